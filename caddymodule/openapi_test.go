package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/internal/testjson"
	"github.com/tokenvault/tokenvault/ratelimit"
)

// The OpenAPI document (openapi.json, served at /openapi.json) is checked
// here in two ways: it must be a valid OpenAPI 3.1 document whose
// operations are exactly the API's routes (plus the documented extras),
// and the traffic of TestOpenAPITraffic, which drives every operation
// through API.ServeHTTP, must match it: every request the handler accepts
// must be valid under the document, and every response must have a
// documented status, body and headers.

// openAPIExtras are operations the document describes that are not in the
// route table: proxy invocation (any method), the document itself and the
// health check.
var openAPIExtras = []string{"/proxy", "/proxy/{path}", "/openapi.json", "/health"}

// loadOpenAPI loads and validates the embedded document.
func loadOpenAPI(tb testing.TB) *openapi3.T {
	tb.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openAPIDocument)
	if err != nil {
		tb.Fatalf("loading openapi.json: %v", err)
	}
	if err := doc.Validate(loader.Context, openapi3.EnableExamplesValidation()); err != nil {
		tb.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	return doc
}

// TestOpenAPIDocument: the document is a valid OpenAPI 3.1 document, and
// its operations are the route table's, one for one.
func TestOpenAPIDocument(t *testing.T) {
	doc := loadOpenAPI(t)
	if doc.OpenAPI != "3.1.0" || !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	scheme := doc.Components.SecuritySchemes["apiKey"]
	if scheme == nil || scheme.Value.Type != "apiKey" || scheme.Value.In != "header" || scheme.Value.Name != "SVC-API-KEY" {
		t.Errorf("security scheme apiKey: %+v", scheme)
	}
	if doc.Components.Schemas["Problem"] == nil {
		t.Error("no Problem schema")
	}

	routed := map[string]bool{}
	for _, rt := range deprecatedRoutes() {
		// retired features are described in prose, not as operations
		// whose only answer is a 400 (see TestOpenAPILint)
		if doc.Paths.Value(rt.pattern) != nil {
			t.Errorf("retired route %s %s is an operation", rt.method, rt.pattern)
		}
		if !strings.Contains(doc.Info.Description, "`"+rt.pattern+"`") && !strings.Contains(doc.Info.Description, "`"+rt.method+" "+rt.pattern+"`") {
			t.Errorf("info.description does not name the retired route %s %s", rt.method, rt.pattern)
		}
	}
	for _, rt := range (&API{}).apiRoutes() {
		key := rt.method + " " + rt.pattern
		routed[key] = true
		item := doc.Paths.Value(rt.pattern)
		if item == nil || item.GetOperation(rt.method) == nil {
			t.Errorf("route %s has no operation in openapi.json", key)
			continue
		}
		op := item.GetOperation(rt.method)
		if rt.perm != "" && !strings.Contains(op.Description, "`"+rt.perm+"`") {
			t.Errorf("%s: the description does not name the permission %s", key, rt.perm)
		}
	}
	ids := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			key := method + " " + path
			if prev, dup := ids[op.OperationID]; dup || op.OperationID == "" {
				t.Errorf("%s: operationId %q is missing or also used by %s", key, op.OperationID, prev)
			}
			ids[op.OperationID] = key
			if !routed[key] && !slices.Contains(openAPIExtras, path) {
				t.Errorf("openapi.json documents %s, which is not a route", key)
			}
			if op.Responses.Len() == 0 {
				t.Errorf("%s: no responses", key)
			}
		}
	}
}

// tvSentBody returns the body of a request about to be sent, leaving the
// request able to send it.
func tvSentBody(req *http.Request) []byte {
	if req.Body == nil || req.Body == http.NoBody {
		return nil
	}
	body, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	return body
}

// openAPIChecker validates exchanges against the document and counts the
// operations and statuses it saw.
type openAPIChecker struct {
	tb  testing.TB
	doc *openapi3.T

	mu   sync.Mutex
	seen map[string]map[int]int // operationId → status → count
}

func newOpenAPIChecker(tb testing.TB) *openAPIChecker {
	return &openAPIChecker{tb: tb, doc: loadOpenAPI(tb), seen: map[string]map[int]int{}}
}

// route finds the document's operation for a request as the handler
// routes it: a trailing slash is ignored, literal segments beat
// parameters, HEAD falls back to GET, and /proxy/<anything> is
// /proxy/{path}.
func (c *openAPIChecker) route(r *http.Request) (*routers.Route, map[string]string) {
	escaped := r.URL.EscapedPath()
	method := r.Method
	find := func(path string, params map[string]string) (*routers.Route, map[string]string) {
		item := c.doc.Paths.Value(path)
		if item == nil {
			return nil, nil
		}
		op := item.GetOperation(method)
		if op == nil && method == http.MethodHead {
			op = item.GetOperation(http.MethodGet)
		}
		if op == nil {
			return nil, nil
		}
		return &routers.Route{Spec: c.doc, Path: path, PathItem: item, Method: method, Operation: op}, params
	}
	if rest, ok := strings.CutPrefix(escaped, "/proxy"); ok && (rest == "" || rest[0] == '/') {
		if rest == "" {
			return find("/proxy", nil)
		}
		return find("/proxy/{path}", map[string]string{"path": rest[1:]})
	}
	segs := splitPath(r.URL.Path)
	best, bestParams := "", map[string]string(nil)
	bestCount := -1
	for path := range c.doc.Paths.Map() {
		pat := splitPath(path)
		params, ok := matchSegments(pat, segs)
		if !ok {
			continue
		}
		if n := strings.Count(path, "{"); bestCount < 0 || n < bestCount {
			if item := c.doc.Paths.Value(path); item.GetOperation(method) != nil ||
				(method == http.MethodHead && item.GetOperation(http.MethodGet) != nil) {
				best, bestParams, bestCount = path, params, n
			}
		}
	}
	if best == "" {
		return nil, nil
	}
	return find(best, bestParams)
}

func (c *openAPIChecker) record(opID string, status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[opID] == nil {
		c.seen[opID] = map[int]int{}
	}
	c.seen[opID][status]++
}

// check validates one exchange: the tokenEnv validate hook.
func (c *openAPIChecker) check(sent *http.Request, body []byte, w *httptest.ResponseRecorder) {
	c.tb.Helper()
	what := fmt.Sprintf("%s %s → %d", sent.Method, sent.URL.RequestURI(), w.Code)
	req := sent.Clone(context.Background())
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }

	route, params := c.route(req)
	if route == nil {
		c.record("(no operation)", w.Code)
		c.checkUnrouted(what, req, w)
		return
	}
	c.record(route.Operation.OperationID, w.Code)
	opts := &openapi3filter.Options{
		IncludeResponseStatus: true,
		AuthenticationFunc:    c.authenticate,
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil && w.Code < 400 {
		c.tb.Errorf("openapi: %s: the handler accepted a request the document says is invalid: %v\nrequest body: %.300s", what, err, body)
	}

	isProxy := strings.HasPrefix(route.Path, "/proxy")
	if isProxy && w.Header().Get("Svc-Proxy-Destination-Status") != "" {
		// the destination's answer, as it is: the default response
		if w.Header().Get("Svc-Trace-Id") == "" {
			c.tb.Errorf("openapi: %s: no SVC-TRACE-ID", what)
		}
		return
	}
	resp := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 w.Code,
		Header:                 w.Header(),
		Options:                opts,
	}
	resp.SetBodyBytes(w.Body.Bytes())
	if err := openapi3filter.ValidateResponse(context.Background(), resp); err != nil {
		c.tb.Errorf("openapi: %s: the response does not match the document: %v\nresponse body: %.500s", what, err, w.Body.Bytes())
		return
	}
	ref := route.Operation.Responses.Status(w.Code)
	if ref == nil {
		ref = route.Operation.Responses.Default()
	}
	if ref != nil && len(ref.Value.Content) == 0 && w.Body.Len() > 0 {
		c.tb.Errorf("openapi: %s: the document declares no body, the response has one: %.200s", what, w.Body.Bytes())
	}
}

// authenticate accepts a security scheme when its header or query
// parameter is present; the handler decides whether it is valid.
func (c *openAPIChecker) authenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	s := in.SecurityScheme
	r := in.RequestValidationInput.Request
	switch {
	case s.In == "header" && r.Header.Get(s.Name) != "":
		return nil
	case s.In == "query" && r.URL.Query().Get(s.Name) != "":
		return nil
	}
	return fmt.Errorf("no %s %s", s.In, s.Name)
}

// checkUnrouted checks an answer to a request no operation describes: the
// information description's 401, 404 or 405, its 400 for a retired
// feature, or a 429, as a problem.
func (c *openAPIChecker) checkUnrouted(what string, r *http.Request, w *httptest.ResponseRecorder) {
	c.tb.Helper()
	switch {
	case w.Code == http.StatusUnauthorized, w.Code == http.StatusNotFound, w.Code == http.StatusTooManyRequests:
	case w.Code == http.StatusBadRequest && retiredPath(r.URL.Path):
	case w.Code == http.StatusMethodNotAllowed:
		if w.Header().Get("Allow") == "" {
			c.tb.Errorf("openapi: %s: 405 without Allow", what)
		}
	default:
		c.tb.Errorf("openapi: %s: no operation in the document for this request", what)
		return
	}
	if ct, _, _ := mime.ParseMediaType(w.Header().Get("Content-Type")); ct != "application/problem+json" {
		c.tb.Errorf("openapi: %s: Content-Type %q, want application/problem+json", what, ct)
	}
	var v any
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		c.tb.Errorf("openapi: %s: body is not JSON: %v", what, err)
		return
	}
	if err := c.doc.Components.Schemas["Problem"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		c.tb.Errorf("openapi: %s: body is not a Problem: %v", what, err)
	}
}

// retiredPath reports whether path is one of deprecatedRoutes'.
func retiredPath(path string) bool {
	for _, rt := range deprecatedRoutes() {
		if _, ok := matchSegments(splitPath(rt.pattern), splitPath(path)); ok {
			return true
		}
	}
	return false
}

// report logs what was seen and returns the operations never exercised.
func (c *openAPIChecker) report() (missing []string, ops, exercised int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var lines []string
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops++
			got := c.seen[op.OperationID]
			if len(got) == 0 {
				missing = append(missing, method+" "+path)
				continue
			}
			exercised++
			var statuses []string
			for s, n := range got {
				statuses = append(statuses, fmt.Sprintf("%d×%d", s, n))
			}
			sort.Strings(statuses)
			lines = append(lines, fmt.Sprintf("%-7s %-34s %s", method, path, strings.Join(statuses, " ")))
		}
	}
	sort.Strings(lines)
	sort.Strings(missing)
	c.tb.Logf("operations exercised (%d of %d):\n%s", exercised, ops, strings.Join(lines, "\n"))
	if got := c.seen["(no operation)"]; len(got) > 0 {
		c.tb.Logf("requests with no operation: %v", got)
	}
	return missing, ops, exercised
}

// TestOpenAPITraffic drives every operation of the API through the handler
// with the document's checker on every exchange, successes and refusals
// alike.
func TestOpenAPITraffic(t *testing.T) {
	faults := &failingAudit{}
	e, cardID := newProxyEnv(t, faults)
	checker := newOpenAPIChecker(t)
	e.validate = checker.check
	dest := newDestination(t)
	const mgmt, reveal, mask, user = tvRoleMgmt, tvRoleReveal, tvRoleMask, "user"
	idem := "SVC-IDEMPOTENCY-KEY"
	want := func(r tvResp, status int, what string) tvResp {
		t.Helper()
		if r.status != status {
			t.Errorf("%s: status %d, want %d: %s", what, r.status, status, r.raw)
		}
		return r
	}

	// the document itself, and the health check once configured
	want(e.do("", http.MethodGet, "/openapi.json", nil), http.StatusOK, "openapi.json")
	e.h.HealthPath = "/health"
	want(e.do("", http.MethodGet, "/health", nil), http.StatusOK, "health")
	e.h.HealthPath = ""

	// tenants
	want(e.do(mgmt, http.MethodGet, "/tenants/self", nil), http.StatusOK, "get tenant")
	want(e.do(mgmt, http.MethodHead, "/tenants/self", nil), http.StatusOK, "head tenant")
	want(e.do(mgmt, http.MethodPut, "/tenants/self", map[string]any{"name": "renamed", "settings": map[string]any{"fingerprint_tokens": "true"}}),
		http.StatusOK, "update tenant")
	want(e.do(mgmt, http.MethodPut, "/tenants/self", map[string]any{"name": "x", "settings": map[string]any{"nope": "true"}}),
		http.StatusBadRequest, "unknown setting")
	want(e.do(mgmt, http.MethodPut, "/tenants/self", map[string]any{"settings": map[string]any{}}), http.StatusBadRequest, "no name")
	want(e.do(reveal, http.MethodGet, "/tenants/self", nil), http.StatusForbidden, "tenant without tenant:read")
	want(e.do("", http.MethodGet, "/tenants/self", nil), http.StatusUnauthorized, "no key")
	want(e.do("", http.MethodGet, "/tenants/self", nil, "SVC-API-KEY", "key_test_notarealkey"), http.StatusUnauthorized, "bad key")

	// applications, keys, permissions
	want(e.do(mgmt, http.MethodGet, "/applications?page=1&size=3&type=private", nil), http.StatusOK, "list applications")
	want(e.do(mgmt, http.MethodGet, "/applications?page=99", nil), http.StatusOK, "page past the end")
	want(e.do(mgmt, http.MethodGet, "/applications?size=101", nil), http.StatusBadRequest, "size over 100")
	want(e.do(mask, http.MethodGet, "/applications", nil), http.StatusForbidden, "list without application:read")
	pub := want(e.do(mgmt, http.MethodPost, "/applications", map[string]any{"name": "pub", "type": "public", "permissions": []string{"token:create"}}),
		http.StatusCreated, "create public application")
	pubID := testjson.Str(pub.body, "id")
	want(e.do(mgmt, http.MethodPost, "/applications", map[string]any{"name": "nokey", "type": "management", "permissions": []string{"log:read"}, "create_key": false}),
		http.StatusCreated, "create without key")
	want(e.do(mgmt, http.MethodPost, "/applications", map[string]any{"name": "bad", "type": "public", "permissions": []string{"token:read"}}),
		http.StatusBadRequest, "permission that does not fit")
	want(e.do(mgmt, http.MethodPost, "/applications", map[string]any{"name": "bad", "type": "other"}), http.StatusBadRequest, "bad type")
	want(e.do(reveal, http.MethodGet, "/applications/key", nil), http.StatusOK, "calling application")
	want(e.do(mgmt, http.MethodGet, "/applications/key/", nil), http.StatusOK, "trailing slash")
	want(e.do(mgmt, http.MethodGet, "/applications/"+pubID, nil), http.StatusOK, "get application")
	want(e.do(mgmt, http.MethodGet, "/applications/5b7c0ab8-0c54-4e4b-a1e4-0e9d6a1d3a4c", nil), http.StatusNotFound, "unknown application")
	want(e.do(mgmt, http.MethodPut, "/applications/"+pubID, map[string]any{"name": "pub2", "permissions": []string{"token:create", "token:update"}}),
		http.StatusOK, "update application")
	want(e.do(mgmt, http.MethodPut, "/applications/"+pubID, map[string]any{"name": "pub2", "type": "private"}), http.StatusBadRequest, "type change")
	want(e.do(mgmt, http.MethodGet, "/applications/"+pubID+"/keys", nil), http.StatusOK, "list keys")
	key := want(e.do(mgmt, http.MethodPost, "/applications/"+pubID+"/keys", nil), http.StatusCreated, "create key")
	want(e.do(mgmt, http.MethodGet, "/applications/"+pubID+"/keys/"+testjson.Str(key.body, "id"), nil), http.StatusOK, "get key")
	want(e.do(mgmt, http.MethodDelete, "/applications/"+pubID+"/keys/"+testjson.Str(key.body, "id"), nil), http.StatusNoContent, "delete key")
	want(e.do(mgmt, http.MethodGet, "/applications/"+pubID+"/keys/"+testjson.Str(key.body, "id"), nil), http.StatusNotFound, "get deleted key")
	want(e.do(mgmt, http.MethodDelete, "/applications/"+pubID+"/keys/"+testjson.Str(key.body, "id"), nil), http.StatusNotFound, "delete key again")
	want(e.do(mgmt, http.MethodPost, "/applications/"+pubID+"/regenerate", nil), http.StatusBadRequest, "regenerate (shut down)")
	want(e.do(mgmt, http.MethodDelete, "/applications/"+pubID, nil), http.StatusNoContent, "delete application")
	want(e.do(mgmt, http.MethodGet, "/permissions", nil), http.StatusOK, "permissions")
	want(e.do(reveal, http.MethodGet, "/permissions?application_type=private", nil), http.StatusOK, "private permissions")
	want(e.do(mgmt, http.MethodGet, "/permissions?application_type=root", nil), http.StatusBadRequest, "bad application_type")
	want(e.do(mgmt, http.MethodDelete, "/permissions", nil), http.StatusMethodNotAllowed, "wrong method")
	want(e.do(mgmt, http.MethodGet, "/nowhere", nil), http.StatusNotFound, "unknown path")

	// tokens of every type
	e.keys["searcher"] = e.createApp(mgmt, "searcher", []map[string]any{{"priority": 1, "container": "/", "transform": "reveal",
		"permissions": []string{"token:create", "token:read", "token:update", "token:delete", "token:search"}}})
	const searcher = "searcher"
	card := tvCardBody()
	card["metadata"] = map[string]any{"ref": "r-1"}
	card["search_indexes"] = []string{"{{ data.number | last4 }}"}
	card["expires_at"] = time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	c := want(e.do(searcher, http.MethodPost, "/tokens", card), http.StatusCreated, "create card")
	card2ID := testjson.Str(c.body, "id")
	bank := want(e.do(searcher, http.MethodPost, "/tokens", tvBankBody()), http.StatusCreated, "create bank")
	bankID := testjson.Str(bank.body, "id")
	want(e.do(searcher, http.MethodPost, "/tokens", map[string]any{"id": "order-1001", "type": "token", "data": map[string]any{"note": "x", "n": 1},
		"metadata": map[string]any{"ref": "r-1"}, "containers": []string{"/general/low/"}, "mask": "{{ data.note }}"}),
		http.StatusCreated, "create generic token")
	want(e.do(searcher, http.MethodPost, "/tokens", map[string]any{"id": "order-1001", "type": "token", "data": "again"}), http.StatusConflict, "duplicate id")
	want(e.do(searcher, http.MethodPost, "/tokens", map[string]any{"type": "token", "data": "dedup me", "deduplicate_token": true}),
		http.StatusCreated, "create deduplicated token")
	d := want(e.do(searcher, http.MethodPost, "/tokens", map[string]any{"type": "token", "data": "dedup me", "deduplicate_token": true}),
		http.StatusCreated, "deduplicated create")
	if testjson.Field(d.body, "_extras", "deduplicated") != true {
		t.Errorf("deduplicated create: %s", d.raw)
	}
	want(e.do(searcher, http.MethodPost, "/tokens", map[string]any{"type": "card", "data": map[string]any{"number": tvCardBadLuhn}}),
		http.StatusBadRequest, "bad card")
	want(e.do(searcher, http.MethodPost, "/tokens", map[string]any{"type": "token"}), http.StatusBadRequest, "no data")
	want(e.do(searcher, http.MethodPost, "/tokens", `{"type":"token","data":1,"data":2}`), http.StatusBadRequest, "duplicate member")
	want(e.do(searcher, http.MethodPost, "/tokens", `{"type":"token","data":"`+strings.Repeat("x", maxBodyBytes)+`"}`),
		http.StatusRequestEntityTooLarge, "body over 1 MB")
	want(e.do(mask, http.MethodPost, "/tokens", map[string]any{"type": "token", "data": "x", "containers": []string{"/other/"}}),
		http.StatusForbidden, "no rule on the container")
	want(e.do("", http.MethodPost, "/tokens", tvCardBody()), http.StatusUnauthorized, "create without key")

	// idempotency
	first := want(e.do(searcher, http.MethodPost, "/tokens", map[string]any{"type": "token", "data": "once"}, idem, "i-1"), http.StatusCreated, "idempotent create")
	again := want(e.do(searcher, http.MethodPost, "/tokens", map[string]any{"type": "token", "data": "once"}, idem, "i-1"), http.StatusCreated, "replay")
	if string(first.raw) != string(again.raw) {
		t.Errorf("replay %s, want %s", again.raw, first.raw)
	}
	want(e.do(searcher, http.MethodPost, "/tokens", map[string]any{"type": "token", "data": "other"}, idem, "i-1"), http.StatusBadRequest, "key reused")

	// reads, lists, search
	for _, role := range []string{reveal, mask, tvRoleRedact, searcher} {
		want(e.do(role, http.MethodGet, "/tokens/"+cardID, nil), http.StatusOK, "get card as "+role)
	}
	want(e.do(searcher, http.MethodGet, "/tokens/"+bankID, nil), http.StatusOK, "get bank")
	want(e.do(searcher, http.MethodGet, "/tokens/order-1001", nil), http.StatusOK, "get generic")
	want(e.do(tvRoleGeneral, http.MethodGet, "/tokens/"+cardID, nil), http.StatusForbidden, "no rule on /pci/")
	want(e.do(searcher, http.MethodGet, "/tokens/no-such-token", nil), http.StatusNotFound, "unknown token")
	want(e.do(tvRoleOther, http.MethodGet, "/tokens/"+cardID, nil), http.StatusNotFound, "another tenant's token")
	want(e.do(searcher, http.MethodGet, "/tokens?page=1&size=2", nil), http.StatusOK, "list tokens")
	want(e.do(mask, http.MethodGet, "/tokens/", nil), http.StatusOK, "list tokens masked")
	want(e.do(searcher, http.MethodGet, "/tokens?id="+cardID+"&id="+bankID, nil), http.StatusOK, "list by id")
	want(e.do(searcher, http.MethodGet, "/tokens?metadata.ref=r-1", nil), http.StatusOK, "list by metadata")
	want(e.do(searcher, http.MethodGet, "/tokens?metadata%5Bref%5D=r-1", nil), http.StatusOK, "list by metadata[]")
	want(e.do(searcher, http.MethodGet, "/tokens?metadata="+url.QueryEscape(`{"ref":"r-1"}`), nil), http.StatusOK, "list by metadata JSON")
	want(e.do(searcher, http.MethodGet, "/tokens?metadata=%7Bnope", nil), http.StatusBadRequest, "bad metadata JSON")
	want(e.do(searcher, http.MethodGet, "/tokens?type=card&container=/pci/high/", nil), http.StatusOK, "list by type and container")
	want(e.do(searcher, http.MethodGet, "/v2/tokens?fingerprint="+url.QueryEscape(testjson.Str(c.body, "fingerprint")), nil), http.StatusOK, "v2 list by fingerprint")
	want(e.do(searcher, http.MethodGet, "/tokens?page=0", nil), http.StatusBadRequest, "page 0")
	p := want(e.do(searcher, http.MethodGet, "/v2/tokens?size=2", nil), http.StatusOK, "v2 list")
	if next := testjson.Str(p.body, "pagination", "next"); next != "" {
		want(e.do(searcher, http.MethodGet, "/v2/tokens?size=2&start="+url.QueryEscape(next), nil), http.StatusOK, "v2 next page")
	} else {
		t.Errorf("v2 list without next: %s", p.raw)
	}
	want(e.do(searcher, http.MethodGet, "/v2/tokens?start=garbage", nil), http.StatusBadRequest, "v2 bad cursor")
	want(e.do(searcher, http.MethodPost, "/tokens/search", map[string]any{"query": "metadata.ref:r-1", "page": 1, "size": 10}), http.StatusOK, "search")
	want(e.do(searcher, http.MethodPost, "/tokens/search", map[string]any{"query": "type:card AND data:4242"}), http.StatusOK, "search by index")
	want(e.do(searcher, http.MethodPost, "/tokens/search", map[string]any{"query": "type:(card"}), http.StatusBadRequest, "malformed query")
	want(e.do(searcher, http.MethodPost, "/tokens/search", map[string]any{"page": 1}), http.StatusBadRequest, "no query")
	want(e.do(reveal, http.MethodPost, "/tokens/search", map[string]any{"query": "type:card"}), http.StatusForbidden, "search without token:search")
	s := want(e.do(searcher, http.MethodPost, "/v2/tokens/search", map[string]any{"query": "metadata.ref:r-1", "size": 1}), http.StatusOK, "v2 search")
	want(e.do(searcher, http.MethodPost, "/v2/tokens/search", map[string]any{"query": "metadata.ref:r-1", "size": 1, "start": testjson.Str(s.body, "pagination", "next")}),
		http.StatusOK, "v2 search next page")
	want(e.do(searcher, http.MethodPost, "/v2/tokens/search", map[string]any{"query": "type:card", "size": 0}), http.StatusBadRequest, "v2 search size 0")

	// updates and deletes
	want(e.do(searcher, http.MethodPatch, "/tokens/"+card2ID, map[string]any{"metadata": map[string]any{"ref": "r-2", "x": nil}, "expires_at": nil}),
		http.StatusOK, "patch token")
	want(e.do(searcher, http.MethodPatch, "/tokens/"+card2ID, map[string]any{"data": map[string]any{"expiration_month": 1}, "containers": []string{"/pci/low/"}}),
		http.StatusOK, "patch card data and move it")
	want(e.do(searcher, http.MethodPatch, "/tokens/"+card2ID, map[string]any{"id": "new"}), http.StatusBadRequest, "patch id")
	want(e.do(searcher, http.MethodPatch, "/tokens/"+card2ID, map[string]any{"metadata": map[string]any{}}, "Content-Type", "application/json"),
		http.StatusUnsupportedMediaType, "patch as JSON")
	want(e.do(searcher, http.MethodPatch, "/tokens/nope-nope", map[string]any{"metadata": map[string]any{}}), http.StatusNotFound, "patch unknown token")
	want(e.do(searcher, http.MethodDelete, "/tokens/"+bankID, nil), http.StatusNoContent, "delete token")
	want(e.do(searcher, http.MethodDelete, "/tokens/"+bankID, nil), http.StatusNotFound, "delete token again")

	// tokenize and detokenize
	want(e.do(searcher, http.MethodPost, "/tokenize", map[string]any{
		"plain": "a-secret-string",
		"card":  tvCardBody(),
		"list":  []any{map[string]any{"type": "token", "data": map[string]any{"a": 1}}, 42},
	}), http.StatusOK, "tokenize")
	want(e.do(searcher, http.MethodPost, "/tokenize", []any{1, 2, 3, 4, 5, 6}), http.StatusBadRequest, "tokenize over the limit")
	want(e.do(reveal, http.MethodPost, "/detokenize", map[string]any{
		"pan": "{{ " + cardID + " | json: '$.number' }}", "card": "{{ token: " + cardID + " | json: '$.data' }}", "n": 5}),
		http.StatusOK, "detokenize")
	want(e.do(mask, http.MethodPost, "/detokenize", map[string]any{"pan": "{{ " + cardID + " }}"}), http.StatusOK, "detokenize masked")
	want(e.do(reveal, http.MethodPost, "/detokenize", map[string]any{"pan": "{{ 5b7c0ab8-0c54-4e4b-a1e4-0e9d6a1d3a4c }}"}),
		http.StatusBadRequest, "detokenize unknown token")
	want(e.do(tvRoleGeneral, http.MethodPost, "/detokenize", map[string]any{"pan": "{{ " + cardID + " }}"}), http.StatusForbidden, "detokenize without a rule")

	// token intents and card details
	e.keys["intents"] = testjson.Str(want(e.do(mgmt, http.MethodPost, "/applications", map[string]any{"name": "intents", "type": "private",
		"permissions": []string{"token:create", "token-intent:create", "token-intent:read", "token-intent:delete"}}), http.StatusCreated, "intents application").body, "key")
	ti := want(e.do("intents", http.MethodPost, "/token-intents", tvCardBody()), http.StatusCreated, "create token intent")
	want(e.do("intents", http.MethodPost, "/token-intents", map[string]any{"type": "card"}), http.StatusBadRequest, "token intent without data")
	want(e.do(mask, http.MethodPost, "/token-intents", tvCardBody()), http.StatusForbidden, "token intent without token-intent:create")
	want(e.do("intents", http.MethodGet, "/token-intents/"+testjson.Str(ti.body, "id"), nil), http.StatusOK, "get token intent")
	want(e.do(mask, http.MethodGet, "/token-intents/"+testjson.Str(ti.body, "id"), nil), http.StatusForbidden, "get token intent without token-intent:read")
	want(e.do("intents", http.MethodPost, "/tokens", map[string]any{"token_intent_id": testjson.Str(ti.body, "id")}), http.StatusCreated, "token from intent")
	want(e.do("intents", http.MethodPost, "/tokens", map[string]any{"token_intent_id": testjson.Str(ti.body, "id")}), http.StatusBadRequest, "used token intent")
	want(e.do("intents", http.MethodGet, "/token-intents/"+testjson.Str(ti.body, "id"), nil), http.StatusNotFound, "used token intent read")
	ti = want(e.do("intents", http.MethodPost, "/token-intents", tvBankBody()), http.StatusCreated, "create bank token intent")
	want(e.do("intents", http.MethodDelete, "/token-intents/"+testjson.Str(ti.body, "id"), nil), http.StatusNoContent, "delete token intent")
	want(e.do("intents", http.MethodDelete, "/token-intents/"+testjson.Str(ti.body, "id"), nil), http.StatusNotFound, "delete token intent again")
	want(e.do(mask, http.MethodDelete, "/token-intents/"+testjson.Str(ti.body, "id"), nil), http.StatusForbidden, "delete token intent without token-intent:delete")
	want(e.do(mask, http.MethodGet, "/enrichments/card-details?bin=42424242", nil), http.StatusOK, "card details")
	want(e.do(mask, http.MethodGet, "/enrichments/card-details?bin=4242", nil), http.StatusBadRequest, "card details of a short bin")

	// usage and logs
	want(e.do(mgmt, http.MethodGet, "/tenants/self/reports/usage", nil), http.StatusOK, "usage")
	l := want(e.do(mgmt, http.MethodGet, "/logs?size=3", nil), http.StatusOK, "logs")
	want(e.do(mgmt, http.MethodGet, "/logs?size=3&start="+url.QueryEscape(testjson.Str(l.body, "pagination", "next")), nil), http.StatusOK, "logs next page")
	want(e.do(mgmt, http.MethodGet, "/logs?entity_type=token&entity_id="+cardID+"&start_date=2020-01-01T00:00:00Z&end_date="+
		url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339)), nil), http.StatusOK, "logs filtered")
	want(e.do(mgmt, http.MethodGet, "/logs?size=2&page=3", nil), http.StatusOK, "logs by page")
	want(e.do(mgmt, http.MethodGet, "/logs?page=0", nil), http.StatusBadRequest, "logs page 0")
	want(e.do(mgmt, http.MethodGet, "/logs?start=nope", nil), http.StatusBadRequest, "logs bad cursor")
	want(e.do(mgmt, http.MethodGet, "/logs?start_date=yesterday", nil), http.StatusBadRequest, "logs bad date")
	want(e.do(mask, http.MethodGet, "/logs", nil), http.StatusForbidden, "logs without log:read")
	want(e.do(mgmt, http.MethodGet, "/logs/entity-types", nil), http.StatusOK, "log entity types")

	// reactors
	inv := want(e.do(mgmt, http.MethodPost, "/applications", map[string]any{"name": "invoker", "type": "private",
		"permissions": []string{"token:use", "token:create", "reactor:invoke"}}), http.StatusCreated, "invoker")
	e.keys["invoker"] = testjson.Str(inv.body, "key")
	r := want(e.do(mgmt, http.MethodPost, "/reactors", map[string]any{
		"name": "charge", "configuration": map[string]any{"fee": "3"},
		"application": map[string]any{"id": testjson.Str(inv.body, "id")},
		"code": `const { BadRequestError, InvalidPaymentMethodError, CustomHttpResponseError } = require('@basis-theory/basis-theory-reactor-formulas-sdk-js');
		module.exports = async function (req) {
			const { args, configuration } = req;
			if (args.mode === 'bad') throw new BadRequestError('bad input');
			if (args.mode === 'pay') throw new InvalidPaymentMethodError();
			if (args.mode === 'custom') throw new CustomHttpResponseError({ status: 418, headers: { 'X-Teapot': '1' }, body: { tea: true } });
			if (args.mode === 'raw') return { raw: [1, 2] };
			return { raw: { last4: args.card.number.slice(-4), fee: configuration.fee }, tokenize: { note: { type: 'token', data: 'from reactor' } } };
		}`,
	}), http.StatusCreated, "create reactor")
	reactorID := testjson.Str(r.body, "id")
	want(e.do(mgmt, http.MethodPost, "/reactors", map[string]any{"name": "f", "code": "module.exports = () => ({raw: 1})", "formula": map[string]any{"id": "x"}}),
		http.StatusBadRequest, "formula")
	want(e.do(mgmt, http.MethodPost, "/reactors", map[string]any{"name": "syntax", "code": "module.exports = function ("}), http.StatusBadRequest, "bad code")
	want(e.do(mgmt, http.MethodGet, "/reactors?name=char*&page=1&size=5", nil), http.StatusOK, "list reactors")
	want(e.do(mgmt, http.MethodGet, "/reactors/"+reactorID, nil), http.StatusOK, "get reactor")
	want(e.do(mgmt, http.MethodPut, "/reactors/"+reactorID, map[string]any{"name": "charge", "code": r.body.(map[string]any)["code"],
		"application": map[string]any{"id": testjson.Str(inv.body, "id")}, "configuration": map[string]any{"fee": "4"}}), http.StatusOK, "put reactor")
	want(e.do(mgmt, http.MethodPatch, "/reactors/"+reactorID, map[string]any{"configuration": map[string]any{"fee": "3"}}), http.StatusNoContent, "patch reactor")
	want(e.do(mgmt, http.MethodPatch, "/reactors/"+reactorID, map[string]any{"name": "x"}, "Content-Type", "application/json"),
		http.StatusUnsupportedMediaType, "patch reactor as JSON")
	want(e.do("invoker", http.MethodPost, "/reactors/"+reactorID+"/react", map[string]any{"args": map[string]any{
		"card": "{{ token: " + cardID + " | json: '$.data' }}"}}), http.StatusOK, "react")
	want(e.do("invoker", http.MethodPost, "/reactors/"+reactorID+"/react", map[string]any{"args": map[string]any{"mode": "raw"}}), http.StatusOK, "react raw only")
	want(e.do("invoker", http.MethodPost, "/reactors/"+reactorID+"/react", map[string]any{"args": map[string]any{"mode": "bad"}}), http.StatusBadRequest, "react bad")
	want(e.do("invoker", http.MethodPost, "/reactors/"+reactorID+"/react", map[string]any{"args": map[string]any{"mode": "pay"}}), http.StatusPaymentRequired, "react 402")
	want(e.do("invoker", http.MethodPost, "/reactors/"+reactorID+"/react", map[string]any{"args": map[string]any{"mode": "custom"}}), 418, "react custom")
	want(e.do("invoker", http.MethodPost, "/reactors/5b7c0ab8-0c54-4e4b-a1e4-0e9d6a1d3a4c/react", map[string]any{"args": 1}), http.StatusNotFound, "react unknown reactor")
	want(e.do("invoker", http.MethodPost, "/reactors/"+reactorID+"/react", map[string]any{"args": 1, "callback_url": "https://x"}), http.StatusBadRequest, "react async")
	want(e.do(reveal, http.MethodPost, "/reactors/"+reactorID+"/react", map[string]any{"args": map[string]any{}}), http.StatusForbidden, "react without reactor:invoke")
	// asynchronous reactions: queued (bounded), run by the dispatcher, read back
	e.h.app.AsyncReactions = &AsyncReactionsConfig{MaxQueuedPerTenant: 1}
	ra := want(e.do("invoker", http.MethodPost, "/reactors/"+reactorID+"/react-async", map[string]any{"args": map[string]any{"mode": "raw"}}), http.StatusAccepted, "react-async")
	requestID := testjson.Str(ra.body, "asyncReactorRequestId")
	want(e.do("invoker", http.MethodPost, "/reactors/"+reactorID+"/react-async", map[string]any{"args": map[string]any{"mode": "raw"}}), http.StatusTooManyRequests, "react-async queue full")
	want(e.do("invoker", http.MethodPost, "/reactors/5b7c0ab8-0c54-4e4b-a1e4-0e9d6a1d3a4c/react-async", map[string]any{"args": 1}), http.StatusNotFound, "react-async unknown reactor")
	want(e.do(reveal, http.MethodPost, "/reactors/"+reactorID+"/react-async", map[string]any{"args": map[string]any{}}), http.StatusForbidden, "react-async without reactor:invoke")
	want(e.do("invoker", http.MethodGet, "/reactors/"+reactorID+"/results/"+requestID, nil), http.StatusOK, "pending result")
	e.h.app.logger = zap.NewNop()
	e.h.app.startAsyncReactions(e.store, true)
	if r := waitReaction(t, e, "invoker", reactorID, requestID); testjson.Str(r.body, "status") != "completed" {
		t.Errorf("async reaction: %s", r.raw)
	}
	e.h.app.stopAsyncReactions()
	e.h.app.AsyncReactions = nil
	want(e.do("invoker", http.MethodGet, "/reactors/"+reactorID+"/results/5b7c0ab8-0c54-4e4b-a1e4-0e9d6a1d3a4c", nil), http.StatusNotFound, "unknown result")
	want(e.do(reveal, http.MethodGet, "/reactors/"+reactorID+"/results/"+requestID, nil), http.StatusForbidden, "result without reactor:invoke")
	want(e.do("", http.MethodGet, "/reactors/"+reactorID+"/results/"+requestID, nil), http.StatusUnauthorized, "result without a key")

	// sessions, roles and application templates
	sp := want(e.do(mgmt, http.MethodPost, "/applications", map[string]any{"name": "browser", "type": "public", "permissions": []string{"token:create"}}), http.StatusCreated, "public application")
	e.keys["browser"] = testjson.Str(sp.body, "key")
	sess := want(e.do("browser", http.MethodPost, "/sessions", nil), http.StatusCreated, "create session")
	want(e.do(reveal, http.MethodPost, "/sessions", nil), http.StatusForbidden, "session by a private key")
	want(e.do("", http.MethodPost, "/sessions", nil), http.StatusUnauthorized, "session without a key")
	want(e.do(reveal, http.MethodPost, "/sessions/authorize", map[string]any{"permissions": []string{"token:read"}}), http.StatusBadRequest, "authorize without nonce")
	want(e.do(reveal, http.MethodPost, "/sessions/authorize", map[string]any{"nonce": "nope", "permissions": []string{"token:read"}}), http.StatusNotFound, "authorize unknown nonce")
	want(e.do("browser", http.MethodPost, "/sessions/authorize", map[string]any{"nonce": testjson.Str(sess.body, "nonce"), "permissions": []string{"token:read"}}), http.StatusForbidden, "authorize by a public key")
	want(e.do(reveal, http.MethodPost, "/sessions/authorize", map[string]any{"nonce": testjson.Str(sess.body, "nonce"), "permissions": []string{"token:read"}}), http.StatusNoContent, "authorize session")
	want(e.do(reveal, http.MethodPost, "/sessions/authorize", map[string]any{"nonce": testjson.Str(sess.body, "nonce"), "permissions": []string{"token:read"}}), http.StatusConflict, "authorize twice")
	e.keys["session"] = testjson.Str(sess.body, "session_key")
	want(e.do("session", http.MethodGet, "/tokens/"+cardID, nil), http.StatusOK, "read with a session")
	want(e.do("session", http.MethodDelete, "/tokens/"+cardID, nil), http.StatusForbidden, "delete with a read-only session")
	want(e.do(mgmt, http.MethodGet, "/roles", nil), http.StatusOK, "roles")
	want(e.do("", http.MethodGet, "/roles", nil), http.StatusUnauthorized, "roles without a key")
	tpls := want(e.do(mgmt, http.MethodGet, "/application-templates", nil), http.StatusOK, "application templates")
	want(e.do(mgmt, http.MethodGet, "/application-templates/"+testjson.Str(testjson.Field(tpls.body, 0), "id"), nil), http.StatusOK, "application template")
	want(e.do(mgmt, http.MethodGet, "/application-templates/5b7c0ab8-0c54-4e4b-a1e4-0e9d6a1d3a4c", nil), http.StatusNotFound, "unknown application template")
	want(e.do("", http.MethodGet, "/application-templates", nil), http.StatusUnauthorized, "templates without a key")
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		want(e.do(mgmt, m, "/reactor-formulas", nil), http.StatusBadRequest, m+" reactor formulas (shut down)")
		want(e.do(mgmt, m, "/reactor-formulas/f-1", nil), http.StatusBadRequest, m+" reactor formula (shut down)")
	}
	want(e.do(mgmt, http.MethodDelete, "/reactors/"+reactorID, nil), http.StatusNoContent, "delete reactor")
	want(e.do(mgmt, http.MethodGet, "/reactors/"+reactorID, nil), http.StatusNotFound, "deleted reactor")

	// proxies
	px := want(e.do(mgmt, http.MethodPost, "/proxies", map[string]any{"name": "pay", "destination_url": dest.srv.URL + "/base",
		"configuration": map[string]any{"a": "b"}}), http.StatusCreated, "create proxy")
	proxyID, proxyKey := testjson.Str(px.body, "id"), testjson.Str(px.body, "key")
	open := want(e.do(mgmt, http.MethodPost, "/proxies", map[string]any{"name": "open", "destination_url": dest.srv.URL, "require_auth": false,
		"application":        map[string]any{"id": testjson.Str(inv.body, "id")},
		"response_transform": map[string]any{"code": `module.exports = (req) => ({ body: { ok: req.args.body.charged }, headers: { 'Content-Type': 'application/json' } })`}}),
		http.StatusCreated, "create open proxy")
	openKey := testjson.Str(open.body, "key")
	want(e.do(mgmt, http.MethodPost, "/proxies", map[string]any{"name": "bad", "destination_url": "http://169.254.169.254/"}), http.StatusBadRequest, "refused destination")
	want(e.do(mgmt, http.MethodPost, "/proxies", map[string]any{"name": "old", "destination_url": dest.srv.URL, "request_reactor_id": "x"}),
		http.StatusBadRequest, "request_reactor_id")
	want(e.do(mgmt, http.MethodGet, "/proxies?name=pa*", nil), http.StatusOK, "list proxies")
	want(e.do(mgmt, http.MethodGet, "/proxies?id="+proxyID+"&size=1", nil), http.StatusOK, "list proxies by id")
	want(e.do(mgmt, http.MethodGet, "/proxies/"+proxyID, nil), http.StatusOK, "get proxy")
	want(e.do(mgmt, http.MethodPut, "/proxies/"+proxyID, map[string]any{"name": "pay", "destination_url": dest.srv.URL + "/base", "require_auth": true}),
		http.StatusOK, "put proxy")
	want(e.do(mgmt, http.MethodPut, "/proxies/"+proxyID, map[string]any{"name": "pay"}), http.StatusBadRequest, "put proxy without destination")
	want(e.do(mgmt, http.MethodPatch, "/proxies/"+proxyID, map[string]any{"configuration": map[string]any{"a": "c"}}), http.StatusNoContent, "patch proxy")
	want(e.do(mgmt, http.MethodPatch, "/proxies/"+proxyID, map[string]any{"key": "x"}), http.StatusBadRequest, "patch proxy key")
	want(e.do(mgmt, http.MethodPatch, "/proxies/"+proxyID, map[string]any{"name": "x"}, "Content-Type", "text/plain"), http.StatusUnsupportedMediaType, "patch proxy as text")
	want(e.do(mgmt, http.MethodGet, "/proxies/"+cardID, nil), http.StatusNotFound, "unknown proxy")

	// proxy invocation
	want(e.do(user, http.MethodPost, "/proxy/charges?x=1", `{"number":"{{ `+cardID+` | json: '$.number' }}"}`,
		"SVC-PROXY-KEY", proxyKey, "Content-Type", "application/json"), http.StatusCreated, "invoke proxy")
	want(e.do(user, http.MethodGet, "/proxy?svc-proxy-key="+proxyKey, nil), http.StatusCreated, "invoke proxy with the query key")
	want(e.do(user, http.MethodPut, "/proxy/a/b", "plain text", "SVC-PROXY-KEY", proxyKey, "Content-Type", "text/plain"), http.StatusCreated, "invoke with a text body")
	want(e.do("", http.MethodPost, "/proxy", map[string]any{"charge": 1}, "SVC-PROXY-KEY", openKey), http.StatusCreated, "invoke open proxy (response transform)")
	want(e.do(user, http.MethodPost, "/proxy", map[string]any{"n": "{{ " + cardID + " }}"}, "SVC-PROXY-URL", dest.srv.URL), http.StatusCreated, "ephemeral proxy")
	want(e.do("", http.MethodPost, "/proxy", `{}`, "SVC-PROXY-KEY", proxyKey), http.StatusUnauthorized, "require_auth without API key")
	want(e.do(user, http.MethodPost, "/proxy", `{}`, "SVC-PROXY-KEY", "not-a-proxy-key"), http.StatusUnauthorized, "bad proxy key")
	want(e.do(user, http.MethodPost, "/proxy", `{}`), http.StatusBadRequest, "no proxy key nor URL")
	want(e.do(user, http.MethodPost, "/proxy", map[string]any{"n": "{{ nope-nope }}"}, "SVC-PROXY-KEY", proxyKey), http.StatusBadRequest, "unknown token")
	want(e.do(mask, http.MethodPost, "/proxy", map[string]any{"n": "{{ " + cardID + " }}"}, "SVC-PROXY-KEY", proxyKey), http.StatusForbidden, "no token:use")
	want(e.do(user, http.MethodPost, "/proxy/../x", `{}`, "SVC-PROXY-KEY", proxyKey), http.StatusBadRequest, "dot segments")
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete, http.MethodOptions, http.MethodHead, http.MethodPatch, http.MethodTrace} {
		want(e.do(user, m, "/proxy", nil, "SVC-PROXY-KEY", proxyKey), http.StatusCreated, m+" /proxy")
		want(e.do(user, m, "/proxy/v1/charges", nil, "SVC-PROXY-KEY", proxyKey), http.StatusCreated, m+" /proxy/{path}")
	}
	gone := want(e.do(mgmt, http.MethodPost, "/proxies", map[string]any{"name": "gone", "destination_url": "http://127.0.0.1:1"}), http.StatusCreated, "proxy to a closed port")
	want(e.do(user, http.MethodPost, "/proxy", `{}`, "SVC-PROXY-KEY", testjson.Str(gone.body, "key")), http.StatusBadGateway, "destination unreachable")

	// webhooks
	want(e.do(mgmt, http.MethodGet, "/webhooks/event-types", nil), http.StatusOK, "webhook event types")
	want(e.do(mgmt, http.MethodGet, "/webhooks/signing-key", nil), http.StatusOK, "webhook signing key")
	hook := want(e.do(mgmt, http.MethodPost, "/webhooks", map[string]any{"name": "h", "url": "http://127.0.0.1:1/hook", "events": []string{"token.created"}}),
		http.StatusCreated, "create webhook")
	hookID := testjson.Str(hook.body, "id")
	want(e.do(mgmt, http.MethodPost, "/webhooks", map[string]any{"name": "h", "url": "https://169.254.169.254/latest", "events": []string{"token.created"}}),
		http.StatusBadRequest, "webhook to the metadata address")
	want(e.do(reveal, http.MethodPost, "/webhooks", map[string]any{"name": "h", "url": "http://127.0.0.1:1/hook", "events": []string{"token.created"}}),
		http.StatusForbidden, "webhook without webhooks:create")
	want(e.do(mgmt, http.MethodGet, "/webhooks", nil), http.StatusOK, "list webhooks")
	want(e.do(mgmt, http.MethodGet, "/webhooks/"+hookID, nil), http.StatusOK, "get webhook")
	want(e.do(mgmt, http.MethodPut, "/webhooks/"+hookID, map[string]any{"name": "h2", "url": "http://127.0.0.1:1/hook", "events": []string{"token.deleted"}}),
		http.StatusOK, "update webhook")
	want(e.do(mgmt, http.MethodDelete, "/webhooks/"+hookID, nil), http.StatusNoContent, "delete webhook")
	want(e.do(mgmt, http.MethodGet, "/webhooks/"+hookID, nil), http.StatusNotFound, "get deleted webhook")

	// client encryption keys and documents
	ck := want(e.do(mgmt, http.MethodPost, "/keys", `{}`, "Content-Type", "application/json-patch+json"), http.StatusCreated, "create client key")
	ckID := testjson.Str(ck.body, "key_id")
	want(e.do(mgmt, http.MethodPost, "/keys", map[string]any{"expires_at": "2000-01-01T00:00:00Z"}), http.StatusBadRequest, "client key expiring in the past")
	want(e.do(reveal, http.MethodGet, "/keys", nil), http.StatusForbidden, "client keys without keys:read")
	want(e.do(mgmt, http.MethodGet, "/keys", nil), http.StatusOK, "list client keys")
	want(e.do(mgmt, http.MethodGet, "/keys/"+ckID, nil), http.StatusOK, "get client key")
	want(e.do(mgmt, http.MethodDelete, "/keys/"+ckID, nil), http.StatusNoContent, "delete client key")
	want(e.do(mgmt, http.MethodGet, "/keys/"+ckID, nil), http.StatusNotFound, "get deleted client key")
	files := docApp(t, e, "files", "documents:create", "documents:read", "documents:reveal", "documents:delete")
	dct, dbody := multipartDoc(t, []byte("%PDF-1.7 mandate"), "application/octet-stream", `{"metadata":{"kind":"mandate"}}`)
	docID := testjson.Str(want(e.do(files, http.MethodPost, "/documents", dbody, "Content-Type", dct), http.StatusCreated, "upload document").body, "id")
	want(e.do(files, http.MethodPost, "/documents", `{}`), http.StatusUnsupportedMediaType, "document as JSON")
	want(e.do(reveal, http.MethodPost, "/documents", dbody, "Content-Type", dct), http.StatusForbidden, "upload without documents:create")
	want(e.do(files, http.MethodGet, "/documents/"+docID, nil), http.StatusOK, "get document")
	dl := httptest.NewRequest(http.MethodGet, "/documents/"+docID+"/data", nil)
	dl.Header.Set("SVC-API-KEY", e.keys[files])
	dw := httptest.NewRecorder()
	if err := e.h.ServeHTTP(dw, dl, nil); err != nil || dw.Code != http.StatusOK {
		t.Errorf("download document: %d, %v", dw.Code, err)
	}
	checker.check(dl, nil, dw)
	want(e.do(files, http.MethodDelete, "/documents/"+docID, nil), http.StatusNoContent, "delete document")
	want(e.do(files, http.MethodGet, "/documents/"+docID+"/data", nil), http.StatusNotFound, "download deleted document")

	// the audit record cannot be written: nothing is done or returned
	faults.on.Store(true)
	want(e.do(searcher, http.MethodGet, "/tokens/"+cardID, nil), http.StatusServiceUnavailable, "read without audit")
	want(e.do(searcher, http.MethodPost, "/tokens", map[string]any{"type": "token", "data": "x"}), http.StatusServiceUnavailable, "create without audit")
	want(e.do(user, http.MethodPost, "/proxy", map[string]any{"n": "{{ " + cardID + " }}"}, "SVC-PROXY-KEY", proxyKey), http.StatusServiceUnavailable, "proxy without audit")
	faults.on.Store(false)
	want(e.do(mgmt, http.MethodDelete, "/proxies/"+proxyID, nil), http.StatusNoContent, "delete proxy")
	want(e.do(user, http.MethodPost, "/proxy", `{}`, "SVC-PROXY-KEY", proxyKey), http.StatusUnauthorized, "deleted proxy's key")

	// rate limits: every answer carries the RateLimit headers, a refusal is 429
	limited := func(rule string, limit int) {
		for _, r := range ratelimit.DefaultRules() {
			if r.Name == rule {
				r.Limit, r.Per, r.Block = limit, time.Minute, 0
				e.h.limits.limiter = ratelimit.New(ratelimit.Options{Rules: []ratelimit.Rule{r}})
				return
			}
		}
		t.Fatalf("no rule %s", rule)
	}
	limited(ratelimit.RuleManagementApp, 1)
	want(e.do(mgmt, http.MethodGet, "/applications/key", nil), http.StatusOK, "within the limit")
	want(e.do(mgmt, http.MethodGet, "/applications/key", nil), http.StatusTooManyRequests, "over the limit")
	limited(ratelimit.RuleProxyKey, 1)
	want(e.do("", http.MethodPost, "/proxy", map[string]any{"charge": 1}, "SVC-PROXY-KEY", openKey), http.StatusCreated, "proxy within the limit")
	want(e.do("", http.MethodPost, "/proxy", map[string]any{"charge": 1}, "SVC-PROXY-KEY", openKey), http.StatusTooManyRequests, "proxy over the limit")
	e.h.limits.limiter = nil

	// the other tenant deletes itself; its key stops working
	want(e.do("other-management", http.MethodDelete, "/tenants/self", nil), http.StatusNoContent, "delete tenant")
	want(e.do("other-management", http.MethodGet, "/tenants/self", nil), http.StatusUnauthorized, "deleted tenant's key")

	missing, ops, exercised := checker.report()
	for _, m := range missing {
		t.Errorf("operation %s was never exercised", m)
	}
	t.Logf("%d of %d documented operations exercised", exercised, ops)
}

// TestOpenAPIHeaderPrefix: /openapi.json names the vault's headers, and
// the proxy key's query parameter, under the configured header_prefix,
// and is still a valid document.
func TestOpenAPIHeaderPrefix(t *testing.T) {
	h, _ := newTestAPI(t, false)
	h.app.HeaderPrefix = "BT"
	h.wire(h.app, zap.NewNop())
	w := httptest.NewRecorder()
	if err := h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/openapi.json", nil), nil); err != nil || w.Code != http.StatusOK {
		t.Fatalf("GET /openapi.json: %d %v", w.Code, err)
	}
	body := w.Body.String()
	for _, old := range []string{"SVC-", "svc-proxy-key"} {
		if strings.Contains(body, old) {
			t.Errorf("the document served with header_prefix BT still names %q", old)
		}
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(w.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(loader.Context, openapi3.EnableExamplesValidation()); err != nil {
		t.Fatalf("the document served with header_prefix BT is not valid: %v", err)
	}
	for scheme, want := range map[string]string{"apiKey": "BT-API-KEY", "proxyKey": "BT-PROXY-KEY", "proxyKeyQuery": "bt-proxy-key"} {
		if got := doc.Components.SecuritySchemes[scheme].Value.Name; got != want {
			t.Errorf("security scheme %s names %q, want %q", scheme, got, want)
		}
	}
	names := map[string]bool{}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, p := range op.Parameters {
				names[p.Value.Name] = true
			}
			for _, r := range op.Responses.Map() {
				for name := range r.Value.Headers {
					names[name] = true
				}
			}
		}
	}
	for _, want := range []string{"BT-PROXY-URL", "BT-IDEMPOTENCY-KEY", "BT-TRACE-ID", "BT-PROXY-DESTINATION-STATUS"} {
		if !names[want] {
			t.Errorf("no parameter or response header %s", want)
		}
	}
	if got := openAPIFor("SVC"); !bytes.Equal(got, openAPIDocument) {
		t.Error("the default prefix does not serve the document as written")
	}
}

// openAPILintExceptions are the warnings Redocly's recommended rules and
// Spectral's spectral:oas still give on the served document, each with
// why it stays (rule, then JSON pointer of the place):
//
//   - operation-4xx-response on GET /openapi.json and GET /health: both
//     are answered before authentication, rate limiting and routing, so
//     no 4xx can come back from them; documenting one would be false.
var openAPILintExceptions = map[string]string{
	"operation-4xx-response #/paths/~1openapi.json/get/responses": "the document is served before any check that could refuse it",
	"operation-4xx-response #/paths/~1health/get/responses":       "the health check is served before any check that could refuse it",
}

// TestOpenAPILintRules checks, without the linters, what their rules ask
// that can be checked in Go: info's license and contact, servers, and for
// every operation an operationId, summary, description and declared tag,
// a success response and a 4xx response (but for openAPILintExceptions);
// every declared tag and every component is used.
func TestOpenAPILintRules(t *testing.T) {
	doc := loadOpenAPI(t)
	if doc.Info.License == nil || doc.Info.License.Name == "" || doc.Info.Contact == nil || doc.Info.Contact.URL == "" {
		t.Errorf("info needs a license and a contact: %+v %+v", doc.Info.License, doc.Info.Contact)
	}
	if len(doc.Servers) == 0 {
		t.Error("no servers")
	}
	declared, usedTags := map[string]bool{}, map[string]bool{}
	for _, tag := range doc.Tags {
		declared[tag.Name] = true
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			key := method + " " + path
			if op.OperationID == "" || op.Summary == "" || op.Description == "" || len(op.Tags) == 0 {
				t.Errorf("%s: needs an operationId, summary, description and tags", key)
			}
			for _, tag := range op.Tags {
				usedTags[tag] = true
				if !declared[tag] {
					t.Errorf("%s: tag %q is not declared", key, tag)
				}
			}
			var ok2xx, ok4xx bool
			for code := range op.Responses.Map() {
				ok2xx = ok2xx || code[0] == '2'
				ok4xx = ok4xx || code[0] == '4'
			}
			pointer := "#/paths/" + strings.ReplaceAll(strings.ReplaceAll(path, "~", "~0"), "/", "~1") + "/" + strings.ToLower(method) + "/responses"
			if !ok2xx {
				t.Errorf("%s: no 2xx response", key)
			}
			if !ok4xx && openAPILintExceptions["operation-4xx-response "+pointer] == "" {
				t.Errorf("%s: no 4xx response", key)
			}
		}
	}
	for name := range declared {
		if !usedTags[name] {
			t.Errorf("tag %q is declared but no operation uses it", name)
		}
	}
	raw := string(openAPIDocument)
	for kind, names := range map[string][]string{
		"schemas":    keys(doc.Components.Schemas),
		"responses":  keys(doc.Components.Responses),
		"parameters": keys(doc.Components.Parameters),
		"headers":    keys(doc.Components.Headers),
	} {
		for _, name := range names {
			if !strings.Contains(raw, `"#/components/`+kind+`/`+name+`"`) {
				t.Errorf("components.%s.%s is never used", kind, name)
			}
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestOpenAPILint runs Redocly (recommended rules) and Spectral
// (spectral:oas) on the document as served under the default header
// prefix and under BT, when TV_OPENAPI_LINT=1 and both are on PATH:
//
//	npm install --prefix /tmp/oalint @redocly/cli @stoplight/spectral-cli
//	PATH=/tmp/oalint/node_modules/.bin:$PATH TV_OPENAPI_LINT=1 go test ./caddymodule -run TestOpenAPILint$
//
// Only the warnings of openAPILintExceptions may remain.
func TestOpenAPILint(t *testing.T) {
	if os.Getenv("TV_OPENAPI_LINT") != "1" {
		t.Skip("set TV_OPENAPI_LINT=1 to run Redocly and Spectral")
	}
	redocly, err1 := exec.LookPath("redocly")
	spectral, err2 := exec.LookPath("spectral")
	if err1 != nil || err2 != nil {
		t.Skip("redocly or spectral is not on PATH")
	}
	dir := t.TempDir()
	ruleset := filepath.Join(dir, ".spectral.yaml")
	if err := os.WriteFile(ruleset, []byte("extends: [\"spectral:oas\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"SVC", "BT"} {
		t.Run(prefix, func(t *testing.T) {
			doc := filepath.Join(dir, prefix+".json")
			if err := os.WriteFile(doc, openAPIFor(prefix), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()

			cmd := exec.CommandContext(ctx, redocly, "lint", doc, "--format=json")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
			out, err := cmd.Output()
			var report struct {
				Problems []struct {
					RuleID   string `json:"ruleId"`
					Message  string `json:"message"`
					Location []struct {
						Pointer string `json:"pointer"`
					} `json:"location"`
				} `json:"problems"`
			}
			if jerr := json.Unmarshal(out, &report); jerr != nil {
				t.Fatalf("redocly: %v, %v: %s", err, jerr, out)
			}
			for _, p := range report.Problems {
				where := ""
				if len(p.Location) > 0 {
					where = p.Location[0].Pointer
				}
				if openAPILintExceptions[p.RuleID+" "+where] == "" {
					t.Errorf("redocly: %s at %s: %s", p.RuleID, where, p.Message)
				}
			}

			results := filepath.Join(dir, prefix+"-spectral.json")
			cmd = exec.CommandContext(ctx, spectral, "lint", doc, "--ruleset", ruleset, "--format", "json", "--output", results)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("spectral: %v: %s", err, out)
			}
			raw, err := os.ReadFile(results)
			if err != nil {
				t.Fatal(err)
			}
			var found []struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				Path    []any  `json:"path"`
			}
			if err := json.Unmarshal(raw, &found); err != nil {
				t.Fatalf("spectral output: %v: %s", err, raw)
			}
			for _, r := range found {
				t.Errorf("spectral: %s at %v: %s", r.Code, r.Path, r.Message)
			}
		})
	}
}

package caddymodule

// The token API tests' harness: the secrets they send, tokenEnv (a handler
// over a fresh store, applications by role, every exchange recorded and
// scanned for secrets) and its helpers.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/tokenvault/tokenvault/internal/testclock"
	"github.com/tokenvault/tokenvault/internal/testjson"
	"github.com/tokenvault/tokenvault/vaultstore"
)

// Values the tests submit as sensitive data. None may appear in a log
// line, and none in a response body except a revealing key's GET of the
// token that holds it.
const (
	tvCard          = "4242424242424242"
	tvCardBadLuhn   = "4242424242424241"
	tvCard12        = "424242424242"
	tvCardFullWidth = "４２４２４２４２４２４２４２４２"
	tvCVC           = "7373"
	tvRouting       = "110000000" // valid ABA checksum
	tvRoutingBad    = "110000001"
	tvAccount       = "771206789"
	tvAccount18     = "771206789771206789"
	tvSecretText    = "tv-secret-Ωmega-✓-9f8e"
	tvBigNumber     = "12345678901234567890"
)

// tvSecrets are searched in bodies and logs (the general key reveals
// /general/, so its reads are exempt like the revealing key's). The CVC is searched as a JSON
// string, since four bare digits turn up in trace ids and timestamps.
var tvSecrets = []string{tvCard, tvCardBadLuhn, tvCard12, tvCardFullWidth, `"` + tvCVC + `"`, tvRoutingBad, tvAccount, tvSecretText}

// Roles of the test keys.
const (
	tvRoleMgmt    = "management"
	tvRoleReveal  = "reveal"  // reveal on "/"
	tvRoleMask    = "mask"    // mask on /pci/, /bank/, /general/
	tvRoleRedact  = "redact"  // redact on "/"
	tvRoleGeneral = "general" // reveal on /general/ only
	tvRoleOther   = "other"   // reveal on "/", in a second tenant
)

// tvLogBuffer collects the handler's log lines.
type tvLogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *tvLogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *tvLogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tvExchange is one request and its answer, kept for the secrets check.
type tvExchange struct {
	role, method, path string
	status             int
	body               string
}

// tokenEnv is a handler over a real on-disk store, a tenant with one
// application per role, and a record of every answer.
type tokenEnv struct {
	tb    testing.TB
	h     *API
	store *vaultstore.Store
	logs  *tvLogBuffer
	keys  map[string]string
	// tenantID is the first tenant's id.
	tenantID string

	record    bool
	mu        sync.Mutex
	exchanges []tvExchange
	validate  func(*http.Request, []byte, *httptest.ResponseRecorder) // checks each exchange when set (openapi_test.go)
}

// tvResp is an answer as a client sees it.
type tvResp struct {
	status int
	header http.Header
	raw    []byte
	body   any // decoded with UseNumber; nil for an empty body
}

func (r tvResp) String() string { return fmt.Sprintf("%d %s", r.status, r.raw) }

// newTokenEnv builds the environment. With record set, every answer and
// every log line is checked for the test secrets when the test ends.
func newTokenEnv(tb testing.TB, syncWrites, record bool) *tokenEnv {
	tb.Helper()
	h, store := newTestAPI(tb, syncWrites)
	return setupTokenEnv(tb, h, store, record)
}

// newTokenEnvClock is newTokenEnv over a store that reads the clock c.
func newTokenEnvClock(tb testing.TB, c *testclock.Clock) *tokenEnv {
	tb.Helper()
	c.Set(time.Now())
	store, err := vaultstore.Open(vaultstore.Options{Dir: tb.TempDir(), MasterKey: make([]byte, vaultstore.MasterKeySize), Now: c.Now})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	h := &API{}
	h.wire(newTestApp(tb, store, nil), zap.NewNop())
	return setupTokenEnv(tb, h, store, true)
}

func setupTokenEnv(tb testing.TB, h *API, store *vaultstore.Store, record bool) *tokenEnv {
	tb.Helper()
	logs := &tvLogBuffer{}
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	h.logger = zap.New(zapcore.NewCore(enc, zapcore.AddSync(logs), zap.DebugLevel))
	e := &tokenEnv{tb: tb, h: h, store: store, logs: logs, keys: map[string]string{}, record: record}

	ctx := context.Background()
	t1, err := store.CreateTenant(ctx, vaultstore.NewTenant{Name: "tokens-test", Type: vaultstore.TenantTest})
	if err != nil {
		tb.Fatal(err)
	}
	e.tenantID = t1.Tenant.ID
	e.keys[tvRoleMgmt] = t1.Key
	all := []string{"token:create", "token:read", "token:update", "token:delete"}
	rule := func(prio int, container, transform string, perms []string) map[string]any {
		return map[string]any{"priority": prio, "container": container, "transform": transform, "permissions": perms}
	}
	apps := []struct {
		role  string
		rules []map[string]any
	}{
		{tvRoleReveal, []map[string]any{rule(1, "/", "reveal", all)}},
		{tvRoleMask, []map[string]any{
			rule(1, "/pci/", "mask", all),
			rule(2, "/bank/", "mask", all),
			rule(3, "/general/", "mask", all),
		}},
		{tvRoleRedact, []map[string]any{rule(1, "/", "redact", all)}},
		{tvRoleGeneral, []map[string]any{rule(1, "/general/", "reveal", all)}},
	}
	for _, a := range apps {
		e.keys[a.role] = e.createApp(tvRoleMgmt, a.role, a.rules)
	}

	t2, err := store.CreateTenant(ctx, vaultstore.NewTenant{Name: "other-tenant", Type: vaultstore.TenantTest})
	if err != nil {
		tb.Fatal(err)
	}
	e.keys["other-management"] = t2.Key
	e.keys[tvRoleOther] = e.createApp("other-management", tvRoleOther, []map[string]any{rule(1, "/", "reveal", all)})

	if record {
		tb.Cleanup(e.checkSecrets)
	}
	return e
}

func (e *tokenEnv) createApp(mgmtRole, name string, rules []map[string]any) string {
	e.tb.Helper()
	r := e.do(mgmtRole, http.MethodPost, "/applications", map[string]any{"name": name, "type": "private", "rules": rules})
	if r.status != http.StatusCreated {
		e.tb.Fatalf("create application %s: %s", name, r)
	}
	key, _ := testjson.Field(r.body, "key").(string)
	if key == "" {
		e.tb.Fatalf("create application %s: no key in %s", name, r)
	}
	return key
}

// tvRevealing reports whether an answer may carry token data in the clear.
func tvRevealing(x tvExchange) bool {
	return (x.role == tvRoleReveal || x.role == tvRoleGeneral) && x.method == http.MethodGet && strings.HasPrefix(x.path, "/tokens")
}

// checkSecrets fails the test when a secret shows up in an answer that
// should not reveal data, or in any log line.
func (e *tokenEnv) checkSecrets() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, x := range e.exchanges {
		if tvRevealing(x) {
			continue
		}
		for _, s := range tvSecrets {
			if strings.Contains(x.body, s) {
				e.tb.Errorf("secret %q in the answer to %s %s (%s key, %d): %s", s, x.method, x.path, x.role, x.status, x.body)
			}
		}
		if strings.Contains(x.body, `"cvc":`) {
			e.tb.Errorf("cvc member in the answer to %s %s (%s key): %s", x.method, x.path, x.role, x.body)
		}
	}
	logs := e.logs.String()
	for _, line := range strings.Split(logs, "\n") {
		for _, s := range append(slices.Clone(tvSecrets), ":"+tvCVC, " "+tvCVC) {
			if strings.Contains(line, s) {
				e.tb.Errorf("secret %q in a log line: %s", s, line)
			}
		}
	}
}

// do sends one request through API.ServeHTTP. body is nil, a string (sent
// as is) or a value (sent as JSON). hdr are header name/value pairs; a
// PATCH defaults to application/merge-patch+json.
func (e *tokenEnv) do(role, method, path string, body any, hdr ...string) tvResp {
	e.tb.Helper()
	rd, err := testjson.Body(body)
	if err != nil {
		e.tb.Fatal(err)
	}
	req := httptest.NewRequest(method, path, rd)
	if key := e.keys[role]; key != "" {
		req.Header.Set("SVC-API-KEY", key)
	}
	if body != nil {
		if method == http.MethodPatch {
			req.Header.Set("Content-Type", "application/merge-patch+json")
		} else {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	if e.validate != nil {
		defer e.validate(req, tvSentBody(req), w)
	}
	if err := e.h.ServeHTTP(w, req, nil); err != nil {
		e.tb.Fatalf("%s %s: ServeHTTP returned %v", method, path, err)
	}
	r := tvResp{status: w.Code, header: w.Header(), raw: w.Body.Bytes()}
	if len(bytes.TrimSpace(r.raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(r.raw))
		dec.UseNumber()
		if err := dec.Decode(&r.body); err != nil {
			e.tb.Errorf("%s %s: answer is not JSON: %v: %s", method, path, err, r.raw)
		}
	}
	if e.record {
		e.mu.Lock()
		e.exchanges = append(e.exchanges, tvExchange{role: role, method: method, path: path, status: r.status, body: string(r.raw)})
		e.mu.Unlock()
	}
	return r
}

// tvWantStatus fails unless the answer has the status.
func tvWantStatus(tb testing.TB, r tvResp, status int, what string) {
	tb.Helper()
	if r.status != status {
		tb.Fatalf("%s: status %d, want %d: %s", what, r.status, status, r.raw)
	}
}

// tvWantProblem checks an RFC 7807 answer; with fields, each must be named
// in errors.
func tvWantProblem(tb testing.TB, r tvResp, status int, what string, fields ...string) {
	tb.Helper()
	if r.status != status {
		tb.Errorf("%s: status %d, want %d: %s", what, r.status, status, r.raw)
		return
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		tb.Errorf("%s: Content-Type %q, want application/problem+json", what, ct)
	}
	if got := testjson.Field(r.body, "status"); fmt.Sprint(got) != fmt.Sprint(status) {
		tb.Errorf("%s: problem status %v, want %d: %s", what, got, status, r.raw)
	}
	if testjson.Str(r.body, "title") == "" || testjson.Str(r.body, "type") == "" {
		tb.Errorf("%s: problem without type or title: %s", what, r.raw)
	}
	errs, _ := testjson.Field(r.body, "errors").(map[string]any)
	for _, f := range fields {
		if _, ok := errs[f]; !ok {
			tb.Errorf("%s: errors does not name %q: %s", what, f, r.raw)
		}
	}
}

// count is the number of tokens the revealing key sees.
func (e *tokenEnv) count() int {
	e.tb.Helper()
	r := e.do(tvRoleReveal, http.MethodGet, "/tokens?size=1", nil)
	tvWantStatus(e.tb, r, http.StatusOK, "count tokens")
	n, err := testjson.Field(r.body, "pagination", "total_items").(json.Number).Int64()
	if err != nil {
		e.tb.Fatalf("total_items: %v: %s", err, r.raw)
	}
	return int(n)
}

// create POSTs a token and returns the answer, failing unless it is 201.
func (e *tokenEnv) create(role string, body any) tvResp {
	e.tb.Helper()
	r := e.do(role, http.MethodPost, "/tokens", body)
	tvWantStatus(e.tb, r, http.StatusCreated, "create token")
	if testjson.Str(r.body, "id") == "" {
		e.tb.Fatalf("create token: no id: %s", r.raw)
	}
	return r
}

func tvCardBody() map[string]any {
	return map[string]any{"type": "card", "data": map[string]any{
		"number": tvCard, "expiration_month": 12, "expiration_year": 2030, "cvc": tvCVC,
	}}
}

func tvBankBody() map[string]any {
	return map[string]any{"type": "bank", "data": map[string]any{"routing_number": tvRouting, "account_number": tvAccount}}
}

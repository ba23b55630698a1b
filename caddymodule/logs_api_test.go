package caddymodule

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testjson"
	"github.com/tokenvault/tokenvault/vaultstore"
)

// TestAuditLogCoversEveryOperation drives each kind of operation once and
// reads GET /logs: each wrote its record, pages return every record once,
// filters select, and no record holds a secret.
func TestAuditLogCoversEveryOperation(t *testing.T) {
	e := newTokenEnv(t, false, true)
	ctx := context.Background()

	card := testjson.Str(e.create(tvRoleReveal, tvCardBody()).body, "id")
	tvWantStatus(t, e.do(tvRoleReveal, http.MethodGet, "/tokens/"+card, nil), http.StatusOK, "read")
	tvWantStatus(t, e.do(tvRoleMask, http.MethodGet, "/tokens", nil), http.StatusOK, "list")
	tvWantStatus(t, e.do(tvRoleReveal, http.MethodPatch, "/tokens/"+card, map[string]any{"metadata": map[string]any{"k": "v"}}), http.StatusOK, "update")
	tvWantStatus(t, e.do(tvRoleReveal, http.MethodPost, "/tokenize", map[string]any{"a": tvBankBody()}), http.StatusOK, "tokenize")
	tvWantStatus(t, e.do(tvRoleReveal, http.MethodDelete, "/tokens/"+card, nil), http.StatusNoContent, "delete")
	r := e.do(tvRoleMgmt, http.MethodPost, "/applications", map[string]any{"name": "a", "type": "private", "permissions": []string{"token:read"}})
	tvWantStatus(t, r, http.StatusCreated, "create application")
	appID := testjson.Str(r.body, "id")
	r = e.do(tvRoleMgmt, http.MethodPost, "/applications/"+appID+"/keys", nil)
	tvWantStatus(t, r, http.StatusCreated, "create key")
	tvWantStatus(t, e.do(tvRoleMgmt, http.MethodDelete, "/applications/"+appID+"/keys/"+testjson.Str(r.body, "id"), nil), http.StatusNoContent, "delete key")
	tvWantStatus(t, e.do(tvRoleMgmt, http.MethodPut, "/applications/"+appID, map[string]any{"name": "b", "permissions": []string{"token:read"}}), http.StatusOK, "update application")
	tvWantStatus(t, e.do(tvRoleMgmt, http.MethodDelete, "/applications/"+appID, nil), http.StatusNoContent, "delete application")
	r = e.do(tvRoleMgmt, http.MethodPost, "/proxies", map[string]any{"name": "p", "destination_url": "https://api.example.com"})
	tvWantStatus(t, r, http.StatusCreated, "create proxy")
	proxyID := testjson.Str(r.body, "id")
	tvWantStatus(t, e.do(tvRoleMgmt, http.MethodPatch, "/proxies/"+proxyID, map[string]any{"name": "q"}), http.StatusNoContent, "patch proxy")
	tvWantStatus(t, e.do(tvRoleMgmt, http.MethodDelete, "/proxies/"+proxyID, nil), http.StatusNoContent, "delete proxy")
	tvWantStatus(t, e.do(tvRoleMgmt, http.MethodPut, "/tenants/self", map[string]any{"name": "renamed"}), http.StatusOK, "update tenant")
	if _, err := e.store.UpdateQuotas(ctx, e.tenantID, vaultstore.QuotasUpdate{TokenizeLimit: ptr(7)}); err != nil {
		t.Fatal(err)
	}

	// every record, through pages of 3
	var all []map[string]any
	seen := map[string]bool{}
	next := ""
	for pages := 0; ; pages++ {
		if pages > 50 {
			t.Fatal("pagination does not end")
		}
		path := "/logs?size=3"
		if next != "" {
			path += "&start=" + url.QueryEscape(next)
		}
		r := e.do(tvRoleMgmt, http.MethodGet, path, nil)
		tvWantStatus(t, r, http.StatusOK, "list logs")
		data, _ := testjson.Field(r.body, "data").([]any)
		if len(data) > 3 {
			t.Fatalf("page of %d records with size=3", len(data))
		}
		for _, d := range data {
			rec := d.(map[string]any)
			id := testjson.Str(rec, "id")
			if seen[id] {
				t.Errorf("record %s returned twice", id)
			}
			seen[id] = true
			all = append(all, rec)
		}
		next = testjson.Str(r.body, "pagination", "next")
		if next == "" {
			break
		}
	}
	want := map[string]bool{
		"tenant create": true, "application create": true, "key create": true,
		"token create": true, "token read": true, "token list": true, "token update": true,
		"token tokenize": true, "token delete": true, "key delete": true, "application update": true,
		"application delete": true, "proxy create": true, "proxy update": true, "proxy delete": true,
		"tenant update": true,
	}
	var prev time.Time
	for i, rec := range all {
		delete(want, testjson.Str(rec, "entity_type")+" "+testjson.Str(rec, "operation"))
		if testjson.Str(rec, "tenant_id") != e.tenantID || testjson.Str(rec, "created_at") == "" {
			t.Errorf("record %v", rec)
		}
		at, err := time.Parse(time.RFC3339Nano, testjson.Str(rec, "created_at"))
		if err != nil {
			t.Fatalf("created_at: %v", err)
		}
		if i > 0 && at.After(prev) {
			t.Errorf("records not newest first at %d", i)
		}
		prev = at
	}
	for op := range want {
		t.Errorf("no audit record for %s", op)
	}
	raw := tvJSON(t, all)
	for _, s := range append(tvSecrets, tvRouting, e.keys[tvRoleMgmt], e.keys[tvRoleReveal]) {
		if strings.Contains(raw, s) {
			t.Errorf("an audit record holds secret %q", s)
		}
	}

	// filters
	r = e.do(tvRoleMgmt, http.MethodGet, "/logs?entity_type=proxy&entity_id="+proxyID, nil)
	tvWantStatus(t, r, http.StatusOK, "filtered logs")
	if data, _ := testjson.Field(r.body, "data").([]any); len(data) != 3 {
		t.Errorf("proxy %s has %d records, want create, update and delete: %s", proxyID, len(data), r.raw)
	}
	future := url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))
	r = e.do(tvRoleMgmt, http.MethodGet, "/logs?start_date="+future, nil)
	if data, _ := testjson.Field(r.body, "data").([]any); r.status != http.StatusOK || len(data) != 0 {
		t.Errorf("start_date in the future: %s", r)
	}
	r = e.do(tvRoleMgmt, http.MethodGet, "/logs?end_date="+future+"&size=100", nil)
	if data, _ := testjson.Field(r.body, "data").([]any); r.status != http.StatusOK || len(data) != len(all) {
		t.Errorf("end_date in the future: %d records, want %d", len(data), len(all))
	}

	// refusals
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodGet, "/logs", nil), http.StatusForbidden, "logs without log:read")
	tvWantProblem(t, e.do(tvRoleMgmt, http.MethodGet, "/logs?size=101", nil), http.StatusBadRequest, "size 101", "size")
	tvWantProblem(t, e.do(tvRoleMgmt, http.MethodGet, "/logs?start=nonsense", nil), http.StatusBadRequest, "bad cursor", "start")
	tvWantProblem(t, e.do(tvRoleMgmt, http.MethodGet, "/logs?start_date=yesterday", nil), http.StatusBadRequest, "bad date", "start_date")
	r = e.do(tvRoleMgmt, http.MethodGet, "/logs/entity-types", nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.raw), `"value":"token"`) {
		t.Errorf("entity types: %s", r)
	}
	r = e.do("other-management", http.MethodGet, "/logs?size=100", nil)
	if strings.Contains(string(r.raw), e.tenantID) {
		t.Error("another tenant sees this tenant's records")
	}
}

// TestReadFailsWhenAuditCannotBeWritten: a read whose record cannot be
// written returns 503 and no data.
func TestReadFailsWhenAuditCannotBeWritten(t *testing.T) {
	faults := &failingAudit{}
	e, cardID := newProxyEnv(t, faults)
	faults.on.Store(true)
	r := e.do("user", http.MethodGet, "/tokens/"+cardID, nil)
	tvWantProblem(t, r, http.StatusServiceUnavailable, "read with the audit sink down")
	if strings.Contains(string(r.raw), tvCard) {
		t.Error("data returned without its audit record")
	}
	tvWantProblem(t, e.do("user", http.MethodPost, "/tokens", tvCardBody()), http.StatusServiceUnavailable, "create with the audit sink down")
	faults.on.Store(false)
	if n := e.count(); n != 1 {
		t.Errorf("%d tokens after a create whose audit failed; want the first one only", n)
	}
}

func ptr[T any](v T) *T { return &v }

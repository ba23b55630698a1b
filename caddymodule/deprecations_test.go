package caddymodule

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// TestDeprecations: each row of the interface's Versioning table.
func TestDeprecations(t *testing.T) {
	e := newTokenEnv(t, false, false)
	appID := testjson.Str(e.do(tvRoleMgmt, http.MethodGet, "/applications/key", nil).body, "id")

	t.Run("reactor ids on proxies", func(t *testing.T) {
		for _, field := range []string{"request_reactor_id", "response_reactor_id"} {
			r := e.do(tvRoleMgmt, http.MethodPost, "/proxies", map[string]any{
				"name": "p", "destination_url": "https://api.example.com", field: "5b7c0ab8-0c54-4e4b-a1e4-0e9d6a1d3a4c"})
			tvWantProblem(t, r, http.StatusBadRequest, field, field)
			want := strings.Replace(field, "reactor_id", "transform", 1)
			if !strings.Contains(string(r.raw), want) {
				t.Errorf("%s: the error does not name %s: %s", field, want, r.raw)
			}
		}
	})
	t.Run("token privacy settings", func(t *testing.T) {
		body := tvCardBody()
		body["privacy"] = map[string]any{"classification": "pci", "impact_level": "high", "restriction_policy": "mask"}
		r := e.create(tvRoleReveal, body)
		if testjson.Has(r.body, "privacy") {
			t.Errorf("privacy came back: %s", r.raw)
		}
		if c, _ := testjson.Field(r.body, "containers").([]any); len(c) != 1 || c[0] != "/pci/high/" {
			t.Errorf("a token without containers is in %v, want the type's default /pci/high/", c)
		}
	})
	t.Run("reactor formulas", func(t *testing.T) {
		for _, req := range []struct{ method, path string }{
			{http.MethodGet, "/reactor-formulas"},
			{http.MethodPost, "/reactor-formulas"},
			{http.MethodGet, "/reactor-formulas/5b7c0ab8-0c54-4e4b-a1e4-0e9d6a1d3a4c"},
			{http.MethodDelete, "/reactor-formulas/5b7c0ab8-0c54-4e4b-a1e4-0e9d6a1d3a4c"},
		} {
			r := e.do(tvRoleMgmt, req.method, req.path, nil)
			tvWantProblem(t, r, http.StatusBadRequest, req.method+" "+req.path)
			if !strings.Contains(string(r.raw), "reactors with a code attribute") {
				t.Errorf("%s %s: no replacement named: %s", req.method, req.path, r.raw)
			}
		}
	})
	t.Run("application key regenerate", func(t *testing.T) {
		r := e.do(tvRoleMgmt, http.MethodPost, "/applications/"+appID+"/regenerate", nil)
		tvWantProblem(t, r, http.StatusBadRequest, "regenerate")
		if !strings.Contains(string(r.raw), "POST /applications/{id}/keys") {
			t.Errorf("no replacement named: %s", r.raw)
		}
		// the calling key still works: nothing was regenerated
		tvWantStatus(t, e.do(tvRoleMgmt, http.MethodGet, "/applications/key", nil), http.StatusOK, "key after regenerate")
	})
	t.Run("without a key, still 401", func(t *testing.T) {
		tvWantProblem(t, e.do("", http.MethodGet, "/reactor-formulas", nil), http.StatusUnauthorized, "no key")
	})
}

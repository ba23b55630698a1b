package caddymodule

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// TestClientKeysAPI: POST, GET, list and DELETE /keys with the
// permissions, shapes and refusals a caller sees; the public key is in
// the creation's answer only.
func TestClientKeysAPI(t *testing.T) {
	e := newTokenEnv(t, false, false)
	k := createJWEKey(t, e, tvRoleMgmt)
	if !strings.HasPrefix(k.pem, "-----BEGIN PUBLIC KEY-----\n") {
		t.Errorf("public_key_pem: %q", k.pem)
	}
	x25519Of(t, k.pem)
	// no body at all makes a key too
	r := e.do(tvRoleMgmt, http.MethodPost, "/keys", nil)
	tvWantStatus(t, r, http.StatusCreated, "POST /keys without a body")
	r = e.do(tvRoleMgmt, http.MethodGet, "/keys/"+k.id, nil)
	tvWantStatus(t, r, http.StatusOK, "GET /keys/{id}")
	if testjson.Str(r.body, "key_id") != k.id || testjson.Str(r.body, "expires_at") == "" || strings.Contains(string(r.raw), "PUBLIC KEY") || strings.Contains(string(r.raw), "private") {
		t.Errorf("GET /keys/{id}: %s", r.raw)
	}
	r = e.do(tvRoleMgmt, http.MethodGet, "/keys", nil)
	tvWantStatus(t, r, http.StatusOK, "GET /keys")
	if list, _ := r.body.([]any); len(list) != 2 || testjson.Str(list[0], "key_id") != k.id || strings.Contains(string(r.raw), "PUBLIC KEY") {
		t.Errorf("GET /keys: %s", r.raw)
	}
	tvWantProblem(t, e.do(tvRoleMgmt, http.MethodPost, "/keys", map[string]any{"expires_at": "2000-01-01T00:00:00Z"}), http.StatusBadRequest, "a past expires_at", "expires_at")
	tvWantProblem(t, e.do(tvRoleMgmt, http.MethodPost, "/keys", map[string]any{"expires_at": "2999-01-01T00:00:00Z"}), http.StatusBadRequest, "expires_at over a year", "expires_at")
	tvWantProblem(t, e.do(tvRoleMgmt, http.MethodPost, "/keys", `{"expires_at": 5}`), http.StatusBadRequest, "expires_at not a string", "expires_at")
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/keys", nil), http.StatusForbidden, "a private application creates a key")
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodGet, "/keys", nil), http.StatusForbidden, "a private application lists keys")
	tvWantProblem(t, e.do("other-management", http.MethodGet, "/keys/"+k.id, nil), http.StatusNotFound, "another tenant's key")
	tvWantProblem(t, e.do("other-management", http.MethodDelete, "/keys/"+k.id, nil), http.StatusNotFound, "another tenant deletes the key")
	tvWantStatus(t, e.do(tvRoleMgmt, http.MethodDelete, "/keys/"+k.id, nil), http.StatusNoContent, "DELETE /keys/{id}")
	tvWantProblem(t, e.do(tvRoleMgmt, http.MethodGet, "/keys/"+k.id, nil), http.StatusNotFound, "a deleted key")
	tvWantProblem(t, e.do(tvRoleMgmt, http.MethodDelete, "/keys/"+k.id, nil), http.StatusNotFound, "deleting twice")
	r = e.do(tvRoleMgmt, http.MethodGet, "/logs?entity_type=client-key", nil)
	tvWantStatus(t, r, http.StatusOK, "the keys' audit records")
	if n := strings.Count(string(r.raw), `"entity_type":"client-key"`); n != 3 {
		t.Errorf("%d audit records of client keys, want 3 (two creates, one delete): %s", n, r.raw)
	}
}

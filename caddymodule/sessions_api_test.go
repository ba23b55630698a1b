package caddymodule

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testclock"
	"github.com/tokenvault/tokenvault/internal/testjson"
	"github.com/tokenvault/tokenvault/vaultstore"
)

// sessionEnv adds a public application (the browser) to the token test
// environment and two tokens the revealing key created.
func sessionEnv(t *testing.T) (e *tokenEnv, clock *testclock.Clock, tokenA, tokenB string) {
	t.Helper()
	clock = &testclock.Clock{}
	e = newTokenEnvClock(t, clock)
	r := e.do(tvRoleMgmt, http.MethodPost, "/applications", map[string]any{"name": "browser", "type": "public", "permissions": []string{"token:create"}})
	tvWantStatus(t, r, http.StatusCreated, "create the public application")
	e.keys["public"] = testjson.Str(r.body, "key")
	tokenA = testjson.Str(e.create(tvRoleReveal, map[string]any{"type": "token", "data": "session-visible-a"}).body, "id")
	tokenB = testjson.Str(e.create(tvRoleReveal, map[string]any{"type": "token", "data": "session-hidden-b"}).body, "id")
	return e, clock, tokenA, tokenB
}

// newSession creates a session with the public key, registers its key as
// role, and returns the nonce.
func newSession(t *testing.T, e *tokenEnv, role string) string {
	t.Helper()
	r := e.do("public", http.MethodPost, "/sessions", nil)
	tvWantStatus(t, r, http.StatusCreated, "create a session")
	key, nonce := testjson.Str(r.body, "session_key"), testjson.Str(r.body, "nonce")
	at, err := time.Parse(time.RFC3339Nano, testjson.Str(r.body, "expires_at"))
	if !strings.HasPrefix(key, "key_test_sess_") || nonce == "" || err != nil {
		t.Fatalf("create a session: %s", r.raw)
	}
	if d := time.Until(at); d < 2*time.Minute || d > 4*time.Minute {
		t.Fatalf("session expires in %v: %s", d, r.raw)
	}
	e.keys[role] = key
	return nonce
}

func TestSessionsAPIReadOneTokenUntilExpiry(t *testing.T) {
	e, clock, tokenA, tokenB := sessionEnv(t)
	nonce := newSession(t, e, "session")

	tvWantProblem(t, e.do("session", http.MethodGet, "/tokens/"+tokenA, nil), http.StatusForbidden, "read before authorization")

	r := e.do(tvRoleReveal, http.MethodPost, "/sessions/authorize", map[string]any{"nonce": nonce, "rules": []map[string]any{{
		"description": "this one token", "priority": 1, "transform": "reveal", "permissions": []string{"token:read"},
		"conditions": []map[string]any{{"attribute": "id", "operator": "equals", "value": tokenA}},
	}}})
	tvWantStatus(t, r, http.StatusNoContent, "authorize")

	r = e.do("session", http.MethodGet, "/tokens/"+tokenA, nil)
	tvWantStatus(t, r, http.StatusOK, "read the granted token")
	if testjson.Str(r.body, "data") != "session-visible-a" {
		t.Fatalf("granted token not revealed: %s", r.raw)
	}
	r = e.do("session", http.MethodGet, "/tokens/"+tokenB, nil)
	tvWantProblem(t, r, http.StatusForbidden, "read another token")
	if strings.Contains(string(r.raw), "session-hidden-b") {
		t.Fatalf("refusal shows data: %s", r.raw)
	}
	tvWantProblem(t, e.do("session", http.MethodPost, "/tokens", map[string]any{"type": "token", "data": "x"}), http.StatusForbidden, "create with a read-only session")
	tvWantProblem(t, e.do("session", http.MethodGet, "/applications", nil), http.StatusForbidden, "a management call")

	clock.Advance(3*time.Minute + time.Second)
	tvWantProblem(t, e.do("session", http.MethodGet, "/tokens/"+tokenA, nil), http.StatusUnauthorized, "read after expiry")
}

func TestSessionsAPIRefusals(t *testing.T) {
	e, _, tokenA, _ := sessionEnv(t)
	nonce := newSession(t, e, "session")
	grant := func(perms ...string) map[string]any { return map[string]any{"nonce": nonce, "permissions": perms} }

	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/sessions", nil), http.StatusForbidden, "a private key creates a session")
	tvWantProblem(t, e.do("session", http.MethodPost, "/sessions", nil), http.StatusForbidden, "a session creates a session")
	tvWantProblem(t, e.do("", http.MethodPost, "/sessions", nil), http.StatusUnauthorized, "no key")
	tvWantProblem(t, e.do("public", http.MethodPost, "/sessions/authorize", grant("token:read")), http.StatusForbidden, "a public key authorizes")
	tvWantProblem(t, e.do("session", http.MethodPost, "/sessions/authorize", grant("token:read")), http.StatusForbidden, "a session authorizes")
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/sessions/authorize", map[string]any{"nonce": "unknown-nonce", "permissions": []string{"token:read"}}), http.StatusNotFound, "unknown nonce")
	tvWantProblem(t, e.do(tvRoleOther, http.MethodPost, "/sessions/authorize", grant("token:read")), http.StatusNotFound, "nonce of another tenant")
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/sessions/authorize", map[string]any{"permissions": []string{"token:read"}}), http.StatusBadRequest, "no nonce", "nonce")
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/sessions/authorize", map[string]any{"nonce": nonce}), http.StatusBadRequest, "nothing granted", "permissions")
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/sessions/authorize", map[string]any{"nonce": nonce, "rules": []map[string]any{{
		"priority": 1, "transform": "reveal", "permissions": []string{"token:read"},
		"conditions": []map[string]any{{"attribute": "data", "operator": "equals", "value": tokenA}},
	}}}), http.StatusBadRequest, "bad condition", "rules[0].conditions[0].attribute")

	// more than the authorizer holds: 403 naming the permission
	r := e.do(tvRoleReveal, http.MethodPost, "/sessions/authorize", grant("token:use"))
	tvWantProblem(t, r, http.StatusForbidden, "grant beyond the authorizer")
	if !strings.Contains(testjson.Str(r.body, "detail"), "token:use") {
		t.Errorf("refusal does not name the permission: %s", r.raw)
	}
	tvWantProblem(t, e.do(tvRoleMgmt, http.MethodPost, "/sessions/authorize", grant("token:read")), http.StatusForbidden, "management grants token:read")

	tvWantStatus(t, e.do(tvRoleReveal, http.MethodPost, "/sessions/authorize", grant("token:read")), http.StatusNoContent, "authorize")
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/sessions/authorize", grant("token:read")), http.StatusConflict, "authorize twice")
	r = e.do("session", http.MethodGet, "/tokens/"+tokenA, nil)
	tvWantStatus(t, r, http.StatusOK, "read with token:read")
	if testjson.Field(r.body, "data") != nil {
		t.Errorf("plain token:read revealed a token without a mask: %s", r.raw)
	}
}

func TestRolesAndApplicationTemplatesAPI(t *testing.T) {
	e := newTokenEnv(t, false, true)
	r := e.do(tvRoleMgmt, http.MethodGet, "/roles", nil)
	tvWantStatus(t, r, http.StatusOK, "list roles")
	roles, _ := r.body.([]any)
	if len(roles) < 3 || testjson.Str(roles[0], "name") != "ADMIN" {
		t.Fatalf("roles: %s", r.raw)
	}
	r = e.do(tvRoleMgmt, http.MethodGet, "/application-templates", nil)
	tvWantStatus(t, r, http.StatusOK, "list templates")
	templates, _ := r.body.([]any)
	if len(templates) < 5 {
		t.Fatalf("templates: %s", r.raw)
	}
	for _, tpl := range templates {
		id := testjson.Str(tpl, "id")
		got := e.do(tvRoleMgmt, http.MethodGet, "/application-templates/"+id, nil)
		tvWantStatus(t, got, http.StatusOK, "get template "+id)
		// create the application as the vendor's clients do: copy the fields
		app := e.do(tvRoleMgmt, http.MethodPost, "/applications", map[string]any{
			"name": testjson.Str(got.body, "name"), "type": testjson.Str(got.body, "application_type"),
			"permissions": testjson.Field(got.body, "permissions"), "rules": testjson.Field(got.body, "rules"),
		})
		tvWantStatus(t, app, http.StatusCreated, "application from template "+id)
		if testjson.Str(app.body, "type") != testjson.Str(got.body, "application_type") || testjson.Str(app.body, "key") == "" {
			t.Fatalf("application from template %s: %s", id, app.raw)
		}
	}
	tvWantProblem(t, e.do(tvRoleMgmt, http.MethodGet, "/application-templates/00000000-0000-4000-8000-000000000000", nil), http.StatusNotFound, "unknown template")
	tvWantProblem(t, e.do("", http.MethodGet, "/application-templates", nil), http.StatusUnauthorized, "templates without a key")
	tvWantProblem(t, e.do("", http.MethodGet, "/roles", nil), http.StatusUnauthorized, "roles without a key")
}

// A session key counts against the rate limits of public keys, under a
// bucket of its own.
func TestSessionKeysAreRateLimitedAsPublicKeys(t *testing.T) {
	e, _, _, _ := sessionEnv(t)
	newSession(t, e, "session")
	p, err := e.store.Authenticate(context.Background(), e.keys["session"])
	if err != nil {
		t.Fatal(err)
	}
	req := limitRequest(httptest.NewRequest(http.MethodGet, "/tokens", nil), "/tokens", p)
	if req.AppType != vaultstore.AppPublic || req.APIKey == "" || req.APIKey != p.Application.ID {
		t.Fatalf("rate limit request of a session key: %+v", req)
	}
	pub, err := e.store.Authenticate(context.Background(), e.keys["public"])
	if err != nil {
		t.Fatal(err)
	}
	if limitRequest(httptest.NewRequest(http.MethodGet, "/tokens", nil), "/tokens", pub).APIKey == req.APIKey {
		t.Fatal("a session shares its creator's rate limit bucket")
	}
}

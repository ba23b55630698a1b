package caddymodule

// Adversarial review of sessions through the API: what a session key can
// reach beyond the token its rules name, and the refusals of bad
// authorizations.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// attackSessionEnv is sessionEnv with a back end that holds every
// private permission (tokens, documents, intents) and a document and an
// intent of the tenant that no session is meant to reach.
func attackSessionEnv(t *testing.T) (e *tokenEnv, tokenA, tokenB, docID, intentID string) {
	t.Helper()
	e, _, tokenA, tokenB = sessionEnv(t)
	docApp(t, e, "everything", "token:create", "token:read", "token:update", "token:delete", "token:use", "token:search",
		"documents:create", "documents:read", "documents:reveal", "documents:delete",
		"token-intent:create", "token-intent:read", "token-intent:delete")
	ct, body := multipartDoc(t, []byte("the passport scan"), "text/plain", `{"metadata":{"k":"v"}}`)
	r := e.do("everything", http.MethodPost, "/documents", body, "Content-Type", ct)
	tvWantStatus(t, r, http.StatusCreated, "upload a document")
	docID = testjson.Str(r.body, "id")
	r = e.do("everything", http.MethodPost, "/token-intents", map[string]any{"type": "token", "data": "intent-data"})
	tvWantStatus(t, r, http.StatusCreated, "create an intent")
	intentID = testjson.Str(r.body, "id")
	return e, tokenA, tokenB, docID, intentID
}

// TestAttackSessionRuleScopedToOneToken: a session whose rules grant
// permissions only where the token id equals tokenA reaches nothing else:
// no other token, document or token intent, by any route. A rule cannot
// grant a permission on documents or intents (a rule names tokens): that
// is a 400 naming it.
func TestAttackSessionRuleScopedToOneToken(t *testing.T) {
	e, tokenA, tokenB, docID, intentID := attackSessionEnv(t)
	nonce := newSession(t, e, "session")
	tokenPerms := []string{"token:read", "token:update", "token:delete", "token:use", "token:search"}
	rule := func(perms []string) map[string]any {
		return map[string]any{"nonce": nonce, "rules": []map[string]any{{
			"priority": 1, "transform": "reveal", "permissions": perms,
			"conditions": []map[string]any{{"attribute": "id", "operator": "equals", "value": tokenA}},
		}}}
	}
	for i, p := range []string{"documents:read", "documents:reveal", "documents:delete", "documents:create",
		"token-intent:read", "token-intent:delete", "token-intent:create"} {
		perms := append(append([]string{}, tokenPerms...), p)
		r := e.do("everything", http.MethodPost, "/sessions/authorize", rule(perms))
		tvWantProblem(t, r, http.StatusBadRequest, fmt.Sprintf("%s in a rule (%d)", p, i), fmt.Sprintf("rules[0].permissions[%d]", len(tokenPerms)))
	}
	tvWantStatus(t, e.do("everything", http.MethodPost, "/sessions/authorize", rule(tokenPerms)), http.StatusNoContent, "authorize for tokenA")

	r := e.do("session", http.MethodGet, "/tokens/"+tokenA, nil)
	tvWantStatus(t, r, http.StatusOK, "the granted token")

	cases := []struct {
		name, method, path string
		body               any
		want               []int
	}{
		{"read tokenB", http.MethodGet, "/tokens/" + tokenB, nil, []int{http.StatusForbidden, http.StatusNotFound}},
		{"patch tokenB", http.MethodPatch, "/tokens/" + tokenB, map[string]any{"metadata": map[string]any{"x": "y"}}, []int{http.StatusForbidden, http.StatusNotFound}},
		{"delete tokenB", http.MethodDelete, "/tokens/" + tokenB, nil, []int{http.StatusForbidden, http.StatusNotFound}},
		{"detokenize tokenB", http.MethodPost, "/detokenize", map[string]any{"v": "{{ " + tokenB + " }}"}, []int{http.StatusForbidden, http.StatusBadRequest, http.StatusNotFound}},
		{"document metadata", http.MethodGet, "/documents/" + docID, nil, []int{http.StatusForbidden, http.StatusNotFound}},
		{"document content", http.MethodGet, "/documents/" + docID + "/data", nil, []int{http.StatusForbidden, http.StatusNotFound}},
		{"intent", http.MethodGet, "/token-intents/" + intentID, nil, []int{http.StatusForbidden, http.StatusNotFound}},
	}
	for _, tc := range cases {
		r := e.do("session", tc.method, tc.path, tc.body)
		ok := false
		for _, s := range tc.want {
			ok = ok || r.status == s
		}
		if !ok {
			t.Errorf("%s: %d, want one of %v: %s", tc.name, r.status, tc.want, r.raw)
		}
		if strings.Contains(string(r.raw), "session-hidden-b") || strings.Contains(string(r.raw), "passport") || strings.Contains(string(r.raw), "intent-data") {
			t.Errorf("%s: the answer shows data: %s", tc.name, r.raw)
		}
	}
	// lists and searches show tokenA at most
	for _, q := range []struct{ method, path string }{
		{http.MethodGet, "/tokens"}, {http.MethodGet, "/v2/tokens"},
	} {
		r := e.do("session", q.method, q.path, nil)
		if strings.Contains(string(r.raw), tokenB) {
			t.Errorf("%s %s shows tokenB: %s", q.method, q.path, r.raw)
		}
	}
	for _, p := range []string{"/tokens/search", "/v2/tokens/search"} {
		r := e.do("session", http.MethodPost, p, map[string]any{"query": "id:" + tokenB})
		if strings.Contains(string(r.raw), tokenB) && r.status == http.StatusOK {
			t.Errorf("search %s finds tokenB: %s", p, r.raw)
		}
	}
	// the document and the intent are still there
	tvWantStatus(t, e.do("everything", http.MethodGet, "/documents/"+docID, nil), http.StatusOK, "the document after the session's attempts")
	tvWantStatus(t, e.do("everything", http.MethodGet, "/token-intents/"+intentID, nil), http.StatusOK, "the intent after the session's attempts")
	tvWantStatus(t, e.do("everything", http.MethodGet, "/tokens/"+tokenB, nil), http.StatusOK, "tokenB after the session's attempts")
}

// TestAttackSessionDocumentsAndIntents: a session authorized with a rule
// on one token cannot upload or delete documents or delete intents.
func TestAttackSessionDocumentsAndIntents(t *testing.T) {
	e, tokenA, _, docID, intentID := attackSessionEnv(t)
	nonce := newSession(t, e, "session")
	r := e.do("everything", http.MethodPost, "/sessions/authorize", map[string]any{"nonce": nonce, "rules": []map[string]any{{
		"priority": 1, "transform": "reveal", "permissions": []string{"token:read", "token:create", "token:delete"},
		"conditions": []map[string]any{{"attribute": "id", "operator": "equals", "value": tokenA}},
	}}})
	tvWantStatus(t, r, http.StatusNoContent, "authorize")
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	fw, _ := mw.CreateFormFile("document", "x.txt")
	fw.Write([]byte("session upload"))
	mw.Close()
	r = e.do("session", http.MethodPost, "/documents", b.Bytes(), "Content-Type", mw.FormDataContentType())
	if r.status != http.StatusForbidden {
		t.Errorf("a session scoped to one token uploads a document: %s", r)
	}
	if r := e.do("session", http.MethodDelete, "/documents/"+docID, nil); r.status != http.StatusForbidden && r.status != http.StatusNotFound {
		t.Errorf("a session scoped to one token deletes a document: %s", r)
	}
	if r := e.do("session", http.MethodDelete, "/token-intents/"+intentID, nil); r.status != http.StatusForbidden && r.status != http.StatusNotFound {
		t.Errorf("a session scoped to one token deletes an intent: %s", r)
	}
	tvWantStatus(t, e.do("everything", http.MethodGet, "/documents/"+docID, nil), http.StatusOK, "the document is still there")
	tvWantStatus(t, e.do("everything", http.MethodGet, "/token-intents/"+intentID, nil), http.StatusOK, "the intent is still there")
}

// TestAttackSessionAuthorizeRefusals: malformed authorizations are 400s
// naming the field, and leave the session unauthorized (it can be
// authorized afterwards).
func TestAttackSessionAuthorizeRefusals(t *testing.T) {
	e, tokenA, _, _, _ := attackSessionEnv(t)
	nonce := newSession(t, e, "session")
	rule := func(change func(map[string]any)) map[string]any {
		r := map[string]any{"priority": 1, "transform": "reveal", "permissions": []string{"token:read"},
			"conditions": []map[string]any{{"attribute": "id", "operator": "equals", "value": tokenA}}}
		change(r)
		return map[string]any{"nonce": nonce, "rules": []any{r}}
	}
	cases := []struct {
		name  string
		body  any
		field string
	}{
		{"nonce a number", `{"nonce": 5, "permissions": ["token:read"]}`, "nonce"},
		{"nonce an object", `{"nonce": {}, "permissions": ["token:read"]}`, "nonce"},
		{"nonce huge", map[string]any{"nonce": strings.Repeat("n", 10000), "permissions": []string{"token:read"}}, "nonce"},
		{"permissions a string", map[string]any{"nonce": nonce, "permissions": "token:read"}, "permissions"},
		{"permissions with null", `{"nonce": "` + nonce + `", "permissions": [null]}`, "permissions[0]"},
		{"unknown permission", map[string]any{"nonce": nonce, "permissions": []string{"token:readx"}}, "permissions[0]"},
		{"management permission", map[string]any{"nonce": nonce, "permissions": []string{"application:create"}}, "permissions[0]"},
		{"both permissions and rules", map[string]any{"nonce": nonce, "permissions": []string{"token:read"}, "rules": rule(func(map[string]any) {})["rules"]}, "rules"},
		{"rule with container and conditions", rule(func(r map[string]any) { r["container"] = "/pci/" }), "rules[0].container"},
		{"rule without either", rule(func(r map[string]any) { delete(r, "conditions") }), "rules[0].conditions"},
		{"bad container", rule(func(r map[string]any) { delete(r, "conditions"); r["container"] = "../pci" }), "rules[0].container"},
		{"bad transform", rule(func(r map[string]any) { r["transform"] = "unmask" }), "rules[0].transform"},
		{"bad operator", rule(func(r map[string]any) {
			r["conditions"] = []map[string]any{{"attribute": "id", "operator": "regex", "value": ".*"}}
		}), "rules[0].conditions[0].operator"},
		{"empty value", rule(func(r map[string]any) {
			r["conditions"] = []map[string]any{{"attribute": "id", "operator": "starts_with", "value": ""}}
		}), "rules[0].conditions[0].value"},
		{"no permissions in rule", rule(func(r map[string]any) { r["permissions"] = []string{} }), "rules[0].permissions"},
		{"priority a string", rule(func(r map[string]any) { r["priority"] = "1" }), "rules[0].priority"},
		{"priority a fraction", rule(func(r map[string]any) { r["priority"] = 1.5 }), "rules[0].priority"},
		{"priority huge", rule(func(r map[string]any) { r["priority"] = json.Number("1e400") }), "rules[0].priority"},
		{"conditions an object", rule(func(r map[string]any) { r["conditions"] = map[string]any{"attribute": "id"} }), "rules[0].conditions"},
		{"description too long", rule(func(r map[string]any) { r["description"] = strings.Repeat("d", 201) }), "rules[0].description"},
		{"rules an object", map[string]any{"nonce": nonce, "rules": map[string]any{"priority": 1}}, "rules"},
		{"expires_at not a date", map[string]any{"nonce": nonce, "permissions": []string{"token:read"}, "expires_at": "tomorrow"}, "expires_at"},
		{"expires_at a number", map[string]any{"nonce": nonce, "permissions": []string{"token:read"}, "expires_at": 5}, "expires_at"},
		{"expires_at in the past", map[string]any{"nonce": nonce, "permissions": []string{"token:read"}, "expires_at": "2001-01-01T00:00:00Z"}, "expires_at"},
		{"expires_at beyond an hour", map[string]any{"nonce": nonce, "permissions": []string{"token:read"}, "expires_at": time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)}, "expires_at"},
		{"duplicate nonce member", `{"nonce": "x", "nonce": "` + nonce + `", "permissions": ["token:read"]}`, ""},
	}
	for _, tc := range cases {
		r := e.do("everything", http.MethodPost, "/sessions/authorize", tc.body)
		if tc.field == "" {
			tvWantProblem(t, r, http.StatusBadRequest, tc.name)
		} else {
			tvWantProblem(t, r, http.StatusBadRequest, tc.name, tc.field)
		}
	}
	// nothing of the refusals stuck: the session has no rights yet and can
	// still be authorized
	tvWantProblem(t, e.do("session", http.MethodGet, "/tokens/"+tokenA, nil), http.StatusForbidden, "the session after refused authorizations")
	tvWantStatus(t, e.do("everything", http.MethodPost, "/sessions/authorize", map[string]any{"nonce": nonce, "permissions": []string{"token:read"}}),
		http.StatusNoContent, "authorize after the refusals")
}

// TestAttackSessionLifetime: a session used after expiry, a nonce
// authorized after its session expired, an extension past an hour, and a
// session whose authorizer is deleted or narrowed.
func TestAttackSessionLifetime(t *testing.T) {
	e, clock, tokenA, tokenB := sessionEnv(t)
	newSession := func(t *testing.T, e *tokenEnv, role string) string {
		t.Helper()
		r := e.do("public", http.MethodPost, "/sessions", nil)
		tvWantStatus(t, r, http.StatusCreated, "create a session")
		e.keys[role] = testjson.Str(r.body, "session_key")
		return testjson.Str(r.body, "nonce")
	}

	// a nonce whose session expired unauthorized
	late := newSession(t, e, "late")
	clock.Advance(3*time.Minute + time.Second)
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/sessions/authorize", map[string]any{"nonce": late, "permissions": []string{"token:read"}}),
		http.StatusNotFound, "authorize an expired session")
	tvWantProblem(t, e.do("late", http.MethodGet, "/tokens/"+tokenA, nil), http.StatusUnauthorized, "an expired, never authorized session")

	// extended to 50 minutes: works at 40, not at 51; never past an hour
	nonce := newSession(t, e, "long")
	created := clock.Now()
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/sessions/authorize", map[string]any{"nonce": nonce, "permissions": []string{"token:read"},
		"expires_at": created.Add(61 * time.Minute).UTC().Format(time.RFC3339)}), http.StatusBadRequest, "extend past an hour", "expires_at")
	tvWantStatus(t, e.do(tvRoleReveal, http.MethodPost, "/sessions/authorize", map[string]any{"nonce": nonce, "permissions": []string{"token:read"},
		"expires_at": created.Add(50 * time.Minute).UTC().Format(time.RFC3339)}), http.StatusNoContent, "extend to 50 minutes")
	clock.Advance(40 * time.Minute)
	tvWantStatus(t, e.do("long", http.MethodGet, "/tokens/"+tokenA, nil), http.StatusOK, "at 40 minutes")
	clock.Advance(11 * time.Minute)
	tvWantProblem(t, e.do("long", http.MethodGet, "/tokens/"+tokenA, nil), http.StatusUnauthorized, "at 51 minutes")
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/sessions/authorize", map[string]any{"nonce": nonce, "permissions": []string{"token:read"}}),
		http.StatusNotFound, "authorize again after expiry")

	// the authorizer narrowed to /general/, then deleted
	r := e.do(tvRoleMgmt, http.MethodPost, "/applications", map[string]any{"name": "narrowing", "type": "private", "rules": []map[string]any{
		{"priority": 1, "container": "/", "transform": "reveal", "permissions": []string{"token:read"}}}})
	tvWantStatus(t, r, http.StatusCreated, "an authorizer")
	authID := testjson.Str(r.body, "id")
	e.keys["narrowing"] = testjson.Str(r.body, "key")
	nonce = newSession(t, e, "narrowed")
	tvWantStatus(t, e.do("narrowing", http.MethodPost, "/sessions/authorize", map[string]any{"nonce": nonce, "rules": []map[string]any{{
		"priority": 1, "transform": "reveal", "permissions": []string{"token:read"}, "container": "/"}}}), http.StatusNoContent, "authorize")
	tvWantStatus(t, e.do("narrowed", http.MethodGet, "/tokens/"+tokenB, nil), http.StatusOK, "read before narrowing")
	tvWantStatus(t, e.do(tvRoleMgmt, http.MethodPut, "/applications/"+authID, map[string]any{"name": "narrowing", "rules": []map[string]any{
		{"priority": 1, "container": "/pci/", "transform": "reveal", "permissions": []string{"token:read"}}}}), http.StatusOK, "narrow the authorizer")
	tvWantProblem(t, e.do("narrowed", http.MethodGet, "/tokens/"+tokenB, nil), http.StatusForbidden, "read after narrowing")
	tvWantStatus(t, e.do(tvRoleMgmt, http.MethodDelete, "/applications/"+authID, nil), http.StatusNoContent, "delete the authorizer")
	tvWantProblem(t, e.do("narrowed", http.MethodGet, "/tokens/"+tokenB, nil), http.StatusUnauthorized, "read after the authorizer is deleted")
}

// TestAttackSessionReactAsync: a session scoped to tokenA cannot queue a
// reaction over tokenB, and another session (or the authorizer) does not
// read the result of the one it queued.
func TestAttackSessionReactAsync(t *testing.T) {
	e, tokenA, tokenB, _, _ := attackSessionEnv(t)
	r := e.do(tvRoleMgmt, http.MethodPost, "/reactors", map[string]any{"name": "echo", "code": `module.exports = async function (req) { return { raw: { n: 1 } }; }`})
	tvWantStatus(t, r, http.StatusCreated, "create reactor")
	reactor := testjson.Str(r.body, "id")
	docApp(t, e, "invoker", "token:use", "reactor:invoke")
	grant := func(role string) {
		nonce := newSession(t, e, role)
		tvWantStatus(t, e.do("invoker", http.MethodPost, "/sessions/authorize", map[string]any{"nonce": nonce, "rules": []map[string]any{{
			"priority": 1, "transform": "reveal", "permissions": []string{"token:use", "reactor:invoke"},
			"conditions": []map[string]any{{"attribute": "id", "operator": "equals", "value": tokenA}},
		}}}), http.StatusNoContent, "authorize "+role)
	}
	grant("s1")
	grant("s2")
	r = e.do("s1", http.MethodPost, "/reactors/"+reactor+"/react-async", map[string]any{"args": map[string]any{"v": "{{ " + tokenB + " }}"}})
	if r.status != http.StatusForbidden {
		t.Errorf("a session queues a reaction over a token it may not use: %s", r)
	}
	r = e.do("s1", http.MethodPost, "/reactors/"+reactor+"/react-async", map[string]any{"args": map[string]any{"v": "{{ " + tokenA + " }}"}})
	tvWantStatus(t, r, http.StatusAccepted, "queue over tokenA")
	rid := testjson.Str(r.body, "asyncReactorRequestId")
	tvWantStatus(t, e.do("s1", http.MethodGet, "/reactors/"+reactor+"/results/"+rid, nil), http.StatusOK, "the queuing session reads its result")
	for _, role := range []string{"s2", "invoker"} {
		tvWantProblem(t, e.do(role, http.MethodGet, "/reactors/"+reactor+"/results/"+rid, nil), http.StatusNotFound, role+" reads the session's result")
	}
}

// TestAttackSessionContainerRule: a session whose rule covers /general/
// creates tokens there only: not a card in /pci/, not a token of a card
// intent, not a move out of /general/.
func TestAttackSessionContainerRule(t *testing.T) {
	e, _, _, _, _ := attackSessionEnv(t)
	nonce := newSession(t, e, "session")
	tvWantStatus(t, e.do("everything", http.MethodPost, "/sessions/authorize", map[string]any{"nonce": nonce, "rules": []map[string]any{{
		"priority": 1, "transform": "reveal", "permissions": []string{"token:create", "token:update", "token:read"}, "container": "/general/",
	}}}), http.StatusNoContent, "authorize on /general/")
	r := e.do("session", http.MethodPost, "/tokens", map[string]any{"type": "token", "data": "fine", "containers": []string{"/general/session/"}})
	tvWantStatus(t, r, http.StatusCreated, "a token in /general/")
	id := testjson.Str(r.body, "id")
	r = e.do("everything", http.MethodPost, "/token-intents", tvCardBody())
	tvWantStatus(t, r, http.StatusCreated, "a card intent")
	intent := testjson.Str(r.body, "id")
	before := e.count()
	for _, tc := range []struct {
		name, method, path string
		body               any
	}{
		{"a card", http.MethodPost, "/tokens", tvCardBody()},
		{"a token in /pci/", http.MethodPost, "/tokens", map[string]any{"type": "token", "data": "x", "containers": []string{"/pci/"}}},
		{"a token of a card intent", http.MethodPost, "/tokens", map[string]any{"token_intent_id": intent}},
		{"tokenize into /pci/", http.MethodPost, "/tokenize", map[string]any{"a": map[string]any{"type": "card", "data": map[string]any{"number": tvCard}}}},
		{"move to /pci/", http.MethodPatch, "/tokens/" + id, map[string]any{"containers": []string{"/pci/"}}},
	} {
		r := e.do("session", tc.method, tc.path, tc.body)
		tvWantProblem(t, r, http.StatusForbidden, tc.name)
	}
	if n := e.count(); n != before {
		t.Errorf("%d tokens, want %d", n, before)
	}
	tvWantStatus(t, e.do("everything", http.MethodGet, "/token-intents/"+intent, nil), http.StatusOK, "the intent is unused")
	r = e.do("everything", http.MethodGet, "/tokens/"+id, nil)
	if c, _ := testjson.Field(r.body, "containers").([]any); len(c) != 1 || c[0] != "/general/session/" {
		t.Errorf("the token moved: %s", r.raw)
	}
}

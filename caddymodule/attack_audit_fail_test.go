package caddymodule

// Adversarial review: every change on the newer surfaces when its audit
// record cannot be written is a 503 and changes nothing.

import (
	"net/http"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// TestAttackAuditFailureWritesNothing: with the audit sink failing, each
// create, update and delete of intents, tokens made of them, client keys,
// documents, webhooks and sessions answers 503, and once the sink is back
// every record is as it was.
func TestAttackAuditFailureWritesNothing(t *testing.T) {
	faults := &failingAudit{}
	e, _ := newProxyEnv(t, faults)
	tiKeys(t, e)
	files := docApp(t, e, "files", "documents:create", "documents:read", "documents:delete")
	r := e.do(tvRoleMgmt, http.MethodPost, "/applications", map[string]any{"name": "browser", "type": "public", "permissions": []string{"token:create"}})
	tvWantStatus(t, r, http.StatusCreated, "public application")
	e.keys["public"] = testjson.Str(r.body, "key")

	ti := testjson.Str(e.do("web", http.MethodPost, "/token-intents", tvCardBody()).body, "id")
	key := testjson.Str(e.do(tvRoleMgmt, http.MethodPost, "/keys", nil).body, "key_id")
	ct, body := attackMultipart(t, attackPart{name: "document", content: []byte("content")})
	doc := testjson.Str(e.do(files, http.MethodPost, "/documents", body, "Content-Type", ct).body, "id")
	wh := testjson.Str(e.do(tvRoleMgmt, http.MethodPost, "/webhooks", attackWebhookBody(nil)).body, "id")
	r = e.do("public", http.MethodPost, "/sessions", nil)
	nonce := testjson.Str(r.body, "nonce")
	e.keys["session"] = testjson.Str(r.body, "session_key")
	if ti == "" || key == "" || doc == "" || wh == "" || nonce == "" {
		t.Fatal("setting up the records failed")
	}
	tokens := e.count()
	webhook := e.do(tvRoleMgmt, http.MethodGet, "/webhooks/"+wh, nil).raw

	faults.on.Store(true)
	for _, c := range []struct {
		role, method, path string
		body               any
		hdr                []string
	}{
		{"web", http.MethodPost, "/token-intents", tvCardBody(), nil},
		{"backend", http.MethodPost, "/tokens", map[string]any{"token_intent_id": ti}, nil},
		{"backend", http.MethodDelete, "/token-intents/" + ti, nil, nil},
		{tvRoleMgmt, http.MethodPost, "/keys", nil, nil},
		{tvRoleMgmt, http.MethodDelete, "/keys/" + key, nil, nil},
		{files, http.MethodPost, "/documents", body, []string{"Content-Type", ct}},
		{files, http.MethodDelete, "/documents/" + doc, nil, nil},
		{tvRoleMgmt, http.MethodPost, "/webhooks", attackWebhookBody(nil), nil},
		{tvRoleMgmt, http.MethodPut, "/webhooks/" + wh, attackWebhookBody(func(b map[string]any) { b["name"] = "changed" }), nil},
		{tvRoleMgmt, http.MethodDelete, "/webhooks/" + wh, nil, nil},
		{"public", http.MethodPost, "/sessions", nil, nil},
		{tvRoleReveal, http.MethodPost, "/sessions/authorize", map[string]any{"nonce": nonce, "permissions": []string{"token:read"}}, nil},
	} {
		r := e.do(c.role, c.method, c.path, c.body, c.hdr...)
		tvWantProblem(t, r, http.StatusServiceUnavailable, c.method+" "+c.path+" with the audit sink failing")
	}
	faults.on.Store(false)

	if n := e.count(); n != tokens {
		t.Errorf("%d tokens, want %d", n, tokens)
	}
	tvWantStatus(t, e.do("backend", http.MethodGet, "/token-intents/"+ti, nil), http.StatusOK, "the intent")
	if r := e.do(tvRoleMgmt, http.MethodGet, "/keys", nil); len(r.body.([]any)) != 1 {
		t.Errorf("keys: %s", r.raw)
	}
	tvWantStatus(t, e.do(files, http.MethodGet, "/documents/"+doc, nil), http.StatusOK, "the document")
	if got := e.do(tvRoleMgmt, http.MethodGet, "/webhooks/"+wh, nil).raw; string(got) != string(webhook) {
		t.Errorf("the webhook changed: %s", got)
	}
	if n := attackWebhookCount(t, e); n != 1 {
		t.Errorf("%d webhooks, want 1", n)
	}
	for _, typ := range []string{"token-intent", "document", "client-key"} {
		if n := attackAuditCount(t, e, typ, "create"); n != 1 {
			t.Errorf("%d creates of %s in the audit log, want 1", n, typ)
		}
	}
	tvWantProblem(t, e.do("session", http.MethodGet, "/tokens", nil), http.StatusForbidden, "the session is still unauthorized")
	tvWantStatus(t, e.do(tvRoleReveal, http.MethodPost, "/sessions/authorize", map[string]any{"nonce": nonce, "permissions": []string{"token:read"}}),
		http.StatusNoContent, "authorize once the sink is back")
	tvWantStatus(t, e.do("backend", http.MethodPost, "/tokens", map[string]any{"token_intent_id": ti}), http.StatusCreated, "use the intent once the sink is back")
}

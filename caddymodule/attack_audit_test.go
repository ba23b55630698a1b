package caddymodule

// Adversarial review: what the newer surfaces write to the audit log when
// secrets are sent to them in every place a caller can put one.

import (
	"net/http"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// TestAttackAuditHoldsNoSecrets: intents and tokens made of them, client
// keys and encrypted data, documents with secret metadata and file names,
// sessions with secret ids in their rules, webhooks and refused requests
// of each: the whole audit log, read back, holds none of the secrets (the
// environment scans the answers when the test ends).
func TestAttackAuditHoldsNoSecrets(t *testing.T) {
	e := newTokenEnv(t, false, true)
	tiKeys(t, e)
	files := docApp(t, e, "files", "documents:create", "documents:read", "documents:reveal", "documents:delete")

	r := e.do("web", http.MethodPost, "/token-intents", tvCardBody())
	tvWantStatus(t, r, http.StatusCreated, "card intent")
	intent := testjson.Str(r.body, "id")
	e.do("web", http.MethodPost, "/token-intents", tvBankBody())
	e.do("web", http.MethodPost, "/token-intents", map[string]any{"type": "token", "data": tvSecretText})
	e.do("web", http.MethodPost, "/token-intents", map[string]any{"type": "card", "data": map[string]any{"number": tvCardBadLuhn}})
	e.do("backend", http.MethodPost, "/tokens", map[string]any{"token_intent_id": intent, "id": tvCard})
	e.record = false // the answer shows the caller's own metadata
	e.do("backend", http.MethodPost, "/tokens", map[string]any{"token_intent_id": intent, "metadata": map[string]any{"n": tvSecretText}})
	e.record = true
	e.do("backend", http.MethodPost, "/tokens", map[string]any{"token_intent_id": tvCard})

	k := createJWEKey(t, e, tvRoleMgmt)
	e.do(tvRoleReveal, http.MethodPost, "/tokens", map[string]any{"type": "card", "encrypted": elementsJWE(t, k, `{"number":"`+tvCard+`"}`)})
	e.do(tvRoleReveal, http.MethodPost, "/tokens", map[string]any{"type": "card", "encrypted": elementsJWE(t, jweKey{id: tvCard, pem: k.pem}, `{"number":"`+tvCard+`"}`)})
	e.do(tvRoleMgmt, http.MethodDelete, "/keys/"+tvCard, nil)

	ct, body := attackMultipart(t, attackPart{name: "document", filename: tvCard + ".pdf", contentType: "text/plain", content: []byte(tvSecretText)},
		attackPart{name: "request", content: []byte(`{"metadata":{"pan":"` + tvCard + `"}}`)})
	e.record = false // the answer shows the caller's own metadata
	r = e.do(files, http.MethodPost, "/documents", body, "Content-Type", ct)
	e.record = true
	tvWantStatus(t, r, http.StatusCreated, "upload")
	doc := testjson.Str(r.body, "id")
	download(t, e, files, doc)
	e.do(files, http.MethodDelete, "/documents/"+doc, nil)
	e.do(files, http.MethodGet, "/documents/"+tvCard, nil)

	e.keys["public"] = ""
	pub := e.tvPublicApp()
	r = e.do(pub, http.MethodPost, "/sessions", nil)
	e.keys["session"] = testjson.Str(r.body, "session_key")
	e.do(tvRoleReveal, http.MethodPost, "/sessions/authorize", map[string]any{"nonce": testjson.Str(r.body, "nonce"), "rules": []map[string]any{{
		"priority": 1, "transform": "reveal", "permissions": []string{"token:read"}, "description": tvCard,
		"conditions": []map[string]any{{"attribute": "id", "operator": "equals", "value": tvCard}}}}})
	e.do("session", http.MethodGet, "/tokens/"+tvCard, nil)

	e.record = false // the answer shows the caller's own URL
	e.do(tvRoleMgmt, http.MethodPost, "/webhooks", map[string]any{"name": "hook", "url": "https://example.com/?pan=" + tvCard, "events": []string{"token.created"}})
	e.record = true

	for _, typ := range []string{"token-intent", "token", "client-key", "document", "session", "webhook", ""} {
		q := "/logs?size=100"
		if typ != "" {
			q += "&entity_type=" + typ
		}
		r := e.do(tvRoleMgmt, http.MethodGet, q, nil)
		tvWantStatus(t, r, http.StatusOK, "logs of "+typ)
		if list, _ := testjson.Field(r.body, "data").([]any); len(list) == 0 {
			t.Errorf("no audit records of %q: %s", typ, r.raw)
		}
	}
}

package caddymodule

// Adversarial review: mutated bodies on the newer endpoints never get a
// 5xx, and every refusal is a problem.

import (
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// attackMutate returns body with a few random edits: bytes flipped,
// deleted, duplicated or replaced by characters JSON parsers trip on.
func attackMutate(rng *rand.Rand, body string) string {
	b := []byte(body)
	tricky := []string{`"`, `\`, `\u0000`, `\ud800`, "\xff", "{", "}", "[", "]", ",", ":", "null", "1e999", "-0", "\u2028", "ʼ", `""`, "true"}
	for range 1 + rng.IntN(3) {
		if len(b) == 0 {
			break
		}
		i := rng.IntN(len(b))
		switch rng.IntN(4) {
		case 0:
			b[i] ^= byte(1 << rng.IntN(7))
		case 1:
			b = append(b[:i], b[i+1:]...)
		case 2:
			b = append(b[:i], append([]byte(tricky[rng.IntN(len(tricky))]), b[i:]...)...)
		case 3:
			j := min(len(b), i+rng.IntN(20))
			b = append(b[:j], append(append([]byte{}, b[i:j]...), b[j:]...)...)
		}
	}
	return string(b)
}

// TestAttackMutatedBodies sends 150 mutations of a valid body to each
// newer endpoint that takes JSON.
func TestAttackMutatedBodies(t *testing.T) {
	e := newTokenEnv(t, false, true)
	tiKeys(t, e)
	k := createJWEKey(t, e, tvRoleMgmt)
	wh := testjson.Str(e.do(tvRoleMgmt, http.MethodPost, "/webhooks", attackWebhookBody(nil)).body, "id")
	ti := testjson.Str(e.do("web", http.MethodPost, "/token-intents", map[string]any{"type": "token", "data": "x"}).body, "id")
	pub := e.tvPublicApp()
	nonce := testjson.Str(e.do(pub, http.MethodPost, "/sessions", nil).body, "nonce")
	jwe := elementsJWE(t, k, `{"number":"4111111111111111","expiration_month":12,"expiration_year":2030}`)
	routes := []struct{ role, method, path, body string }{
		{"web", http.MethodPost, "/token-intents", `{"type":"card","data":{"number":"4111111111111111","expiration_month":12,"expiration_year":2030,"cvc":"123"}}`},
		{"web", http.MethodPost, "/token-intents", `{"type":"card","encrypted":"` + jwe + `"}`},
		{"backend", http.MethodPost, "/tokens", `{"token_intent_id":"` + ti + `","metadata":{"a":"b"},"id":"mut-{{ data | alias_preserve_length: 0, 0 }}"}`},
		{tvRoleReveal, http.MethodPost, "/tokens", `{"type":"card","encrypted":"` + jwe + `"}`},
		{tvRoleReveal, http.MethodPost, "/tokenize", `{"a":{"type":"card","encrypted":"` + jwe + `"},"b":[{"type":"token","data":"x"}]}`},
		{tvRoleMgmt, http.MethodPost, "/keys", `{"expires_at":"2027-01-01T00:00:00Z"}`},
		{tvRoleMgmt, http.MethodPost, "/webhooks", `{"name":"n","url":"https://example.com/h?x=1","notify_email":"a@example.com","events":["token.created","token.deleted"]}`},
		{tvRoleMgmt, http.MethodPut, "/webhooks/" + wh, `{"name":"n","url":"https://example.com/h","events":["token.updated"]}`},
		{tvRoleReveal, http.MethodPost, "/sessions/authorize", `{"nonce":"` + nonce + `","expires_at":"2099-01-01T00:00:00Z","rules":[{"priority":1,"transform":"mask","permissions":["token:read"],"conditions":[{"attribute":"container","operator":"starts_with","value":"/pci/"}]}]}`},
	}
	rng := rand.New(rand.NewPCG(20261127, 7))
	for _, rt := range routes {
		for i := range 150 {
			body := attackMutate(rng, rt.body)
			r := e.do(rt.role, rt.method, rt.path, body)
			if r.status >= 500 {
				t.Errorf("%s %s, mutation %d: %s\nbody: %q", rt.method, rt.path, i, r, body)
			}
			if r.status >= 400 && !strings.HasPrefix(r.header.Get("Content-Type"), "application/problem+json") {
				t.Errorf("%s %s, mutation %d: %d without a problem: %s", rt.method, rt.path, i, r.status, r.raw)
			}
		}
	}
}

// TestAttackMutatedUploads sends 150 mutations of a valid document
// upload: never a 5xx, every refusal a problem, and every 201 a document
// that reads back.
func TestAttackMutatedUploads(t *testing.T) {
	e := newTokenEnv(t, false, true)
	files := docApp(t, e, "files", "documents:create", "documents:read", "documents:reveal")
	ct, body := attackMultipart(t, attackPart{name: "request", content: []byte(`{"metadata":{"kind":"scan"}}`)},
		attackPart{name: "document", filename: "a.pdf", contentType: "application/pdf", content: []byte("%PDF-1.7 content of the document")})
	rng := rand.New(rand.NewPCG(20261127, 8))
	for i := range 150 {
		mutated := attackMutate(rng, string(body))
		r := e.do(files, http.MethodPost, "/documents", []byte(mutated), "Content-Type", ct)
		switch {
		case r.status >= 500:
			t.Errorf("mutation %d: %s\nbody: %q", i, r, mutated)
		case r.status >= 400 && !strings.HasPrefix(r.header.Get("Content-Type"), "application/problem+json"):
			t.Errorf("mutation %d: %d without a problem: %s", i, r.status, r.raw)
		case r.status == http.StatusCreated:
			if g := download(t, e, files, testjson.Str(r.body, "id")); g.status != http.StatusOK {
				t.Errorf("mutation %d: stored, but does not read back: %s", i, g)
			}
		}
	}
}

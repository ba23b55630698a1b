package caddymodule

// Adversarial review: secrets sent where a name, an id or a type belongs
// on the newer surfaces must not come back in a refusal or a log line
// (the environment scans every answer and log line when the test ends).

import (
	"net/http"
	"testing"
)

// TestAttackSecretsNotEchoed sends each test secret as a member name, an
// id, a type and a permission to the newer endpoints.
func TestAttackSecretsNotEchoed(t *testing.T) {
	e := newTokenEnv(t, false, true)
	tiKeys(t, e)
	for _, s := range []string{tvCard, tvCardBadLuhn, tvCard12, tvCardFullWidth, tvAccount, tvRoutingBad, tvSecretText} {
		cardData := map[string]any{"number": tvCard, "expiration_month": 12, "expiration_year": 2030, s: 1}
		reqs := []struct {
			role, method, path string
			body               any
		}{
			{"web", http.MethodPost, "/token-intents", map[string]any{"type": s, "data": "x"}},
			{"web", http.MethodPost, "/token-intents", map[string]any{"type": "card", "data": cardData}},
			{"web", http.MethodPost, "/token-intents", map[string]any{"type": "card", "data": map[string]any{"number": s}}},
			{"web", http.MethodPost, "/token-intents", map[string]any{"type": "bank", "data": map[string]any{"routing_number": s, "account_number": s}}},
			{"backend", http.MethodGet, "/token-intents/" + s, nil},
			{"backend", http.MethodPost, "/tokens", map[string]any{"token_intent_id": s}},
			{"backend", http.MethodPost, "/tokens", map[string]any{"type": "token", "encrypted": s}},
			{"backend", http.MethodGet, "/enrichments/card-details?bin=" + s, nil},
			{tvRoleMgmt, http.MethodGet, "/keys/" + s, nil},
			{tvRoleMgmt, http.MethodPost, "/keys", map[string]any{"expires_at": s}},
			{tvRoleMgmt, http.MethodPost, "/webhooks", map[string]any{"name": "n", "url": "https://example.com/" + s, "events": []string{s}}},
			{tvRoleMgmt, http.MethodPost, "/webhooks", map[string]any{"name": "n", "url": "https://" + s + "/", "events": []string{"token.created"}, "notify_email": s}},
			{tvRoleMgmt, http.MethodGet, "/webhooks/" + s, nil},
			{tvRoleMgmt, http.MethodGet, "/application-templates/" + s, nil},
			{tvRoleReveal, http.MethodPost, "/sessions/authorize", map[string]any{"nonce": s, "permissions": []string{s}}},
			{tvRoleReveal, http.MethodPost, "/sessions/authorize", map[string]any{"nonce": s, "rules": []map[string]any{{
				"priority": 1, "transform": s, "permissions": []string{"token:read"}, "container": "/" + s + "/"}}}},
			{"backend", http.MethodGet, "/documents/" + s, nil},
			{"backend", http.MethodGet, "/reactors/" + s + "/results/" + s, nil},
		}
		for i, r := range reqs {
			if i == 2 && s == tvCard {
				continue // a valid card
			}
			got := e.do(r.role, r.method, r.path, r.body)
			if got.status < 400 || got.status >= 500 {
				t.Errorf("%s %s with a secret: %d %v", r.method, r.path[:min(len(r.path), 20)], got.status, r.body)
			}
		}
	}
}

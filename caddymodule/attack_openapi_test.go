package caddymodule

// Adversarial review: what the newer surfaces accept, checked against the
// OpenAPI description clients generate code and validate requests from.

import (
	"net/http"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// TestAttackOpenAPILogEntityTypes: every entity type GET /logs/entity-types
// lists is one the document's entity_type parameter admits.
func TestAttackOpenAPILogEntityTypes(t *testing.T) {
	e := newTokenEnv(t, false, true)
	e.validate = newOpenAPIChecker(t).check
	r := e.do(tvRoleMgmt, http.MethodGet, "/logs/entity-types", nil)
	tvWantStatus(t, r, http.StatusOK, "entity types")
	list, _ := r.body.([]any)
	if len(list) == 0 {
		t.Fatalf("no entity types: %s", r.raw)
	}
	for _, et := range list {
		v := testjson.Str(et, "value")
		if v == "" {
			t.Fatalf("an entity type without a value: %s", r.raw)
		}
		tvWantStatus(t, e.do(tvRoleMgmt, http.MethodGet, "/logs?entity_type="+v, nil), http.StatusOK, "logs of "+v)
	}
}

// TestAttackOpenAPIEncryptedCreates: a token and a token intent sent as
// encrypted data, as the official SDKs send them, are requests the
// document admits.
func TestAttackOpenAPIEncryptedCreates(t *testing.T) {
	e := newTokenEnv(t, false, true)
	e.validate = newOpenAPIChecker(t).check
	k := createJWEKey(t, e, tvRoleMgmt)
	card := `{"number":"` + tvCard + `","expiration_month":12,"expiration_year":2099}`
	tvWantStatus(t, e.do(tvRoleReveal, http.MethodPost, "/tokens", map[string]any{"type": "card", "encrypted": elementsJWE(t, k, card)}),
		http.StatusCreated, "POST /tokens with encrypted data")
	web := docApp(t, e, "web", "token-intent:create")
	tvWantStatus(t, e.do(web, http.MethodPost, "/token-intents", map[string]any{"type": "card", "encrypted": elementsJWE(t, k, card)}),
		http.StatusCreated, "POST /token-intents with encrypted data")
}

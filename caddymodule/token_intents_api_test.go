package caddymodule

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testclock"
	"github.com/tokenvault/tokenvault/internal/testjson"
	"github.com/tokenvault/tokenvault/ratelimit"
	"github.com/tokenvault/tokenvault/vaultstore"
)

// tiKeys adds the applications token intents need to a token
// environment: a public one that creates intents, a private back end
// that reads, deletes and converts them, and one in the other tenant.
func tiKeys(t *testing.T, e *tokenEnv) {
	t.Helper()
	for _, a := range []struct {
		role, mgmt, typ string
		perms           []string
	}{
		{"web", tvRoleMgmt, "public", []string{"token-intent:create"}},
		{"backend", tvRoleMgmt, "private", []string{"token:create", "token:read", "token-intent:read", "token-intent:delete"}},
		{"other-backend", "other-management", "private", []string{"token:create", "token-intent:read", "token-intent:delete"}},
	} {
		r := e.do(a.mgmt, http.MethodPost, "/applications", map[string]any{"name": a.role, "type": a.typ, "permissions": a.perms})
		if r.status != http.StatusCreated {
			t.Fatalf("create application %s: %s", a.role, r)
		}
		e.keys[a.role] = testjson.Str(r.body, "key")
	}
}

// tiWantProblem checks a problem+json answer of status naming field (when
// field is not "") with a message holding msg.
func tiWantProblem(t *testing.T, r tvResp, status int, field, msg string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Errorf("content type %q", ct)
	}
	if field == "" {
		return
	}
	errs, _ := testjson.Field(r.body, "errors").(map[string]any)
	msgs, _ := errs[field].([]any)
	if len(errs) != 1 || len(msgs) == 0 || !strings.Contains(msgs[0].(string), msg) {
		t.Errorf("errors %v, want %s: %q", errs, field, msg)
	}
}

// TestTokenIntentsAPI: a public application creates an intent, a back end
// reads it and makes a token of it; the intent is then gone, and every
// refusal is a problem naming its field.
func TestTokenIntentsAPI(t *testing.T) {
	clock := &testclock.Clock{}
	e := newTokenEnvClock(t, clock)
	tiKeys(t, e)

	r := e.do("web", http.MethodPost, "/token-intents", tvCardBody())
	if r.status != http.StatusCreated {
		t.Fatalf("create intent: %s", r)
	}
	id := testjson.Str(r.body, "id")
	for _, f := range []string{"id", "type", "tenant_id", "fingerprint", "card", "created_by", "created_at", "expires_at"} {
		if testjson.Field(r.body, f) == nil {
			t.Errorf("the intent has no %s: %s", f, r.raw)
		}
	}
	if testjson.Field(r.body, "data") != nil || strings.Contains(string(r.raw), tvCVC) {
		t.Errorf("the intent shows data: %s", r.raw)
	}
	card, _ := testjson.Field(r.body, "card").(map[string]any)
	if card["bin"] != "42424242" || card["last4"] != "4242" || card["brand"] != "visa" || testjson.Str(r.body, "tenant_id") != e.tenantID {
		t.Errorf("intent card %v", card)
	}
	created, _ := time.Parse(time.RFC3339Nano, testjson.Str(r.body, "created_at"))
	expires, _ := time.Parse(time.RFC3339Nano, testjson.Str(r.body, "expires_at"))
	if expires.Sub(created) != 24*time.Hour {
		t.Errorf("created %v, expires %v", created, expires)
	}

	t.Run("create refusals", func(t *testing.T) {
		tiWantProblem(t, e.do("web", http.MethodPost, "/token-intents", map[string]any{"data": "x"}), http.StatusBadRequest, "type", "type must be")
		tiWantProblem(t, e.do("web", http.MethodPost, "/token-intents", map[string]any{"type": "card"}), http.StatusBadRequest, "data", "required")
		tiWantProblem(t, e.do("web", http.MethodPost, "/token-intents", map[string]any{"type": "card", "data": map[string]any{"number": tvCardBadLuhn}}),
			http.StatusBadRequest, "data.number", "Luhn")
		tiWantProblem(t, e.do("web", http.MethodPost, "/token-intents", map[string]any{"type": "card", "encrypted": "eyJhbGciOi.x.y.z.w"}),
			http.StatusBadRequest, "encrypted", "could not be decrypted")
		tiWantProblem(t, e.do("web", http.MethodPost, "/token-intents", `{"type":`), http.StatusBadRequest, "", "")
		tiWantProblem(t, e.do("web", http.MethodPost, "/token-intents", `{"type":"token","data":"`+strings.Repeat("x", 1<<20)+`"}`),
			http.StatusRequestEntityTooLarge, "", "")
		tiWantProblem(t, e.do("", http.MethodPost, "/token-intents", tvCardBody()), http.StatusUnauthorized, "", "")
		tiWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/token-intents", tvCardBody()), http.StatusForbidden, "", "")
		tiWantProblem(t, e.do(tvRoleMgmt, http.MethodPost, "/token-intents", tvCardBody()), http.StatusForbidden, "", "")
	})

	t.Run("read and delete refusals", func(t *testing.T) {
		tiWantProblem(t, e.do("web", http.MethodGet, "/token-intents/"+id, nil), http.StatusForbidden, "", "")
		tiWantProblem(t, e.do("web", http.MethodDelete, "/token-intents/"+id, nil), http.StatusForbidden, "", "")
		tiWantProblem(t, e.do("other-backend", http.MethodGet, "/token-intents/"+id, nil), http.StatusNotFound, "", "")
		tiWantProblem(t, e.do("other-backend", http.MethodDelete, "/token-intents/"+id, nil), http.StatusNotFound, "", "")
		tiWantProblem(t, e.do("backend", http.MethodGet, "/token-intents/not-an-intent", nil), http.StatusNotFound, "", "")
		tiWantProblem(t, e.do("", http.MethodGet, "/token-intents/"+id, nil), http.StatusUnauthorized, "", "")
		tiWantProblem(t, e.do("backend", http.MethodPut, "/token-intents/"+id, map[string]any{}), http.StatusMethodNotAllowed, "", "")
	})

	got := e.do("backend", http.MethodGet, "/token-intents/"+id, nil)
	if got.status != http.StatusOK || testjson.Str(got.body, "id") != id || testjson.Field(got.body, "data") != nil {
		t.Fatalf("get intent: %s", got)
	}

	t.Run("token from intent refusals", func(t *testing.T) {
		tiWantProblem(t, e.do("backend", http.MethodPost, "/tokens", map[string]any{"token_intent_id": id, "data": "x"}), http.StatusBadRequest, "data", "not both")
		tiWantProblem(t, e.do("backend", http.MethodPost, "/tokens", map[string]any{"token_intent_id": id, "type": "bank"}), http.StatusBadRequest, "type", "intent's type")
		tiWantProblem(t, e.do("backend", http.MethodPost, "/tokens", map[string]any{"token_intent_id": "6f1e2d3c-4b5a-4987-8a6b-5c4d3e2f1a0b"}),
			http.StatusBadRequest, "token_intent_id", "no token intent")
		tiWantProblem(t, e.do("other-backend", http.MethodPost, "/tokens", map[string]any{"token_intent_id": id}),
			http.StatusBadRequest, "token_intent_id", "no token intent")
		tiWantProblem(t, e.do(tvRoleGeneral, http.MethodPost, "/tokens", map[string]any{"token_intent_id": id}), http.StatusForbidden, "", "")
		tiWantProblem(t, e.do("backend", http.MethodPost, "/tokenize", map[string]any{"a": map[string]any{"type": "card", "data": map[string]any{"number": tvCard}, "token_intent_id": id}}),
			http.StatusBadRequest, "a.token_intent_id", "only by POST /tokens")
	})

	tok := e.do("backend", http.MethodPost, "/tokens", map[string]any{"token_intent_id": id, "metadata": map[string]any{"order": "o-1"}})
	if tok.status != http.StatusCreated || testjson.Str(tok.body, "type") != "card" {
		t.Fatalf("token from intent: %s", tok)
	}
	tokCard, _ := testjson.Field(tok.body, "card").(map[string]any)
	if tokCard["last4"] != "4242" || testjson.Field(tok.body, "metadata") == nil {
		t.Errorf("token from intent: %s", tok.raw)
	}
	revealed := e.do(tvRoleReveal, http.MethodGet, "/tokens/"+testjson.Str(tok.body, "id"), nil)
	data, _ := testjson.Field(revealed.body, "data").(map[string]any)
	if data["number"] != tvCard || data["cvc"] != nil {
		t.Errorf("the token's data: number ok %v, cvc %v", data["number"] == tvCard, data["cvc"] != nil)
	}
	tiWantProblem(t, e.do("backend", http.MethodPost, "/tokens", map[string]any{"token_intent_id": id}), http.StatusBadRequest, "token_intent_id", "already used")
	tiWantProblem(t, e.do("backend", http.MethodGet, "/token-intents/"+id, nil), http.StatusNotFound, "", "")

	// expiry: gone after 24 hours, and a token cannot be made of it
	r = e.do("web", http.MethodPost, "/token-intents", tvBankBody())
	if r.status != http.StatusCreated || testjson.Field(r.body, "bank") == nil {
		t.Fatalf("bank intent: %s", r)
	}
	late := testjson.Str(r.body, "id")
	clock.Advance(24*time.Hour + time.Second)
	tiWantProblem(t, e.do("backend", http.MethodGet, "/token-intents/"+late, nil), http.StatusNotFound, "", "")
	tiWantProblem(t, e.do("backend", http.MethodPost, "/tokens", map[string]any{"token_intent_id": late}), http.StatusBadRequest, "token_intent_id", "expired")

	// delete
	r = e.do("web", http.MethodPost, "/token-intents", map[string]any{"type": "token", "data": map[string]any{"note": "n"}})
	del := testjson.Str(r.body, "id")
	if d := e.do("backend", http.MethodDelete, "/token-intents/"+del, nil); d.status != http.StatusNoContent {
		t.Fatalf("delete: %s", d)
	}
	tiWantProblem(t, e.do("backend", http.MethodDelete, "/token-intents/"+del, nil), http.StatusNotFound, "", "")

	// the audit log names the entity type
	logs := e.do(tvRoleMgmt, http.MethodGet, "/logs?entity_type=token-intent", nil)
	if logs.status != http.StatusOK || strings.Count(string(logs.raw), `"entity_type":"token-intent"`) < 5 {
		t.Errorf("audit records of intents: %s", logs)
	}
}

// TestTokenIntentsRateLimited: POST /token-intents counts against the
// api-tokens-create limit, as POST /tokens does.
func TestTokenIntentsRateLimited(t *testing.T) {
	e := newTokenEnv(t, false, true)
	tiKeys(t, e)
	for _, r := range ratelimit.DefaultRules() {
		if r.Name == ratelimit.RuleTokensCreate {
			r.Limit, r.Per, r.Block = 2, time.Minute, 0
			e.h.limits.limiter = ratelimit.New(ratelimit.Options{Rules: []ratelimit.Rule{r}})
		}
	}
	if r := e.do("web", http.MethodPost, "/token-intents", tvCardBody()); r.status != http.StatusCreated {
		t.Fatalf("first: %s", r)
	}
	if r := e.do(tvRoleReveal, http.MethodPost, "/tokens", tvCardBody()); r.status != http.StatusCreated {
		t.Fatalf("second (a token): %s", r)
	}
	r := e.do("web", http.MethodPost, "/token-intents", tvCardBody())
	tiWantProblem(t, r, http.StatusTooManyRequests, "", "")
	if r.header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	if r := e.do("backend", http.MethodGet, "/enrichments/card-details?bin=424242", nil); r.status != http.StatusOK {
		t.Errorf("a read is not counted: %s", r)
	}
}

// TestCardDetailsAPI: GET /enrichments/card-details answers a BIN's
// brand, the BIN table's fields when one is loaded, and 400 naming bin
// for anything but 6 to 8 digits; card and bank details show on tokens
// to every reader.
func TestCardDetailsAPI(t *testing.T) {
	e := newTokenEnv(t, false, true)
	tiKeys(t, e)
	for _, tc := range []struct{ query, want string }{
		{"bin=424242", `{"brand":"visa"}`},
		{"bin=22210000", `{"brand":"mastercard"}`},
		{"bin=378282", `{"brand":"american-express"}`},
		{"bin=100000", `{}`},
	} {
		r := e.do("web", http.MethodGet, "/enrichments/card-details?"+tc.query, nil)
		if r.status != http.StatusOK || strings.TrimSpace(string(r.raw)) != tc.want {
			t.Errorf("%s: %s, want %s", tc.query, r, tc.want)
		}
	}
	for _, q := range []string{"", "bin=", "bin=42424", "bin=424242424", "bin=4242x2", "bin=%EF%BC%94%EF%BC%92%EF%BC%94%EF%BC%92%EF%BC%94%EF%BC%92", "bin=424242&bin=555555", "bin=%zz"} {
		tiWantProblem(t, e.do("web", http.MethodGet, "/enrichments/card-details?"+q, nil), http.StatusBadRequest, "bin", "")
	}
	tiWantProblem(t, e.do("", http.MethodGet, "/enrichments/card-details?bin=424242", nil), http.StatusUnauthorized, "", "")

	table, err := vaultstore.ParseBINTable(strings.NewReader("bin,funding,issuer_name,issuer_country\n42424242,credit,Example Bank,US\n"))
	if err != nil {
		t.Fatal(err)
	}
	e.store.SetBINTable(table)
	defer e.store.SetBINTable(nil)
	r := e.do("web", http.MethodGet, "/enrichments/card-details?bin=42424242", nil)
	if want := `{"brand":"visa","funding":"credit","issuer":{"country":"US","name":"Example Bank"},"issuer_country":{"alpha2":"US"}}`; strings.TrimSpace(string(r.raw)) != want {
		t.Errorf("with a table: %s, want %s", r, want)
	}

	c := e.do(tvRoleReveal, http.MethodPost, "/tokens", tvCardBody())
	b := e.do(tvRoleReveal, http.MethodPost, "/tokens", tvBankBody())
	for _, role := range []string{tvRoleReveal, tvRoleMask, tvRoleRedact} {
		got := e.do(role, http.MethodGet, "/tokens/"+testjson.Str(c.body, "id"), nil)
		card, _ := testjson.Field(got.body, "card").(map[string]any)
		if card["bin"] != "42424242" || card["last4"] != "4242" || card["funding"] != "credit" || card["expiration_year"] == nil {
			t.Errorf("%s: card %s", role, got.raw)
		}
		got = e.do(role, http.MethodGet, "/tokens/"+testjson.Str(b.body, "id"), nil)
		bank, _ := testjson.Field(got.body, "bank").(map[string]any)
		if bank["routing_number"] == nil || bank["account_number_last4"] != tvAccount[len(tvAccount)-4:] {
			t.Errorf("%s: bank %s", role, got.raw)
		}
	}
	e.keys["searcher"] = e.createApp(tvRoleMgmt, "searcher", []map[string]any{{"priority": 1, "container": "/", "transform": "mask",
		"permissions": []string{"token:read", "token:search"}}})
	found := e.do("searcher", http.MethodPost, "/tokens/search", map[string]any{"query": "card.brand:VISA AND card.last4:4242 AND card.bin:42424242"})
	if found.status != http.StatusOK || strings.Count(string(found.raw), `"last4":"4242"`) != 1 {
		t.Errorf("search by card details: %s", found)
	}
	tiWantProblem(t, e.do("searcher", http.MethodPost, "/tokens/search", map[string]any{"query": "card.cvc:123"}), http.StatusBadRequest, "query", "unknown field")
}

package caddymodule

// Adversarial review, through the API, of token intents, client-side
// encryption, card details, reaction results, roles and templates: wrong
// types, odd sizes and encodings, other tenants' ids, and a check that
// every refusal stored nothing.

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// attackAuditCount counts the first tenant's audit records of an entity
// type and operation.
func attackAuditCount(t *testing.T, e *tokenEnv, entityType, operation string) int {
	t.Helper()
	n, start := 0, ""
	for range 100 {
		r := e.do(tvRoleMgmt, http.MethodGet, "/logs?size=100&entity_type="+entityType+start, nil)
		tvWantStatus(t, r, http.StatusOK, "list audit records")
		list, _ := testjson.Field(r.body, "data").([]any)
		for _, rec := range list {
			if testjson.Str(rec, "operation") == operation {
				n++
			}
		}
		next := testjson.Str(r.body, "pagination", "next")
		if next == "" || len(list) == 0 {
			return n
		}
		start = "&start=" + next
	}
	t.Fatal("more than 100 pages of audit records")
	return n
}

// TestAttackTokenIntentCreate: bad intent bodies are 400s naming the
// field; none is stored.
func TestAttackTokenIntentCreate(t *testing.T) {
	e := newTokenEnv(t, false, true)
	tiKeys(t, e)
	card := func(change func(map[string]any)) map[string]any {
		b := tvCardBody()
		change(b["data"].(map[string]any))
		return b
	}
	cases := []struct {
		name  string
		body  any
		field string
	}{
		{"type a number", map[string]any{"type": 5, "data": "x"}, "type"},
		{"type null", `{"type": null, "data": "x"}`, "type"},
		{"type in capitals", map[string]any{"type": "CARD", "data": tvCardBody()["data"]}, "type"},
		{"type with a space", map[string]any{"type": "card ", "data": tvCardBody()["data"]}, "type"},
		{"type huge", map[string]any{"type": strings.Repeat("t", 100000), "data": "x"}, "type"},
		{"type unicode", map[string]any{"type": "ｃａｒｄ", "data": "x"}, "type"},
		{"no data", map[string]any{"type": "token"}, "data"},
		{"data null", `{"type": "token", "data": null}`, "data"},
		{"card data a string", map[string]any{"type": "card", "data": tvCard}, "data"},
		{"card data an array", map[string]any{"type": "card", "data": []any{tvCard}}, "data"},
		{"card number a number", card(func(d map[string]any) { d["number"] = json.Number(tvCard) }), "data.number"},
		{"card number full width", card(func(d map[string]any) { d["number"] = tvCardFullWidth }), "data.number"},
		{"card number bad Luhn", card(func(d map[string]any) { d["number"] = tvCardBadLuhn }), "data.number"},
		{"card number too short", card(func(d map[string]any) { d["number"] = tvCard12 }), "data.number"},
		{"card month 13", card(func(d map[string]any) { d["expiration_month"] = 13 }), "data.expiration_month"},
		{"card month a string", card(func(d map[string]any) { d["expiration_month"] = "12" }), "data.expiration_month"},
		{"card year two digits", card(func(d map[string]any) { d["expiration_year"] = 30 }), "data.expiration_year"},
		{"card year huge", card(func(d map[string]any) { d["expiration_year"] = json.Number("1e400") }), "data.expiration_year"},
		{"card month a fraction", card(func(d map[string]any) { d["expiration_month"] = json.Number("1.5") }), "data.expiration_month"},
		{"card month negative", card(func(d map[string]any) { d["expiration_month"] = -1 }), "data.expiration_month"},
		{"card cvc letters", card(func(d map[string]any) { d["cvc"] = "12a" }), "data.cvc"},
		{"bank bad routing", map[string]any{"type": "bank", "data": map[string]any{"routing_number": tvRoutingBad, "account_number": tvAccount}}, "data.routing_number"},
		{"bank account too long", map[string]any{"type": "bank", "data": map[string]any{"routing_number": tvRouting, "account_number": tvAccount18}}, "data.account_number"},
		{"encrypted a number", `{"type": "token", "encrypted": 5}`, "encrypted"},
		{"encrypted an object", `{"type": "token", "encrypted": {"a": 1}}`, "encrypted"},
		{"encrypted garbage", map[string]any{"type": "token", "encrypted": "a.b.c.d.e"}, "encrypted"},
		{"encrypted and data", map[string]any{"type": "token", "data": "x", "encrypted": "a.b.c.d.e"}, "encrypted"},
	}
	for _, tc := range cases {
		r := e.do("web", http.MethodPost, "/token-intents", tc.body)
		tvWantProblem(t, r, http.StatusBadRequest, tc.name, tc.field)
	}
	for _, raw := range []string{
		`{"type":"token","type":"card","data":"x"}`,
		`{"type":"token","data":{"a":1,"a":2}}`,
		`{"type":"token","data":"\xff"}`,
		`{"type":"token","data":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`,
		`[]`, `null`, `"token"`, ``,
	} {
		r := e.do("web", http.MethodPost, "/token-intents", raw)
		tvWantProblem(t, r, http.StatusBadRequest, "raw "+strings.ToValidUTF8(raw[:min(len(raw), 40)], "?"))
	}
	if n := attackAuditCount(t, e, "token-intent", "create"); n != 0 {
		t.Errorf("%d intents created by refused requests", n)
	}
	// odd ids: 404, never 5xx
	for _, id := range []string{"..", "%2e%2e", "x", strings.Repeat("a", 5000), "%00", "%E2%9C%93", "6f1e2d3c-4b5a-4987-8a6b-5c4d3e2f1a0b"} {
		for _, m := range []string{http.MethodGet, http.MethodDelete} {
			r := e.do("backend", m, "/token-intents/"+id, nil)
			if r.status != http.StatusNotFound {
				t.Errorf("%s /token-intents/%.20s: %s", m, id, r)
			}
		}
	}
}

// TestAttackTokenFromIntentAllOrNothing: a token create that fails after
// naming an intent (a duplicate id, a container the caller may not write,
// a bad field) leaves the intent unused; a good create uses it once, even
// when many race for it.
func TestAttackTokenFromIntentAllOrNothing(t *testing.T) {
	e := newTokenEnv(t, false, true)
	tiKeys(t, e)
	r := e.do("web", http.MethodPost, "/token-intents", tvCardBody())
	tvWantStatus(t, r, http.StatusCreated, "create an intent")
	id := testjson.Str(r.body, "id")
	e.create("backend", map[string]any{"id": "attack-taken-id", "type": "token", "data": "x"})
	before := e.count()
	fails := []struct {
		name, role string
		body       map[string]any
		status     int
		field      string
	}{
		{"duplicate id", "backend", map[string]any{"token_intent_id": id, "id": "attack-taken-id"}, http.StatusConflict, ""},
		{"container not allowed", tvRoleMask, map[string]any{"token_intent_id": id, "containers": []string{"/other/"}}, http.StatusForbidden, ""},
		{"bad container", "backend", map[string]any{"token_intent_id": id, "containers": []string{"../x"}}, http.StatusBadRequest, "containers[0]"},
		{"bad expires_at", "backend", map[string]any{"token_intent_id": id, "expires_at": "yesterday"}, http.StatusBadRequest, "expires_at"},
		{"past expires_at", "backend", map[string]any{"token_intent_id": id, "expires_at": "2001-01-01T00:00:00Z"}, http.StatusBadRequest, "expires_at"},
		{"bad mask", "backend", map[string]any{"token_intent_id": id, "mask": "{{ data.number | nope }}"}, http.StatusBadRequest, "mask"},
		{"metadata not strings", "backend", map[string]any{"token_intent_id": id, "metadata": map[string]any{"a": map[string]any{}}}, http.StatusBadRequest, "metadata.a"},
		{"id too short", "backend", map[string]any{"token_intent_id": id, "id": "ab"}, http.StatusBadRequest, "id"},
		{"id showing the number", "backend", map[string]any{"token_intent_id": id, "id": "{{ data.number }}"}, http.StatusBadRequest, "id"},
		{"type mismatch", "backend", map[string]any{"token_intent_id": id, "type": "token"}, http.StatusBadRequest, "type"},
		{"intent id a number", "backend", map[string]any{"token_intent_id": 5}, http.StatusBadRequest, "token_intent_id"},
		{"intent id an array", "backend", map[string]any{"token_intent_id": []string{id}}, http.StatusBadRequest, "token_intent_id"},
		{"intent id huge", "backend", map[string]any{"token_intent_id": strings.Repeat("a", 10000)}, http.StatusBadRequest, "token_intent_id"},
		{"intent id with traversal", "backend", map[string]any{"token_intent_id": "../" + id}, http.StatusBadRequest, "token_intent_id"},
		{"intent id in capitals", "backend", map[string]any{"token_intent_id": strings.ToUpper(id)}, http.StatusBadRequest, "token_intent_id"},
		{"another tenant", "other-backend", map[string]any{"token_intent_id": id}, http.StatusBadRequest, "token_intent_id"},
	}
	for _, tc := range fails {
		r := e.do(tc.role, http.MethodPost, "/tokens", tc.body)
		if tc.field != "" {
			tvWantProblem(t, r, tc.status, tc.name, tc.field)
		} else {
			tvWantProblem(t, r, tc.status, tc.name)
		}
		if g := e.do("backend", http.MethodGet, "/token-intents/"+id, nil); g.status != http.StatusOK {
			t.Fatalf("after %s the intent is gone: %s", tc.name, g)
		}
	}
	if n := e.count(); n != before {
		t.Errorf("%d tokens after refused creates, want %d", n, before)
	}

	// many at once: one token
	const racers = 8
	var wg sync.WaitGroup
	statuses := make([]int, racers)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = e.do("backend", http.MethodPost, "/tokens", map[string]any{"token_intent_id": id}).status
		}()
	}
	wg.Wait()
	created := 0
	for _, s := range statuses {
		switch s {
		case http.StatusCreated:
			created++
		case http.StatusBadRequest, http.StatusServiceUnavailable:
		default:
			t.Errorf("a racing create answered %d", s)
		}
	}
	if created != 1 || e.count() != before+1 {
		t.Errorf("%d racing creates of one intent succeeded (%v); tokens %d, want %d", created, statuses, e.count(), before+1)
	}
}

// TestAttackClientKeys: bad POST /keys bodies are 400s naming the field
// and make no key; odd ids are 404; keys of one tenant never open data
// for another, in either direction.
func TestAttackClientKeys(t *testing.T) {
	e := newTokenEnv(t, false, true)
	for _, tc := range []struct {
		name, body, field string
	}{
		{"expires_at a number", `{"expires_at": 5}`, "expires_at"},
		{"expires_at an array", `{"expires_at": []}`, "expires_at"},
		{"expires_at garbage", `{"expires_at": "soon"}`, "expires_at"},
		{"expires_at month 13", `{"expires_at": "2027-13-01T00:00:00Z"}`, "expires_at"},
		{"expires_at past", `{"expires_at": "1999-01-01T00:00:00Z"}`, "expires_at"},
		{"expires_at far", `{"expires_at": "9999-12-31T23:59:59Z"}`, "expires_at"},
		{"expires_at huge", `{"expires_at": "` + strings.Repeat("9", 100000) + `"}`, "expires_at"},
		{"duplicate member", `{"expires_at": "2027-01-01T00:00:00Z", "expires_at": "2027-01-02T00:00:00Z"}`, ""},
		{"an array", `[]`, ""},
		{"a string", `"key"`, ""},
		{"broken", `{"expires_at":`, ""},
		{"invalid UTF-8", "{\"expires_at\": \"\xff\"}", ""},
	} {
		r := e.do(tvRoleMgmt, http.MethodPost, "/keys", tc.body, "Content-Type", "application/json-patch+json")
		if tc.field != "" {
			tvWantProblem(t, r, http.StatusBadRequest, tc.name, tc.field)
		} else {
			tvWantProblem(t, r, http.StatusBadRequest, tc.name)
		}
	}
	r := e.do(tvRoleMgmt, http.MethodGet, "/keys", nil)
	if list, _ := r.body.([]any); r.status != http.StatusOK || len(list) != 0 {
		t.Errorf("keys after refused creates: %s", r)
	}
	for _, id := range []string{"..", "%2e%2e", strings.Repeat("k", 5000), "%00", "6f1e2d3c-4b5a-4987-8a6b-5c4d3e2f1a0b"} {
		for _, m := range []string{http.MethodGet, http.MethodDelete} {
			if r := e.do(tvRoleMgmt, m, "/keys/"+id, nil); r.status != http.StatusNotFound {
				t.Errorf("%s /keys/%.20s: %s", m, id, r)
			}
		}
	}
	pub := e.tvPublicApp()
	for _, role := range []string{pub, tvRoleReveal} {
		for _, tc := range []struct{ method, path, perm string }{
			{http.MethodPost, "/keys", "keys:create"}, {http.MethodGet, "/keys", "keys:read"},
			{http.MethodGet, "/keys/6f1e2d3c-4b5a-4987-8a6b-5c4d3e2f1a0b", "keys:read"}, {http.MethodDelete, "/keys/6f1e2d3c-4b5a-4987-8a6b-5c4d3e2f1a0b", "keys:delete"},
		} {
			r := e.do(role, tc.method, tc.path, nil)
			tvWantProblem(t, r, http.StatusForbidden, role+" "+tc.method+" "+tc.path)
			if !strings.Contains(testjson.Str(r.body, "detail"), tc.perm) {
				t.Errorf("%s %s %s: the 403 does not name %s: %s", role, tc.method, tc.path, tc.perm, r.raw)
			}
		}
	}

	// the other tenant sends data encrypted to the first tenant's key, with
	// its kid: it does not open
	mine := createJWEKey(t, e, tvRoleMgmt)
	theirs := createJWEKey(t, e, "other-management")
	card := `{"number":"` + tvCard + `","expiration_month":12,"expiration_year":2099}`
	for _, tc := range []struct {
		role string
		k    jweKey
	}{{tvRoleOther, mine}, {tvRoleReveal, theirs}} {
		r := e.do(tc.role, http.MethodPost, "/tokens", map[string]any{"type": "card", "encrypted": elementsJWE(t, tc.k, card)})
		tvWantProblem(t, r, http.StatusBadRequest, tc.role+" with another tenant's key", "encrypted")
	}
}

// TestAttackEncryptedMember: the encrypted member of POST /tokens and
// /tokenize with wrong types, empty and odd plaintexts: 400 naming it,
// nothing created.
func TestAttackEncryptedMember(t *testing.T) {
	e := newTokenEnv(t, false, true)
	k := createJWEKey(t, e, tvRoleMgmt)
	cases := []struct {
		name  string
		body  any
		field string
	}{
		{"a number", `{"type":"token","encrypted":5}`, "encrypted"},
		{"an object", `{"type":"token","encrypted":{"protected":"x"}}`, "encrypted"},
		{"an array", `{"type":"token","encrypted":["a"]}`, "encrypted"},
		{"true", `{"type":"token","encrypted":true}`, "encrypted"},
		{"empty", `{"type":"token","encrypted":""}`, "encrypted"},
		{"dots", `{"type":"token","encrypted":"...."}`, "encrypted"},
		{"JSON serialization", `{"type":"token","encrypted":"{\"protected\":\"e30\",\"ciphertext\":\"\"}"}`, "encrypted"},
		{"huge kid", map[string]any{"type": "token", "encrypted": craftedJWE(map[string]any{"alg": "ECDH-ES", "enc": "A256GCM", "kid": strings.Repeat("k", 200000)})}, "encrypted"},
		{"kid not a string", map[string]any{"type": "token", "encrypted": craftedJWE(map[string]any{"alg": "ECDH-ES", "enc": "A256GCM", "kid": 5})}, "encrypted"},
		{"epk not an object", map[string]any{"type": "token", "encrypted": craftedJWE(map[string]any{"alg": "ECDH-ES", "enc": "A256GCM", "kid": k.id, "epk": "x"})}, "encrypted"},
		{"epk with d", map[string]any{"type": "token", "encrypted": craftedJWE(map[string]any{"alg": "ECDH-ES", "enc": "A256GCM", "kid": k.id,
			"epk": map[string]any{"kty": "OKP", "crv": "X25519", "x": strings.Repeat("A", 43), "d": strings.Repeat("A", 43)}})}, "encrypted"},
		{"apu not base64", map[string]any{"type": "token", "encrypted": craftedJWE(map[string]any{"alg": "ECDH-ES", "enc": "A256GCM", "kid": k.id,
			"epk": map[string]any{"kty": "OKP", "crv": "X25519", "x": "9GXjPGGvmRq9F6Ng5dQQ_s31mfhxrcNZxRGONrmH30k"}, "apu": "!!"})}, "encrypted"},
		{"plaintext not JSON", map[string]any{"type": "token", "encrypted": elementsJWE(t, k, `{"a":`)}, "encrypted"},
		{"plaintext with duplicate members", map[string]any{"type": "token", "encrypted": elementsJWE(t, k, `{"a":1,"a":2}`)}, "encrypted"},
		{"plaintext too deep", map[string]any{"type": "token", "encrypted": elementsJWE(t, k, strings.Repeat("[", 50)+strings.Repeat("]", 50))}, "encrypted"},
		{"plaintext not UTF-8", map[string]any{"type": "token", "encrypted": elementsJWE(t, k, "\xff\xfe")}, "encrypted"},
		{"plaintext a card number for a card", map[string]any{"type": "card", "encrypted": elementsJWE(t, k, tvCard)}, "data"},
		{"plaintext a card of bad Luhn", map[string]any{"type": "card", "encrypted": elementsJWE(t, k, `{"number":"`+tvCardBadLuhn+`"}`)}, "data.number"},
	}
	for _, tc := range cases {
		r := e.do(tvRoleReveal, http.MethodPost, "/tokens", tc.body)
		tvWantProblem(t, r, http.StatusBadRequest, "/tokens: "+tc.name, tc.field)
		if strings.Contains(string(r.raw), tvCard) || strings.Contains(string(r.raw), tvCardBadLuhn) {
			t.Errorf("%s: the refusal shows the plaintext: %s", tc.name, r.raw)
		}
	}
	for _, tc := range []struct {
		name  string
		body  string
		field string
	}{
		{"a number", `{"a":{"type":"token","encrypted":5}}`, "a.encrypted"},
		{"null", `{"a":{"type":"token","encrypted":null}}`, "a.encrypted"},
		{"garbage in an array", `{"a":[{"type":"token","encrypted":"x.y.z"}]}`, "a.[0].encrypted"},
		{"one good, one bad", `{"a":{"type":"token","encrypted":"` + elementsJWE(t, k, "fine") + `"},"b":{"type":"token","encrypted":"x"}}`, "b.encrypted"},
	} {
		r := e.do(tvRoleReveal, http.MethodPost, "/tokenize", tc.body)
		if r.status != http.StatusBadRequest {
			t.Errorf("/tokenize %s: %s", tc.name, r)
			continue
		}
		errs, _ := testjson.Field(r.body, "errors").(map[string]any)
		if len(errs) == 0 {
			t.Errorf("/tokenize %s: no field named: %s", tc.name, r.raw)
		}
		if _, ok := errs[tc.field]; !ok {
			t.Logf("/tokenize %s: names %v, expected %s", tc.name, errs, tc.field)
		}
	}
	if n := e.count(); n != 0 {
		t.Errorf("%d tokens after refused creates", n)
	}
	// an empty plaintext is the empty string, as in clear
	inClear := e.do(tvRoleReveal, http.MethodPost, "/tokens", map[string]any{"type": "token", "data": ""})
	enc := e.do(tvRoleReveal, http.MethodPost, "/tokens", map[string]any{"type": "token", "encrypted": elementsJWE(t, k, "")})
	if inClear.status != enc.status {
		t.Errorf("an empty string: %d in clear, %d encrypted: %s", inClear.status, enc.status, enc.raw)
	}
}

// TestAttackCardDetailsAndReadOnlyRoutes: odd BINs are 400 naming bin;
// templates, roles and reaction results take odd ids without a 5xx.
func TestAttackCardDetailsAndReadOnlyRoutes(t *testing.T) {
	e := newTokenEnv(t, false, true)
	for _, q := range []string{"bin=%20424242", "bin=424242%20", "bin=%2B424242", "bin=-424242", "bin=424242%00", "bin=%D9%A4%D9%A2%D9%A4%D9%A2%D9%A4%D9%A2",
		"bin=4242.42", "bin=4e5678", "bin=" + strings.Repeat("4", 10000), "bin=" + tvCard, "BIN=424242", "bin[]=424242"} {
		r := e.do(tvRoleReveal, http.MethodGet, "/enrichments/card-details?"+q, nil)
		tvWantProblem(t, r, http.StatusBadRequest, q[:min(len(q), 30)], "bin")
		if strings.Contains(string(r.raw), tvCard) {
			t.Errorf("the refusal quotes the number: %s", r.raw)
		}
	}
	for _, path := range []string{"/application-templates/..", "/application-templates/%2e%2e", "/application-templates/" + strings.Repeat("x", 5000),
		"/application-templates/%00", "/reactors/x/results/y", "/reactors/../results/..", "/reactors/6f1e2d3c-4b5a-4987-8a6b-5c4d3e2f1a0b/results/6f1e2d3c-4b5a-4987-8a6b-5c4d3e2f1a0b"} {
		role := tvRoleMgmt
		if strings.HasPrefix(path, "/reactors") {
			role = docApp(t, e, "invoker", "reactor:invoke")
		}
		r := e.do(role, http.MethodGet, path, nil)
		if r.status != http.StatusNotFound {
			t.Errorf("GET %.40s: %s", path, r)
		}
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		// (PUT and DELETE /webhooks/event-types are PUT and DELETE of a
		// webhook of that id: 404)
		for _, p := range []string{"/roles", "/application-templates", "/enrichments/card-details"} {
			r := e.do(tvRoleMgmt, m, p, `{}`)
			tvWantProblem(t, r, http.StatusMethodNotAllowed, m+" "+p)
		}
	}
}

// TestAttackProblemsNeverQuoteInput: refusals of unicode and huge values
// answer valid UTF-8 of a bounded size, whatever was sent.
func TestAttackProblemsNeverQuoteInput(t *testing.T) {
	e := newTokenEnv(t, false, true)
	tiKeys(t, e)
	huge := strings.Repeat("Ω", 200000)
	for _, tc := range []struct {
		role, method, path string
		body               any
	}{
		{"web", http.MethodPost, "/token-intents", map[string]any{"type": huge, "data": "x"}},
		{tvRoleMgmt, http.MethodPost, "/webhooks", attackWebhookBody(func(b map[string]any) { b["url"] = "https://example.com/" + huge })},
		{tvRoleMgmt, http.MethodPost, "/webhooks", attackWebhookBody(func(b map[string]any) { b["events"] = []string{huge} })},
		{tvRoleMgmt, http.MethodPost, "/keys", map[string]any{"expires_at": huge}},
		{tvRoleReveal, http.MethodPost, "/sessions/authorize", map[string]any{"nonce": huge, "permissions": []string{"token:read"}}},
	} {
		r := e.do(tc.role, tc.method, tc.path, tc.body)
		if r.status < 400 || r.status >= 500 {
			t.Errorf("%s %s: %d", tc.method, tc.path, r.status)
		}
		if !utf8.Valid(r.raw) || len(r.raw) > 4096 || strings.Contains(string(r.raw), "ΩΩΩΩ") {
			t.Errorf("%s %s: the refusal (%d bytes) quotes the input", tc.method, tc.path, len(r.raw))
		}
	}
}

// TestAttackIntentEncryptedEmpty: POST /token-intents treats an empty
// encrypted member as POST /tokens does: data and encrypted together are
// a 400 on encrypted, and an empty JWE does not decrypt.
func TestAttackIntentEncryptedEmpty(t *testing.T) {
	e := newTokenEnv(t, false, true)
	tiKeys(t, e)
	for _, path := range []string{"/tokens", "/token-intents"} {
		role := "backend"
		if path == "/token-intents" {
			role = "web"
		}
		tvWantProblem(t, e.do(role, http.MethodPost, path, map[string]any{"type": "token", "data": "x", "encrypted": ""}),
			http.StatusBadRequest, path+": data and an empty encrypted", "encrypted")
		tvWantProblem(t, e.do(role, http.MethodPost, path, map[string]any{"type": "token", "encrypted": ""}),
			http.StatusBadRequest, path+": an empty encrypted", "encrypted")
	}
	if n := attackAuditCount(t, e, "token-intent", "create"); n != 0 {
		t.Errorf("%d intents created by refused requests", n)
	}
}

// TestAttackIntentIdempotency: a token made of an intent under an
// idempotency key is replayed, not refused as a used intent; the same key
// with another intent is a 400; a failed first attempt keeps nothing.
func TestAttackIntentIdempotency(t *testing.T) {
	e := newTokenEnv(t, false, true)
	tiKeys(t, e)
	mk := func() string {
		r := e.do("web", http.MethodPost, "/token-intents", map[string]any{"type": "token", "data": "intent data"})
		tvWantStatus(t, r, http.StatusCreated, "intent")
		return testjson.Str(r.body, "id")
	}
	a, b := mk(), mk()
	body := map[string]any{"token_intent_id": a}
	first := e.do("backend", http.MethodPost, "/tokens", body, "SVC-IDEMPOTENCY-KEY", "attack-1")
	tvWantStatus(t, first, http.StatusCreated, "token of the intent")
	again := e.do("backend", http.MethodPost, "/tokens", body, "SVC-IDEMPOTENCY-KEY", "attack-1")
	if again.status != http.StatusCreated || testjson.Str(again.body, "id") != testjson.Str(first.body, "id") {
		t.Errorf("the replay: %s, want the first answer %s", again, first)
	}
	tvWantProblem(t, e.do("backend", http.MethodPost, "/tokens", map[string]any{"token_intent_id": b}, "SVC-IDEMPOTENCY-KEY", "attack-1"),
		http.StatusBadRequest, "the key with another intent")
	// a failure is not kept: the same request succeeds once the cause is gone
	e.create("backend", map[string]any{"id": "attack-taken", "type": "token", "data": "x"})
	failing := map[string]any{"token_intent_id": b, "id": "attack-taken"}
	tvWantProblem(t, e.do("backend", http.MethodPost, "/tokens", failing, "SVC-IDEMPOTENCY-KEY", "attack-2"), http.StatusConflict, "a duplicate id")
	tvWantStatus(t, e.do("backend", http.MethodDelete, "/tokens/attack-taken", nil), http.StatusForbidden, "the backend may not delete")
	tvWantStatus(t, e.do(tvRoleReveal, http.MethodDelete, "/tokens/attack-taken", nil), http.StatusNoContent, "free the id")
	tvWantStatus(t, e.do("backend", http.MethodPost, "/tokens", failing, "SVC-IDEMPOTENCY-KEY", "attack-2"), http.StatusCreated, "the retry")
	if n := e.count(); n != 2 {
		t.Errorf("%d tokens, want 2", n)
	}
}

// TestAttackCardDetailsFollowData: card details are derived again when a
// card's data changes, and a refused change leaves them as they were.
func TestAttackCardDetailsFollowData(t *testing.T) {
	e := newTokenEnv(t, false, true)
	id := testjson.Str(e.create(tvRoleReveal, tvCardBody()).body, "id")
	amex := "378282246310005"
	r := e.do(tvRoleReveal, http.MethodPatch, "/tokens/"+id, map[string]any{"data": map[string]any{"number": amex}})
	tvWantStatus(t, r, http.StatusOK, "change the number")
	for _, role := range []string{tvRoleReveal, tvRoleMask, tvRoleRedact} {
		got := e.do(role, http.MethodGet, "/tokens/"+id, nil)
		if testjson.Str(got.body, "card", "brand") != "american-express" || testjson.Str(got.body, "card", "bin") != "378282" || testjson.Str(got.body, "card", "last4") != "0005" {
			t.Errorf("%s: details after the change: %s", role, got.raw)
		}
	}
	for _, bad := range []map[string]any{
		{"data": map[string]any{"number": tvCardBadLuhn}},
		{"data": map[string]any{"number": tvCardFullWidth}},
		{"data": map[string]any{"expiration_month": 13}},
		{"data": "a string"},
		{"data": nil},
	} {
		tvWantProblem(t, e.do(tvRoleReveal, http.MethodPatch, "/tokens/"+id, bad), http.StatusBadRequest, "a refused change")
	}
	got := e.do(tvRoleMask, http.MethodGet, "/tokens/"+id, nil)
	if testjson.Str(got.body, "card", "last4") != "0005" || strings.Contains(string(got.raw), amex) {
		t.Errorf("details after refused changes: %s", got.raw)
	}
}

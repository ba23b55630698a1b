package caddymodule

import (
	"crypto/ecdh"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwe"

	"github.com/tokenvault/tokenvault/internal/testclock"
	"github.com/tokenvault/tokenvault/internal/testjson"
)

// jweKey is a client encryption key as POST /keys answered it.
type jweKey struct{ id, pem string }

// createJWEKey makes a key through the API, with the content type the
// official Node SDK sends.
func createJWEKey(t *testing.T, e *tokenEnv, role string) jweKey {
	t.Helper()
	r := e.do(role, http.MethodPost, "/keys", `{}`, "Content-Type", "application/json-patch+json")
	tvWantStatus(t, r, http.StatusCreated, "POST /keys")
	k := jweKey{id: testjson.Str(r.body, "key_id"), pem: testjson.Str(r.body, "public_key_pem")}
	if k.id == "" || k.pem == "" || testjson.Str(r.body, "expires_at") == "" {
		t.Fatalf("POST /keys: %s", r.raw)
	}
	return k
}

// x25519Of reads the raw public key inside the PEM, as Elements do.
func x25519Of(t *testing.T, pemText string) *ecdh.PublicKey {
	t.Helper()
	block, _ := pem.Decode([]byte(pemText))
	if block == nil {
		t.Fatalf("not PEM: %q", pemText)
	}
	pub, err := ecdh.X25519().NewPublicKey(block.Bytes)
	if err != nil {
		t.Fatalf("the PEM is not a raw X25519 key: %v", err)
	}
	return pub
}

// encryptJWE encrypts payload with jwx (an independent JOSE library) as
// the vendor's Elements do: ECDH-ES on X25519, A256GCM, kid the key id.
func encryptJWE(t *testing.T, pub any, alg jwa.KeyEncryptionAlgorithm, enc jwa.ContentEncryptionAlgorithm, kid string, payload []byte) string {
	t.Helper()
	h := jwe.NewHeaders()
	if err := h.Set("kid", kid); err != nil {
		t.Fatal(err)
	}
	out, err := jwe.Encrypt(payload, jwe.WithKey(alg, pub), jwe.WithContentEncryption(enc), jwe.WithProtectedHeaders(h), jwe.WithCompact())
	if err != nil {
		t.Fatalf("encrypting with %s/%s: %v", alg, enc, err)
	}
	return string(out)
}

func elementsJWE(t *testing.T, k jweKey, payload string) string {
	t.Helper()
	return encryptJWE(t, x25519Of(t, k.pem), jwa.ECDH_ES(), jwa.A256GCM(), k.id, []byte(payload))
}

// craftedJWE is a compact JWE with the given protected header and random
// parts, for algorithms no library should produce.
func craftedJWE(header map[string]any) string {
	h, _ := json.Marshal(header)
	part := func(n int) string {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return base64.RawURLEncoding.EncodeToString(h) + "." + part(32) + "." + part(12) + "." + part(40) + "." + part(16)
}

// TestJWETokenCreate: card data encrypted to a client key, as Elements
// encrypt it, becomes a token through POST /tokens and /tokenize, and is
// validated once decrypted like data sent in clear.
func TestJWETokenCreate(t *testing.T) {
	e := newTokenEnv(t, false, false)
	k := createJWEKey(t, e, tvRoleMgmt)
	card := `{"number":"` + tvCard + `","expiration_month":12,"expiration_year":2099}`
	r := e.create(tvRoleReveal, map[string]any{"type": "card", "encrypted": elementsJWE(t, k, card)})
	tvWantStatus(t, r, http.StatusCreated, "POST /tokens with JWE data")
	got := e.do(tvRoleReveal, http.MethodGet, "/tokens/"+testjson.Str(r.body, "id"), nil)
	if testjson.Str(got.body, "data", "number") != tvCard {
		t.Errorf("the decrypted card was not stored: %s", got.raw)
	}
	// a string payload is the string itself, not JSON
	r = e.create(tvRoleReveal, map[string]any{"type": "token", "encrypted": elementsJWE(t, k, "123-45-6789")})
	tvWantStatus(t, r, http.StatusCreated, "POST /tokens with a JWE string")
	got = e.do(tvRoleReveal, http.MethodGet, "/tokens/"+testjson.Str(r.body, "id"), nil)
	if testjson.Str(got.body, "data") != "123-45-6789" {
		t.Errorf("the decrypted string: %s", got.raw)
	}
	// decrypted data is validated like data in clear
	bad := `{"number":"4242424242424241","expiration_month":12,"expiration_year":2099}`
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/tokens", map[string]any{"type": "card", "encrypted": elementsJWE(t, k, bad)}), http.StatusBadRequest, "a decrypted card failing Luhn", "data.number")
	// /tokenize: each token-create object's data, by its path
	r = e.do(tvRoleReveal, http.MethodPost, "/tokenize", map[string]any{
		"card":   map[string]any{"type": "card", "encrypted": elementsJWE(t, k, card)},
		"nested": []any{map[string]any{"type": "token", "encrypted": elementsJWE(t, k, `{"ssn":"123-45-6789"}`)}},
	})
	tvWantStatus(t, r, http.StatusOK, "POST /tokenize with JWE data")
	got = e.do(tvRoleReveal, http.MethodGet, "/tokens/"+testjson.Str(r.body, "nested", 0, "id"), nil)
	if testjson.Str(got.body, "data", "ssn") != "123-45-6789" {
		t.Errorf("tokenized JWE: %s / %s", r.raw, got.raw)
	}
	r = e.do(tvRoleReveal, http.MethodPost, "/tokenize", map[string]any{
		"card": map[string]any{"type": "card", "encrypted": craftedJWE(map[string]any{"alg": "ECDH-ES", "enc": "A256GCM", "kid": k.id})},
	})
	tvWantProblem(t, r, http.StatusBadRequest, "tokenize with a bad JWE", "card.encrypted")
	// data and encrypted together are refused; a string in data that looks
	// like a JWE is data like any other
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/tokens", map[string]any{"type": "token", "data": "x", "encrypted": elementsJWE(t, k, "y")}),
		http.StatusBadRequest, "data and encrypted", "encrypted")
	jweString := elementsJWE(t, k, "z")
	r = e.create(tvRoleReveal, map[string]any{"type": "token", "data": jweString})
	got = e.do(tvRoleReveal, http.MethodGet, "/tokens/"+testjson.Str(r.body, "id"), nil)
	if testjson.Str(got.body, "data") != jweString {
		t.Errorf("a JWE-shaped string in data was changed: %s", got.raw)
	}
	// token intents take encrypted data the same way
	web := docApp(t, e, "web", "token-intent:create")
	r = e.do(web, http.MethodPost, "/token-intents", map[string]any{"type": "card", "encrypted": elementsJWE(t, k, card)})
	tvWantStatus(t, r, http.StatusCreated, "POST /token-intents with encrypted data")
	if testjson.Str(r.body, "card", "last4") != tvCard[len(tvCard)-4:] || strings.Contains(string(r.raw), tvCard) {
		t.Errorf("the intent of encrypted data: %s", r.raw)
	}
	r = e.do(web, http.MethodPost, "/token-intents", map[string]any{"type": "card", "encrypted": elementsJWE(t, jweKey{id: k.id, pem: createJWEKey(t, e, "other-management").pem}, card)})
	tvWantProblem(t, r, http.StatusBadRequest, "an intent encrypted to another key", "encrypted")

	// a public application may send encrypted data too
	pub := e.tvPublicApp()
	r = e.create(pub, map[string]any{"type": "card", "encrypted": elementsJWE(t, k, card)})
	tvWantStatus(t, r, http.StatusCreated, "a public application's JWE")
	if strings.Contains(string(r.raw), tvCard) {
		t.Errorf("a public application's answer shows the number: %s", r.raw)
	}
}

// TestJWERefusals: every JWE that must not open is refused with 400 on
// data and the one message "could not be decrypted", whatever the reason.
func TestJWERefusals(t *testing.T) {
	e := newTokenEnv(t, false, false)
	k := createJWEKey(t, e, tvRoleMgmt)
	other := createJWEKey(t, e, "other-management")
	deleted := createJWEKey(t, e, tvRoleMgmt)
	tvWantStatus(t, e.do(tvRoleMgmt, http.MethodDelete, "/keys/"+deleted.id, nil), http.StatusNoContent, "DELETE /keys")
	card := `{"number":"` + tvCard + `","expiration_month":12,"expiration_year":2099}`
	good := elementsJWE(t, k, card)
	parts := strings.Split(good, ".")
	tamper := func(i int) string {
		p := append([]string(nil), parts...)
		b, _ := base64.RawURLEncoding.DecodeString(p[i])
		b[len(b)/2] ^= 1
		p[i] = base64.RawURLEncoding.EncodeToString(b)
		return strings.Join(p, ".")
	}
	withHeader := func(change func(map[string]any)) string {
		p := append([]string(nil), parts...)
		raw, _ := base64.RawURLEncoding.DecodeString(p[0])
		var h map[string]any
		_ = json.Unmarshal(raw, &h)
		change(h)
		raw, _ = json.Marshal(h)
		p[0] = base64.RawURLEncoding.EncodeToString(raw)
		return strings.Join(p, ".")
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub := x25519Of(t, k.pem)
	guessed := make([]byte, 32)
	cases := []struct{ name, jwe string }{
		{"unknown kid", elementsJWE(t, jweKey{id: "5b7c0ab8-0c54-4e4b-a1e4-0e9d6a1d3a4c", pem: k.pem}, card)},
		{"kid that is not an id", elementsJWE(t, jweKey{id: "../../ckey", pem: k.pem}, card)},
		{"deleted key", elementsJWE(t, deleted, card)},
		{"another tenant's key", elementsJWE(t, other, card)},
		{"kid of this tenant, encrypted to another key", elementsJWE(t, jweKey{id: k.id, pem: other.pem}, card)},
		{"tampered ciphertext", tamper(3)},
		{"tampered tag", tamper(4)},
		{"tampered iv", tamper(2)},
		{"tampered header (kid swapped)", withHeader(func(h map[string]any) { h["kid"] = other.id })},
		{"tampered header (extra member)", withHeader(func(h map[string]any) { h["x"] = 1 })},
		{"alg none", craftedJWE(map[string]any{"alg": "none", "enc": "A256GCM", "kid": k.id})},
		{"alg RSA1_5", craftedJWE(map[string]any{"alg": "RSA1_5", "enc": "A256GCM", "kid": k.id})},
		{"alg RSA-OAEP", encryptJWE(t, &rsaKey.PublicKey, jwa.RSA_OAEP(), jwa.A256GCM(), k.id, []byte(card))},
		{"alg dir with a guessed key", encryptJWE(t, guessed, jwa.DIRECT(), jwa.A256GCM(), k.id, []byte(card))},
		{"alg ECDH-ES+A256KW", encryptJWE(t, pub, jwa.ECDH_ES_A256KW(), jwa.A256GCM(), k.id, []byte(card))},
		{"enc A128GCM", encryptJWE(t, pub, jwa.ECDH_ES(), jwa.A128GCM(), k.id, []byte(card))},
		{"enc A256CBC-HS512", encryptJWE(t, pub, jwa.ECDH_ES(), jwa.A256CBC_HS512(), k.id, []byte(card))},
		{"no kid", craftedJWE(map[string]any{"alg": "ECDH-ES", "enc": "A256GCM"})},
		{"epk on another curve", withHeader(func(h map[string]any) { h["epk"].(map[string]any)["crv"] = "P-256" })},
		{"epk of low order", withHeader(func(h map[string]any) {
			h["epk"].(map[string]any)["x"] = base64.RawURLEncoding.EncodeToString(make([]byte, 32))
		})},
		{"crit header", withHeader(func(h map[string]any) { h["crit"] = []string{"exp"}; h["exp"] = 1 })},
		{"truncated", strings.Join(parts[:4], ".") + ".AAAA"},
	}
	var body string
	for _, tc := range cases {
		r := e.do(tvRoleReveal, http.MethodPost, "/tokens", map[string]any{"type": "card", "encrypted": tc.jwe})
		tvWantProblem(t, r, http.StatusBadRequest, tc.name, "encrypted")
		msgs, _ := testjson.Field(r.body, "errors", "encrypted").([]any)
		if len(msgs) != 1 || fmt.Sprint(msgs[0]) != jweUndecryptable {
			t.Errorf("%s: errors.encrypted %v, want only %q", tc.name, msgs, jweUndecryptable)
		}
		// every refusal reads the same
		m := map[string]any{}
		_ = json.Unmarshal(r.raw, &m)
		delete(m, "trace_id")
		delete(m, "instance")
		raw, _ := json.Marshal(m)
		if body == "" {
			body = string(raw)
		} else if string(raw) != body {
			t.Errorf("%s: the refusal differs from the others: %s vs %s", tc.name, raw, body)
		}
	}
	if n := e.count(); n != 0 {
		t.Errorf("%d tokens were created from refused data", n)
	}
	// the same data, well encrypted, goes through
	tvWantStatus(t, e.create(tvRoleReveal, map[string]any{"type": "card", "encrypted": good}), http.StatusCreated, "the untampered JWE")
}

// TestJWEExpiredKey: data encrypted to a key refuses once the key has
// expired, in the same words; the key's metadata still reads.
func TestJWEExpiredKey(t *testing.T) {
	clock := &testclock.Clock{}
	e := newTokenEnvClock(t, clock)
	at := clock.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	r := e.do(tvRoleMgmt, http.MethodPost, "/keys", map[string]any{"expires_at": at})
	tvWantStatus(t, r, http.StatusCreated, "a key for two hours")
	k := jweKey{id: testjson.Str(r.body, "key_id"), pem: testjson.Str(r.body, "public_key_pem")}
	data := elementsJWE(t, k, `{"ssn":"123-45-6789"}`)
	tvWantStatus(t, e.do(tvRoleReveal, http.MethodPost, "/tokens", map[string]any{"type": "token", "encrypted": data}), http.StatusCreated, "before expiry")
	clock.Advance(3 * time.Hour)
	r = e.do(tvRoleReveal, http.MethodPost, "/tokens", map[string]any{"type": "token", "encrypted": data})
	tvWantProblem(t, r, http.StatusBadRequest, "after expiry", "encrypted")
	if msgs, _ := testjson.Field(r.body, "errors", "encrypted").([]any); len(msgs) != 1 || fmt.Sprint(msgs[0]) != jweUndecryptable {
		t.Errorf("after expiry: %s", r.raw)
	}
	tvWantStatus(t, e.do(tvRoleMgmt, http.MethodGet, "/keys/"+k.id, nil), http.StatusOK, "an expired key's metadata")
}

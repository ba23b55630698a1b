package caddymodule

// Adversarial review of client-side encryption: JWEs the documentation
// says never open, made with an independent JOSE library.

import (
	"net/http"
	"strings"
	"testing"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwe"
)

// TestAttackJWECompressed: a JWE with "zip": "DEF" (compressed before
// encryption, a decompression bomb's vehicle) is refused like every JWE
// that does not open, however well encrypted to the right key.
func TestAttackJWECompressed(t *testing.T) {
	e := newTokenEnv(t, false, true)
	k := createJWEKey(t, e, tvRoleMgmt)
	h := jwe.NewHeaders()
	if err := h.Set("kid", k.id); err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"note":"` + strings.Repeat("a", 100000) + `"}`)
	out, err := jwe.Encrypt(payload, jwe.WithKey(jwa.ECDH_ES(), x25519Of(t, k.pem)), jwe.WithContentEncryption(jwa.A256GCM()),
		jwe.WithProtectedHeaders(h), jwe.WithCompress(jwa.Deflate()), jwe.WithCompact())
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > 10000 {
		t.Fatalf("the JWE is %d bytes: not compressed", len(out))
	}
	for _, path := range []string{"/tokens", "/token-intents"} {
		role := tvRoleReveal
		if path == "/token-intents" {
			role = docApp(t, e, "web", "token-intent:create")
		}
		r := e.do(role, http.MethodPost, path, map[string]any{"type": "token", "encrypted": string(out)})
		tvWantProblem(t, r, http.StatusBadRequest, path+" with a compressed JWE", "encrypted")
	}
	if n := e.count(); n != 0 {
		t.Errorf("%d tokens made of a compressed JWE", n)
	}
}

package vaultstore

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// withChecksum appends a valid checksum to body, so a test can build keys
// that are wrong in exactly one other way.
func withChecksum(body string) string { return body + keyChecksum(body) }

func TestNewAPIKeyShape(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range []struct {
		tenantType, prefix string
	}{
		{TenantTest, "key_test_"},
		{TenantProduction, "key_prod_"},
	} {
		for range 200 {
			k := newAPIKey(tc.tenantType)
			if !strings.HasPrefix(k, tc.prefix) || !keyShape.MatchString(k) || !wellFormedKey(k) {
				t.Fatalf("newAPIKey(%s) = %q", tc.tenantType, k)
			}
			if seen[k] {
				t.Fatalf("duplicate key %q", k)
			}
			seen[k] = true
		}
	}
}

func TestBase62(t *testing.T) {
	for _, tc := range []struct {
		in    []byte
		width int
		want  string
	}{
		{[]byte{0}, 3, "000"},
		{[]byte{61}, 2, "0z"},
		{[]byte{62}, 2, "10"},
		{[]byte{0xff, 0xff, 0xff, 0xff}, 6, "4gfFC3"},
	} {
		if got := base62(tc.in, tc.width); got != tc.want {
			t.Errorf("base62(%x, %d) = %q, want %q", tc.in, tc.width, got, tc.want)
		}
	}
}

func TestAuthenticateRejectsBadKeys(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	ct := mustCreateTenant(t, s, "T", TenantTest)
	prod := mustCreateTenant(t, s, "P", TenantProduction)
	good := ct.Key
	payload := good[len("key_test_") : len(good)-keyChecksumLen]
	lastChar := good[len(good)-1]
	swapped := byte('a')
	if lastChar == 'a' {
		swapped = 'b'
	}

	for _, tc := range []struct {
		name       string
		key        string
		wellFormed bool // passes the shape and checksum check, so only storage can refuse it
	}{
		{"empty", "", false},
		{"prefix only", "key_test_", false},
		{"no prefix", good[len("key_test_"):], false},
		{"wrong prefix", withChecksum("key_live_" + payload), false},
		{"upper-case prefix", withChecksum("KEY_TEST_" + payload), false},
		{"other tenant type's prefix", withChecksum("key_prod_" + payload), true},
		{"bad checksum", good[:len(good)-1] + string(swapped), false},
		{"checksum of another key", good[:len(good)-keyChecksumLen] + prod.Key[len(prod.Key)-keyChecksumLen:], false},
		{"one character short", withChecksum("key_test_" + payload[1:]), false},
		{"one character long", withChecksum("key_test_" + payload + "A"), false},
		{"no checksum", "key_test_" + payload, false},
		{"non-base62 dash", withChecksum("key_test_" + "-" + payload[1:]), false},
		{"non-base62 plus", withChecksum("key_test_" + payload[:10] + "+" + payload[11:]), false},
		{"non-base62 multibyte", withChecksum("key_test_" + "é" + payload[2:]), false},
		{"trailing newline", good + "\n", false},
		{"leading space", " " + good, false},
		{"bearer scheme", "Bearer " + good, false},
		{"well-formed but unknown test key", newAPIKey(TenantTest), true},
		{"well-formed but unknown prod key", newAPIKey(TenantProduction), true},
		{"huge", strings.Repeat("A", 1<<20), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.key == good || tc.key == prod.Key {
				t.Fatalf("test case is a valid key")
			}
			if got := wellFormedKey(tc.key); got != tc.wellFormed {
				t.Errorf("wellFormedKey = %v, want %v: a malformed key must be refused without a storage read", got, tc.wellFormed)
			}
			p, err := s.Authenticate(ctx, tc.key)
			if !errors.Is(err, ErrUnauthenticated) {
				t.Errorf("Authenticate = %v, %v; want ErrUnauthenticated", p, err)
			}
			if p != nil {
				t.Errorf("principal returned with an error: %+v", p)
			}
		})
	}
	// The good keys still work, so the cases above fail for their own reasons.
	for _, k := range []string{good, prod.Key} {
		if _, err := s.Authenticate(ctx, k); err != nil {
			t.Errorf("valid key refused: %v", err)
		}
	}
}

// Only the key's digest is stored: the index cannot be turned back into
// a key, and a key that hashes differently is not found.
func TestKeyIndexHoldsOnlyDigest(t *testing.T) {
	s, _ := newTestStore(t)
	ct := mustCreateTenant(t, s, "T", TenantTest)
	keys := kvKeys(t, s, "v1/apikey/")
	if len(keys) != 1 || keys[0] != "v1/apikey/"+keyDigest(ct.Key) {
		t.Errorf("key index = %v, want the digest of the one key", keys)
	}
	for _, k := range kvKeys(t, s, "v1/") {
		if strings.Contains(k, ct.Key[9:]) {
			t.Errorf("KV key %q contains the API key", k)
		}
	}
}

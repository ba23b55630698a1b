package vaultstore

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"

	"golang.org/x/text/unicode/norm"
)

// fingerprintOf is the keyed HMAC-SHA-256 of an evaluated fingerprint
// expression: the same value gives the same fingerprint within one tenant
// and token type, and different ones across tenants (each has its own key)
// and types (the type is part of the input). The value is NFC-normalized
// first, so the same text in two Unicode spellings matches.
func (tk *tenantKeys) fingerprintOf(tokenType, value string) string {
	return tk.keyedHash("fingerprint", tokenType, value)
}

// searchHashOf is the keyed hash under which a search index value is
// stored; the value itself never is.
func (tk *tenantKeys) searchHashOf(value string) string {
	return tk.keyedHash("search", "", value)
}

func (tk *tenantKeys) keyedHash(purpose, scope, value string) string {
	m := hmac.New(sha256.New, tk.fingerprint)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write([]byte(scope))
	m.Write([]byte{0})
	m.Write(norm.NFC.Bytes([]byte(value)))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

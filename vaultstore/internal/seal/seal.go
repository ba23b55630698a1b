// Package seal is the vault's key hierarchy and its sealing: master
// keys (Masters) wrap the keys the vault keeps; each tenant's data keys
// (DataKeys) seal its records; short-lived CVC keys (CVCKeys) seal card
// verification codes until their epoch ends. Every sealed value is
// AES-256-GCM under a random nonce, with a format byte and the key
// version in front, bound to associated data that names what it is
// (RecordAAD and the other AAD builders), so a value moved to another
// record does not open.
//
// The package stores nothing: where wrapped keys live (the engine, the
// CVC slot file) is the vault's, which hands them in and out as bytes.
// It imports no part of the vault, so it can be reviewed as one unit.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// KeySize is the length of every key in bytes (AES-256): master keys,
// data keys, fingerprint keys and CVC keys.
const KeySize = 32

// sealFormat is the first byte of every sealed value, so the format can
// change without guessing.
const sealFormat = 1

// sealHeader is the header (format byte and key version) plus the nonce.
const sealHeader = 1 + 4

// ErrIntegrity reports a sealed value that does not open: wrong key,
// tampered bytes, or a value moved to another record.
var ErrIntegrity = errors.New("sealed value failed its integrity check")

// NewAEAD returns AES-256-GCM under key, which must be KeySize bytes.
func NewAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Seal encrypts plaintext with AES-256-GCM under a random nonce. The key
// version travels in the header and is bound, with aad, as associated data.
func Seal(aead cipher.AEAD, version uint32, plaintext, aad []byte) ([]byte, error) {
	out := make([]byte, sealHeader+aead.NonceSize(), sealHeader+aead.NonceSize()+len(plaintext)+aead.Overhead())
	out[0] = sealFormat
	binary.BigEndian.PutUint32(out[1:5], version)
	nonce := out[sealHeader:]
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("reading nonce: %w", err)
	}
	return aead.Seal(out, nonce, plaintext, sealAAD(out[:sealHeader], aad)), nil
}

// Version returns the key version a sealed value was written with, or
// ErrIntegrity for what is not a sealed value.
func Version(sealed []byte) (uint32, error) {
	if len(sealed) < sealHeader || sealed[0] != sealFormat {
		return 0, ErrIntegrity
	}
	return binary.BigEndian.Uint32(sealed[1:5]), nil
}

// Open reverses Seal. Any mismatch (key, bytes, associated data) is
// ErrIntegrity and never a panic.
func Open(aead cipher.AEAD, sealed, aad []byte) ([]byte, error) {
	if len(sealed) < sealHeader+aead.NonceSize()+aead.Overhead() || sealed[0] != sealFormat {
		return nil, ErrIntegrity
	}
	nonce := sealed[sealHeader : sealHeader+aead.NonceSize()]
	pt, err := aead.Open(nil, nonce, sealed[sealHeader+aead.NonceSize():], sealAAD(sealed[:sealHeader], aad))
	if err != nil {
		return nil, ErrIntegrity
	}
	return pt, nil
}

// sealAAD is the associated data seal binds: a fixed label, the header
// and the caller's aad, in one allocation.
func sealAAD(header, aad []byte) []byte {
	const label = "tokenvault/"
	b := make([]byte, 0, len(label)+len(header)+len(aad))
	return append(append(append(b, label...), header...), aad...)
}

// KeyCheck derives a value that proves a master key is the one a store was
// created with, without revealing anything about the key.
func KeyCheck(masterKey []byte) []byte {
	m := hmac.New(sha256.New, masterKey)
	m.Write([]byte("tokenvault master key check v1"))
	return m.Sum(nil)
}

// RandomBytes returns n bytes from the system's secure generator.
func RandomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // the OS generator never fails on Linux
	}
	return b
}

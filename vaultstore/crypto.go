package vaultstore

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

// MasterKeySize is the length of the master key in bytes (AES-256).
const MasterKeySize = 32

// sealFormat is the first byte of every sealed value, so the format can
// change without guessing.
const sealFormat = 1

// sealOverhead is the header (format byte and key version) plus the nonce.
const sealHeader = 1 + 4

// ErrIntegrity reports a sealed value that does not open: wrong key,
// tampered bytes, or a value moved to another record.
var ErrIntegrity = errors.New("sealed value failed its integrity check")

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != MasterKeySize {
		return nil, fmt.Errorf("key must be %d bytes, got %d", MasterKeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// seal encrypts plaintext with AES-256-GCM under a random nonce. The key
// version travels in the header and is bound, with aad, as associated data.
func seal(aead cipher.AEAD, version uint32, plaintext, aad []byte) ([]byte, error) {
	out := make([]byte, sealHeader+aead.NonceSize(), sealHeader+aead.NonceSize()+len(plaintext)+aead.Overhead())
	out[0] = sealFormat
	binary.BigEndian.PutUint32(out[1:5], version)
	nonce := out[sealHeader:]
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("reading nonce: %w", err)
	}
	return aead.Seal(out, nonce, plaintext, sealAAD(out[:sealHeader], aad)), nil
}

// sealedVersion returns the key version a sealed value was written with.
func sealedVersion(sealed []byte) (uint32, error) {
	if len(sealed) < sealHeader || sealed[0] != sealFormat {
		return 0, ErrIntegrity
	}
	return binary.BigEndian.Uint32(sealed[1:5]), nil
}

// open reverses seal. Any mismatch (key, bytes, associated data) is
// ErrIntegrity and never a panic.
func open(aead cipher.AEAD, sealed, aad []byte) ([]byte, error) {
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

// keyCheck derives a value that proves a master key is the one a store was
// created with, without revealing anything about the key.
func keyCheck(masterKey []byte) []byte {
	m := hmac.New(sha256.New, masterKey)
	m.Write([]byte("tokenvault master key check v1"))
	return m.Sum(nil)
}

// randomBytes returns n bytes from the system's secure generator.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // the OS generator never fails on Linux
	}
	return b
}

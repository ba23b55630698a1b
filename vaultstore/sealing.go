package vaultstore

import (
	"context"
	"crypto/cipher"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/internal/seal"
)

// The key hierarchy and its sealing are package seal (internal/seal),
// reviewable as one unit; this file gives the domain's files the names
// they call it by. What stays in vaultstore is where keys are stored:
// the keyring's cache and the engine's entries (datakeys.go), the CVC
// key stores (cvc_keys.go), the store's meta file (meta.go) and the
// rotations that rewrite them (rotation.go, datakey_rotation.go).

// MasterKeySize is the length of the master key in bytes (AES-256).
const MasterKeySize = seal.KeySize

// ErrIntegrity reports a sealed value that does not open: wrong key,
// tampered bytes, or a value moved to another record.
var ErrIntegrity = seal.ErrIntegrity

func newAEAD(key []byte) (cipher.AEAD, error) { return seal.NewAEAD(key) }

// open reverses seal.Seal; any mismatch is ErrIntegrity.
func open(aead cipher.AEAD, sealed, aad []byte) ([]byte, error) {
	return seal.Open(aead, sealed, aad)
}

// sealedVersion returns the key version a sealed value was written with.
func sealedVersion(sealed []byte) (uint32, error) { return seal.Version(sealed) }

// keyCheck proves a master key without revealing it (seal.KeyCheck).
func keyCheck(masterKey []byte) []byte { return seal.KeyCheck(masterKey) }

// randomBytes returns n bytes from the system's secure generator.
func randomBytes(n int) []byte { return seal.RandomBytes(n) }

// The associated data that binds each kind of sealed value.
func recordAAD(kind, tenantID, id string) []byte { return seal.RecordAAD(kind, tenantID, id) }

func dataKeyAAD(tenantID string, version uint32) []byte { return seal.DataKeyAAD(tenantID, version) }

func fingerprintKeyAAD(tenantID string) []byte { return seal.FingerprintKeyAAD(tenantID) }

// masterKeys are the master keys (seal.Masters), under the names the
// store, its rotation and its backups use.
type masterKeys struct{ m *seal.Masters }

func newMasterKeys(current []byte, others ...[]byte) (*masterKeys, error) {
	m, err := seal.NewMasters(current, others...)
	if err != nil {
		return nil, err
	}
	return &masterKeys{m}, nil
}

func (k *masterKeys) add(key []byte) error       { return k.m.Add(key) }
func (k *masterKeys) promote(check []byte) error { return k.m.Promote(check) }
func (k *masterKeys) keepOnlyCurrent()           { k.m.KeepOnlyCurrent() }
func (k *masterKeys) holds(check []byte) bool    { return k.m.Holds(check) }
func (k *masterKeys) currentCheck() []byte       { return k.m.CurrentCheck() }
func (k *masterKeys) wrap(version uint32, raw, aad []byte) ([]byte, error) {
	return k.m.Wrap(version, raw, aad)
}
func (k *masterKeys) unwrap(wrapped, aad []byte) ([]byte, bool, error) {
	return k.m.Unwrap(wrapped, aad)
}

// CVC keys: see seal.CVCKeys for why a CVC has keys of its own.
const (
	cvcEpoch     = seal.CVCEpoch
	cvcKeyHeader = seal.CVCHeader
)

// errCVCShredded reports a CVC whose key is gone.
var errCVCShredded = seal.ErrCVCShredded

// cvcKeyStore keeps the wrapped CVC keys, one per epoch: the slot file
// or a shared engine's entries (cvc_keys.go).
type cvcKeyStore = seal.CVCKeyStore

// cvcKeyring is the live CVC keys (seal.CVCKeys) under the names the
// store, its sweep and its tokens use.
type cvcKeyring struct{ k *seal.CVCKeys }

func openCVCKeyring(ctx context.Context, store cvcKeyStore, masters *masterKeys) (*cvcKeyring, error) {
	k, err := seal.OpenCVCKeys(ctx, store, masters.m)
	if err != nil {
		return nil, err
	}
	return &cvcKeyring{k}, nil
}

func (c *cvcKeyring) seal(ctx context.Context, cvc string, expires, now time.Time, aad []byte) ([]byte, error) {
	return c.k.Seal(ctx, cvc, expires, now, aad)
}
func (c *cvcKeyring) open(ctx context.Context, blob, aad []byte) (string, error) {
	return c.k.Open(ctx, blob, aad)
}
func (c *cvcKeyring) shred(ctx context.Context, now time.Time) error { return c.k.Shred(ctx, now) }
func (c *cvcKeyring) rewrap(ctx context.Context) error               { return c.k.Rewrap(ctx) }
func (c *cvcKeyring) close() error                                   { return c.k.Close() }

package vaultstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/tokenvault/tokenvault/vaultstore/internal/seal"
)

// tenantKeys holds a tenant's unwrapped data keys by version
// (seal.DataKeys: new values are sealed under the current one) and its
// fingerprint key.
type tenantKeys struct {
	*seal.DataKeys
	// fingerprint keys the HMACs of fingerprints and search indexes. It
	// is separate from the data keys so rotating those leaves every
	// fingerprint unchanged.
	fingerprint []byte
}

// keyring unwraps tenant data keys with the master key and caches them.
// A cached entry is only ever made from committed data.
type keyring struct {
	masters *masterKeys
	mu      sync.RWMutex
	cache   map[string]*tenantKeys
	deleted map[string]bool // tenant ids are never reused; a late reader must not cache them again
}

func newKeyring(masters *masterKeys) *keyring {
	return &keyring{masters: masters, cache: make(map[string]*tenantKeys), deleted: make(map[string]bool)}
}

// create makes version 1 of a new tenant's data key and writes it wrapped.
func (k *keyring) create(w Writer, tenantID string) (*tenantKeys, error) {
	const version = 1
	raw := randomBytes(MasterKeySize)
	keys := seal.NewDataKeys()
	if err := keys.Add(version, raw); err != nil {
		return nil, err
	}
	wrapped, err := k.masters.wrap(version, raw, dataKeyAAD(tenantID, version))
	if err != nil {
		return nil, err
	}
	if err := w.Put(dataKeyKey(tenantID, version), wrapped, 0); err != nil {
		return nil, err
	}
	fp := randomBytes(MasterKeySize)
	wrappedFP, err := k.masters.wrap(1, fp, fingerprintKeyAAD(tenantID))
	if err != nil {
		return nil, err
	}
	if err := w.Put(fingerprintKeyKey(tenantID), wrappedFP, 0); err != nil {
		return nil, err
	}
	return &tenantKeys{DataKeys: keys, fingerprint: fp}, nil
}

// forTenant returns the tenant's data keys, unwrapping them on first use.
func (k *keyring) forTenant(r Reader, tenantID string) (*tenantKeys, error) {
	k.mu.RLock()
	tk := k.cache[tenantID]
	k.mu.RUnlock()
	if tk != nil {
		return tk, nil
	}
	tk = &tenantKeys{DataKeys: seal.NewDataKeys()}
	prefix := dataKeyPrefix(tenantID)
	err := r.Scan(prefix, nil, func(key, wrapped []byte) error {
		version, err := sealedVersion(wrapped)
		if err != nil {
			return err
		}
		raw, _, err := k.masters.unwrap(wrapped, dataKeyAAD(tenantID, version))
		if err != nil {
			return fmt.Errorf("unwrapping data key: %w", err)
		}
		defer clear(raw)
		return tk.Add(version, raw)
	})
	if err != nil {
		return nil, err
	}
	if tk.Len() == 0 {
		return nil, ErrNotFound
	}
	wrappedFP, err := r.Get(fingerprintKeyKey(tenantID))
	if err != nil {
		return nil, fmt.Errorf("fingerprint key: %w", err)
	}
	if tk.fingerprint, _, err = k.masters.unwrap(wrappedFP, fingerprintKeyAAD(tenantID)); err != nil {
		return nil, fmt.Errorf("unwrapping fingerprint key: %w", err)
	}
	k.remember(tenantID, tk)
	return tk, nil
}

// cached returns the tenant's data keys if they are in memory, else nil.
func (k *keyring) cached(tenantID string) *tenantKeys {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.cache[tenantID]
}

func (k *keyring) remember(tenantID string, tk *tenantKeys) {
	k.mu.Lock()
	if !k.deleted[tenantID] {
		k.cache[tenantID] = tk
	}
	k.mu.Unlock()
}

// invalidate drops a tenant's cached keys, so the next use loads the
// versions stored now (after a data key rotation).
func (k *keyring) invalidate(tenantID string) {
	k.mu.Lock()
	delete(k.cache, tenantID)
	k.mu.Unlock()
}

// forget drops a tenant's keys from memory (after the tenant is deleted).
func (k *keyring) forget(tenantID string) {
	k.mu.Lock()
	delete(k.cache, tenantID)
	k.deleted[tenantID] = true
	k.mu.Unlock()
}

// recordAppender is a record that encodes itself exactly as json.Marshal
// would, faster.
type recordAppender interface {
	appendRecord(dst []byte) ([]byte, error)
}

// recordDecoder is a record that decodes itself exactly as a json.Decoder
// with UseNumber would, faster.
type recordDecoder interface {
	decodeRecord(b []byte) error
}

// sealRecord stores v as JSON sealed under the tenant's current data key,
// bound to its kind, tenant and id so it cannot be moved to another record.
func (tk *tenantKeys) sealRecord(kind, tenantID, id string, v any) ([]byte, error) {
	var plain []byte
	var err error
	if a, ok := v.(recordAppender); ok {
		plain, err = a.appendRecord(make([]byte, 0, 1024))
	} else {
		plain, err = json.Marshal(v)
	}
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", kind, err)
	}
	return tk.Seal(plain, recordAAD(kind, tenantID, id))
}

// openRecord reverses sealRecord into v.
func (tk *tenantKeys) openRecord(kind, tenantID, id string, sealed []byte, v any) error {
	plain, err := tk.Open(sealed, recordAAD(kind, tenantID, id))
	if err != nil {
		return fmt.Errorf("%s %s: %w", kind, id, err)
	}
	if d, ok := v.(recordDecoder); ok {
		err = d.decodeRecord(plain)
	} else {
		dec := json.NewDecoder(bytes.NewReader(plain))
		dec.UseNumber() // token data keeps its numbers exactly
		err = dec.Decode(v)
	}
	if err != nil {
		return fmt.Errorf("decoding %s %s: %w", kind, id, err)
	}
	return nil
}

// reseal re-seals a sealed record under the current data key version;
// changed is false when it already is.
func (tk *tenantKeys) reseal(kind, tenantID, id string, sealed []byte) (out []byte, changed bool, err error) {
	out, changed, err = tk.Reseal(sealed, recordAAD(kind, tenantID, id))
	if err != nil {
		return nil, false, fmt.Errorf("%s %s: %w", kind, id, err)
	}
	return out, changed, nil
}

package seal

import (
	"bytes"
	"crypto/cipher"
	"crypto/subtle"
	"errors"
	"fmt"
	"sync"
)

// ErrWrongMasterKey reports a master key that is not the one the store was
// created with (nor, during a rotation, the other one).
var ErrWrongMasterKey = errors.New("master key does not match this store")

// Masters wraps the keys the vault keeps (tenant data keys,
// fingerprint keys, CVC keys): the first key wraps, any of them unwraps.
// More than one is held only while a master key rotation is under way.
type Masters struct {
	mu     sync.RWMutex
	aeads  []cipher.AEAD
	checks [][]byte // keyCheck of each, same order
}

// NewMasters holds current, which wraps, and others, which only unwrap.
func NewMasters(current []byte, others ...[]byte) (*Masters, error) {
	m := &Masters{}
	for _, k := range append([][]byte{current}, others...) {
		if err := m.Add(k); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Add appends a key that unwraps; a key held already is ignored.
func (m *Masters) Add(key []byte) error {
	aead, err := NewAEAD(key)
	if err != nil {
		return fmt.Errorf("master key: %w", err)
	}
	check := KeyCheck(key)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.checks {
		if subtle.ConstantTimeCompare(c, check) == 1 {
			return nil
		}
	}
	m.aeads, m.checks = append(m.aeads, aead), append(m.checks, check)
	return nil
}

// Promote makes the key with check wrap new values; it must be held.
func (m *Masters) Promote(check []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, c := range m.checks {
		if bytes.Equal(c, check) {
			m.aeads[0], m.aeads[i] = m.aeads[i], m.aeads[0]
			m.checks[0], m.checks[i] = m.checks[i], m.checks[0]
			return nil
		}
	}
	return fmt.Errorf("promoting a master key that is not held: %w", ErrWrongMasterKey)
}

// KeepOnlyCurrent forgets every key but the one that wraps.
func (m *Masters) KeepOnlyCurrent() {
	m.mu.Lock()
	m.aeads, m.checks = m.aeads[:1], m.checks[:1]
	m.mu.Unlock()
}

// Holds reports whether a key with this check is held.
func (m *Masters) Holds(check []byte) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, c := range m.checks {
		if subtle.ConstantTimeCompare(c, check) == 1 {
			return true
		}
	}
	return false
}

// CurrentCheck is the check value of the key that wraps.
func (m *Masters) CurrentCheck() []byte {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.checks[0]
}

// Wrap seals raw key material under the current master key.
func (m *Masters) Wrap(version uint32, raw, aad []byte) ([]byte, error) {
	m.mu.RLock()
	aead := m.aeads[0]
	m.mu.RUnlock()
	return Seal(aead, version, raw, aad)
}

// Unwrap opens a wrapped key with whichever master key wrapped it, and
// reports whether that was the current one.
func (m *Masters) Unwrap(wrapped, aad []byte) (raw []byte, current bool, err error) {
	m.mu.RLock()
	aeads := m.aeads
	m.mu.RUnlock()
	for i, aead := range aeads {
		if raw, err := Open(aead, wrapped, aad); err == nil {
			return raw, i == 0, nil
		}
	}
	return nil, false, ErrIntegrity
}

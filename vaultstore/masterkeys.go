package vaultstore

import (
	"bytes"
	"crypto/cipher"
	"crypto/subtle"
	"fmt"
	"sync"
)

// masterKeys wraps the keys the vault keeps (tenant data keys,
// fingerprint keys, CVC keys): the first key wraps, any of them unwraps.
// More than one is held only while a master key rotation is under way.
type masterKeys struct {
	mu     sync.RWMutex
	aeads  []cipher.AEAD
	checks [][]byte // keyCheck of each, same order
}

func newMasterKeys(current []byte, others ...[]byte) (*masterKeys, error) {
	m := &masterKeys{}
	for _, k := range append([][]byte{current}, others...) {
		if err := m.add(k); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// add appends a key that unwraps; a key held already is ignored.
func (m *masterKeys) add(key []byte) error {
	aead, err := newAEAD(key)
	if err != nil {
		return fmt.Errorf("master key: %w", err)
	}
	check := keyCheck(key)
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

// promote makes the key with check wrap new values; it must be held.
func (m *masterKeys) promote(check []byte) error {
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

// keepOnlyCurrent forgets every key but the one that wraps.
func (m *masterKeys) keepOnlyCurrent() {
	m.mu.Lock()
	m.aeads, m.checks = m.aeads[:1], m.checks[:1]
	m.mu.Unlock()
}

// holds reports whether a key with this check is held.
func (m *masterKeys) holds(check []byte) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, c := range m.checks {
		if subtle.ConstantTimeCompare(c, check) == 1 {
			return true
		}
	}
	return false
}

// currentCheck is the check value of the key that wraps.
func (m *masterKeys) currentCheck() []byte {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.checks[0]
}

// wrap seals raw key material under the current master key.
func (m *masterKeys) wrap(version uint32, raw, aad []byte) ([]byte, error) {
	m.mu.RLock()
	aead := m.aeads[0]
	m.mu.RUnlock()
	return seal(aead, version, raw, aad)
}

// unwrap opens a wrapped key with whichever master key wrapped it, and
// reports whether that was the current one.
func (m *masterKeys) unwrap(wrapped, aad []byte) (raw []byte, current bool, err error) {
	m.mu.RLock()
	aeads := m.aeads
	m.mu.RUnlock()
	for i, aead := range aeads {
		if raw, err := open(aead, wrapped, aad); err == nil {
			return raw, i == 0, nil
		}
	}
	return nil, false, ErrIntegrity
}

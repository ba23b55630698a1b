package vaultstore

import (
	"bytes"
	"encoding/json"
	"sync"
)

// DefaultRecordCacheEntries bounds the decoded-record cache when
// Options.RecordCacheEntries is zero.
const DefaultRecordCacheEntries = 10_000

// recordCache keeps the decoded form of small records that nearly every
// request reads — tenants, applications, proxies and key index entries — so a
// request pays for a storage read and a byte comparison instead of an
// AES-GCM open and a JSON decode.
//
// An entry is keyed by the record's storage key and is only valid while the
// stored bytes equal the ones it was decoded from: every lookup still reads
// the record inside the caller's transaction (so writes keep their conflict
// detection and a deleted or rewritten record is never served from memory),
// and any change to the stored value — an update, a reseal under a new data
// key, a delete and re-create — is a miss. There is nothing to invalidate.
//
// Cached values are shared between requests and must not be modified; the
// few callers that change a record copy it first (Tenant.clone).
type recordCache struct {
	mu      sync.RWMutex
	max     int
	entries map[string]cachedRecord
}

type cachedRecord struct {
	stored []byte // the value as stored, sealed or not
	value  any
}

func newRecordCache(max int) *recordCache {
	if max <= 0 {
		max = DefaultRecordCacheEntries
	}
	return &recordCache{max: max, entries: make(map[string]cachedRecord)}
}

// lookup returns the value decoded from stored under key, if it is cached.
func (c *recordCache) lookup(key, stored []byte) (any, bool) {
	c.mu.RLock()
	e, ok := c.entries[string(key)]
	c.mu.RUnlock()
	if !ok || !bytes.Equal(e.stored, stored) {
		return nil, false
	}
	return e.value, true
}

// remember caches value as the decoded form of stored under key. A full
// cache drops an arbitrary entry (Go's map order) to make room.
func (c *recordCache) remember(key, stored []byte, value any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[string(key)]; !ok && len(c.entries) >= c.max {
		for k := range c.entries {
			delete(c.entries, k)
			break
		}
	}
	c.entries[string(key)] = cachedRecord{stored: stored, value: value}
}

// len reports the number of cached records.
func (c *recordCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}

// openCached reads the sealed record at key and returns its decoded value,
// from the cache when the stored bytes have not changed. The result is
// shared: callers must not modify it.
func openCached[T any](s *Store, r Reader, tk *tenantKeys, kind, tenantID, id string, key []byte) (*T, error) {
	raw, err := r.Get(key)
	if err != nil {
		return nil, err
	}
	if v, ok := s.records.lookup(key, raw); ok {
		if t, ok := v.(*T); ok {
			return t, nil
		}
	}
	v := new(T)
	if err := tk.openRecord(kind, tenantID, id, raw, v); err != nil {
		return nil, err
	}
	s.records.remember(key, raw, v)
	return v, nil
}

// decodeCached reads the plain JSON record at key (an index entry holding
// no secret) and returns its decoded value, from the cache when the stored
// bytes have not changed. The result is shared: callers must not modify it.
func decodeCached[T any](s *Store, r Reader, key []byte) (*T, error) {
	raw, err := r.Get(key)
	if err != nil {
		return nil, err
	}
	if v, ok := s.records.lookup(key, raw); ok {
		if t, ok := v.(*T); ok {
			return t, nil
		}
	}
	v := new(T)
	if err := json.Unmarshal(raw, v); err != nil {
		return nil, err
	}
	s.records.remember(key, raw, v)
	return v, nil
}

package vaultstore

import (
	"bytes"
	"cmp"
	"encoding/json"

	"github.com/tokenvault/tokenvault/internal/bounded"
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
	entries *bounded.Map[cachedRecord]
}

type cachedRecord struct {
	stored []byte // the value as stored, sealed or not
	value  any
}

func newRecordCache(max int) *recordCache {
	return &recordCache{entries: bounded.New[cachedRecord](cmp.Or(max, DefaultRecordCacheEntries))}
}

// lookup returns the value decoded from stored under key, if it is cached.
func (c *recordCache) lookup(key, stored []byte) (any, bool) {
	e, ok := c.entries.Get(string(key))
	if !ok || !bytes.Equal(e.stored, stored) {
		return nil, false
	}
	return e.value, true
}

// remember caches value as the decoded form of stored under key.
func (c *recordCache) remember(key, stored []byte, value any) {
	c.entries.Put(string(key), cachedRecord{stored: stored, value: value})
}

// len reports the number of cached records.
func (c *recordCache) len() int { return c.entries.Len() }

// openCached reads the sealed record at key and returns its decoded value,
// from the cache when the stored bytes have not changed. The result is
// shared: callers must not modify it.
func openCached[T any](s *Store, r Reader, tk *tenantKeys, kind, tenantID, id string, key []byte) (*T, error) {
	return readCached(s, r, key, func(raw []byte, v *T) error { return tk.openRecord(kind, tenantID, id, raw, v) })
}

// decodeCached reads the plain JSON record at key (an index entry holding
// no secret) and returns its decoded value, from the cache when the stored
// bytes have not changed. The result is shared: callers must not modify it.
func decodeCached[T any](s *Store, r Reader, key []byte) (*T, error) {
	return readCached(s, r, key, func(raw []byte, v *T) error { return json.Unmarshal(raw, v) })
}

// readCached reads the record at key and returns it decoded by decode,
// from the cache when the stored bytes have not changed.
func readCached[T any](s *Store, r Reader, key []byte, decode func(raw []byte, v *T) error) (*T, error) {
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
	if err := decode(raw, v); err != nil {
		return nil, err
	}
	s.records.remember(key, raw, v)
	return v, nil
}

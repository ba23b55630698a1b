package vaultstore

import (
	"bytes"
	"cmp"
	"context"
	"sync/atomic"
	"time"

	"github.com/tokenvault/tokenvault/internal/bounded"
)

// principalCache remembers the principal each API key resolved to, by the
// key's SHA-256 digest (never the key), so that a request with a known key
// costs no storage read at all.
//
// Every entry carries the generation it was read at. The generation moves
// on after any transaction that wrote a record a principal is made of — a
// tenant, an application, an API key index entry or a data key (see
// principalKV) — which drops every entry at once. An entry read while such
// a write was committing is stamped with the generation from before the
// read began, so it is dropped by that write's bump: a request that starts
// after a key revoke, an application or tenant change or a tenant delete
// has returned always sees it.
type principalCache struct {
	generation atomic.Uint64
	entries    *bounded.Map[principalEntry]
}

type principalEntry struct {
	principal  Principal
	generation uint64
}

func newPrincipalCache(max int) *principalCache {
	return &principalCache{entries: bounded.New[principalEntry](cmp.Or(max, DefaultRecordCacheEntries))}
}

// lookup returns a copy of the principal cached for digest, if it is
// current.
func (c *principalCache) lookup(digest string) (*Principal, bool) {
	e, ok := c.entries.Get(digest)
	if !ok || e.generation != c.generation.Load() {
		return nil, false
	}
	p := e.principal
	return &p, true
}

// remember caches p for digest as read at generation.
func (c *principalCache) remember(digest string, generation uint64, p *Principal) {
	c.entries.Put(digest, principalEntry{principal: *p, generation: generation})
}

// invalidate makes every cached principal stale.
func (c *principalCache) invalidate() { c.generation.Add(1) }

// principalKV is the store's engine as the rest of the store sees it: it
// tells the principal cache when a transaction wrote a record principals
// are made of.
type principalKV struct {
	KV
	cache *principalCache
}

// Unwrap returns the engine underneath.
func (kv principalKV) Unwrap() KV { return kv.KV }

func (kv principalKV) Update(ctx context.Context, fn func(Writer) error) error {
	touched := false
	err := kv.KV.Update(ctx, func(w Writer) error { return fn(principalWriter{w, &touched}) })
	if touched {
		kv.cache.invalidate()
	}
	return err
}

func (kv principalKV) DeletePrefix(ctx context.Context, prefix []byte) error {
	err := kv.KV.DeletePrefix(ctx, prefix)
	kv.cache.invalidate()
	return err
}

type principalWriter struct {
	Writer
	touched *bool
}

func (w principalWriter) Put(key, value []byte, ttl time.Duration) error {
	if principalRecord(key) {
		*w.touched = true
	}
	return w.Writer.Put(key, value, ttl)
}

func (w principalWriter) Delete(key []byte) error {
	if principalRecord(key) {
		*w.touched = true
	}
	return w.Writer.Delete(key)
}

// principalRecord reports whether key holds part of a principal: a tenant
// record, a data key, an API key index entry or an application record.
func principalRecord(key []byte) bool {
	for _, p := range principalPrefixes {
		if bytes.HasPrefix(key, p) {
			return true
		}
	}
	// v1/t/{tenant}/app/{application}
	rest, ok := bytes.CutPrefix(key, tenantDataRoot)
	if !ok {
		return false
	}
	if i := bytes.IndexByte(rest, '/'); i >= 0 {
		return bytes.HasPrefix(rest[i:], applicationSegment)
	}
	return false
}

var (
	principalPrefixes = [][]byte{
		[]byte(keyVersion + "tenant/"),
		[]byte(keyVersion + "dek/"),
		[]byte(keyVersion + "apikey/"),
	}
	tenantDataRoot     = []byte(keyVersion + "t/")
	applicationSegment = []byte("/app/")
)

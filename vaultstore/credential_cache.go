package vaultstore

import (
	"bytes"
	"cmp"
	"context"
	"sync/atomic"
	"time"

	"github.com/tokenvault/tokenvault/internal/bounded"
)

// credentialCache remembers what a credential resolved to, by the
// credential's SHA-256 digest (never the credential): the principal of an
// API key, and the proxy and tenant of a proxy key. A request with a known
// credential costs no storage read to resolve it.
//
// Every entry carries the generation it was read at. The generation moves
// on after any transaction that wrote a record a resolution is made of — a
// tenant, an application, a proxy, an API or proxy key index entry or a
// data key (see credentialKV) — which drops every entry at once. An entry
// read while such a write was committing is stamped with the generation
// from before the read began, so it is dropped by that write's bump: a
// request that starts after a key revoke, an application, proxy or tenant
// change or a tenant delete has returned always sees it.
type credentialCache struct {
	// trusted, when set, reports whether entries may be used: with an
	// engine shared by several processes, only while change notices flow.
	trusted    func() bool
	generation atomic.Uint64
	principals *bounded.Map[cachedPrincipal] // by API key digest
	proxies    *bounded.Map[cachedProxy]     // by proxy key digest
}

type cachedPrincipal struct {
	principal  Principal
	generation uint64
}

type cachedProxy struct {
	proxy      *Proxy // shared, as from openCached: never modified
	tenant     *Tenant
	generation uint64
}

func newCredentialCache(max int) *credentialCache {
	max = cmp.Or(max, DefaultRecordCacheEntries)
	return &credentialCache{principals: bounded.New[cachedPrincipal](max), proxies: bounded.New[cachedProxy](max)}
}

// principal returns a copy of the principal cached for an API key digest,
// if it is current.
func (c *credentialCache) principal(digest string) (*Principal, bool) {
	if c.trusted != nil && !c.trusted() {
		return nil, false
	}
	e, ok := c.principals.Get(digest)
	if !ok || e.generation != c.generation.Load() {
		return nil, false
	}
	p := e.principal
	return &p, true
}

// rememberPrincipal caches p for an API key digest as read at generation.
func (c *credentialCache) rememberPrincipal(digest string, generation uint64, p *Principal) {
	c.principals.Put(digest, cachedPrincipal{principal: *p, generation: generation})
}

// proxy returns the proxy and tenant cached for a proxy key digest, if
// they are current. Both are shared and must not be modified.
func (c *credentialCache) proxy(digest string) (*Proxy, *Tenant, bool) {
	if c.trusted != nil && !c.trusted() {
		return nil, nil, false
	}
	e, ok := c.proxies.Get(digest)
	if !ok || e.generation != c.generation.Load() {
		return nil, nil, false
	}
	return e.proxy, e.tenant, true
}

// rememberProxy caches a proxy key's proxy and tenant as read at
// generation.
func (c *credentialCache) rememberProxy(digest string, generation uint64, p *Proxy, t *Tenant) {
	c.proxies.Put(digest, cachedProxy{proxy: p, tenant: t, generation: generation})
}

// invalidate makes every cached resolution stale.
func (c *credentialCache) invalidate() { c.generation.Add(1) }

// credentialKV is the store's engine as the rest of the store sees it: it
// tells the credential cache when a transaction wrote a record that
// credentials resolve to.
type credentialKV struct {
	KV
	cache *credentialCache
}

// Unwrap returns the engine underneath.
func (kv credentialKV) Unwrap() KV { return kv.KV }

func (kv credentialKV) Update(ctx context.Context, fn func(Writer) error) error {
	touched := false
	err := kv.KV.Update(ctx, func(w Writer) error { return fn(credentialWriter{w, &touched}) })
	if touched {
		kv.cache.invalidate()
	}
	return err
}

func (kv credentialKV) DeletePrefix(ctx context.Context, prefix []byte) error {
	err := kv.KV.DeletePrefix(ctx, prefix)
	kv.cache.invalidate()
	return err
}

type credentialWriter struct {
	Writer
	touched *bool
}

func (w credentialWriter) Put(key, value []byte, ttl time.Duration) error {
	if credentialRecord(key) {
		*w.touched = true
	}
	return w.Writer.Put(key, value, ttl)
}

func (w credentialWriter) Delete(key []byte) error {
	if credentialRecord(key) {
		*w.touched = true
	}
	return w.Writer.Delete(key)
}

// credentialRecord reports whether key holds part of what a credential
// resolves to: a tenant record, a data key, an API or proxy key index
// entry, an application or a proxy record.
func credentialRecord(key []byte) bool {
	for _, p := range credentialPrefixes {
		if bytes.HasPrefix(key, p) {
			return true
		}
	}
	// v1/t/{tenant}/app/{application}, v1/t/{tenant}/proxy/{proxy}
	rest, ok := bytes.CutPrefix(key, tenantDataRoot)
	if !ok {
		return false
	}
	if i := bytes.IndexByte(rest, '/'); i >= 0 {
		return bytes.HasPrefix(rest[i:], applicationSegment) || bytes.HasPrefix(rest[i:], proxySegment)
	}
	return false
}

var (
	credentialPrefixes = [][]byte{
		[]byte(keyVersion + "tenant/"),
		[]byte(keyVersion + "dek/"),
		[]byte(keyVersion + "apikey/"),
		[]byte(keyVersion + "proxykey/"),
	}
	tenantDataRoot     = []byte(keyVersion + "t/")
	applicationSegment = []byte("/app/")
	proxySegment       = []byte("/proxy/")
)

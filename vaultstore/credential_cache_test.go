package vaultstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/tokenvault/tokenvault/vaultstore/kv/badgerkv"
)

// Every change that alters what a key resolves to is seen by the very next
// Authenticate, although the key's principal was cached just before it.
func TestAuthenticateSeesChangesToACachedPrincipal(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, s *Store, ct *CreatedTenant, key string)
		check  func(t *testing.T, p *Principal, err error)
	}{
		{
			name: "key revoked",
			change: func(t *testing.T, s *Store, ct *CreatedTenant, key string) {
				p, _ := s.Authenticate(ctx, key)
				if err := s.DeleteKey(ctx, ct.Tenant.ID, ct.Application.ID, p.KeyID, "test"); err != nil {
					t.Fatal(err)
				}
			},
			check: wantUnauthenticated,
		},
		{
			name: "application deleted",
			change: func(t *testing.T, s *Store, ct *CreatedTenant, key string) {
				if err := s.DeleteApplication(ctx, ct.Tenant.ID, ct.Application.ID, "test"); err != nil {
					t.Fatal(err)
				}
			},
			check: wantUnauthenticated,
		},
		{
			name: "tenant deleted",
			change: func(t *testing.T, s *Store, ct *CreatedTenant, key string) {
				if err := s.DeleteTenant(ctx, ct.Tenant.ID); err != nil {
					t.Fatal(err)
				}
			},
			check: wantUnauthenticated,
		},
		{
			name: "application permissions changed",
			change: func(t *testing.T, s *Store, ct *CreatedTenant, key string) {
				in := ApplicationInput{Name: "renamed", Type: ct.Application.Type, Permissions: []string{"tenant:read"}}
				if _, err := s.UpdateApplication(ctx, ct.Tenant.ID, ct.Application.ID, "test", in); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, p *Principal, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if p.Application.Name != "renamed" || !slices.Equal(p.Application.Permissions, []string{"tenant:read"}) {
					t.Errorf("application after the update: %q %v", p.Application.Name, p.Application.Permissions)
				}
			},
		},
		{
			name: "tenant settings changed",
			change: func(t *testing.T, s *Store, ct *CreatedTenant, key string) {
				in := TenantUpdate{Name: "renamed", Settings: map[string]string{"deduplicate_tokens": "true"}}
				if _, err := s.UpdateTenant(ctx, ct.Tenant.ID, "test", in); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, p *Principal, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if p.Tenant.Name != "renamed" || p.Tenant.Settings["deduplicate_tokens"] != "true" {
					t.Errorf("tenant after the update: %q %v", p.Tenant.Name, p.Tenant.Settings)
				}
			},
		},
		{
			name: "tenant quotas changed",
			change: func(t *testing.T, s *Store, ct *CreatedTenant, key string) {
				limit := 7
				if _, err := s.UpdateQuotas(ctx, ct.Tenant.ID, QuotasUpdate{TokenizeLimit: &limit}); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, p *Principal, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if p.Tenant.Quotas.TokenizeLimit != 7 {
					t.Errorf("tokenize limit after the update: %d", p.Tenant.Quotas.TokenizeLimit)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newTestStore(t)
			ct := mustCreateTenant(t, s, "Cached", TenantTest)
			for range 2 { // the second is served from the cache
				if _, err := s.Authenticate(ctx, ct.Key); err != nil {
					t.Fatal(err)
				}
			}
			if _, ok := s.credentials.principal(keyDigest(ct.Key)); !ok {
				t.Fatal("the principal is not cached after two authentications")
			}
			tc.change(t, s, ct, ct.Key)
			p, err := s.Authenticate(ctx, ct.Key)
			tc.check(t, p, err)
		})
	}
}

// Every change that alters what a proxy key resolves to is seen by the
// very next ProxyByKey, although the key's proxy was cached just before it.
func TestProxyByKeySeesChangesToACachedProxy(t *testing.T) {
	ctx := context.Background()
	const dest = "https://api.example.com/v1"
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, s *Store, ct *CreatedTenant, p *Proxy)
		check  func(t *testing.T, p *Proxy, tn *Tenant, err error)
	}{
		{
			name: "proxy deleted",
			change: func(t *testing.T, s *Store, ct *CreatedTenant, p *Proxy) {
				if err := s.DeleteProxy(ctx, ct.Tenant.ID, p.ID, "test"); err != nil {
					t.Fatal(err)
				}
			},
			check: wantProxyNotFound,
		},
		{
			name: "tenant deleted",
			change: func(t *testing.T, s *Store, ct *CreatedTenant, p *Proxy) {
				if err := s.DeleteTenant(ctx, ct.Tenant.ID); err != nil {
					t.Fatal(err)
				}
			},
			check: wantProxyNotFound,
		},
		{
			name: "destination and authentication changed",
			change: func(t *testing.T, s *Store, ct *CreatedTenant, p *Proxy) {
				requireAuth := true
				in := ProxyInput{Name: "moved", DestinationURL: "https://other.example.com/v2", RequireAuth: &requireAuth}
				if _, err := s.UpdateProxy(ctx, ct.Tenant.ID, p.ID, "test", in, nil); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, p *Proxy, _ *Tenant, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if p.DestinationURL != "https://other.example.com/v2" || !p.RequireAuth {
					t.Errorf("proxy after the update: %s, require_auth %v", p.DestinationURL, p.RequireAuth)
				}
			},
		},
		{
			name: "tenant settings changed",
			change: func(t *testing.T, s *Store, ct *CreatedTenant, p *Proxy) {
				in := TenantUpdate{Name: "renamed", Settings: map[string]string{"disable_ephemeral_proxy": "true"}}
				if _, err := s.UpdateTenant(ctx, ct.Tenant.ID, "test", in); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, _ *Proxy, tn *Tenant, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if tn.Name != "renamed" || tn.Settings["disable_ephemeral_proxy"] != "true" {
					t.Errorf("tenant after the update: %q %v", tn.Name, tn.Settings)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newTestStore(t)
			ct := mustCreateTenant(t, s, "Cached", TenantTest)
			p := mustCreateProxy(t, s, ct.Tenant.ID, ProxyInput{Name: "pay", DestinationURL: dest})
			for range 2 { // the second is served from the cache
				if _, _, err := s.ProxyByKey(ctx, p.Key); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, ok := s.credentials.proxy(keyDigest(p.Key)); !ok {
				t.Fatal("the proxy is not cached after two lookups")
			}
			tc.change(t, s, ct, p)
			got, tn, err := s.ProxyByKey(ctx, p.Key)
			tc.check(t, got, tn, err)
		})
	}
}

func wantProxyNotFound(t *testing.T, p *Proxy, _ *Tenant, err error) {
	t.Helper()
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("ProxyByKey after the change = %+v, %v; want ErrNotFound", p, err)
	}
}

func wantUnauthenticated(t *testing.T, p *Principal, err error) {
	t.Helper()
	if !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("Authenticate after the change = %+v, %v; want ErrUnauthenticated", p, err)
	}
}

// Token writes do not touch what credentials resolve to, so they leave the
// cache warm.
func TestTokenWritesKeepCredentialsCached(t *testing.T) {
	// With a shared engine the notices of the writes that set this test up
	// arrive a moment later and drop the cache whatever the token write
	// does; that the engine notifies only credential records is tested by
	// TestCredentialRecord and the engine's own watch tests.
	badgerOnly(t)
	w := newTokenWorld(t, nil)
	ct := mustCreateTenant(t, w.s, "Warm", TenantTest)
	w.mustCreate("admin", TokenInput{Type: "token", Data: "first"}) // creates the world's application
	p := mustCreateProxy(t, w.s, ct.Tenant.ID, ProxyInput{Name: "pay", DestinationURL: "https://api.example.com"})
	if _, err := w.s.Authenticate(w.ctx, ct.Key); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.s.ProxyByKey(w.ctx, p.Key); err != nil {
		t.Fatal(err)
	}
	w.mustCreate("admin", TokenInput{Type: "token", Data: "hello"})
	if _, ok := w.s.credentials.principal(keyDigest(ct.Key)); !ok {
		t.Fatal("creating a token dropped the cached principals")
	}
	if _, _, ok := w.s.credentials.proxy(keyDigest(p.Key)); !ok {
		t.Fatal("creating a token dropped the cached proxies")
	}
}

func TestCredentialRecord(t *testing.T) {
	const tenant, app = "11111111-2222-3333-4444-555555555555", "66666666-7777-8888-9999-000000000000"
	for _, tc := range []struct {
		key  []byte
		want bool
	}{
		{tenantKey(tenant), true},
		{dataKeyKey(tenant, 3), true},
		{apiKeyIndexKey("ab12"), true},
		{applicationKey(tenant, app), true},
		{proxyKey(tenant, app), true},
		{proxyKeyIndexKey("cd34"), true},
		{appKeyKey(tenant, app, "k1"), false}, // key metadata: not read by Authenticate
		{tokenKey(tenant, "t1"), false},
		{fingerprintKeyKey(tenant), false},
		{[]byte(keyVersion + "t/" + tenant + "/log/00ff"), false},
		{[]byte(keyVersion + "t/" + tenant + "/tok/app/x"), false},
		{[]byte(keyVersion + "t/"), false},
	} {
		if got := credentialRecord(tc.key); got != tc.want {
			t.Errorf("credentialRecord(%s) = %v, want %v", tc.key, got, tc.want)
		}
	}
}

// The caches hold at most the configured number of entries, and a record
// rewritten under the same key is decoded again, not served stale.
func TestRecordCacheBoundedAndNeverStale(t *testing.T) {
	s := openTestStore(t, Options{Dir: t.TempDir(), RecordCacheEntries: 3})
	ctx := context.Background()
	for i := range 5 {
		ct := mustCreateTenant(t, s, fmt.Sprintf("T%d", i), TenantTest)
		if _, err := s.Authenticate(ctx, ct.Key); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.records.len(); n > 3 {
		t.Errorf("record cache holds %d entries, want at most 3", n)
	}
	if n := s.credentials.principals.Len(); n > 3 {
		t.Errorf("principal cache holds %d entries, want at most 3", n)
	}

	// A record cache entry is checked against the stored bytes: the same
	// key with other bytes is a miss.
	key := []byte("v1/tenant/x")
	s.records.remember(key, []byte("sealed-1"), &Tenant{Name: "old"})
	if _, ok := s.records.lookup(key, []byte("sealed-2")); ok {
		t.Error("a cached record was served for different stored bytes")
	}
	if v, ok := s.records.lookup(key, []byte("sealed-1")); !ok || v.(*Tenant).Name != "old" {
		t.Errorf("lookup with the same bytes = %v, %v", v, ok)
	}
}

// tenantForWrite hands out a copy: changing it does not change what the
// next reader of the cached tenant gets.
func TestTenantForWriteReturnsACopy(t *testing.T) {
	s, _ := newTestStore(t)
	ct := mustCreateTenant(t, s, "Copy", TenantTest)
	err := s.kv.Update(context.Background(), func(w Writer) error {
		for range 2 {
			_, tenant, err := s.tenantForWrite(w, ct.Tenant.ID)
			if err != nil {
				return err
			}
			if tenant.Settings["deduplicate_tokens"] != "false" {
				t.Errorf("setting changed by an earlier caller: %v", tenant.Settings)
			}
			tenant.Settings["deduplicate_tokens"] = "true"
			tenant.Name = "changed"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The storage engine's block cache is bounded by default and takes the
// size the options give; no index cache is allocated, since Badger reads
// the indexes of the tables it does not encrypt from their files.
func TestEngineCacheSizes(t *testing.T) {
	badgerOnly(t)
	for _, tc := range []struct {
		name      string
		block     int64
		wantBlock int64
	}{
		{"default", 0, badgerkv.DefaultBlockCacheBytes},
		{"configured", 32 << 20, 32 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t, Options{Dir: t.TempDir(), BlockCacheBytes: tc.block})
			bk, ok := engineAs[*badgerkv.Store](s.kv)
			if !ok {
				t.Fatal("no Badger engine")
			}
			opts := bk.DB().Opts()
			if opts.BlockCacheSize != tc.wantBlock || opts.IndexCacheSize != 0 {
				t.Errorf("block cache %d, index cache %d; want %d, 0", opts.BlockCacheSize, opts.IndexCacheSize, tc.wantBlock)
			}
			if bk.DB().IndexCacheMetrics() != nil {
				t.Error("Badger allocated an index cache")
			}
		})
	}
}

// A proxy read through its key, then changed or deleted, is read fresh:
// the decoded copy in memory is never served for a rewritten record.
func TestProxyByKeySeesChanges(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := context.Background()
	ct := mustCreateTenant(t, s, "Proxies", TenantTest)
	p := mustCreateProxy(t, s, ct.Tenant.ID, ProxyInput{Name: "p", DestinationURL: "https://one.example.com/"})
	for range 2 {
		got, _, err := s.ProxyByKey(ctx, p.Key)
		if err != nil || got.DestinationURL != "https://one.example.com/" {
			t.Fatalf("ProxyByKey = %+v, %v", got, err)
		}
	}
	if _, err := s.UpdateProxy(ctx, ct.Tenant.ID, p.ID, "actor", ProxyInput{Name: "p", DestinationURL: "https://two.example.com/"}, nil); err != nil {
		t.Fatal(err)
	}
	if got, _, err := s.ProxyByKey(ctx, p.Key); err != nil || got.DestinationURL != "https://two.example.com/" {
		t.Fatalf("ProxyByKey after the update = %+v, %v", got, err)
	}
	if err := s.DeleteProxy(ctx, ct.Tenant.ID, p.ID, "actor"); err != nil {
		t.Fatal(err)
	}
	if got, _, err := s.ProxyByKey(ctx, p.Key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ProxyByKey after the delete = %+v, %v", got, err)
	}
}

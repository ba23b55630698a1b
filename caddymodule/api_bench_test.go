package caddymodule

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// newTestAPI wires the handler to a fresh on-disk store, as Provision
// does inside Caddy.
func newTestAPI(tb testing.TB, syncWrites bool) (*API, *vaultstore.Store) {
	tb.Helper()
	store, err := vaultstore.Open(vaultstore.Options{Dir: tb.TempDir(), MasterKey: make([]byte, vaultstore.MasterKeySize), SyncWrites: syncWrites})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	h := &API{}
	h.wire(newTestApp(tb, store, nil), zap.NewNop())
	return h, store
}

// newTestApp is a vault app around store, as Provision leaves it, with
// the egress policy of cfg (nil: the default).
func newTestApp(tb testing.TB, store *vaultstore.Store, cfg *EgressConfig) *App {
	tb.Helper()
	policy, err := cfg.policy()
	if err != nil {
		tb.Fatal(err)
	}
	app := &App{HeaderPrefix: "SVC", Egress: cfg, egress: policy, transport: policy.Transport(), workers: sharedTestWorkers(tb)}
	app.opened(store)
	tb.Cleanup(app.transport.CloseIdleConnections)
	return app
}

// BenchmarkAPIAuthenticatedGet measures one authenticated API call through
// the handler: routing, key check, key → application and tenant lookup,
// response encoding.
func BenchmarkAPIAuthenticatedGet(b *testing.B) {
	h, store := newTestAPI(b, false)
	created, err := store.CreateTenant(context.Background(), vaultstore.NewTenant{Name: "bench", Type: vaultstore.TenantTest})
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/applications/key", nil)
	req.Header.Set("SVC-API-KEY", created.Key)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req.Clone(req.Context()), nil)
			if w.Code != http.StatusOK {
				b.Fatalf("status %d", w.Code)
			}
		}
	})
}

// BenchmarkAPIRejectMalformedKey measures the refusal of a junk key,
// which must cost no storage read.
func BenchmarkAPIRejectMalformedKey(b *testing.B) {
	h, _ := newTestAPI(b, false)
	req := httptest.NewRequest(http.MethodGet, "/tenants/self", nil)
	req.Header.Set("SVC-API-KEY", "key_test_notarealkeyatall")
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req, nil)
		if w.Code != http.StatusUnauthorized {
			b.Fatalf("status %d", w.Code)
		}
	}
}

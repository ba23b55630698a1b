package vaultstore

import (
	"context"
	"testing"
)

// BenchmarkAuthenticate measures the key → tenant and application path
// on disk, with a warm data-key cache.
func BenchmarkAuthenticate(b *testing.B) {
	ctx := context.Background()
	s := openTestStore(b, Options{Dir: b.TempDir(), SyncWrites: false})
	ct := mustCreateTenant(b, s, "Bench", TenantTest)
	_, key := mustCreateApp(b, s, ct.Tenant.ID, privateApp("bench"))
	if _, err := s.Authenticate(ctx, key.Key); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p, err := s.Authenticate(ctx, key.Key)
		if err != nil || p.Application.Type != AppPrivate {
			b.Fatalf("Authenticate = %v, %v", p, err)
		}
	}
}

// BenchmarkCreateApplication measures creating an application with its
// first key, with and without synchronous writes.
func BenchmarkCreateApplication(b *testing.B) {
	for _, tc := range []struct {
		name string
		sync bool
	}{
		{"SyncWrites=false", false},
		{"SyncWrites=true", true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			s := openTestStore(b, Options{Dir: b.TempDir(), SyncWrites: tc.sync})
			ct := mustCreateTenant(b, s, "Bench", TenantTest)
			in := privateApp("bench")
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, _, err := s.CreateApplication(ctx, ct.Tenant.ID, "actor", in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

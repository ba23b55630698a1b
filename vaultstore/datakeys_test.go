package vaultstore

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tokenvault/tokenvault/vaultstore/internal/seal"
)

// testTenantKeys holds data key versions 1..n, version v filled with the
// byte v; the newest seals.
func testTenantKeys(tb testing.TB, versions ...uint32) *tenantKeys {
	tb.Helper()
	tk := &tenantKeys{DataKeys: seal.NewDataKeys()}
	for _, v := range versions {
		if err := tk.Add(v, bytes.Repeat([]byte{byte(v)}, MasterKeySize)); err != nil {
			tb.Fatal(err)
		}
	}
	return tk
}

// A sealed record is bound to its kind, tenant and id: it cannot be moved.
func TestRecordBinding(t *testing.T) {
	tk := testTenantKeys(t, 1, 2)
	sealed, err := tk.sealRecord("application", "tenant-a", "app-1", map[string]string{"name": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := sealedVersion(sealed); v != 2 {
		t.Errorf("sealed under version %d, want current 2", v)
	}
	var ok map[string]string
	if err := tk.openRecord("application", "tenant-a", "app-1", sealed, &ok); err != nil || ok["name"] != "x" {
		t.Fatalf("openRecord = %v, %v", ok, err)
	}
	otherTenant := &tenantKeys{DataKeys: seal.NewDataKeys()}
	if err := otherTenant.Add(2, bytes.Repeat([]byte{3}, MasterKeySize)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name             string
		tk               *tenantKeys
		kind, tenant, id string
		sealed           []byte
	}{
		{"other id", tk, "application", "tenant-a", "app-2", sealed},
		{"other kind", tk, "apikey", "tenant-a", "app-1", sealed},
		{"other tenant", tk, "application", "tenant-b", "app-1", sealed},
		{"other tenant's keys", otherTenant, "application", "tenant-a", "app-1", sealed},
		{"unknown key version", testTenantKeys(t, 1), "application", "tenant-a", "app-1", sealed},
		{"garbage", tk, "application", "tenant-a", "app-1", []byte("garbage")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v map[string]string
			if err := tc.tk.openRecord(tc.kind, tc.tenant, tc.id, tc.sealed, &v); !errors.Is(err, ErrIntegrity) {
				t.Errorf("openRecord error = %v, want ErrIntegrity", err)
			}
		})
	}
}

// BenchmarkSealRecord measures what every stored record pays to be
// sealed and opened: a card token's record encoded and sealed under a
// tenant key, then opened and decoded (seal's BenchmarkSealOpen has
// AES-GCM alone).
func BenchmarkSealRecord(b *testing.B) {
	rec, _ := codecBenchCard(b)
	tk := testTenantKeys(b, 1)
	sealedRec, err := tk.sealRecord("token", rec.TenantID, rec.ID, rec)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("SealRecord/card", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, err := tk.sealRecord("token", rec.TenantID, rec.ID, rec)
			if err != nil {
				b.Fatal(err)
			}
			codecSink = out
		}
	})
	b.Run("OpenRecord/card", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got tokenRecord
			if err := tk.openRecord("token", rec.TenantID, rec.ID, sealedRec, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
}

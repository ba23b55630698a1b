package vaultstore

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"
)

// clientPublicKey reads the public key a creation answered, as the vendor's
// Elements read it: PEM armour around the raw 32 bytes.
func clientPublicKey(t *testing.T, k *ClientKey) *ecdh.PublicKey {
	t.Helper()
	block, rest := pem.Decode([]byte(k.PublicKeyPEM))
	if block == nil || block.Type != "PUBLIC KEY" || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("public_key_pem is not one PUBLIC KEY block: %q", k.PublicKeyPEM)
	}
	if len(block.Bytes) != 32 {
		t.Fatalf("the PEM holds %d bytes, want the raw 32 of an X25519 key (not SPKI)", len(block.Bytes))
	}
	pub, err := ecdh.X25519().NewPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// TestClientKeyLifecycle: a key is made with its public half shown once,
// read and listed as metadata only, and refuses once deleted.
func TestClientKeyLifecycle(t *testing.T) {
	s, clock := newTestStore(t)
	ctx := context.Background()
	tn := mustCreateTenant(t, s, "keys", TenantTest)
	created := clock.Peek()
	k, err := s.CreateClientKey(ctx, tn.Tenant.ID, "actor", ClientKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	clientPublicKey(t, k)
	if k.KeyID != k.ID || !isID(k.ID) || k.TenantID != tn.Tenant.ID || k.CreatedBy != "actor" {
		t.Errorf("created key: %+v", k)
	}
	if got := k.ExpiresAt.Sub(created); got < DefaultClientKeyLifetime-time.Minute || got > DefaultClientKeyLifetime+time.Minute {
		t.Errorf("default lifetime %v, want %v", got, DefaultClientKeyLifetime)
	}
	got, err := s.GetClientKey(ctx, tn.Tenant.ID, k.ID)
	if err != nil || got.PublicKeyPEM != "" || got.KeyID != k.ID || !got.ExpiresAt.Equal(k.ExpiresAt.Time) {
		t.Errorf("GetClientKey: %+v, %v", got, err)
	}
	list, err := s.ListClientKeys(ctx, tn.Tenant.ID)
	if err != nil || len(list) != 1 || list[0].KeyID != k.ID || list[0].PublicKeyPEM != "" {
		t.Errorf("ListClientKeys: %+v, %v", list, err)
	}
	raw, _ := json.Marshal(list)
	if strings.Contains(string(raw), "private") || strings.Contains(string(raw), "PUBLIC KEY") {
		t.Errorf("the listing shows key material: %s", raw)
	}
	other := mustCreateTenant(t, s, "other", TenantTest)
	if _, err := s.GetClientKey(ctx, other.Tenant.ID, k.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("another tenant reads the key: %v", err)
	}
	if err := s.DeleteClientKey(ctx, other.Tenant.ID, k.ID, "actor"); !errors.Is(err, ErrNotFound) {
		t.Errorf("another tenant deletes the key: %v", err)
	}
	if err := s.DeleteClientKey(ctx, tn.Tenant.ID, k.ID, "actor"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetClientKey(ctx, tn.Tenant.ID, k.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("a deleted key reads: %v", err)
	}
	if err := s.DeleteClientKey(ctx, tn.Tenant.ID, k.ID, "actor"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting twice: %v", err)
	}
	logs, _, err := s.ListAudit(ctx, tn.Tenant.ID, AuditFilter{EntityType: "client-key"}, "", 10)
	if err != nil || len(logs) != 2 {
		t.Errorf("audit records of the key: %d, %v", len(logs), err)
	}
}

// TestClientKeyExpiresAt: expires_at must be in the future and within a
// year, and is refused naming the field.
func TestClientKeyExpiresAt(t *testing.T) {
	s, clock := newTestStore(t)
	ctx := context.Background()
	tn := mustCreateTenant(t, s, "keys", TenantTest)
	now := clock.Peek()
	for _, tc := range []struct{ name, at string }{
		{"past", now.Add(-time.Hour).Format(time.RFC3339)},
		{"over a year", now.Add(MaxClientKeyLifetime + 24*time.Hour).Format(time.RFC3339)},
		{"not a date", "soon"},
	} {
		_, err := s.CreateClientKey(ctx, tn.Tenant.ID, "actor", ClientKeyInput{ExpiresAt: tc.at})
		if f := validationFields(t, err); len(f) != 1 || f[0] != "expires_at" {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	at := now.Add(48 * time.Hour).Truncate(time.Second)
	k, err := s.CreateClientKey(ctx, tn.Tenant.ID, "actor", ClientKeyInput{ExpiresAt: at.Format(time.RFC3339)})
	if err != nil || !k.ExpiresAt.Equal(at) {
		t.Errorf("a key for two days: %+v, %v", k, err)
	}
}

// TestClientKeyAgreement: the store's X25519 agrees with the sender's,
// and refuses an unknown, deleted, expired or other tenant's key and a
// public key that is not one, all alike.
func TestClientKeyAgreement(t *testing.T) {
	s, clock := newTestStore(t)
	ctx := context.Background()
	tn := mustCreateTenant(t, s, "keys", TenantTest)
	other := mustCreateTenant(t, s, "other", TenantTest)
	k, err := s.CreateClientKey(ctx, tn.Tenant.ID, "actor", ClientKeyInput{ExpiresAt: clock.Peek().Add(time.Hour).Format(time.RFC3339Nano)})
	if err != nil {
		t.Fatal(err)
	}
	pub := clientPublicKey(t, k)
	eph, err := ecdh.X25519().GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := eph.ECDH(pub)
	if err != nil {
		t.Fatal(err)
	}
	z, err := s.ClientKeyAgreement(ctx, tn.Tenant.ID, k.ID, eph.PublicKey().Bytes())
	if err != nil || !bytes.Equal(z, want) {
		t.Fatalf("agreement: %x, %v; want %x", z, err, want)
	}
	gone, _ := s.CreateClientKey(ctx, tn.Tenant.ID, "actor", ClientKeyInput{})
	if err := s.DeleteClientKey(ctx, tn.Tenant.ID, gone.ID, "actor"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, tenant, key string
		peer              []byte
	}{
		{"unknown key", tn.Tenant.ID, "5b7c0ab8-0c54-4e4b-a1e4-0e9d6a1d3a4c", eph.PublicKey().Bytes()},
		{"not an id", tn.Tenant.ID, "../ckey", eph.PublicKey().Bytes()},
		{"deleted key", tn.Tenant.ID, gone.ID, eph.PublicKey().Bytes()},
		{"another tenant's key", other.Tenant.ID, k.ID, eph.PublicKey().Bytes()},
		{"short public key", tn.Tenant.ID, k.ID, eph.PublicKey().Bytes()[:31]},
		{"low-order point", tn.Tenant.ID, k.ID, make([]byte, 32)},
	} {
		if _, err := s.ClientKeyAgreement(ctx, tc.tenant, tc.key, tc.peer); !errors.Is(err, ErrClientKeyUnusable) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	clock.Advance(time.Hour)
	if _, err := s.ClientKeyAgreement(ctx, tn.Tenant.ID, k.ID, eph.PublicKey().Bytes()); !errors.Is(err, ErrClientKeyUnusable) {
		t.Errorf("expired key: %v", err)
	}
	if _, err := s.GetClientKey(ctx, tn.Tenant.ID, k.ID); err != nil {
		t.Errorf("an expired key's metadata still reads: %v", err)
	}
}

// TestClientKeySealed: the private key is stored sealed, never in clear.
func TestClientKeySealed(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := context.Background()
	tn := mustCreateTenant(t, s, "keys", TenantTest)
	k, err := s.CreateClientKey(ctx, tn.Tenant.ID, "actor", ClientKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	var rec clientKeyRecord
	err = s.kv.View(ctx, func(r Reader) error {
		raw, err := r.Get(clientKeyKey(tn.Tenant.ID, k.ID))
		if err != nil {
			return err
		}
		if bytes.Contains(raw, []byte("private_key")) {
			t.Error("the stored record is readable JSON")
		}
		tk, err := s.tenantKeysFor(r, tn.Tenant.ID)
		if err != nil {
			return err
		}
		if err := tk.openRecord("clientkey", tn.Tenant.ID, k.ID, raw, &rec); err != nil {
			return err
		}
		if bytes.Contains(raw, rec.PrivateKey) {
			t.Error("the private key is stored in clear")
		}
		return nil
	})
	if err != nil || len(rec.PrivateKey) != 32 {
		t.Fatalf("reading the record: %v (%d private bytes)", err, len(rec.PrivateKey))
	}
}

package vaultstore

import (
	"context"
	"crypto/ecdh"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Client encryption keys let a browser or a mobile app encrypt data to
// the vault, so that no server in between sees it in clear. Each is an
// X25519 key pair: the public half is handed out once, when the key is
// made, as its raw 32 bytes in PEM armour (the form the vendor's Elements
// read); the private half is sealed with the rest of the record under the
// tenant's data key and is used only inside this package, for the key
// agreement of a JWE's ECDH-ES (ClientKeyAgreement).
//
//	v1/t/{tenant}/ckey/{key}   client key record, sealed (holds the private key)

// MaxClientKeyLifetime is the longest a client encryption key may live
// (the vendor's limit).
const MaxClientKeyLifetime = 366 * 24 * time.Hour

// DefaultClientKeyLifetime is how long a key made without expires_at
// lives.
const DefaultClientKeyLifetime = 365 * 24 * time.Hour

// ErrClientKeyUnusable reports a key id that cannot decrypt: unknown,
// deleted, expired or another tenant's. Callers show no more than that.
var ErrClientKeyUnusable = errors.New("client encryption key is unknown or expired")

// ClientKey is a client encryption key as the API shows it. PublicKeyPEM
// is set only in the answer to its creation.
type ClientKey struct {
	ID           string     `json:"id"`
	KeyID        string     `json:"key_id"`
	TenantID     string     `json:"tenant_id"`
	PublicKeyPEM string     `json:"public_key_pem,omitempty"`
	ExpiresAt    *Timestamp `json:"expires_at"`
	CreatedBy    string     `json:"created_by,omitempty"`
	CreatedAt    *Timestamp `json:"created_at,omitempty"`
}

// ClientKeyInput is the body of POST /keys.
type ClientKeyInput struct {
	ExpiresAt string `json:"expires_at"`
}

// clientKeyRecord is what is stored, sealed.
type clientKeyRecord struct {
	ID         string     `json:"id"`
	TenantID   string     `json:"tenant_id"`
	PrivateKey []byte     `json:"private_key"`
	ExpiresAt  *Timestamp `json:"expires_at"`
	CreatedBy  string     `json:"created_by,omitempty"`
	CreatedAt  *Timestamp `json:"created_at,omitempty"`
}

func (r *clientKeyRecord) created() *Timestamp { return r.CreatedAt }

func (r *clientKeyRecord) view() *ClientKey {
	return &ClientKey{ID: r.ID, KeyID: r.ID, TenantID: r.TenantID, ExpiresAt: r.ExpiresAt, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt}
}

func clientKeyKey(tenantID, id string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/ckey/" + id)
}

func clientKeyPrefix(tenantID string) []byte { return []byte(keyVersion + "t/" + tenantID + "/ckey/") }

// PublicKeyPEM armours a raw X25519 public key as the vendor hands it
// out: "PUBLIC KEY" around the 32 bytes themselves, not an SPKI structure.
func PublicKeyPEM(raw []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: raw}))
}

// CreateClientKey makes a key pair for the tenant. The answer carries the
// public key; no later answer does.
func (s *Store) CreateClientKey(ctx context.Context, tenantID, actorID string, in ClientKeyInput) (*ClientKey, error) {
	now := s.now()
	expires := now.Add(DefaultClientKeyLifetime)
	if in.ExpiresAt != "" {
		at, err := ParseExpiresAt(in.ExpiresAt, now)
		if err != nil {
			return nil, err
		}
		if at.Sub(now) > MaxClientKeyLifetime {
			return nil, invalid("expires_at", "expires_at must be at most a year from now")
		}
		expires = at
	}
	priv, err := ecdh.X25519().GenerateKey(nil)
	if err != nil {
		return nil, fmt.Errorf("generating a client key: %w", err)
	}
	rec := &clientKeyRecord{ID: uuid.NewString(), TenantID: tenantID, PrivateKey: priv.Bytes(),
		ExpiresAt: &Timestamp{expires}, CreatedBy: actorID, CreatedAt: stamp(now)}
	defer clear(rec.PrivateKey)
	err = s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		if err := s.writeAudit(w, tk, t, byActor(actorID, "client-key", rec.ID, "create", "client encryption key created")); err != nil {
			return err
		}
		return putSealed(w, tk, "clientkey", tenantID, rec.ID, clientKeyKey(tenantID, rec.ID), rec)
	})
	if err != nil {
		return nil, err
	}
	out := rec.view()
	out.PublicKeyPEM = PublicKeyPEM(priv.PublicKey().Bytes())
	return out, nil
}

// GetClientKey returns a key's metadata (never its public or private key).
func (s *Store) GetClientKey(ctx context.Context, tenantID, id string) (*ClientKey, error) {
	rec, err := getRecord[clientKeyRecord](ctx, s, "clientkey", tenantID, id, clientKeyKey(tenantID, id))
	if err != nil {
		return nil, err
	}
	clear(rec.PrivateKey)
	return rec.view(), nil
}

// ListClientKeys returns the metadata of the tenant's keys, oldest first,
// expired ones included.
func (s *Store) ListClientKeys(ctx context.Context, tenantID string) ([]*ClientKey, error) {
	recs, err := listRecords[clientKeyRecord](ctx, s, "clientkey", tenantID, clientKeyPrefix(tenantID))
	if err != nil {
		return nil, err
	}
	out := make([]*ClientKey, 0, len(recs))
	for _, r := range recs {
		clear(r.PrivateKey)
		out = append(out, r.view())
	}
	return out, nil
}

// DeleteClientKey destroys a key: data encrypted to it can no longer be
// decrypted.
func (s *Store) DeleteClientKey(ctx context.Context, tenantID, id, actorID string) error {
	return deleteRecord(ctx, s, tenantID, id, clientKeyKey(tenantID, id), deleted(byActor(actorID, "client-key", id, "delete", "client encryption key deleted")))
}

// ClientKeyAgreement runs X25519 between the tenant's key id and a
// sender's ephemeral public key, and returns the shared secret (the Z of
// RFC 7518's ECDH-ES). The private key never leaves this function. Any
// failure (an unknown, deleted or expired key, a key of another tenant, a
// public key of the wrong length or of low order) is
// ErrClientKeyUnusable, or a storage error.
func (s *Store) ClientKeyAgreement(ctx context.Context, tenantID, keyID string, peer []byte) ([]byte, error) {
	if !isID(keyID) {
		return nil, ErrClientKeyUnusable
	}
	var rec clientKeyRecord
	err := s.kv.View(ctx, func(r Reader) error {
		tk, err := s.tenantKeysFor(r, tenantID)
		if err != nil {
			return err
		}
		return s.getSealed(r, tk, "clientkey", tenantID, keyID, clientKeyKey(tenantID, keyID), &rec)
	})
	defer clear(rec.PrivateKey)
	if errors.Is(err, ErrNotFound) {
		return nil, ErrClientKeyUnusable
	} else if err != nil {
		return nil, err
	}
	if rec.ExpiresAt != nil && !s.now().Before(rec.ExpiresAt.Time) {
		return nil, ErrClientKeyUnusable
	}
	priv, err := ecdh.X25519().NewPrivateKey(rec.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("client key %s: %w", keyID, ErrIntegrity)
	}
	pub, err := ecdh.X25519().NewPublicKey(peer)
	if err != nil {
		return nil, ErrClientKeyUnusable
	}
	z, err := priv.ECDH(pub) // refuses an all-zero result (a low-order point)
	if err != nil {
		return nil, ErrClientKeyUnusable
	}
	return z, nil
}

package vaultstore

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Each tenant has an RSA signing key for its webhooks, made with its
// first webhook, sealed with its data key at v1/t/{tenant}/wh/key. A
// delivery's body is signed with RSASSA-PSS over SHA-256 (salt of the
// hash's length), as the vendor's receivers verify it; the public key is
// what GET /webhooks/signing-key answers.

func webhookSigningKeyKey(tenantID string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/wh/key")
}

// webhookSigningKeyBits is the size of a signing key.
const webhookSigningKeyBits = 2048

// storedSigningKey is the sealed form of a signing key.
type storedSigningKey struct {
	PKCS8     string     `json:"pkcs8"` // base64
	CreatedAt *Timestamp `json:"created_at"`
}

// freshSigningKey is a key generated outside a transaction, to be stored
// when the tenant has none (generation is slow; a retried transaction
// must not repeat it).
type freshSigningKey struct {
	key    *rsa.PrivateKey
	stored storedSigningKey
}

func newWebhookSigningKey(now time.Time) (*freshSigningKey, error) {
	k, err := rsa.GenerateKey(rand.Reader, webhookSigningKeyBits)
	if err != nil {
		return nil, fmt.Errorf("generating a webhook signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return &freshSigningKey{key: k, stored: storedSigningKey{PKCS8: base64.StdEncoding.EncodeToString(der), CreatedAt: stamp(now)}}, nil
}

// WebhookSigningKey is a tenant's public signing key, as receivers fetch it.
type WebhookSigningKey struct {
	// ID names the key; deliveries carry it in a header.
	ID string `json:"id"`
	// Algorithm is RSASSA-PSS with SHA-256.
	Algorithm string `json:"algorithm"`
	// PublicKey is the PEM "PUBLIC KEY" (SubjectPublicKeyInfo).
	PublicKey string `json:"public_key"`
	// CreatedAt is when the tenant's first webhook made the key.
	CreatedAt *Timestamp `json:"created_at"`
}

// signingKey is an opened signing key.
type signingKey struct {
	private *rsa.PrivateKey
	public  WebhookSigningKey
}

func openSigningKey(st *storedSigningKey) (*signingKey, error) {
	der, err := base64.StdEncoding.DecodeString(st.PKCS8)
	if err != nil {
		return nil, fmt.Errorf("webhook signing key: %w", ErrIntegrity)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(der)
	clear(der)
	if err != nil {
		return nil, fmt.Errorf("webhook signing key: %w", ErrIntegrity)
	}
	k, ok := parsed.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("webhook signing key: not RSA: %w", ErrIntegrity)
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(pub)
	return &signingKey{private: k, public: WebhookSigningKey{
		ID: hex.EncodeToString(sum[:8]), Algorithm: "RSA-PSS-SHA256",
		PublicKey: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})), CreatedAt: st.CreatedAt,
	}}, nil
}

// ensureSigningKey returns the tenant's signing key, storing fresh (which
// may be nil when the caller knows one exists) when it has none.
func (s *Store) ensureSigningKey(w Writer, tk *tenantKeys, tenantID string, fresh *freshSigningKey) (*signingKey, error) {
	var st storedSigningKey
	err := s.getSealed(w, tk, webhookKind, tenantID, "key", webhookSigningKeyKey(tenantID), &st)
	switch {
	case err == nil:
		return openSigningKey(&st)
	case !errors.Is(err, ErrNotFound) || fresh == nil:
		return nil, err
	}
	if err := putSealed(w, tk, webhookKind, tenantID, "key", webhookSigningKeyKey(tenantID), &fresh.stored); err != nil {
		return nil, err
	}
	return openSigningKey(&fresh.stored)
}

// WebhookSigningKey returns the public half of the tenant's signing key,
// making the key when the tenant has none yet.
func (s *Store) WebhookSigningKey(ctx context.Context, tenantID string) (*WebhookSigningKey, error) {
	k, err := s.signingKeyOf(ctx, tenantID)
	if err != nil && errors.Is(err, ErrNotFound) {
		fresh, gerr := newWebhookSigningKey(s.now())
		if gerr != nil {
			return nil, gerr
		}
		err = s.kv.Update(ctx, func(w Writer) error {
			tk, _, err := s.tenantForWrite(w, tenantID)
			if err != nil {
				return err
			}
			k, err = s.ensureSigningKey(w, tk, tenantID, fresh)
			return err
		})
	}
	if err != nil {
		return nil, err
	}
	pub := k.public
	return &pub, nil
}

// signingKeyOf reads the tenant's signing key; ErrNotFound when it has
// none.
func (s *Store) signingKeyOf(ctx context.Context, tenantID string) (*signingKey, error) {
	if k := s.hooks.cachedKey(tenantID); k != nil {
		return k, nil
	}
	var k *signingKey
	err := s.kv.View(ctx, func(r Reader) error {
		tk, err := s.tenantKeysFor(r, tenantID)
		if err != nil {
			return err
		}
		var st storedSigningKey
		if err := s.getSealed(r, tk, webhookKind, tenantID, "key", webhookSigningKeyKey(tenantID), &st); err != nil {
			return err
		}
		k, err = openSigningKey(&st)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.hooks.cacheKey(tenantID, k)
	return k, nil
}

// sign signs body with RSASSA-PSS over SHA-256, base64.
func (k *signingKey) sign(body []byte) (string, error) {
	sum := sha256.Sum256(body)
	sig, err := rsa.SignPSS(rand.Reader, k.private, crypto.SHA256, sum[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// signingKeys caches opened signing keys by tenant; a key never changes
// once made, and a tenant's id is never reused.
type signingKeys struct {
	mu   sync.Mutex
	keys map[string]*signingKey
}

func (c *signingKeys) get(tenantID string) *signingKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.keys[tenantID]
}

func (c *signingKeys) put(tenantID string, k *signingKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys == nil || len(c.keys) > 10000 {
		c.keys = make(map[string]*signingKey)
	}
	c.keys[tenantID] = k
}

package vaultstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash/crc32"
	"math/big"
	"sort"
	"strings"

	"github.com/google/uuid"
)

// An API key reads key_<env>_<payload><checksum>: env is test or prod
// after the tenant type, payload is 192 random bits in base62, and the
// last six characters are a CRC-32 of everything before them, so junk is
// refused without a storage read. Only the key's SHA-256 digest is
// stored; 192 random bits make a slow hash unnecessary.
const (
	keyRandomBytes = 24
	keyPayloadLen  = 33 // base62 digits of 192 bits
	keyChecksumLen = 6
	base62Digits   = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// IssuedKey is a newly issued API key; Key is shown only this once.
type IssuedKey struct {
	ID        string     `json:"id"`
	Key       string     `json:"key"`
	CreatedBy string     `json:"created_by,omitempty"`
	CreatedAt *Timestamp `json:"created_at"`
}

// APIKey describes an issued key without its secret.
type APIKey struct {
	ID        string     `json:"id"`
	CreatedBy string     `json:"created_by,omitempty"`
	CreatedAt *Timestamp `json:"created_at"`
}

// apiKeyRecord is the stored, sealed metadata of a key.
type apiKeyRecord struct {
	ID            string     `json:"id"`
	ApplicationID string     `json:"application_id"`
	Digest        string     `json:"digest"`
	CreatedBy     string     `json:"created_by,omitempty"`
	CreatedAt     *Timestamp `json:"created_at"`
}

// keyIndexEntry is what a key's digest points at; it holds no secret.
type keyIndexEntry struct {
	TenantID      string `json:"tenant_id"`
	ApplicationID string `json:"application_id"`
	KeyID         string `json:"key_id"`
}

// Principal is an authenticated caller: the key's tenant and application.
// Tenant and Application are shared with other requests: read them, never
// modify them.
type Principal struct {
	Tenant      *Tenant
	Application *Application
	KeyID       string
}

func keyEnv(tenantType string) string {
	if tenantType == TenantProduction {
		return "prod"
	}
	return "test"
}

func base62(b []byte, width int) string {
	n := new(big.Int).SetBytes(b)
	out := make([]byte, width)
	base := big.NewInt(62)
	mod := new(big.Int)
	for i := width - 1; i >= 0; i-- {
		n.DivMod(n, base, mod)
		out[i] = base62Digits[mod.Int64()]
	}
	return string(out)
}

func keyChecksum(body string) string {
	var b [4]byte
	c := crc32.ChecksumIEEE([]byte(body))
	b[0], b[1], b[2], b[3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
	return base62(b[:], keyChecksumLen)
}

// newAPIKey returns a fresh key for a tenant of tenantType.
func newAPIKey(tenantType string) string {
	body := "key_" + keyEnv(tenantType) + "_" + base62(randomBytes(keyRandomBytes), keyPayloadLen)
	return body + keyChecksum(body)
}

// wellFormedKey checks a key's shape and checksum without any storage read.
func wellFormedKey(key string) bool {
	rest, ok := strings.CutPrefix(key, "key_test_")
	if !ok {
		if rest, ok = strings.CutPrefix(key, "key_prod_"); !ok {
			return false
		}
	}
	if len(rest) != keyPayloadLen+keyChecksumLen {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if strings.IndexByte(base62Digits, rest[i]) < 0 {
			return false
		}
	}
	body := key[:len(key)-keyChecksumLen]
	return keyChecksum(body) == key[len(body):]
}

func keyDigest(key string) string {
	d := sha256.Sum256([]byte(key))
	return hex.EncodeToString(d[:])
}

// issueKey creates a key for an application and writes its record and
// index entry. It returns the secret and the record.
func (s *Store) issueKey(w Writer, tk *tenantKeys, t *Tenant, appID, actorID string) (string, *apiKeyRecord, error) {
	key := newAPIKey(t.Type)
	rec := &apiKeyRecord{ID: uuid.NewString(), ApplicationID: appID, Digest: keyDigest(key), CreatedBy: actorID, CreatedAt: s.stampNow()}
	if err := putSealed(w, tk, "apikey", t.ID, rec.ID, appKeyKey(t.ID, appID, rec.ID), rec); err != nil {
		return "", nil, err
	}
	idx, err := json.Marshal(keyIndexEntry{TenantID: t.ID, ApplicationID: appID, KeyID: rec.ID})
	if err != nil {
		return "", nil, err
	}
	if err := w.Put(apiKeyIndexKey(rec.Digest), idx, 0); err != nil {
		return "", nil, err
	}
	return key, rec, nil
}

func (s *Store) listKeyRecords(r Reader, tk *tenantKeys, tenantID, appID string) ([]*apiKeyRecord, error) {
	var out []*apiKeyRecord
	err := r.Scan(appKeyPrefix(tenantID, appID), nil, func(key, raw []byte) error {
		var k apiKeyRecord
		if err := tk.openRecord("apikey", tenantID, lastSegment(key), raw, &k); err != nil {
			return err
		}
		out = append(out, &k)
		return nil
	})
	return out, err
}

func deleteKeyRecord(w Writer, tenantID string, k *apiKeyRecord) error {
	if err := w.Delete(apiKeyIndexKey(k.Digest)); err != nil {
		return err
	}
	return w.Delete(appKeyKey(tenantID, k.ApplicationID, k.ID))
}

// CreateKey issues another key for an application.
func (s *Store) CreateKey(ctx context.Context, tenantID, appID, actorID string) (*IssuedKey, error) {
	if !isID(appID) {
		return nil, ErrNotFound
	}
	var issued *IssuedKey
	err := s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		if _, err := w.Get(applicationKey(tenantID, appID)); err != nil {
			return err
		}
		key, rec, err := s.issueKey(w, tk, t, appID, actorID)
		if err != nil {
			return err
		}
		issued = &IssuedKey{ID: rec.ID, Key: key, CreatedBy: rec.CreatedBy, CreatedAt: rec.CreatedAt}
		return s.writeAudit(w, tk, t, byActor(actorID, "key", rec.ID, "create", "API key issued"))
	})
	if err != nil {
		return nil, err
	}
	return issued, nil
}

// ListKeys describes an application's keys, oldest first, without secrets.
func (s *Store) ListKeys(ctx context.Context, tenantID, appID string) ([]APIKey, error) {
	if !isID(appID) {
		return nil, ErrNotFound
	}
	var out []APIKey
	err := s.kv.View(ctx, func(r Reader) error {
		tk, err := s.tenantKeysFor(r, tenantID)
		if err != nil {
			return err
		}
		if _, err := r.Get(applicationKey(tenantID, appID)); err != nil {
			return err
		}
		recs, err := s.listKeyRecords(r, tk, tenantID, appID)
		for _, k := range recs {
			out = append(out, APIKey{ID: k.ID, CreatedBy: k.CreatedBy, CreatedAt: k.CreatedAt})
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt.Time) })
	return out, nil
}

// DeleteKey revokes one key of an application; its other keys keep working.
func (s *Store) DeleteKey(ctx context.Context, tenantID, appID, keyID, actorID string) error {
	if !isID(appID) || !isID(keyID) {
		return ErrNotFound
	}
	return s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		var k apiKeyRecord
		if err := s.getSealed(w, tk, "apikey", tenantID, keyID, appKeyKey(tenantID, appID, keyID), &k); err != nil {
			return err
		}
		if err := s.writeAudit(w, tk, t, byActor(actorID, "key", keyID, "delete", "API key revoked")); err != nil {
			return err
		}
		return deleteKeyRecord(w, tenantID, &k)
	})
}

// Authenticate resolves an API key to its tenant and application. Every
// failure (malformed, unknown, revoked, tenant gone) is ErrUnauthenticated;
// a malformed key costs no storage read.
func (s *Store) Authenticate(ctx context.Context, key string) (*Principal, error) {
	if isSessionKey(key) {
		return s.authenticateSession(ctx, key)
	}
	if !wellFormedKey(key) {
		return nil, ErrUnauthenticated
	}
	digest := keyDigest(key)
	if p, ok := s.credentials.principal(digest); ok {
		return p, nil
	}
	generation := s.credentials.generation.Load()
	p := &Principal{}
	err := s.kv.View(ctx, func(r Reader) error {
		idx, err := decodeCached[keyIndexEntry](s, r, apiKeyIndexKey(digest))
		if err != nil {
			return err
		}
		tk, err := s.tenantKeysFor(r, idx.TenantID)
		if err != nil {
			return err
		}
		if p.Tenant, err = openCached[Tenant](s, r, tk, "tenant", idx.TenantID, idx.TenantID, tenantKey(idx.TenantID)); err != nil {
			return err
		}
		p.KeyID = idx.KeyID
		p.Application, err = openCached[Application](s, r, tk, "application", idx.TenantID, idx.ApplicationID, applicationKey(idx.TenantID, idx.ApplicationID))
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, err
	}
	s.credentials.rememberPrincipal(digest, generation, p)
	return p, nil
}

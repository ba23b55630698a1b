package vaultstore

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Token intents: data collected (typically by a public application in a
// browser or a mobile app) and held for a short time before a back end
// turns it into a token with POST /tokens {"token_intent_id": ...}. An
// intent is validated like a token of its type, sealed like a token,
// audited, and gone after TokenIntentTTL or once a token was made from
// it, whichever comes first. Its answer never holds its data: only its
// fingerprint and card or bank details.
//
// A card intent keeps no CVC: it is checked and dropped when the intent
// is created (nothing in the vault reads an intent's CVC, and a token
// made from an intent does not carry one over).

// TokenIntentTTL is how long a token intent lives.
const TokenIntentTTL = 24 * time.Hour

// TokenIntent is a token intent as the API shows it.
type TokenIntent struct {
	ID          string       `json:"id"`
	TenantID    string       `json:"tenant_id"`
	Type        string       `json:"type"`
	Fingerprint string       `json:"fingerprint,omitempty"`
	Card        *CardDetails `json:"card,omitempty"`
	Bank        *BankDetails `json:"bank,omitempty"`
	CreatedBy   string       `json:"created_by,omitempty"`
	CreatedAt   *Timestamp   `json:"created_at,omitempty"`
	ExpiresAt   *Timestamp   `json:"expires_at,omitempty"`
}

// tokenIntentRecord is an intent as stored, sealed: with its data until
// a token is made from it, then only the mark that it was used (kept
// until it would have expired, so that a second use is told so).
type tokenIntentRecord struct {
	TokenIntent
	Data       any        `json:"data,omitempty"`
	ConsumedAt *Timestamp `json:"consumed_at,omitempty"`
}

// TokenIntentInput is the body of POST /token-intents once decoded (and,
// for client-side encrypted data, decrypted).
type TokenIntentInput struct {
	Type string `json:"type"`
	Data any    `json:"data"`
}

// tokenIntentKind is the record kind an intent's seal binds.
const tokenIntentKind = "token-intent"

// Messages of a token_intent_id that cannot be used.
const (
	msgIntentUnknown  = "no token intent with this id exists in this tenant (an expired intent is purged)"
	msgIntentExpired  = "the token intent has expired"
	msgIntentConsumed = "the token intent was already used to create a token"
)

func (r *tokenIntentRecord) expired(now time.Time) bool {
	return r.ExpiresAt != nil && !now.Before(r.ExpiresAt.Time)
}

// public returns the intent as the API shows it, with what the BIN table
// knows of its card.
func (s *Store) publicIntent(r *tokenIntentRecord) *TokenIntent {
	out := r.TokenIntent
	out.Card = s.BINTable().withBINTable(r.Card)
	if r.Bank != nil {
		b := *r.Bank
		out.Bank = &b
	}
	return &out
}

// CreateTokenIntent validates data as a token of its type would be and
// keeps it sealed for TokenIntentTTL. It needs token-intent:create.
func (s *Store) CreateTokenIntent(ctx context.Context, req TokenRequest, in TokenIntentInput) (*TokenIntent, error) {
	if !req.Application.Can("token-intent:create") {
		return nil, &PermissionError{Permission: "token-intent:create"}
	}
	v := &ValidationError{}
	typ, ok := LookupTokenType(in.Type)
	if !ok {
		v.Add("type", "type must be one of "+strings.Join(TokenTypeNames(), ", "))
		return nil, v
	}
	if in.Data == nil {
		v.Add("data", "data is required")
	} else {
		typ.Validate(in.Data, v)
	}
	if err := v.OrNil(); err != nil {
		return nil, err
	}
	data := withoutCVC(typ.Name, in.Data)
	card, bank := deriveDetails(typ.Name, data)
	var out *TokenIntent
	err := s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, req.Tenant.ID)
		if err != nil {
			return err
		}
		now := s.now()
		rec := &tokenIntentRecord{TokenIntent: TokenIntent{
			ID: uuid.NewString(), TenantID: t.ID, Type: typ.Name, Card: card, Bank: bank,
			CreatedBy: req.Application.ID, CreatedAt: stamp(now), ExpiresAt: stamp(now.Add(TokenIntentTTL)),
		}, Data: data}
		value, err := evaluateString(typ.DefaultFingerprint, map[string]any{"data": data})
		if err != nil {
			return invalid("data", err.Error())
		}
		if value != "" {
			rec.Fingerprint = tk.fingerprintOf(typ.Name, value)
		}
		if err := s.putIntent(w, tk, rec, now); err != nil {
			return err
		}
		if err := s.writeAudit(w, tk, t, byApp(req.Application, tokenIntentKind, rec.ID, "create", "token intent created")); err != nil {
			return err
		}
		out = s.publicIntent(rec)
		return nil
	})
	return out, err
}

// putIntent seals and writes an intent record, to be purged by the
// storage engine when the intent expires.
func (s *Store) putIntent(w Writer, tk *tenantKeys, rec *tokenIntentRecord, now time.Time) error {
	ttl := rec.ExpiresAt.Sub(now)
	if ttl <= 0 {
		return w.Delete(tokenIntentKey(rec.TenantID, rec.ID))
	}
	sealed, err := tk.sealRecord(tokenIntentKind, rec.TenantID, rec.ID, rec)
	if err != nil {
		return err
	}
	return w.Put(tokenIntentKey(rec.TenantID, rec.ID), sealed, ttl)
}

// loadIntent reads an intent record, expired and used ones included.
func (s *Store) loadIntent(r Reader, tk *tenantKeys, tenantID, id string) (*tokenIntentRecord, error) {
	if !isIntentID(id) {
		return nil, ErrNotFound
	}
	var rec tokenIntentRecord
	if err := s.getSealed(r, tk, tokenIntentKind, tenantID, id, tokenIntentKey(tenantID, id), &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// loadLiveIntent reads an intent that has neither expired nor been used;
// anything else is ErrNotFound.
func (s *Store) loadLiveIntent(r Reader, tk *tenantKeys, tenantID, id string) (*tokenIntentRecord, error) {
	rec, err := s.loadIntent(r, tk, tenantID, id)
	if err != nil {
		return nil, err
	}
	if rec.ConsumedAt != nil || rec.expired(s.now()) {
		return nil, ErrNotFound
	}
	return rec, nil
}

// isIntentID reports whether id can be an intent's id (a UUID the vault
// drew), so that no other string reaches a key.
func isIntentID(id string) bool {
	_, err := uuid.Parse(id)
	return err == nil && len(id) == 36
}

// GetTokenIntent reads a live token intent (without its data). It needs
// token-intent:read.
func (s *Store) GetTokenIntent(ctx context.Context, req TokenRequest, id string) (*TokenIntent, error) {
	if !req.Application.Can("token-intent:read") {
		return nil, &PermissionError{Permission: "token-intent:read"}
	}
	var rec *tokenIntentRecord
	err := s.kv.View(ctx, func(r Reader) error {
		tk, err := s.tenantKeysFor(r, req.Tenant.ID)
		if err != nil {
			return err
		}
		rec, err = s.loadLiveIntent(r, tk, req.Tenant.ID, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := s.recordAccess(ctx, nil, req.Tenant, nil, byApp(req.Application, tokenIntentKind, rec.ID, "read", "token intent read")); err != nil {
		return nil, err
	}
	return s.publicIntent(rec), nil
}

// DeleteTokenIntent deletes a live token intent. It needs
// token-intent:delete.
func (s *Store) DeleteTokenIntent(ctx context.Context, req TokenRequest, id string) error {
	if !req.Application.Can("token-intent:delete") {
		return &PermissionError{Permission: "token-intent:delete"}
	}
	return s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, req.Tenant.ID)
		if err != nil {
			return err
		}
		rec, err := s.loadLiveIntent(w, tk, t.ID, id)
		if err != nil {
			return err
		}
		if err := w.Delete(tokenIntentKey(t.ID, rec.ID)); err != nil {
			return err
		}
		return s.writeAudit(w, tk, t, byApp(req.Application, tokenIntentKind, rec.ID, "delete", "token intent deleted"))
	})
}

// takeIntent resolves in.TokenIntentID inside a token create: it fills
// in the intent's type and data (no CVC) and marks the intent used, in
// the create's transaction, so the token exists exactly when the intent
// is consumed. An unknown, expired or used intent, data given beside it,
// or a type other than the intent's, is a *ValidationError. It returns
// in unchanged when it names no intent.
func (s *Store) takeIntent(w Writer, tk *tenantKeys, tenantID string, in TokenInput) (TokenInput, error) {
	if in.TokenIntentID == "" {
		return in, nil
	}
	if in.Data != nil {
		return in, invalid("data", "give either data or token_intent_id, not both")
	}
	rec, err := s.loadIntent(w, tk, tenantID, in.TokenIntentID)
	if errors.Is(err, ErrNotFound) {
		return in, invalid("token_intent_id", msgIntentUnknown)
	} else if err != nil {
		return in, err
	}
	now := s.now()
	switch {
	case rec.ConsumedAt != nil:
		return in, invalid("token_intent_id", msgIntentConsumed)
	case rec.expired(now):
		return in, invalid("token_intent_id", msgIntentExpired)
	case in.Type != "" && in.Type != rec.Type:
		return in, invalid("type", "type must be the token intent's type ("+rec.Type+"), or left out")
	}
	in.Type, in.Data, in.TokenIntentID = rec.Type, rec.Data, ""
	used := &tokenIntentRecord{TokenIntent: rec.TokenIntent, ConsumedAt: stamp(now)}
	used.Card, used.Bank, used.Fingerprint = nil, nil, ""
	return in, s.putIntent(w, tk, used, now)
}

// intentTTL is what is left of a sealed intent record's life, for a
// re-seal that rewrites it; 0 when it has ended.
func (s *Store) intentTTL(tk *tenantKeys, tenantID string, key, sealed []byte) time.Duration {
	var rec tokenIntentRecord
	if err := tk.openRecord(tokenIntentKind, tenantID, lastSegment(key), sealed, &rec); err != nil || rec.ExpiresAt == nil {
		return time.Second // unreadable: let the engine drop it soon
	}
	return max(rec.ExpiresAt.Sub(s.now()), 0)
}

package vaultstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore/expr"
)

// Token is a token as the API shows it. Data is present only as the
// caller's access allows: revealed, masked, or left out.
type Token struct {
	ID                    string            `json:"id"`
	TenantID              string            `json:"tenant_id"`
	Type                  string            `json:"type"`
	Data                  any               `json:"data,omitempty"`
	Mask                  any               `json:"mask,omitempty"`
	Fingerprint           string            `json:"fingerprint,omitempty"`
	FingerprintExpression string            `json:"fingerprint_expression,omitempty"`
	Containers            []string          `json:"containers"`
	Metadata              map[string]string `json:"metadata,omitempty"`
	SearchIndexes         []string          `json:"search_indexes,omitempty"`
	DeduplicateToken      *bool             `json:"deduplicate_token,omitempty"`
	ExpiresAt             *Timestamp        `json:"expires_at,omitempty"`
	CreatedBy             string            `json:"created_by,omitempty"`
	CreatedAt             *Timestamp        `json:"created_at,omitempty"`
	ModifiedBy            string            `json:"modified_by,omitempty"`
	ModifiedAt            *Timestamp        `json:"modified_at,omitempty"`
	Card                  *CardDetails      `json:"card,omitempty"`
	Bank                  *BankDetails      `json:"bank,omitempty"`
	Extras                *TokenExtras      `json:"_extras,omitempty"`
}

// TokenExtras says how a create was answered.
type TokenExtras struct {
	Deduplicated bool `json:"deduplicated"`
}

// tokenRecord is a token as stored: the token with its full data (the
// CVC apart), the sealed CVC, and what it takes to remove its index
// entries.
type tokenRecord struct {
	Token
	CVC          []byte     `json:"cvc_sealed,omitempty"`
	CVCExpiresAt *Timestamp `json:"cvc_expires_at,omitempty"`
	IndexHashes  []string   `json:"index_hashes,omitempty"`
}

// TokenInput is the body of a token create, inside /tokenize too.
type TokenInput struct {
	ID                    string   `json:"id"`
	Type                  string   `json:"type"`
	Data                  any      `json:"data"`
	Mask                  any      `json:"mask"`
	Containers            []string `json:"containers"`
	Metadata              Metadata `json:"metadata"`
	SearchIndexes         []string `json:"search_indexes"`
	FingerprintExpression string   `json:"fingerprint_expression"`
	DeduplicateToken      *bool    `json:"deduplicate_token"`
	ExpiresAt             string   `json:"expires_at"`
	// TokenIntentID makes the token from a token intent (token_intents.go):
	// its type and data come from the intent, which is consumed.
	TokenIntentID string `json:"token_intent_id"`
}

// container is the one container a token lives in.
func (t *Token) container() string {
	if len(t.Containers) == 0 {
		return "/"
	}
	return t.Containers[0]
}

func (r *tokenRecord) expired(now time.Time) bool {
	return r.ExpiresAt != nil && !now.Before(r.ExpiresAt.Time)
}

// prefixed returns a ValidationError with every field under prefix.
func prefixed(prefix string, err error) error {
	var v *ValidationError
	if prefix == "" || !errors.As(err, &v) {
		return err
	}
	out := &ValidationError{}
	for f, msgs := range v.Fields {
		for _, m := range msgs {
			out.Add(prefix+f, m)
		}
	}
	return out
}

// buildToken validates a create request and evaluates everything derived
// from the data (id, fingerprint, search indexes), without any I/O.
func (s *Store) buildToken(t *Tenant, tk *tenantKeys, actorID string, in TokenInput) (*tokenRecord, bool, error) {
	v := &ValidationError{}
	if in.TokenIntentID != "" { // CreateToken resolves it (takeIntent); nothing else takes it
		v.Add("token_intent_id", "token_intent_id is accepted only by POST /tokens")
		return nil, false, v
	}
	typ, ok := LookupTokenType(in.Type)
	if !ok {
		v.Add("type", "type must be one of "+strings.Join(TokenTypeNames(), ", "))
		return nil, false, v
	}
	if in.Data == nil {
		v.Add("data", "data is required")
	} else {
		typ.Validate(in.Data, v)
	}
	containers := NormalizeContainers(in.Containers, v)
	if containers == nil {
		containers = []string{typ.DefaultContainer}
	}
	ValidateMetadata(in.Metadata, v)
	mask := in.Mask
	if mask == nil {
		mask = typ.DefaultMask
	}
	checkExpressions("mask", mask, v)
	now := s.now()
	var expires *Timestamp
	if in.ExpiresAt != "" {
		at, err := ParseExpiresAt(in.ExpiresAt, now)
		if err != nil {
			mergeValidation(v, err)
		} else {
			expires = &Timestamp{at}
		}
	}
	if err := v.OrNil(); err != nil {
		return nil, false, err
	}
	if err := checkMask(typ.Name, mask, withoutCVC(typ.Name, in.Data)); err != nil {
		return nil, false, err
	}

	rec := &tokenRecord{Token: Token{
		TenantID:              t.ID,
		Type:                  typ.Name,
		Data:                  in.Data,
		Mask:                  mask,
		FingerprintExpression: in.FingerprintExpression,
		Containers:            containers,
		Metadata:              in.Metadata,
		SearchIndexes:         in.SearchIndexes,
		DeduplicateToken:      in.DeduplicateToken,
		ExpiresAt:             expires,
		CreatedBy:             actorID,
		CreatedAt:             stamp(now),
	}}
	id, err := evaluateTokenID(typ.Name, in.ID, withoutCVC(typ.Name, in.Data))
	if err != nil {
		return nil, false, err
	}
	rec.ID = id
	dedupe := t.Settings["deduplicate_tokens"] == "true"
	if in.DeduplicateToken != nil {
		dedupe = *in.DeduplicateToken
	}
	if err := s.derive(t, tk, rec, dedupe); err != nil {
		return nil, false, err
	}
	return rec, dedupe, nil
}

// derive computes a record's fingerprint and search index hashes from its
// current data, and moves a card's CVC out of the data into its own seal.
func (s *Store) derive(t *Tenant, tk *tenantKeys, rec *tokenRecord, dedupe bool) error {
	// the CVC goes first: nothing derived and kept (fingerprint, search
	// index) may depend on it, or it would outlive its retention
	if err := s.sealCVC(t, rec); err != nil {
		return err
	}
	rec.Card, rec.Bank = deriveDetails(rec.Type, rec.Data)
	bindings := map[string]any{"data": rec.Data}
	fpExpr := rec.FingerprintExpression
	if fpExpr == "" && (dedupe || t.Settings["fingerprint_tokens"] == "true") {
		typ, _ := LookupTokenType(rec.Type)
		fpExpr = typ.DefaultFingerprint
	}
	rec.Fingerprint = ""
	if fpExpr != "" {
		value, err := evaluateString(fpExpr, map[string]any{"data": rec.Data, "metadata": rec.Metadata})
		if err != nil {
			return invalid("fingerprint_expression", err.Error())
		}
		if value == "" {
			return invalid("fingerprint_expression", "the expression evaluated to an empty value")
		}
		rec.Fingerprint = tk.fingerprintOf(rec.Type, value)
	}
	rec.IndexHashes = nil
	for i, src := range rec.SearchIndexes {
		field := fmt.Sprintf("search_indexes[%d]", i)
		value, err := evaluateString(src, bindings)
		if err != nil {
			return invalid(field, err.Error())
		}
		if value == "" {
			return invalid(field, "the expression evaluated to an empty value")
		}
		rec.IndexHashes = append(rec.IndexHashes, tk.searchHashOf(strings.ToLower(value)))
	}
	slices.Sort(rec.IndexHashes)
	rec.IndexHashes = slices.Compact(rec.IndexHashes)
	return nil
}

// sealCVC moves data.cvc of a card into a seal that is shredded after the
// tenant's CVC retention.
func (s *Store) sealCVC(t *Tenant, rec *tokenRecord) error {
	if rec.Type != TokenTypeCard {
		return nil
	}
	card, _ := rec.Data.(map[string]any)
	cvc, ok := card["cvc"].(string)
	if !ok {
		rec.CVC, rec.CVCExpiresAt = nil, nil
		return nil
	}
	retention := time.Duration(t.Quotas.CVCRetentionSeconds) * time.Second
	if retention <= 0 || retention > MaxCVCRetention {
		retention = time.Hour
	}
	now := s.now()
	expires := now.Add(retention)
	if rec.CVCExpiresAt != nil && rec.CVCExpiresAt.After(now) && rec.CVCExpiresAt.Before(expires) {
		expires = rec.CVCExpiresAt.Time // an update never extends a CVC's retention
	}
	sealed, err := s.cvc.seal(s.ctx, cvc, expires, now, recordAAD("cvc", t.ID, rec.ID))
	if err != nil {
		return err
	}
	rec.Data, rec.CVC, rec.CVCExpiresAt = withoutCVC(TokenTypeCard, card), sealed, &Timestamp{expires}
	return nil
}

// withoutCVC returns card data without its cvc member; other data as is.
func withoutCVC(tokenType string, data any) any {
	card, ok := data.(map[string]any)
	if tokenType != TokenTypeCard || !ok {
		return data
	}
	if _, has := card["cvc"]; !has {
		return data
	}
	out := make(map[string]any, len(card))
	for k, v := range card {
		if k != "cvc" {
			out[k] = v
		}
	}
	return out
}

// fullData returns the record's data with its CVC while it is retained.
func (s *Store) fullData(rec *tokenRecord) any {
	if rec.CVC == nil || rec.CVCExpiresAt == nil || !s.now().Before(rec.CVCExpiresAt.Time) {
		return rec.Data
	}
	cvc, err := s.cvc.open(s.ctx, rec.CVC, recordAAD("cvc", rec.TenantID, rec.ID))
	if err != nil {
		return rec.Data
	}
	card, _ := rec.Data.(map[string]any)
	data := make(map[string]any, len(card)+1)
	for k, v := range card {
		data[k] = v
	}
	data["cvc"] = cvc
	return data
}

func mergeValidation(v *ValidationError, err error) {
	var other *ValidationError
	if errors.As(err, &other) {
		for f, msgs := range other.Fields {
			for _, m := range msgs {
				v.Add(f, m)
			}
		}
	}
}

// checkExpressions compiles every string of a JSON template, recording
// those that do not parse.
func checkExpressions(field string, template any, v *ValidationError) {
	switch t := template.(type) {
	case string:
		if _, err := expr.Compile(t); err != nil {
			v.Add(field, err.Error())
		}
	case map[string]any:
		for k, sub := range t {
			checkExpressions(field+"."+k, sub, v)
		}
	case []any:
		for i, sub := range t {
			checkExpressions(fmt.Sprintf("%s[%d]", field, i), sub, v)
		}
	}
}

// evaluateString evaluates an expression to text; objects become JSON.
func evaluateString(src string, bindings map[string]any) (string, error) {
	e, err := expr.Compile(src)
	if err != nil {
		return "", err
	}
	out, err := e.Evaluate(bindings)
	if err != nil {
		return "", err
	}
	return stringOf(out)
}

func stringOf(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	}
	raw, err := json.Marshal(v)
	return string(raw), err
}

// evaluateTokenID returns the id of a new token: a random UUID, the
// caller's id, or the caller's id expression evaluated over the data. A
// card or bank token's id may not show its number (see checkTokenID and
// evaluateGuardedID).
func evaluateTokenID(tokenType, src string, data any) (string, error) {
	if src == "" {
		return uuid.NewString(), nil
	}
	if expr.IsExpression(src) && (tokenType == TokenTypeCard || tokenType == TokenTypeBank) {
		return evaluateGuardedID(tokenType, src, data)
	}
	id := src
	if expr.IsExpression(src) {
		var err error
		if id, err = evaluateString(src, map[string]any{"data": data}); err != nil {
			return "", invalid("id", err.Error())
		}
	}
	if err := ValidateTokenID(id); err != nil {
		return "", err
	}
	if err := checkTokenID(tokenType, id, data); err != nil {
		return "", err
	}
	return id, nil
}

// insertToken writes a new token and its index entries, or returns the
// existing token it duplicates. It runs inside the caller's transaction.
// randomID says the vault drew the id (a version 4 UUID): no token can
// hold it yet, so neither the id nor its activity marker is looked up.
func (s *Store) insertToken(w Writer, tk *tenantKeys, rec *tokenRecord, dedupe, randomID bool) (*tokenRecord, bool, error) {
	tid := rec.TenantID
	if dedupe && rec.Fingerprint != "" {
		existing, err := s.liveHolder(w, tk, tid, rec.Fingerprint, "")
		if err != nil {
			return nil, false, err
		}
		if existing != nil {
			return existing, true, nil
		}
	}
	if randomID {
		if err := s.writeToken(w, tk, rec); err != nil {
			return nil, false, err
		}
		if err := s.countToken(w, rec, 1, rec.CreatedAt); err != nil {
			return nil, false, err
		}
		return rec, false, w.Put(activeTokenKey(tid, s.now(), rec.ID), nil, activeMarkerTTL)
	}
	if raw, err := w.Get(tokenKey(tid, rec.ID)); err == nil {
		var old tokenRecord
		if err := tk.openRecord("token", tid, rec.ID, raw, &old); err != nil {
			return nil, false, err
		}
		if !old.expired(s.now()) {
			return nil, false, fmt.Errorf("token id: %w", ErrConflict)
		}
		if err := s.removeToken(w, &old); err != nil {
			return nil, false, err
		}
		if err := s.countToken(w, &old, -1, nil); err != nil {
			return nil, false, err
		}
	} else if !errors.Is(err, ErrNotFound) {
		return nil, false, err
	}
	if err := s.writeToken(w, tk, rec); err != nil {
		return nil, false, err
	}
	if err := s.countToken(w, rec, 1, rec.CreatedAt); err != nil {
		return nil, false, err
	}
	return rec, false, markActive(w, activeTokenKey(tid, s.now(), rec.ID))
}

// writeToken writes a record and all its index entries.
func (s *Store) writeToken(w Writer, tk *tenantKeys, rec *tokenRecord) error {
	tid := rec.TenantID
	if err := putSealed(w, tk, "token", tid, rec.ID, tokenKey(tid, rec.ID), rec); err != nil {
		return err
	}
	// the order entry carries the container and expiry, so a list can
	// skip and count tokens without opening them
	if err := w.Put(tokenOrderKey(tid, rec.CreatedAt.Time, rec.ID), orderValue(rec), 0); err != nil {
		return err
	}
	if rec.Fingerprint != "" {
		if err := w.Put(fingerprintIndexKey(tid, rec.Fingerprint, rec.ID), nil, 0); err != nil {
			return err
		}
		// the claim names the token deduplication returns; a token takes
		// it over when its holder is gone
		claim, err := w.Get(fingerprintClaimKey(tid, rec.Fingerprint))
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if err != nil || string(claim) == rec.ID || !s.isLive(w, tk, tid, string(claim)) {
			if err := w.Put(fingerprintClaimKey(tid, rec.Fingerprint), []byte(rec.ID), 0); err != nil {
				return err
			}
		}
	}
	for _, h := range rec.IndexHashes {
		if err := w.Put(searchIndexKey(tid, h, rec.ID), nil, 0); err != nil {
			return err
		}
	}
	if rec.ExpiresAt != nil {
		if err := w.Put(expiryKey(rec.ExpiresAt.Time, tid, rec.ID), []byte(rec.Type), 0); err != nil {
			return err
		}
	}
	return nil
}

// removeToken deletes a record and its index entries (not its count).
func (s *Store) removeToken(w Writer, rec *tokenRecord) error {
	tid := rec.TenantID
	keys := [][]byte{tokenKey(tid, rec.ID), tokenOrderKey(tid, rec.CreatedAt.Time, rec.ID)}
	if rec.Fingerprint != "" {
		keys = append(keys, fingerprintIndexKey(tid, rec.Fingerprint, rec.ID))
		if claim, err := w.Get(fingerprintClaimKey(tid, rec.Fingerprint)); err == nil && string(claim) == rec.ID {
			keys = append(keys, fingerprintClaimKey(tid, rec.Fingerprint))
		}
	}
	for _, h := range rec.IndexHashes {
		keys = append(keys, searchIndexKey(tid, h, rec.ID))
	}
	if rec.ExpiresAt != nil {
		keys = append(keys, expiryKey(rec.ExpiresAt.Time, tid, rec.ID))
	}
	for _, k := range keys {
		if err := w.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// orderValue is the value of a token's list order entry: its container,
// and its expiry in Unix nanoseconds when it has one.
func orderValue(rec *tokenRecord) []byte {
	v := append([]byte(rec.container()), 0)
	if rec.ExpiresAt != nil {
		v = strconv.AppendInt(v, rec.ExpiresAt.UnixNano(), 10)
	}
	return append(append(v, 0), rec.Type...)
}

// orderInfo is what a token's order entry tells without opening the
// record.
type orderInfo struct {
	container string
	expires   time.Time // zero: no expiry
	tokenType string    // "" in entries written before store format 2
}

// parseOrderValue reads an order entry: "container", or (format 2)
// "container\x00[expiry ns]\x00type"; format 1 wrote
// "container[\x00expiry ns]".
func parseOrderValue(v []byte) orderInfo {
	parts := bytes.SplitN(v, []byte{0}, 3)
	o := orderInfo{container: string(parts[0])}
	if len(parts) > 1 && len(parts[1]) > 0 {
		if ns, err := strconv.ParseInt(string(parts[1]), 10, 64); err == nil {
			o.expires = time.Unix(0, ns)
		}
	}
	if len(parts) > 2 {
		o.tokenType = string(parts[2])
	}
	return o
}

// isLive reports whether a token exists and has not expired.
func (s *Store) isLive(r Reader, tk *tenantKeys, tenantID, id string) bool {
	_, err := s.loadToken(r, tk, tenantID, id)
	return err == nil
}

// liveHolder returns a live token holding a fingerprint, other than
// except: the claimed one if it lives, else any other holder (tokens made
// without deduplication share fingerprints too). nil when there is none.
func (s *Store) liveHolder(r Reader, tk *tenantKeys, tenantID, fingerprint, except string) (*tokenRecord, error) {
	claim, err := r.Get(fingerprintClaimKey(tenantID, fingerprint))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if err == nil && string(claim) != except {
		rec, err := s.loadToken(r, tk, tenantID, string(claim))
		if err == nil {
			return rec, nil
		} else if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	var found *tokenRecord
	prefix := fingerprintIndexPrefix(tenantID, fingerprint)
	err = r.Scan(prefix, nil, func(key, _ []byte) error {
		id := lastSegment(key)
		if id == except || id == string(claim) {
			return nil
		}
		rec, err := s.loadToken(r, tk, tenantID, id)
		if errors.Is(err, ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		found = rec
		return ErrStopScan
	})
	return found, err
}

// loadToken reads a live token; an expired one is ErrNotFound.
func (s *Store) loadToken(r Reader, tk *tenantKeys, tenantID, id string) (*tokenRecord, error) {
	if id == "" || strings.Contains(id, "/") {
		return nil, ErrNotFound
	}
	var rec tokenRecord
	if err := s.getSealed(r, tk, "token", tenantID, id, tokenKey(tenantID, id), &rec); err != nil {
		return nil, err
	}
	if rec.expired(s.now()) {
		return nil, ErrNotFound
	}
	return &rec, nil
}

// usageDelta is one change to a token type's count. Creates and deletes
// write a new delta key without reading any, so they never conflict with
// each other; Usage sums the deltas and folds them now and then.
type usageDelta struct {
	Count         int64      `json:"count"`
	LastCreatedAt *Timestamp `json:"last_created_at,omitempty"`
}

// countToken records that rec's type and container gained delta tokens;
// created is the creation time when delta counts a new token. The change
// goes into the tenant's current epoch, which it reads (see foldUsage).
func (s *Store) countToken(w Writer, rec *tokenRecord, delta int64, created *Timestamp) error {
	raw, err := json.Marshal(usageDelta{Count: delta, LastCreatedAt: created})
	if err != nil {
		return err
	}
	// only the current epoch: a create must not conflict with the fold's
	// record of the epochs it folded
	epoch, err := readUsageEpoch(w, usageCurrentEpochKey(rec.TenantID), 1)
	if err != nil {
		return err
	}
	s.noteUsageChange(rec.TenantID)
	return w.Put(usageDeltaKey(rec.TenantID, epoch, rec.Type, rec.container(), s.now(), rand.Uint64()), raw, 0)
}

// markActive writes an activity marker (activeTokenKey) unless it is
// stored: the token was created, read or used that month.
func markActive(w Writer, key []byte) error {
	if _, err := w.Get(key); err == nil {
		return nil
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	return w.Put(key, nil, activeMarkerTTL)
}

// activeMarkerTTL keeps a monthly activity marker past the month's usage
// report.
const activeMarkerTTL = 62 * 24 * time.Hour

// TokenRequest says who asks for a token operation.
type TokenRequest struct {
	Tenant      *Tenant
	Application *Application
}

// CreateToken creates a token, or returns the one it duplicates, shaped
// for the caller.
func (s *Store) CreateToken(ctx context.Context, req TokenRequest, in TokenInput) (*Token, error) {
	var out *Token
	var created bool
	err := s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, req.Tenant.ID)
		if err != nil {
			return err
		}
		in, err := s.takeIntent(w, tk, t.ID, in) // token_intent_id: type and data from the intent
		if err != nil {
			return err
		}
		rec, dedupe, err := s.buildToken(t, tk, req.Application.ID, in)
		if err != nil {
			return err
		}
		transform, err := req.Application.Authorize("token:create", rec.container())
		if err != nil {
			return err
		}
		got, deduplicated, err := s.insertToken(w, tk, rec, dedupe, in.ID == "")
		if err != nil {
			return err
		}
		msg := "token created"
		if deduplicated {
			msg = "existing token returned (deduplicated)"
		}
		if err := s.writeAudit(w, tk, t, byApp(req.Application, "token", got.ID, "create", msg)); err != nil {
			return err
		}
		out, err = s.shapeCreated(req.Application, got, transform, deduplicated)
		created = !deduplicated
		return err
	})
	if err == nil && created {
		s.emit(EventTokenCreated, out.Type, 1)
	}
	return out, err
}

// shapeCreated shapes the answer to a create: data masked at most (a
// create reveals nothing), and a deduplicated token shown in full only
// to a caller who may read it.
func (s *Store) shapeCreated(app *Application, rec *tokenRecord, transform string, deduplicated bool) (*Token, error) {
	if deduplicated {
		readTransform, ok := app.grant("token:read", rec.container())
		if !ok {
			return &Token{ID: rec.ID, Type: rec.Type, TenantID: rec.TenantID, Fingerprint: rec.Fingerprint,
				Containers: rec.Containers, Extras: &TokenExtras{Deduplicated: true}}, nil
		}
		transform = readTransform
	}
	if transform == TransformReveal {
		transform = TransformMask
	}
	tok, err := s.shape(rec, transform)
	if err != nil {
		return nil, err
	}
	if deduplicated {
		tok.Extras = &TokenExtras{Deduplicated: true}
	}
	return tok, nil
}

// shape returns the token with its data revealed, masked or left out.
func (s *Store) shape(rec *tokenRecord, transform string) (*Token, error) {
	tok := rec.Token
	tok.Card, tok.Bank = s.details(rec)
	if transform != TransformReveal && maskTemplateShowsNumber(rec) {
		tok.Mask = nil // written before the vault refused such masks
	}
	switch transform {
	case TransformReveal:
		tok.Data = s.fullData(rec)
	case TransformMask:
		tok.Data = nil
		if rec.Mask != nil {
			// a mask sees the data without the CVC: a mask must never
			// show it, and must not break once the CVC is gone
			masked, err := evaluateMask(rec)
			if errors.Is(err, errMaskShowsNumber) {
				s.logger.Warn("a token's mask could show more of its number than allowed; its data is left out",
					zap.String("tenant_id", rec.TenantID), zap.String("token_type", rec.Type))
				return &tok, nil
			}
			if err != nil {
				// a mask that fails on this token's data hides the data;
				// it must not fail the reader's request
				s.logger.Warn("a token's mask failed; its data is left out", zap.String("tenant_id", rec.TenantID), zap.Error(err))
				return &tok, nil
			}
			if obj, ok := masked.(map[string]any); ok {
				for k, v := range obj {
					if v == nil {
						delete(obj, k) // a mask member over absent data shows nothing
					}
				}
			}
			tok.Data = masked
		}
	default:
		tok.Data = nil
	}
	return &tok, nil
}

// GetToken reads a token as the caller may see it.
func (s *Store) GetToken(ctx context.Context, req TokenRequest, id string) (*Token, error) {
	exp := s.audits.expect() // see auditBatcher: a busy batch lingers for this read
	defer exp.done()
	var (
		rec    *tokenRecord
		active bool
	)
	err := s.kv.View(ctx, func(r Reader) error {
		tk, err := s.tenantKeysFor(r, req.Tenant.ID)
		if err != nil {
			return err
		}
		if rec, err = s.loadToken(r, tk, req.Tenant.ID, id); err != nil {
			return err
		}
		active, err = s.isActive(r, req.Tenant.ID, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	transform, err := req.Application.AuthorizeToken("token:read", rec.ID, rec.container())
	if err != nil {
		return nil, err
	}
	var mark []string
	if !active {
		mark = []string{rec.ID}
	}
	if err := s.recordAccess(ctx, exp, req.Tenant, mark, byApp(req.Application, "token", rec.ID, "read", "token read ("+transform+")")); err != nil {
		return nil, err
	}
	return s.shape(rec, transform)
}

// isActive reports whether a token is already marked active this month.
func (s *Store) isActive(r Reader, tenantID, id string) (bool, error) {
	key := activeTokenKey(tenantID, s.now(), id)
	if s.active.known(key) {
		return true, nil
	}
	_, err := r.Get(key)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	s.active.stored(key)
	return true, nil
}

// markActiveIDs marks tokens active this month in one write; callers
// skip it for tokens isActive already found marked.
func (s *Store) markActiveIDs(ctx context.Context, tenantID string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	// one reading of the clock: the keys remembered are the keys written,
	// even when the month turns during the write
	now := s.now()
	keys := make([][]byte, len(ids))
	for i, id := range ids {
		keys[i] = activeTokenKey(tenantID, now, id)
	}
	err := s.kv.Update(ctx, func(w Writer) error {
		for _, key := range keys {
			if err := markActive(w, key); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		for _, key := range keys {
			s.active.stored(key)
		}
	}
	return err
}

// TokenFilter selects tokens to list.
type TokenFilter struct {
	IDs         []string
	Metadata    map[string]string // exact, case-insensitive, all must match
	Type        string            // exact
	Container   string            // exact, normalized
	Fingerprint string            // exact
}

// decidedByOrder reports whether the order entry alone settles the
// filter (so the record need not be opened to count it), and whether it
// matches.
func (f TokenFilter) decidedByOrder(o orderInfo) (decided, match bool) {
	if f.Type != "" && o.tokenType != "" && o.tokenType != f.Type {
		return true, false
	}
	if f.Container != "" && o.container != f.Container {
		return true, false
	}
	if len(f.Metadata) > 0 || f.Fingerprint != "" || (f.Type != "" && o.tokenType == "") {
		return false, false
	}
	return true, true
}

func (f TokenFilter) matches(rec *tokenRecord) bool {
	if len(f.IDs) > 0 && !slices.Contains(f.IDs, rec.ID) {
		return false
	}
	if (f.Type != "" && rec.Type != f.Type) || (f.Fingerprint != "" && rec.Fingerprint != f.Fingerprint) ||
		(f.Container != "" && rec.container() != f.Container) {
		return false
	}
	for k, want := range f.Metadata {
		got, ok := rec.Metadata[k]
		if !ok || !strings.EqualFold(got, want) {
			return false
		}
	}
	return true
}

// ListTokens returns one page of the tokens the caller may read that
// match the filter, oldest first, shaped for the caller, and how many
// match in all. Tokens the caller may not read are not counted. Unless
// the filter names ids, metadata or a fingerprint, the total comes from
// the kept counts and the scan stops once the page is full.
func (s *Store) ListTokens(ctx context.Context, req TokenRequest, f TokenFilter, offset, limit int) ([]*Token, int, error) {
	var (
		page   []*tokenRecord
		total  int
		deltas int
	)
	keep := func(rec *tokenRecord) {
		if total >= offset && len(page) < limit {
			page = append(page, rec)
		}
		total++
	}
	err := s.kv.View(ctx, func(r Reader) error {
		page, total = page[:0], 0
		tk, err := s.tenantKeysFor(r, req.Tenant.ID)
		if err != nil {
			return err
		}
		if ids := slices.DeleteFunc(slices.Clone(f.IDs), func(id string) bool { return id == "" }); len(ids) > 0 {
			f.IDs = ids
			var recs []*tokenRecord
			for _, id := range slices.Compact(slices.Sorted(slices.Values(f.IDs))) {
				rec, err := s.loadToken(r, tk, req.Tenant.ID, id)
				if errors.Is(err, ErrNotFound) {
					continue
				} else if err != nil {
					return err
				}
				if _, ok := req.Application.grantToken("token:read", rec.ID, rec.container()); ok && f.matches(rec) {
					recs = append(recs, rec)
				}
			}
			slices.SortStableFunc(recs, func(a, b *tokenRecord) int { return a.CreatedAt.Compare(b.CreatedAt.Time) })
			for _, rec := range recs {
				keep(rec)
			}
			return nil
		}
		now := s.now()
		counted := f.countedFilter()
		var countedTotal int
		if counted {
			if countedTotal, deltas, err = s.liveTokenTotal(r, tk, req, f, now); err != nil {
				return err
			}
		}
		err = r.Scan(tokenOrderPrefix(req.Tenant.ID), nil, func(key, value []byte) error {
			if counted && len(page) >= limit {
				return ErrStopScan
			}
			o := parseOrderValue(value)
			if !o.expires.IsZero() && !now.Before(o.expires) {
				return nil
			}
			if _, ok := req.Application.grant("token:read", o.container); !ok {
				return nil
			}
			if decided, match := f.decidedByOrder(o); decided && (!match || total < offset || len(page) >= limit) {
				if match {
					total++ // counted without opening the record
				}
				return nil
			}
			rec, err := s.loadToken(r, tk, req.Tenant.ID, lastSegment(key))
			if errors.Is(err, ErrNotFound) {
				return nil
			} else if err != nil {
				return err
			}
			if f.matches(rec) {
				keep(rec)
			}
			return nil
		})
		if counted {
			total = countedTotal
		}
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	s.foldUsageIfNeeded(req.Tenant.ID, deltas)
	out := make([]*Token, 0, len(page))
	ids := make([]string, 0, len(page))
	for _, rec := range page {
		transform, ok := req.Application.grantToken("token:read", rec.ID, rec.container())
		if !ok {
			continue
		}
		tok, err := s.shape(rec, transform)
		if err != nil {
			return nil, 0, err
		}
		out, ids = append(out, tok), append(ids, rec.ID)
	}
	audit := byApp(req.Application, "token", "", "list", fmt.Sprintf("%d tokens listed", len(ids)))
	audit.TokenIDs = ids
	if err := s.recordAccess(ctx, nil, req.Tenant, nil, audit); err != nil {
		return nil, 0, err
	}
	return out, total, nil
}

// DeleteToken deletes a token and its index entries.
func (s *Store) DeleteToken(ctx context.Context, req TokenRequest, id string) error {
	var tokenType string
	err := s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, req.Tenant.ID)
		if err != nil {
			return err
		}
		rec, err := s.loadToken(w, tk, req.Tenant.ID, id)
		if err != nil {
			return err
		}
		if _, err := req.Application.AuthorizeToken("token:delete", rec.ID, rec.container()); err != nil {
			return err
		}
		if err := s.removeToken(w, rec); err != nil {
			return err
		}
		if err := s.writeAudit(w, tk, t, byApp(req.Application, "token", rec.ID, "delete", "token deleted")); err != nil {
			return err
		}
		tokenType = rec.Type
		return s.countToken(w, rec, -1, nil)
	})
	if err == nil {
		s.emit(EventTokenDeleted, tokenType, 1)
	}
	return err
}

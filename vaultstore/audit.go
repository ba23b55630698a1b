package vaultstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/tokenvault/tokenvault/internal/redact"
)

// Actor types of audit records.
const (
	ActorApplication = "application"
	ActorProxy       = "proxy"
	ActorOperator    = "operator"
)

// AuditRecord says who did what to which entity, when. It never holds a
// token's data, a key or any other secret: token ids and the destination
// host are the most it names.
type AuditRecord struct {
	ID         string     `json:"id"`
	TenantID   string     `json:"tenant_id"`
	ActorID    string     `json:"actor_id,omitempty"`
	ActorType  string     `json:"actor_type,omitempty"`
	EntityType string     `json:"entity_type"`
	EntityID   string     `json:"entity_id,omitempty"`
	Operation  string     `json:"operation"`
	Message    string     `json:"message,omitempty"`
	CreatedAt  *Timestamp `json:"created_at"`
	// TokenIDs are the tokens a detokenization used.
	TokenIDs []string `json:"token_ids,omitempty"`
	// Destination is the host a proxied request went to.
	Destination string `json:"destination_host,omitempty"`
	// AuthorizedBy, on a record of a session's call, is the application
	// that authorized the session.
	AuthorizedBy string `json:"authorized_by,omitempty"`
}

// appendRecord encodes rec exactly as json.Marshal would, without
// reflection: every audited read and proxy call seals one.
func (rec *AuditRecord) appendRecord(dst []byte) ([]byte, error) {
	if rec == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, `{"id":`...)
	dst = appendJSONString(dst, rec.ID)
	dst = append(dst, `,"tenant_id":`...)
	dst = appendJSONString(dst, rec.TenantID)
	if rec.ActorID != "" {
		dst = append(dst, `,"actor_id":`...)
		dst = appendJSONString(dst, rec.ActorID)
	}
	if rec.ActorType != "" {
		dst = append(dst, `,"actor_type":`...)
		dst = appendJSONString(dst, rec.ActorType)
	}
	dst = append(dst, `,"entity_type":`...)
	dst = appendJSONString(dst, rec.EntityType)
	if rec.EntityID != "" {
		dst = append(dst, `,"entity_id":`...)
		dst = appendJSONString(dst, rec.EntityID)
	}
	dst = append(dst, `,"operation":`...)
	dst = appendJSONString(dst, rec.Operation)
	if rec.Message != "" {
		dst = append(dst, `,"message":`...)
		dst = appendJSONString(dst, rec.Message)
	}
	dst = append(dst, `,"created_at":`...)
	if rec.CreatedAt == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendTimestamp(dst, rec.CreatedAt)
	}
	if len(rec.TokenIDs) > 0 {
		dst = append(dst, `,"token_ids":`...)
		dst = appendJSONStrings(dst, rec.TokenIDs)
	}
	if rec.Destination != "" {
		dst = append(dst, `,"destination_host":`...)
		dst = appendJSONString(dst, rec.Destination)
	}
	if rec.AuthorizedBy != "" {
		dst = append(dst, `,"authorized_by":`...)
		dst = appendJSONString(dst, rec.AuthorizedBy)
	}
	return append(dst, '}'), nil
}

// ErrAuditUnavailable: the audit record of an operation could not be
// written, so the operation did not happen (or, for a read, nothing was
// returned).
var ErrAuditUnavailable = errors.New("the audit record could not be written")

// byApp starts a record of an operation by an application; app nil means
// the operator (admin API and CLI).
func byApp(app *Application, entityType, entityID, operation, message string) *AuditRecord {
	rec := &AuditRecord{EntityType: entityType, EntityID: entityID, Operation: operation, Message: message, ActorType: ActorOperator}
	if app != nil {
		rec.ActorID, rec.ActorType = app.ID, ActorApplication
		app.stampSession(rec)
	}
	return rec
}

// byActor is byApp for operations that know only the actor's id ("" for
// the operator).
func byActor(actorID, entityType, entityID, operation, message string) *AuditRecord {
	rec := &AuditRecord{EntityType: entityType, EntityID: entityID, Operation: operation, Message: message, ActorType: ActorOperator}
	if actorID != "" {
		rec.ActorID, rec.ActorType = actorID, ActorApplication
	}
	return rec
}

// auditTokenID is a token id as audit records and webhook payloads name
// it: withheld when it could be data (see internal/redact).
func auditTokenID(id string) string { return redact.ID(id) }

// recordAccess writes the audit record of a read or a detokenization and
// marks the tokens used active this month, in one transaction shared with
// other readers' records (auditBatcher), before the caller gets any data.
// The tenant is the caller's, read when it authenticated: a read needs no
// conflict with a tenant change, only the tenant's keys and retention.
// exp is the read's announcement (auditBatcher.expect), which queueing
// the record ends; nil for reads that do not announce themselves (lists
// and searches, which can scan for long: batches should not wait on them).
func (s *Store) recordAccess(ctx context.Context, exp *auditExpectation, t *Tenant, markIDs []string, audit *AuditRecord) error {
	if audit == nil {
		return s.markActiveIDs(ctx, t.ID, markIDs)
	}
	tk := s.keys.cached(t.ID)
	if tk == nil {
		if err := s.kv.View(ctx, func(r Reader) (err error) {
			tk, err = s.tenantKeysFor(r, t.ID)
			return err
		}); err != nil {
			return err
		}
	}
	rec := *audit
	sealed, err := s.sealAudit(tk, t, &rec)
	if err != nil {
		return err
	}
	puts := []*pendingPut{sealed}
	now := s.now()
	for _, id := range markIDs { // rewriting a marker that exists is harmless
		puts = append(puts, &pendingPut{key: activeTokenKey(t.ID, now, id), ttl: activeMarkerTTL})
	}
	if err := s.audits.write(ctx, exp, puts); err != nil {
		return err
	}
	for _, p := range puts[1:] {
		s.active.stored(p.key)
	}
	return nil
}

// writeAudit stamps rec and writes it in w, sealed, to expire after the
// tenant's log retention.
func (s *Store) writeAudit(w Writer, tk *tenantKeys, t *Tenant, rec *AuditRecord) error {
	e, err := s.sealAudit(tk, t, rec)
	if err != nil {
		return err
	}
	if err := s.enqueueWebhookEvents(w, tk, t, rec); err != nil { // the change's webhook events, in its transaction
		return err
	}
	return e.put(w)
}

// pendingPut is an entry ready to be written with an audit record: the
// record itself (chain: it is sealed in the transaction that gives it
// its place in the tenant's audit chain), or an activity marker it covers.
type pendingPut struct {
	key, value []byte
	ttl        time.Duration
	chain      *chainedPut
}

func (e *pendingPut) put(w Writer) error {
	if e.chain != nil {
		return e.chain.write(w)
	}
	if err := w.Put(e.key, e.value, e.ttl); err != nil {
		return fmt.Errorf("%w: %w", ErrAuditUnavailable, err)
	}
	return nil
}

// sealAudit stamps rec and makes it ready for its tenant's audit chain:
// the transaction that writes it gives it its sequence number and MAC,
// and seals it (audit_chain.go). It has no time to live: the sweep
// removes it in chain order once the tenant's log retention has passed.
func (s *Store) sealAudit(tk *tenantKeys, t *Tenant, rec *AuditRecord) (*pendingPut, error) {
	now := s.now()
	rec.ID, rec.TenantID, rec.CreatedAt = uuid.NewString(), t.ID, stamp(now)
	rec.EntityID, rec.TokenIDs = auditTokenID(rec.EntityID), redact.IDs(rec.TokenIDs)
	slot := auditSlot(now, binary.BigEndian.Uint64(randomBytes(8)))
	return &pendingPut{chain: &chainedPut{tk: tk, tenantID: t.ID, slot: slot, rec: rec}}, nil
}

// AuditFilter selects audit records; zero fields select everything.
type AuditFilter struct {
	EntityType string
	EntityID   string
	Operation  string
	Since      time.Time // created at or after
	Until      time.Time // created at or before
}

func (f AuditFilter) matches(rec *AuditRecord) bool {
	return (f.EntityType == "" || rec.EntityType == f.EntityType) && (f.EntityID == "" || rec.EntityID == f.EntityID) &&
		(f.Operation == "" || rec.Operation == f.Operation)
}

// ListAudit returns up to limit of the tenant's audit records that match
// the filter, newest first, starting after the record at cursor (empty
// for the newest), and the cursor of the next page ("" when there is no
// more). A malformed cursor is a ValidationError on "start".
func (s *Store) ListAudit(ctx context.Context, tenantID string, f AuditFilter, cursor string, limit int) ([]*AuditRecord, string, error) {
	prefix := auditPrefix(tenantID)
	var after []byte
	switch {
	case cursor != "":
		if !isAuditSlot(cursor) {
			return nil, "", invalid("start", "start must be the pagination.next of a previous page")
		}
		after = auditKey(tenantID, cursor)
	case !f.Until.IsZero():
		// records of the Until instant itself sort right after this key
		after = fmt.Appendf(prefix, "%016x", ^uint64(f.Until.UnixNano()))
	}
	var out []*AuditRecord
	var last, next string
	err := s.kv.View(ctx, func(r Reader) error {
		out, last, next = out[:0], "", ""
		tk, err := s.tenantKeysFor(r, tenantID)
		if err != nil {
			return err
		}
		return r.Scan(prefix, after, func(key, raw []byte) error {
			slot := string(key[len(prefix):])
			at, ok := auditSlotTime(slot)
			if !ok {
				return nil
			}
			if !f.Until.IsZero() && at.After(f.Until) {
				return nil
			}
			if !f.Since.IsZero() && at.Before(f.Since) {
				return ErrStopScan // every later key is older still
			}
			var rec AuditRecord
			if err := tk.openRecord("audit", tenantID, slot, raw, &rec); err != nil {
				return err
			}
			if !f.matches(&rec) {
				return nil
			}
			if len(out) == limit { // a match beyond the page: there is more
				next = last
				return ErrStopScan
			}
			out, last = append(out, &rec), slot
			return nil
		})
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// isAuditSlot reports whether s has the shape of an audit record's slot.
func isAuditSlot(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// auditSlotTime reads the creation time out of a slot.
func auditSlotTime(slot string) (time.Time, bool) {
	if len(slot) < 16 {
		return time.Time{}, false
	}
	inv, err := strconv.ParseUint(slot[:16], 16, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, int64(^inv)), true
}

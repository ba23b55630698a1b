package vaultstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// The outbox: an event is written in the transaction of the change it
// reports, one entry per subscribed webhook, so an acknowledged change
// always gets its events, and a change that did not commit never does.
//
//	v1/whq/{tenant}/{webhook}/{slot}   a pending event, sealed with the tenant's data key
//
// A slot is the event's time in nanoseconds (16 hex digits) and 8 random
// hex digits, so a webhook's events sort in the order they happened and
// the worker finds every pending webhook with one ordered scan. The
// queue stays outside v1/t/{tenant}/ so that scan need not visit every
// tenant; the worker drops the entries of a tenant that is gone.

// webhookEventTypes are the event types, sorted: {entity}.{created,
// updated, deleted} for the entities the store audits.
var webhookEventTypes = []string{
	"application.created", "application.deleted", "application.updated",
	"key.created", "key.deleted",
	"proxy.created", "proxy.deleted", "proxy.updated",
	"reactor.created", "reactor.deleted", "reactor.updated",
	"token.created", "token.deleted", "token.updated",
}

// webhookEntities are the audited entity types that have events.
var webhookEntities = map[string]bool{"application": true, "key": true, "proxy": true, "reactor": true, "token": true}

// webhookQueuePrefixAll holds every pending event.
var webhookQueuePrefixAll = []byte(keyVersion + "whq/")

func webhookQueueTenantPrefix(tenantID string) []byte {
	return []byte(keyVersion + "whq/" + tenantID + "/")
}

func webhookQueuePrefix(tenantID, webhookID string) []byte {
	return []byte(keyVersion + "whq/" + tenantID + "/" + webhookID + "/")
}

func webhookQueueKey(tenantID, webhookID, slot string) []byte {
	return []byte(keyVersion + "whq/" + tenantID + "/" + webhookID + "/" + slot)
}

// webhookEventKind binds a pending event's seal.
const webhookEventKind = "webhook-event"

// webhookSlot orders a webhook's events by time.
func webhookSlot(at time.Time) string {
	return fmt.Sprintf("%016x%08x", uint64(at.UnixNano()), binary.BigEndian.Uint32(randomBytes(4)))
}

// WebhookEvent is what a webhook receives about one change: ids, types
// and who did it, never token data.
type WebhookEvent struct {
	// ID is the event's own id: a receiver that gets it twice (delivery
	// is at least once) has it already.
	ID string `json:"id"`
	// Type is one of WebhookEventTypes.
	Type     string `json:"type"`
	TenantID string `json:"tenant_id"`
	// Timestamp is when the change was made (RFC 3339, UTC).
	Timestamp string `json:"timestamp"`
	// Entity is the changed record's kind (token, application, key,
	// proxy, reactor) and EntityID its id.
	Entity   string `json:"entity"`
	EntityID string `json:"entity_id"`
	// ActorID and ActorType say who made the change.
	ActorID   string `json:"actor_id,omitempty"`
	ActorType string `json:"actor_type,omitempty"`
	// TraceID is the audit record the event comes from.
	TraceID string `json:"trace_id"`
}

// pendingEvent is an event in the outbox with its delivery state.
type pendingEvent struct {
	Event WebhookEvent `json:"event"`
	// Attempts made so far; FirstAttempt and NextAttempt in Unix
	// nanoseconds (0: not yet).
	Attempts     int    `json:"attempts,omitempty"`
	FirstAttempt int64  `json:"first_attempt,omitempty"`
	NextAttempt  int64  `json:"next_attempt,omitempty"`
	LastError    string `json:"last_error,omitempty"`
}

// webhookEventsOf derives the events of an audit record: the type and
// the entity id of each.
func webhookEventsOf(rec *AuditRecord) (eventType string, ids []string) {
	if !webhookEntities[rec.EntityType] {
		return "", nil
	}
	switch rec.Operation {
	case "create":
		if strings.Contains(rec.Message, "deduplicated") { // an existing token came back
			return "", nil
		}
		return rec.EntityType + ".created", []string{rec.EntityID}
	case "update":
		return rec.EntityType + ".updated", []string{rec.EntityID}
	case "delete":
		return rec.EntityType + ".deleted", []string{rec.EntityID}
	case "tokenize": // one record for every token of the request
		return "token.created", rec.TokenIDs
	}
	return "", nil
}

// enqueueWebhookEvents writes, in w, the events of an audited change for
// every enabled webhook of the tenant that subscribes to them. writeAudit
// calls it with the stamped record, so every audited change is covered.
func (s *Store) enqueueWebhookEvents(w Writer, tk *tenantKeys, t *Tenant, rec *AuditRecord) error {
	eventType, ids := webhookEventsOf(rec)
	if eventType == "" || len(ids) == 0 {
		return nil
	}
	hooks, err := s.webhooksIn(w, tk, t.ID)
	if err != nil {
		return err
	}
	now := s.now()
	queued := false
	for _, wh := range hooks {
		if !wh.subscribes(eventType) {
			continue
		}
		for i, id := range ids {
			ev := &pendingEvent{Event: WebhookEvent{ID: uuid.NewString(), Type: eventType, TenantID: t.ID,
				Timestamp: rec.CreatedAt.UTC().Format(time.RFC3339Nano), Entity: rec.EntityType, EntityID: auditTokenID(id),
				ActorID: rec.ActorID, ActorType: rec.ActorType, TraceID: rec.ID}}
			slot := webhookSlot(now.Add(time.Duration(i))) // a request's tokens in their order
			sealed, err := tk.sealRecord(webhookEventKind, t.ID, slot, ev)
			if err != nil {
				return err
			}
			if err := w.Put(webhookQueueKey(t.ID, wh.ID, slot), sealed, 0); err != nil {
				return err
			}
			queued = true
		}
	}
	if queued {
		s.wakeWebhooks()
	}
	return nil
}

// wakeWebhooks tells this process's delivery worker, if it runs, that an
// event may be waiting (it polls as well: the change may not have
// committed yet, or another process may have made it).
func (s *Store) wakeWebhooks() {
	s.hooks.init()
	select {
	case s.hooks.wake <- struct{}{}:
	default:
	}
}

// dropWebhookQueue deletes a webhook's pending events, in batches so a
// long queue fits the engine's transactions, and returns how many it
// deleted.
func (s *Store) dropWebhookQueue(ctx context.Context, tenantID, webhookID string) (int, error) {
	prefix := webhookQueuePrefix(tenantID, webhookID)
	total := 0
	for {
		n := 0
		err := s.kv.Update(ctx, func(w Writer) error {
			n = 0
			var keys [][]byte
			if err := w.Scan(prefix, nil, func(key, _ []byte) error {
				keys = append(keys, append([]byte(nil), key...))
				if len(keys) == 500 {
					return ErrStopScan
				}
				return nil
			}); err != nil {
				return err
			}
			for _, k := range keys {
				if err := w.Delete(k); err != nil {
					return err
				}
			}
			n = len(keys)
			return nil
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < 500 {
			return total, nil
		}
	}
}

// PendingWebhookEvents counts the events waiting for delivery to a
// webhook.
func (s *Store) PendingWebhookEvents(ctx context.Context, tenantID, webhookID string) (int, error) {
	n := 0
	err := s.kv.View(ctx, func(r Reader) error {
		n = 0
		return r.Scan(webhookQueuePrefix(tenantID, webhookID), nil, func(_, _ []byte) error { n++; return nil })
	})
	return n, err
}

package vaultstore

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"sort"
	"unicode/utf8"

	"github.com/google/uuid"
	"go.uber.org/zap"
)

// Webhooks tell a tenant's systems about changes without polling. A
// webhook names a URL and the event types it wants; every change the
// store makes to tokens, applications, keys, proxies and reactors writes
// an event for each subscribed webhook in the transaction of the change
// (webhooks_outbox.go), and a background worker posts them, signed, in
// order, retrying with backoff (webhooks_delivery.go).
//
// Everything of a webhook lives under the tenant, sealed with its data
// key like its other records: v1/t/{tenant}/wh/def/{id} for a webhook and
// v1/t/{tenant}/wh/key for the tenant's signing key. Pending events live
// under v1/whq/{tenant}/{webhook}/{slot} (webhooks_outbox.go).

// Webhook statuses.
const (
	WebhookEnabled  = "enabled"
	WebhookDisabled = "disabled"
)

// MaxWebhooks bounds a tenant's webhooks: every change reads them.
const MaxWebhooks = 20

// Webhook is a subscription of a URL to event types, as the API shows it.
type Webhook struct {
	ID       string `json:"id"`
	TenantID string `json:"tenant_id"`
	// Status is WebhookEnabled, or WebhookDisabled once its deliveries
	// kept failing.
	Status string `json:"status"`
	Name   string `json:"name"`
	// URL receives the events; the egress policy applies to it.
	URL string `json:"url"`
	// NotifyEmail is kept and shown; the vault sends no mail.
	NotifyEmail string `json:"notify_email,omitempty"`
	// Events are the event types it receives, sorted.
	Events []string `json:"events"`
	// CreatedBy and ModifiedBy are application ids ("" for the operator
	// or, on a disabling, the vault).
	CreatedBy  string     `json:"created_by"`
	CreatedAt  *Timestamp `json:"created_at"`
	ModifiedBy string     `json:"modified_by,omitempty"`
	ModifiedAt *Timestamp `json:"modified_at,omitempty"`
}

func (wh *Webhook) created() *Timestamp { return wh.CreatedAt }

// subscribes reports whether the webhook wants events of eventType.
func (wh *Webhook) subscribes(eventType string) bool {
	return wh.Status == WebhookEnabled && slices.Contains(wh.Events, eventType)
}

// WebhookInput is the body of POST and PUT /webhooks.
type WebhookInput struct {
	// Name is required, as for other records.
	Name string `json:"name"`
	// URL is required and must meet the egress policy.
	URL string `json:"url"`
	// NotifyEmail, optional, must be an email address.
	NotifyEmail string `json:"notify_email,omitempty"`
	// Events must name at least one of WebhookEventTypes.
	Events []string `json:"events"`
}

// WebhookURLCheck refuses a URL the deployment's egress policy forbids,
// with the reason a user can act on. The store checks everything else.
type WebhookURLCheck func(rawURL string) error

// maxWebhookURL bounds a webhook's URL.
const maxWebhookURL = 2048

// validate checks the input and, through check, the egress policy.
func (in *WebhookInput) validate(check WebhookURLCheck) error {
	v := &ValidationError{}
	validateName(v, in.Name)
	switch {
	case in.URL == "":
		v.Add("url", "url is required")
	case len(in.URL) > maxWebhookURL:
		v.Add("url", fmt.Sprintf("url must be at most %d characters", maxWebhookURL))
	case check != nil:
		if err := check(in.URL); err != nil {
			v.Add("url", err.Error())
		}
	}
	if in.NotifyEmail != "" {
		if a, err := mail.ParseAddress(in.NotifyEmail); err != nil || a.Address != in.NotifyEmail || utf8.RuneCountInString(in.NotifyEmail) > 254 {
			v.Add("notify_email", "notify_email must be an email address")
		}
	}
	if len(in.Events) == 0 {
		v.Add("events", "events must name at least one event type (GET /webhooks/event-types)")
	}
	for _, e := range in.Events {
		if !slices.Contains(webhookEventTypes, e) {
			v.Add("events", "events must be event types of GET /webhooks/event-types")
			break
		}
	}
	return v.OrNil()
}

// WebhookEventTypes lists the event types a webhook can subscribe to,
// sorted.
func WebhookEventTypes() []string { return slices.Clone(webhookEventTypes) }

func webhookKey(tenantID, id string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/wh/def/" + id)
}

func webhookPrefix(tenantID string) []byte { return []byte(keyVersion + "t/" + tenantID + "/wh/def/") }

// webhookKind binds every sealed value under v1/t/{tenant}/wh/ (the data
// key rotation re-seals them under this kind, with the key's last segment
// as id).
const webhookKind = "webhook"

// CreateWebhook creates an enabled webhook, and the tenant's signing key
// when it has none yet.
func (s *Store) CreateWebhook(ctx context.Context, tenantID, actorID string, in WebhookInput, check WebhookURLCheck) (*Webhook, error) {
	if err := in.validate(check); err != nil {
		return nil, err
	}
	var fresh *freshSigningKey // made outside the transaction, and only when the tenant has no key
	_, err := s.signingKeyOf(ctx, tenantID)
	if errors.Is(err, ErrNotFound) {
		fresh, err = newWebhookSigningKey(s.now())
	}
	if err != nil {
		return nil, err
	}
	wh := &Webhook{ID: uuid.NewString(), TenantID: tenantID, Status: WebhookEnabled, Name: in.Name, URL: in.URL,
		NotifyEmail: in.NotifyEmail, Events: normalizedEvents(in.Events), CreatedBy: actorID, CreatedAt: s.stampNow()}
	err = s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		n := 0
		if err := w.Scan(webhookPrefix(tenantID), nil, func(_, _ []byte) error { n++; return nil }); err != nil {
			return err
		}
		if n >= MaxWebhooks {
			return invalid("webhooks", fmt.Sprintf("a tenant has at most %d webhooks", MaxWebhooks))
		}
		if _, err := s.ensureSigningKey(w, tk, tenantID, fresh); err != nil {
			return err
		}
		if err := s.writeAudit(w, tk, t, byActor(actorID, "webhook", wh.ID, "create", "webhook created")); err != nil {
			return err
		}
		return putSealed(w, tk, webhookKind, tenantID, wh.ID, webhookKey(tenantID, wh.ID), wh)
	})
	if err != nil {
		return nil, err
	}
	return wh, nil
}

// normalizedEvents sorts event types and drops repeats.
func normalizedEvents(events []string) []string {
	out := slices.Clone(events)
	sort.Strings(out)
	return slices.Compact(out)
}

// GetWebhook returns one of the tenant's webhooks.
func (s *Store) GetWebhook(ctx context.Context, tenantID, id string) (*Webhook, error) {
	return getRecord[Webhook](ctx, s, webhookKind, tenantID, id, webhookKey(tenantID, id))
}

// ListWebhooks returns the tenant's webhooks, oldest first.
func (s *Store) ListWebhooks(ctx context.Context, tenantID string) ([]*Webhook, error) {
	return listRecords[Webhook](ctx, s, webhookKind, tenantID, webhookPrefix(tenantID))
}

// UpdateWebhook replaces a webhook's name, URL, notify_email and events.
// Saving a webhook enables it again: a disabled one starts with the
// events that happen from then on.
func (s *Store) UpdateWebhook(ctx context.Context, tenantID, id, actorID string, in WebhookInput, check WebhookURLCheck) (*Webhook, error) {
	if !isID(id) {
		return nil, ErrNotFound
	}
	if err := in.validate(check); err != nil {
		return nil, err
	}
	var out *Webhook
	err := s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		var wh Webhook
		if err := s.getSealed(w, tk, webhookKind, tenantID, id, webhookKey(tenantID, id), &wh); err != nil {
			return err
		}
		wh.Name, wh.URL, wh.NotifyEmail, wh.Events = in.Name, in.URL, in.NotifyEmail, normalizedEvents(in.Events)
		wh.Status, wh.ModifiedBy, wh.ModifiedAt = WebhookEnabled, actorID, s.stampNow()
		if err := s.writeAudit(w, tk, t, byActor(actorID, "webhook", id, "update", "webhook updated")); err != nil {
			return err
		}
		out = &wh
		return putSealed(w, tk, webhookKind, tenantID, id, webhookKey(tenantID, id), &wh)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteWebhook removes a webhook; its pending events go with it.
func (s *Store) DeleteWebhook(ctx context.Context, tenantID, id, actorID string) error {
	if !isID(id) {
		return ErrNotFound
	}
	err := s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		var wh Webhook
		if err := s.getSealed(w, tk, webhookKind, tenantID, id, webhookKey(tenantID, id), &wh); err != nil {
			return err
		}
		if err := s.writeAudit(w, tk, t, byActor(actorID, "webhook", id, "delete", "webhook deleted")); err != nil {
			return err
		}
		return w.Delete(webhookKey(tenantID, id))
	})
	if err != nil {
		return err
	}
	// the worker drops events of a webhook that is gone; drop them now
	// too, in batches, so a long queue does not wait for it
	if _, err := s.dropWebhookQueue(context.WithoutCancel(ctx), tenantID, id); err != nil {
		s.logger.Warn("dropping a deleted webhook's events failed; the delivery worker drops them",
			zap.String("webhook_id", id), zap.Error(err))
	}
	return nil
}

// webhooksIn reads the tenant's webhooks inside a transaction.
func (s *Store) webhooksIn(r Reader, tk *tenantKeys, tenantID string) ([]*Webhook, error) {
	prefix := webhookPrefix(tenantID)
	var out []*Webhook
	err := r.Scan(prefix, nil, func(key, raw []byte) error {
		var wh Webhook
		if err := tk.openRecord(webhookKind, tenantID, string(key[len(prefix):]), raw, &wh); err != nil {
			return err
		}
		out = append(out, &wh)
		return nil
	})
	return out, err
}

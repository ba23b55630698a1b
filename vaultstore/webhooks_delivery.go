package vaultstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Delivery: one process of those sharing the engine runs the worker (the
// "webhooks" lease, cluster.go), so a webhook's events go out one at a
// time, in the order they happened. A failed delivery is retried with
// exponential backoff, blocking the webhook's later events; a webhook
// whose oldest event still fails RetryFor after its first attempt is
// disabled, its pending events dropped, with an audit record. Delivery is
// at least once: a process that dies after the receiver answered and
// before the event left the outbox sends it again, with the same event id.

// WebhookDelivery is one attempt to post an event.
type WebhookDelivery struct {
	TenantID  string
	WebhookID string
	URL       string
	EventID   string
	EventType string
	// Attempt counts from 1.
	Attempt int
	// Body is the JSON posted, and Signature its RSASSA-PSS SHA-256
	// signature (base64) under the tenant's key KeyID.
	Body      []byte
	Signature string
	KeyID     string
}

// WebhookDeliveryConfig configures the delivery worker.
type WebhookDeliveryConfig struct {
	// Deliver posts one event; nil error means the receiver took it (2xx).
	Deliver func(ctx context.Context, d *WebhookDelivery) error
	// RetryBase is the first retry's delay, doubled at each retry up to
	// RetryMax. Defaults: 5s and 1h.
	RetryBase, RetryMax time.Duration
	// RetryFor is how long a webhook's oldest event is retried before the
	// webhook is disabled. Default: 24h.
	RetryFor time.Duration
	// Concurrency bounds the webhooks delivered to at once. Default: 16.
	Concurrency int
	// Poll is how often the worker looks for events other processes
	// wrote. Default: 1s.
	Poll time.Duration
	// OnAttempt, when set, is told of every attempt (metrics).
	OnAttempt func(d *WebhookDelivery, err error, took time.Duration)
	// OnDisabled, when set, is told of every webhook disabled (metrics).
	OnDisabled func(tenantID, webhookID string)
}

func (c *WebhookDeliveryConfig) defaults() {
	if c.RetryBase <= 0 {
		c.RetryBase = 5 * time.Second
	}
	if c.RetryMax <= 0 {
		c.RetryMax = time.Hour
	}
	if c.RetryFor <= 0 {
		c.RetryFor = 24 * time.Hour
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 16
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
}

// backoff is the delay before retry n (n >= 1).
func (c *WebhookDeliveryConfig) backoff(n int) time.Duration {
	d := c.RetryBase
	for i := 1; i < n && d < c.RetryMax; i++ {
		d *= 2
	}
	return min(d, c.RetryMax)
}

// webhookWorkers is the store's side of delivery: the configurations that
// started a worker and have not stopped it, newest last (the last one's
// worker runs), the wake-up channel and the signing keys opened.
type webhookWorkers struct {
	once    sync.Once
	wake    chan struct{}
	mu      sync.Mutex
	started []*webhookWorker
	keys    signingKeys
}

func (h *webhookWorkers) init() { h.once.Do(func() { h.wake = make(chan struct{}, 1) }) }

func (h *webhookWorkers) cachedKey(tenantID string) *signingKey { return h.keys.get(tenantID) }

func (h *webhookWorkers) cacheKey(tenantID string, k *signingKey) { h.keys.put(tenantID, k) }

// webhookWorker is one configuration's worker; cancel and done are set
// while it runs.
type webhookWorker struct {
	cfg    WebhookDeliveryConfig
	cancel context.CancelFunc
	done   chan struct{}
}

// StartWebhookDelivery starts the delivery worker with cfg in place of the
// one running: Caddy starts a reloaded configuration before it stops the
// old one. stop ends this configuration's worker; when it was the running
// one and an earlier configuration has not stopped (the new one failed to
// start), the earlier one's worker runs again. Close stops every worker.
func (s *Store) StartWebhookDelivery(cfg WebhookDeliveryConfig) (stop func()) {
	cfg.defaults()
	s.hooks.init()
	wk := &webhookWorker{cfg: cfg}
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	if n := len(s.hooks.started); n > 0 {
		s.haltWebhookWorker(s.hooks.started[n-1])
	}
	s.hooks.started = append(s.hooks.started, wk)
	s.runWebhookWorkerOf(wk)
	return func() {
		s.hooks.mu.Lock()
		defer s.hooks.mu.Unlock()
		i := slices.Index(s.hooks.started, wk)
		if i < 0 {
			return
		}
		last := i == len(s.hooks.started)-1
		s.haltWebhookWorker(wk)
		s.hooks.started = slices.Delete(s.hooks.started, i, i+1)
		if n := len(s.hooks.started); last && n > 0 && s.ctx.Err() == nil {
			s.runWebhookWorkerOf(s.hooks.started[n-1])
		}
	}
}

// runWebhookWorkerOf starts wk's worker; hooks.mu is held.
func (s *Store) runWebhookWorkerOf(wk *webhookWorker) {
	ctx, cancel := context.WithCancel(s.ctx)
	wk.cancel, wk.done = cancel, make(chan struct{})
	done := wk.done
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(done)
		s.runWebhookWorker(ctx, &wk.cfg)
	}()
}

// haltWebhookWorker stops wk's worker, if it runs, and waits for it;
// hooks.mu is held.
func (s *Store) haltWebhookWorker(wk *webhookWorker) {
	if wk.cancel == nil {
		return
	}
	wk.cancel()
	<-wk.done
	wk.cancel, wk.done = nil, nil
}

// webhookLeaseRetry is how often a process without the lease tries to
// take it.
const webhookLeaseRetry = 10 * time.Second

// runWebhookWorker delivers under the cluster's lease until ctx ends.
func (s *Store) runWebhookWorker(ctx context.Context, cfg *WebhookDeliveryConfig) {
	for ctx.Err() == nil {
		ran, err := s.exclusively(ctx, "webhooks", func(ctx context.Context) error {
			s.deliverWebhooks(ctx, cfg)
			return nil
		})
		if err != nil && ctx.Err() == nil {
			s.logger.Warn("webhook delivery stopped; it starts again", zap.Error(err))
		}
		if ran && ctx.Err() == nil {
			continue // the lease was lost: try to take it again at once
		}
		select {
		case <-ctx.Done():
		case <-time.After(webhookLeaseRetry):
		}
	}
}

// webhookRef names a webhook with pending events.
type webhookRef struct{ tenantID, webhookID string }

// deliverWebhooks drains every webhook with due events, cfg.Concurrency
// webhooks at a time, until ctx ends.
func (s *Store) deliverWebhooks(ctx context.Context, cfg *WebhookDeliveryConfig) {
	var mu sync.Mutex
	busy := map[webhookRef]bool{}
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	ticker := time.NewTicker(cfg.Poll)
	defer ticker.Stop()
	for {
		refs, err := s.pendingWebhooks(ctx, 1000)
		if err != nil && ctx.Err() == nil {
			s.logger.Warn("listing pending webhook events failed", zap.Error(err))
		}
		for _, ref := range refs {
			mu.Lock()
			if busy[ref] {
				mu.Unlock()
				continue
			}
			busy[ref] = true
			mu.Unlock()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem; mu.Lock(); delete(busy, ref); mu.Unlock() }()
				if err := s.drainWebhook(ctx, cfg, ref); err != nil && ctx.Err() == nil {
					s.logger.Warn("delivering a webhook's events failed", zap.String("webhook_id", ref.webhookID), zap.Error(err))
				}
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-s.hooks.wake:
		}
	}
}

// pendingWebhooks lists up to limit webhooks with pending events, with
// one ordered scan that skips past each webhook's events.
func (s *Store) pendingWebhooks(ctx context.Context, limit int) ([]webhookRef, error) {
	var out []webhookRef
	var after []byte
	for len(out) < limit {
		var found *webhookRef
		err := s.kv.View(ctx, func(r Reader) error {
			found = nil
			return r.Scan(webhookQueuePrefixAll, after, func(key, _ []byte) error {
				parts := strings.Split(string(key[len(webhookQueuePrefixAll):]), "/")
				if len(parts) == 3 {
					found = &webhookRef{tenantID: parts[0], webhookID: parts[1]}
				}
				return ErrStopScan
			})
		})
		if err != nil {
			return out, err
		}
		if found == nil {
			return out, nil
		}
		out = append(out, *found)
		after = append(webhookQueuePrefix(found.tenantID, found.webhookID), 0xff)
	}
	return out, nil
}

// drainWebhook delivers a webhook's events in order until none is due.
func (s *Store) drainWebhook(ctx context.Context, cfg *WebhookDeliveryConfig, ref webhookRef) error {
	for ctx.Err() == nil {
		slot, ev, wh, err := s.webhookHead(ctx, ref)
		switch {
		case errors.Is(err, ErrNotFound): // the tenant or the webhook is gone, or disabled
			_, err = s.dropWebhookQueue(ctx, ref.tenantID, ref.webhookID)
			return err
		case err != nil:
			return err
		case ev == nil:
			return nil
		}
		if wait := time.Until(time.Unix(0, ev.NextAttempt)); wait > 0 {
			if wait > cfg.Poll { // the dispatcher comes back for it
				return nil
			}
			select { // a short backoff: wait here rather than a poll
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
		now := time.Now()
		key, err := s.signingKeyOf(ctx, ref.tenantID)
		if err != nil {
			return err
		}
		d := &WebhookDelivery{TenantID: ref.tenantID, WebhookID: ref.webhookID, URL: wh.URL, EventID: ev.Event.ID,
			EventType: ev.Event.Type, Attempt: ev.Attempts + 1, KeyID: key.public.ID}
		if d.Body, err = webhookBody(&ev.Event, now); err != nil {
			return err
		}
		if d.Signature, err = key.sign(d.Body); err != nil {
			return err
		}
		derr := cfg.Deliver(ctx, d)
		took := time.Since(now)
		if derr != nil && ctx.Err() != nil {
			return nil // stopped mid-attempt: it counts for nothing, the event stays
		}
		// the receiver's answer is known: record it even when stopping, so a
		// delivered event is not sent again by the next worker
		if err := s.recordAttempt(ctx, cfg, ref, slot, ev, d, derr, now, took); err != nil {
			return err
		}
	}
	return nil
}

// recordAttempt records one attempt's outcome: the event leaves the
// outbox, or is rescheduled, or its webhook is disabled.
func (s *Store) recordAttempt(ctx context.Context, cfg *WebhookDeliveryConfig, ref webhookRef, slot string, ev *pendingEvent,
	d *WebhookDelivery, derr error, now time.Time, took time.Duration) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if cfg.OnAttempt != nil {
		cfg.OnAttempt(d, derr, took)
	}
	if derr == nil {
		return s.finishWebhookEvent(ctx, ref, slot, d, nil, nil)
	}
	if ev.FirstAttempt == 0 {
		ev.FirstAttempt = now.UnixNano()
	}
	if time.Duration(now.UnixNano()-ev.FirstAttempt) >= cfg.RetryFor {
		if err := s.disableWebhook(ctx, ref, d, derr, cfg.RetryFor); err != nil {
			return err
		}
		if cfg.OnDisabled != nil {
			cfg.OnDisabled(ref.tenantID, ref.webhookID)
		}
		return nil
	}
	ev.Attempts++
	ev.NextAttempt = now.Add(cfg.backoff(ev.Attempts)).UnixNano()
	ev.LastError = deliveryReason(derr)
	return s.finishWebhookEvent(ctx, ref, slot, d, derr, ev)
}

// webhookHead reads a webhook's oldest pending event and the webhook;
// ErrNotFound when the tenant or the webhook is gone or disabled, nil
// event when nothing is pending.
func (s *Store) webhookHead(ctx context.Context, ref webhookRef) (string, *pendingEvent, *Webhook, error) {
	var slot string
	var ev *pendingEvent
	var wh Webhook
	err := s.kv.View(ctx, func(r Reader) error {
		slot, ev = "", nil
		tk, err := s.tenantKeysFor(r, ref.tenantID)
		if err != nil {
			return err
		}
		prefix := webhookQueuePrefix(ref.tenantID, ref.webhookID)
		var raw []byte
		if err := r.Scan(prefix, nil, func(key, value []byte) error {
			slot, raw = string(key[len(prefix):]), append([]byte(nil), value...)
			return ErrStopScan
		}); err != nil {
			return err
		}
		if raw == nil {
			return nil
		}
		if err := s.getSealed(r, tk, webhookKind, ref.tenantID, ref.webhookID, webhookKey(ref.tenantID, ref.webhookID), &wh); err != nil {
			return err
		}
		if wh.Status != WebhookEnabled {
			return ErrNotFound
		}
		ev = &pendingEvent{}
		return tk.openRecord(webhookEventKind, ref.tenantID, slot, raw, ev)
	})
	return slot, ev, &wh, err
}

// webhookBody is the JSON a receiver gets, with its keys sorted and no
// HTML escaping: the bytes are those of a stable stringify of the parsed
// body, so a receiver that verifies the vendor's way (stringify the
// parsed body) checks exactly the signed bytes.
func webhookBody(ev *WebhookEvent, deliveredAt time.Time) ([]byte, error) {
	actor := map[string]any{}
	if ev.ActorID != "" {
		actor["id"] = ev.ActorID
	}
	if ev.ActorType != "" {
		actor["type"] = ev.ActorType
	}
	body := map[string]any{
		"delivered_at": deliveredAt.UTC().Format(time.RFC3339Nano),
		"event": map[string]any{
			"id": ev.ID, "type": ev.Type, "tenant_id": ev.TenantID, "timestamp": ev.Timestamp, "trace_id": ev.TraceID,
			"data": map[string]any{ev.Entity: map[string]any{"id": ev.EntityID}, "actor": actor},
		},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// deliveryReason is a failed attempt's error as the audit log and the
// outbox keep it: short, and without the URL (which may hold a secret).
func deliveryReason(err error) string {
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return msg
}

// finishWebhookEvent records an attempt: the event leaves the outbox when
// it was delivered (next nil), else is rewritten with its next attempt;
// an audit record of the attempt goes in the same transaction.
func (s *Store) finishWebhookEvent(ctx context.Context, ref webhookRef, slot string, d *WebhookDelivery, derr error, next *pendingEvent) error {
	return s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, ref.tenantID)
		if err != nil {
			return err
		}
		key := webhookQueueKey(ref.tenantID, ref.webhookID, slot)
		if _, err := w.Get(key); errors.Is(err, ErrNotFound) {
			return nil // dropped meanwhile (webhook deleted)
		} else if err != nil {
			return err
		}
		msg := fmt.Sprintf("event %s (%s) delivered, attempt %d", d.EventID, d.EventType, d.Attempt)
		if derr != nil {
			msg = fmt.Sprintf("event %s (%s) attempt %d failed: %s", d.EventID, d.EventType, d.Attempt, deliveryReason(derr))
		}
		if err := s.writeAudit(w, tk, t, byActor("", "webhook", ref.webhookID, "deliver", msg)); err != nil {
			return err
		}
		if next == nil {
			return w.Delete(key)
		}
		sealed, err := tk.sealRecord(webhookEventKind, ref.tenantID, slot, next)
		if err != nil {
			return err
		}
		return w.Put(key, sealed, 0)
	})
}

// disableWebhook disables a webhook that kept failing, with an audit
// record, and drops its pending events.
func (s *Store) disableWebhook(ctx context.Context, ref webhookRef, d *WebhookDelivery, derr error, retryFor time.Duration) error {
	err := s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, ref.tenantID)
		if err != nil {
			return err
		}
		var wh Webhook
		if err := s.getSealed(w, tk, webhookKind, ref.tenantID, ref.webhookID, webhookKey(ref.tenantID, ref.webhookID), &wh); err != nil {
			return err
		}
		wh.Status, wh.ModifiedAt = WebhookDisabled, s.stampNow()
		msg := fmt.Sprintf("webhook disabled: event %s (%s) still failed after %d attempts over %s: %s; its pending events were dropped",
			d.EventID, d.EventType, d.Attempt, retryFor, deliveryReason(derr))
		if err := s.writeAudit(w, tk, t, byActor("", "webhook", ref.webhookID, "update", msg)); err != nil {
			return err
		}
		return putSealed(w, tk, webhookKind, ref.tenantID, ref.webhookID, webhookKey(ref.tenantID, ref.webhookID), &wh)
	})
	if err != nil {
		return err
	}
	s.logger.Warn("a webhook that kept failing was disabled", zap.String("tenant_id", ref.tenantID), zap.String("webhook_id", ref.webhookID))
	_, err = s.dropWebhookQueue(ctx, ref.tenantID, ref.webhookID)
	return err
}

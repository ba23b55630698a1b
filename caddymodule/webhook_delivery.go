package caddymodule

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/tokenvault/tokenvault/egress"
	"github.com/tokenvault/tokenvault/internal/version"
	"github.com/tokenvault/tokenvault/vaultstore"
)

// Webhook delivery's transport: the store's worker (vaultstore,
// webhooks_delivery.go) picks the events and signs them; this posts them
// under the proxy's egress policy, which the URL meets again before every
// attempt and the dialer checks on the very address it connects to.

// WebhooksConfig tunes webhook delivery.
type WebhooksConfig struct {
	// RetryBase is the delay before the first retry of a failed delivery,
	// doubled at each retry up to RetryMax. Defaults: 5s and 1h.
	RetryBase caddy.Duration `json:"retry_base,omitempty"`
	RetryMax  caddy.Duration `json:"retry_max,omitempty"`
	// RetryFor is how long an event is retried before its webhook is
	// disabled. Default: 24h.
	RetryFor caddy.Duration `json:"retry_for,omitempty"`
	// Timeout bounds one delivery attempt. Default: 10s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
}

// validate refuses negative durations.
func (c *WebhooksConfig) validate() error {
	if c == nil {
		return nil
	}
	for name, d := range map[string]caddy.Duration{"retry_base": c.RetryBase, "retry_max": c.RetryMax, "retry_for": c.RetryFor, "timeout": c.Timeout} {
		if d < 0 {
			return fmt.Errorf("webhooks: %s must not be negative", name)
		}
	}
	return nil
}

// set sets one option of the Caddyfile's webhooks block.
func (c *WebhooksConfig) set(option, value string) error {
	var target *caddy.Duration
	switch option {
	case "retry_base":
		target = &c.RetryBase
	case "retry_max":
		target = &c.RetryMax
	case "retry_for":
		target = &c.RetryFor
	case "timeout":
		target = &c.Timeout
	default:
		return fmt.Errorf("unrecognized webhooks option %q", option)
	}
	d, err := caddy.ParseDuration(value)
	if err != nil || d <= 0 {
		return fmt.Errorf("webhooks: %s: %q is not a positive duration", option, value)
	}
	*target = caddy.Duration(d)
	return nil
}

// webhookTimeout is an attempt's bound.
func (c *WebhooksConfig) webhookTimeout() time.Duration {
	if c == nil || c.Timeout <= 0 {
		return 10 * time.Second
	}
	return time.Duration(c.Timeout)
}

// maxWebhookAnswer is how much of a receiver's answer is read (and
// thrown away) so the connection can be reused.
const maxWebhookAnswer = 64 << 10

// startWebhooks starts the store's delivery worker with this config's
// transport; Stop stops it, unless a newer config's has replaced it.
func (a *App) startWebhooks(s *vaultstore.Store) error {
	if err := registerWebhookMetrics(a.ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("registering webhook metrics: %w", err)
	}
	cfg := vaultstore.WebhookDeliveryConfig{Deliver: a.deliverWebhook, OnAttempt: countWebhookAttempt, OnDisabled: countWebhookDisabled}
	if c := a.Webhooks; c != nil {
		cfg.RetryBase, cfg.RetryMax, cfg.RetryFor = time.Duration(c.RetryBase), time.Duration(c.RetryMax), time.Duration(c.RetryFor)
	}
	a.stopWebhooks = s.StartWebhookDelivery(cfg)
	return nil
}

// webhookClient posts deliveries: the egress transport, no redirects.
func (a *App) webhookClient() *http.Client {
	return &http.Client{Transport: a.transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// deliverWebhook posts one signed event; nil when the receiver answered
// 2xx. Errors never name the URL, which may hold a secret.
func (a *App) deliverWebhook(ctx context.Context, d *vaultstore.WebhookDelivery) error {
	u, err := a.egress.CheckURL(d.URL)
	if err != nil {
		return fmt.Errorf("refused by the egress policy: %s", egressReason(err))
	}
	ctx, cancel := context.WithTimeout(ctx, a.Webhooks.webhookTimeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(d.Body))
	if err != nil {
		return errors.New("the url cannot be requested")
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "Tokenvault-Webhooks/"+version.Version)
	prefix := a.HeaderPrefix + "-"
	h.Set(prefix+"SIGNATURE", d.Signature)
	h.Set(prefix+"SIGNATURE-VERSION", "1")
	h.Set(prefix+"SIGNATURE-KEY-ID", d.KeyID)
	h.Set(prefix+"WEBHOOK-ID", d.WebhookID)
	h.Set(prefix+"EVENT-ID", d.EventID)
	h.Set(prefix+"EVENT-TYPE", d.EventType)
	h.Set(prefix+"DELIVERY-ATTEMPT", fmt.Sprint(d.Attempt))
	resp, err := a.webhookClient().Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		if errors.Is(err, egress.ErrRefused) {
			return fmt.Errorf("refused by the egress policy at connect: %s", egressReason(err))
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return errors.New("the receiver did not answer in time")
		}
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Err != nil {
			err = oe.Err // without the address
		}
		return fmt.Errorf("connecting to the receiver: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxWebhookAnswer))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the receiver answered %d", resp.StatusCode)
	}
	return nil
}

package caddymodule

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// webhookMetrics count delivery attempts and disabled webhooks. No label
// names a tenant, a webhook or a URL.
var webhookMetrics = struct {
	attempts *prometheus.CounterVec
	duration prometheus.Histogram
	disabled prometheus.Counter
}{
	attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "tokenvault", Name: "webhook_deliveries_total",
		Help: "Webhook delivery attempts, by result (delivered, failed).",
	}, []string{"result"}),
	duration: prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "tokenvault", Name: "webhook_delivery_seconds",
		Help:    "Time a webhook delivery attempt took, until the receiver's answer or the failure.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
	}),
	disabled: prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "tokenvault", Name: "webhooks_disabled_total",
		Help: "Webhooks disabled because their deliveries kept failing.",
	}),
}

// registerWebhookMetrics registers the webhook metrics in the config's
// registry.
func registerWebhookMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{webhookMetrics.attempts, webhookMetrics.duration, webhookMetrics.disabled} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return err
			}
		}
	}
	return nil
}

// countWebhookAttempt counts one delivery attempt.
func countWebhookAttempt(_ *vaultstore.WebhookDelivery, err error, took time.Duration) {
	result := "delivered"
	if err != nil {
		result = "failed"
	}
	webhookMetrics.attempts.WithLabelValues(result).Inc()
	webhookMetrics.duration.Observe(took.Seconds())
}

// countWebhookDisabled counts a webhook disabled.
func countWebhookDisabled(string, string) { webhookMetrics.disabled.Inc() }

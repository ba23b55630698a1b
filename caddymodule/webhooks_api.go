package caddymodule

import (
	"errors"
	"net/http"
	"strings"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// The webhook endpoints (docs/webhooks.md): subscriptions of a URL to
// event types, the event types, and the tenant's signing key receivers
// verify deliveries with. Delivery itself is webhook_delivery.go.

// listWebhookEventTypes: GET /webhooks/event-types.
func listWebhookEventTypes(c *call) error {
	return writeJSON(c.w, http.StatusOK, vaultstore.WebhookEventTypes())
}

// getWebhookSigningKey: GET /webhooks/signing-key, the public key that
// verifies the tenant's deliveries.
func getWebhookSigningKey(c *call) error {
	k, err := c.store.WebhookSigningKey(c.ctx(), c.tenantID())
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, k)
}

// createWebhook: POST /webhooks.
func createWebhook(c *call) error {
	var in vaultstore.WebhookInput
	if err := c.decode(&in); err != nil {
		return err
	}
	wh, err := c.store.CreateWebhook(c.ctx(), c.tenantID(), c.actorID(), in, c.api.checkWebhookURL)
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusCreated, wh)
}

// listWebhooks: GET /webhooks, oldest first.
func listWebhooks(c *call) error {
	number, size, err := pageParams(c.r.URL.Query())
	if err != nil {
		return err
	}
	hooks, err := c.store.ListWebhooks(c.ctx(), c.tenantID())
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, paginate(hooks, number, size))
}

// getWebhook: GET /webhooks/{id}.
func getWebhook(c *call) error {
	wh, err := c.store.GetWebhook(c.ctx(), c.tenantID(), c.params["id"])
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, wh)
}

// updateWebhook: PUT /webhooks/{id}; saving a disabled webhook enables it.
func updateWebhook(c *call) error {
	var in vaultstore.WebhookInput
	if err := c.decode(&in); err != nil {
		return err
	}
	wh, err := c.store.UpdateWebhook(c.ctx(), c.tenantID(), c.params["id"], c.actorID(), in, c.api.checkWebhookURL)
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, wh)
}

// deleteWebhook: DELETE /webhooks/{id}; its pending events are dropped.
func deleteWebhook(c *call) error {
	if err := c.store.DeleteWebhook(c.ctx(), c.tenantID(), c.params["id"], c.actorID()); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// checkWebhookURL applies the proxy's egress policy to a webhook URL when
// it is saved (the transport applies it again at every connection). The
// policy's reasons speak of a proxy's destination_url; a webhook's field
// is url.
func (h *API) checkWebhookURL(raw string) error {
	if _, err := h.app.egress.CheckURL(raw); err != nil {
		reason := egressReason(err)
		if rest, ok := strings.CutPrefix(reason, "destination_url "); ok {
			reason = "url " + rest
		}
		return errors.New(reason)
	}
	return nil
}

package vaultstore

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// webhookWorld is a tenant with a management application, for webhook tests.
type webhookWorld struct {
	s      *Store
	ctx    context.Context
	tenant *Tenant
	mgmt   *Application
	app    *Application // private, creates tokens
}

func newWebhookWorld(t *testing.T) *webhookWorld {
	t.Helper()
	s := openTestStore(t, Options{Dir: t.TempDir()})
	ct := mustCreateTenant(t, s, "hooks", "test")
	app, _ := mustCreateApp(t, s, ct.Tenant.ID, ApplicationInput{Name: "backend", Type: AppPrivate,
		Permissions: []string{"token:create", "token:read", "token:update", "token:delete"}})
	return &webhookWorld{s: s, ctx: context.Background(), tenant: ct.Tenant, mgmt: ct.Application, app: app}
}

func (w *webhookWorld) req() TokenRequest { return TokenRequest{Tenant: w.tenant, Application: w.app} }

func (w *webhookWorld) hook(t *testing.T, events ...string) *Webhook {
	t.Helper()
	wh, err := w.s.CreateWebhook(w.ctx, w.tenant.ID, w.mgmt.ID, WebhookInput{Name: "hook", URL: "https://hooks.example.com/in", Events: events}, nil)
	if err != nil {
		t.Fatalf("CreateWebhook: %v", err)
	}
	return wh
}

// queued opens every pending event of a webhook, oldest first.
func (w *webhookWorld) queued(t *testing.T, webhookID string) []WebhookEvent {
	t.Helper()
	var out []WebhookEvent
	err := w.s.kv.View(w.ctx, func(r Reader) error {
		out = out[:0]
		tk, err := w.s.tenantKeysFor(r, w.tenant.ID)
		if err != nil {
			return err
		}
		prefix := webhookQueuePrefix(w.tenant.ID, webhookID)
		return r.Scan(prefix, nil, func(key, raw []byte) error {
			var ev pendingEvent
			if err := tk.openRecord(webhookEventKind, w.tenant.ID, string(key[len(prefix):]), raw, &ev); err != nil {
				return err
			}
			out = append(out, ev.Event)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWebhookInputValidation(t *testing.T) {
	w := newWebhookWorld(t)
	refuse := func(raw string) error {
		if strings.Contains(raw, "169.254.169.254") {
			return errors.New("the address is not public")
		}
		return nil
	}
	good := WebhookInput{Name: "n", URL: "https://a.example/x", Events: []string{"token.created"}}
	cases := []struct {
		name   string
		change func(in *WebhookInput)
		fields []string
	}{
		{"no name", func(in *WebhookInput) { in.Name = "" }, []string{"name"}},
		{"no url", func(in *WebhookInput) { in.URL = "" }, []string{"url"}},
		{"url the egress policy refuses", func(in *WebhookInput) { in.URL = "https://169.254.169.254/latest" }, []string{"url"}},
		{"url too long", func(in *WebhookInput) { in.URL = "https://a.example/" + strings.Repeat("a", 3000) }, []string{"url"}},
		{"no events", func(in *WebhookInput) { in.Events = nil }, []string{"events"}},
		{"unknown event", func(in *WebhookInput) { in.Events = []string{"token.created", "token:created"} }, []string{"events"}},
		{"bad email", func(in *WebhookInput) { in.NotifyEmail = "not an address" }, []string{"notify_email"}},
		{"everything", func(in *WebhookInput) { *in = WebhookInput{} }, []string{"events", "name", "url"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := good
			in.Events = slices.Clone(good.Events)
			tc.change(&in)
			_, err := w.s.CreateWebhook(w.ctx, w.tenant.ID, w.mgmt.ID, in, refuse)
			if got := validationFields(t, err); !slices.Equal(got, tc.fields) {
				t.Fatalf("create: fields %v, want %v (err %v)", got, tc.fields, err)
			}
		})
	}
	list, err := w.s.ListWebhooks(w.ctx, w.tenant.ID)
	if err != nil || len(list) != 0 {
		t.Fatalf("refused webhooks were stored: %v, %v", list, err)
	}
}

func TestWebhookCRUD(t *testing.T) {
	w := newWebhookWorld(t)
	wh, err := w.s.CreateWebhook(w.ctx, w.tenant.ID, w.mgmt.ID, WebhookInput{Name: "first", URL: "https://a.example/in",
		NotifyEmail: "ops@example.com", Events: []string{"token.deleted", "token.created", "token.created"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if wh.Status != WebhookEnabled || !slices.Equal(wh.Events, []string{"token.created", "token.deleted"}) || wh.CreatedBy != w.mgmt.ID || wh.TenantID != w.tenant.ID {
		t.Fatalf("created %+v", wh)
	}
	got, err := w.s.GetWebhook(w.ctx, w.tenant.ID, wh.ID)
	if err != nil || got.URL != wh.URL || got.NotifyEmail != "ops@example.com" {
		t.Fatalf("get: %+v, %v", got, err)
	}
	up, err := w.s.UpdateWebhook(w.ctx, w.tenant.ID, wh.ID, "other", WebhookInput{Name: "renamed", URL: "https://b.example/in", Events: []string{"proxy.created"}}, nil)
	if err != nil || up.Name != "renamed" || up.URL != "https://b.example/in" || up.ModifiedBy != "other" || up.ModifiedAt == nil || up.NotifyEmail != "" {
		t.Fatalf("update: %+v, %v", up, err)
	}
	// another tenant sees nothing
	other := mustCreateTenant(t, w.s, "other", "test")
	if _, err := w.s.GetWebhook(w.ctx, other.Tenant.ID, wh.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another tenant's get: %v", err)
	}
	if _, err := w.s.UpdateWebhook(w.ctx, other.Tenant.ID, wh.ID, "x", WebhookInput{Name: "x", URL: "https://c.example", Events: []string{"token.created"}}, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another tenant's update: %v", err)
	}
	if err := w.s.DeleteWebhook(w.ctx, other.Tenant.ID, wh.ID, "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another tenant's delete: %v", err)
	}
	if list, _ := w.s.ListWebhooks(w.ctx, other.Tenant.ID); len(list) != 0 {
		t.Fatalf("another tenant lists %d webhooks", len(list))
	}
	if err := w.s.DeleteWebhook(w.ctx, w.tenant.ID, wh.ID, w.mgmt.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.s.GetWebhook(w.ctx, w.tenant.ID, wh.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if err := w.s.DeleteWebhook(w.ctx, w.tenant.ID, wh.ID, w.mgmt.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	recs, _, err := w.s.ListAudit(w.ctx, w.tenant.ID, AuditFilter{EntityType: "webhook"}, "", 10)
	if err != nil || len(recs) != 3 {
		t.Fatalf("audit of create, update, delete: %d records, %v", len(recs), err)
	}
	// the tenant's management application holds the permissions
	for _, p := range []string{"webhooks:create", "webhooks:read", "webhooks:update", "webhooks:delete"} {
		if !w.mgmt.Can(p) || slices.Contains(PermissionsFor(AppPrivate), p) || slices.Contains(PermissionsFor(AppPublic), p) {
			t.Errorf("%s: management only", p)
		}
	}
}

func TestWebhooksBoundedPerTenant(t *testing.T) {
	w := newWebhookWorld(t)
	for range MaxWebhooks {
		w.hook(t, "token.created")
	}
	_, err := w.s.CreateWebhook(w.ctx, w.tenant.ID, w.mgmt.ID, WebhookInput{Name: "one more", URL: "https://a.example", Events: []string{"token.created"}}, nil)
	if got := validationFields(t, err); !slices.Equal(got, []string{"webhooks"}) {
		t.Fatalf("webhook %d: %v", MaxWebhooks+1, err)
	}
}

func TestWebhookOutboxFollowsChanges(t *testing.T) {
	w := newWebhookWorld(t)
	all := w.hook(t, WebhookEventTypes()...)
	tokensOnly := w.hook(t, "token.created")
	disabled := w.hook(t, "token.created")
	setWebhookStatus(t, w, disabled.ID, WebhookDisabled)

	tok, err := w.s.CreateToken(w.ctx, w.req(), TokenInput{Type: "token", Data: "4242424242424242"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.s.UpdateToken(w.ctx, w.req(), tok.ID, map[string]any{"metadata": map[string]any{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	// a change that fails writes no event
	if _, err := w.s.CreateToken(w.ctx, w.req(), TokenInput{Type: "card", Data: map[string]any{"number": "1"}}); err == nil {
		t.Fatal("an invalid card was created")
	}
	if _, err := w.s.Tokenize(w.ctx, w.req(), map[string]any{"a": map[string]any{"type": "token", "data": "x"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.s.DeleteToken(w.ctx, w.req(), tok.ID); err != nil {
		t.Fatal(err)
	}
	app, _ := mustCreateApp(t, w.s, w.tenant.ID, privateApp("second"))
	if _, err := w.s.CreateProxy(w.ctx, w.tenant.ID, w.mgmt.ID, ProxyInput{Name: "p", DestinationURL: "https://dest.example"}, nil); err != nil {
		t.Fatal(err)
	}

	got := w.queued(t, all.ID)
	var types []string
	for _, ev := range got {
		types = append(types, ev.Type)
		if ev.TenantID != w.tenant.ID || ev.ID == "" || ev.TraceID == "" || ev.Timestamp == "" {
			t.Errorf("event %+v lacks its ids", ev)
		}
	}
	want := []string{"token.created", "token.updated", "token.created", "token.deleted", "application.created", "key.created", "proxy.created"}
	if !slices.Equal(types, want) {
		t.Fatalf("events %v, want %v", types, want)
	}
	if got[0].EntityID != tok.ID || got[0].ActorID != w.app.ID || got[0].ActorType != ActorApplication || got[4].EntityID != app.ID {
		t.Fatalf("events name the wrong records: %+v", got)
	}
	if n := len(w.queued(t, tokensOnly.ID)); n != 2 {
		t.Fatalf("the token.created webhook got %d events, want 2", n)
	}
	if n := len(w.queued(t, disabled.ID)); n != 0 {
		t.Fatalf("a disabled webhook got %d events", n)
	}
	raw, _ := json.Marshal(got)
	if strings.Contains(string(raw), "4242") {
		t.Fatalf("events hold token data: %s", raw)
	}
}

// An id that could be a card number is not repeated in an event, as in
// the audit log.
func TestWebhookEventHidesDataLikeIDs(t *testing.T) {
	w := newWebhookWorld(t)
	wh := w.hook(t, "token.created")
	if _, err := w.s.CreateToken(w.ctx, w.req(), TokenInput{ID: "4242424242424242", Type: "token", Data: "x"}); err != nil {
		t.Fatal(err)
	}
	evs := w.queued(t, wh.ID)
	if len(evs) != 1 || strings.Contains(evs[0].EntityID, "4242") {
		t.Fatalf("events %+v", evs)
	}
}

func setWebhookStatus(t *testing.T, w *webhookWorld, id, status string) {
	t.Helper()
	err := w.s.kv.Update(w.ctx, func(wr Writer) error {
		tk, err := w.s.tenantKeysFor(wr, w.tenant.ID)
		if err != nil {
			return err
		}
		var wh Webhook
		if err := w.s.getSealed(wr, tk, webhookKind, w.tenant.ID, id, webhookKey(w.tenant.ID, id), &wh); err != nil {
			return err
		}
		wh.Status = status
		return putSealed(wr, tk, webhookKind, w.tenant.ID, id, webhookKey(w.tenant.ID, id), &wh)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// recorder is a Deliver func that keeps what it was given and fails as
// told.
type recorder struct {
	mu        sync.Mutex
	got       []*WebhookDelivery
	fail      func(d *WebhookDelivery) error
	delivered chan string
}

func newRecorder(fail func(d *WebhookDelivery) error) *recorder {
	return &recorder{fail: fail, delivered: make(chan string, 1000)}
}

func (r *recorder) deliver(_ context.Context, d *WebhookDelivery) error {
	r.mu.Lock()
	r.got = append(r.got, d)
	r.mu.Unlock()
	if r.fail != nil {
		if err := r.fail(d); err != nil {
			return err
		}
	}
	r.delivered <- d.EventID
	return nil
}

func (r *recorder) attempts() []*WebhookDelivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func waitDelivered(t *testing.T, r *recorder, n int) []string {
	t.Helper()
	var ids []string
	deadline := time.After(60 * time.Second)
	for len(ids) < n {
		select {
		case id := <-r.delivered:
			ids = append(ids, id)
		case <-deadline:
			t.Fatalf("%d of %d events delivered in 60 s", len(ids), n)
		}
	}
	return ids
}

func verifyDelivery(t *testing.T, pubPEM string, d *WebhookDelivery) {
	t.Helper()
	block, _ := pem.Decode([]byte(pubPEM))
	if block == nil {
		t.Fatal("the signing key is not PEM")
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := base64.StdEncoding.DecodeString(d.Signature)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(d.Body)
	if err := rsa.VerifyPSS(pub.(*rsa.PublicKey), crypto.SHA256, sum[:], sig, nil); err != nil {
		t.Fatalf("signature of %s does not verify: %v", d.Body, err)
	}
}

func TestWebhookDeliveryInOrderSignedWithRetries(t *testing.T) {
	w := newWebhookWorld(t)
	wh := w.hook(t, "token.created", "token.deleted")
	failures := map[string]int{}
	var mu sync.Mutex
	rec := newRecorder(func(d *WebhookDelivery) error {
		mu.Lock()
		defer mu.Unlock()
		if failures[d.EventID] < 2 { // every event fails twice first
			failures[d.EventID]++
			return fmt.Errorf("receiver answered 500")
		}
		return nil
	})
	var ids []string
	for range 5 {
		tok, err := w.s.CreateToken(w.ctx, w.req(), TokenInput{Type: "token", Data: "secret-value"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tok.ID)
	}
	want := w.queued(t, wh.ID)
	stop := w.s.StartWebhookDelivery(WebhookDeliveryConfig{Deliver: rec.deliver, RetryBase: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond, Poll: 10 * time.Millisecond})
	defer stop()
	got := waitDelivered(t, rec, 5)
	for i, ev := range want {
		if got[i] != ev.ID {
			t.Fatalf("delivered %v, want the order %v", got, want)
		}
	}
	key, err := w.s.WebhookSigningKey(w.ctx, w.tenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	attempts := rec.attempts()
	if len(attempts) != 15 {
		t.Fatalf("%d attempts, want 15 (two failures and a success each)", len(attempts))
	}
	for i, d := range attempts {
		if d.Attempt != i%3+1 || d.KeyID != key.ID || d.URL != wh.URL || d.WebhookID != wh.ID {
			t.Fatalf("attempt %d: %+v", i, d)
		}
		verifyDelivery(t, key.PublicKey, d)
		var body struct {
			DeliveredAt string `json:"delivered_at"`
			Event       struct {
				ID, Type, TenantID string
				Data               map[string]map[string]string
			} `json:"event"`
		}
		if err := json.Unmarshal(d.Body, &body); err != nil || body.DeliveredAt == "" || body.Event.Type != "token.created" ||
			body.Event.Data["token"]["id"] != ids[i/3] || body.Event.Data["actor"]["id"] != w.app.ID {
			t.Fatalf("body %s (%v)", d.Body, err)
		}
		if strings.Contains(string(d.Body), "secret-value") {
			t.Fatal("a delivery holds token data")
		}
	}
	// the receiver has answered; the outbox and the audit log follow
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, _ := w.s.PendingWebhookEvents(w.ctx, w.tenant.ID, wh.ID)
		recs, _, err := w.s.ListAudit(w.ctx, w.tenant.ID, AuditFilter{EntityType: "webhook", Operation: "deliver"}, "", 100)
		if n == 0 && err == nil && len(recs) == 15 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events left in the outbox, %d audit records of attempts (want 0 and 15; %v)", n, len(recs), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWebhookDisabledWhenItKeepsFailing(t *testing.T) {
	w := newWebhookWorld(t)
	wh := w.hook(t, "token.created")
	healthy := w.hook(t, "token.created")
	rec := newRecorder(func(d *WebhookDelivery) error {
		if d.WebhookID == wh.ID {
			return errors.New("receiver answered 503")
		}
		return nil
	})
	for range 3 {
		if _, err := w.s.CreateToken(w.ctx, w.req(), TokenInput{Type: "token", Data: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	disabled := make(chan string, 1)
	stop := w.s.StartWebhookDelivery(WebhookDeliveryConfig{Deliver: rec.deliver, RetryBase: 5 * time.Millisecond, RetryMax: 10 * time.Millisecond,
		RetryFor: 200 * time.Millisecond, Poll: 10 * time.Millisecond, OnDisabled: func(_, id string) { disabled <- id }})
	defer stop()
	select {
	case id := <-disabled:
		if id != wh.ID {
			t.Fatalf("disabled %s", id)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the failing webhook was not disabled in 60 s")
	}
	waitDelivered(t, rec, 3) // the healthy one got everything
	got, err := w.s.GetWebhook(w.ctx, w.tenant.ID, wh.ID)
	if err != nil || got.Status != WebhookDisabled {
		t.Fatalf("status %+v, %v", got, err)
	}
	if h, _ := w.s.GetWebhook(w.ctx, w.tenant.ID, healthy.ID); h.Status != WebhookEnabled {
		t.Fatal("the healthy webhook was disabled")
	}
	deadline := time.Now().Add(30 * time.Second)
	for n, _ := w.s.PendingWebhookEvents(w.ctx, w.tenant.ID, wh.ID); n != 0; n, _ = w.s.PendingWebhookEvents(w.ctx, w.tenant.ID, wh.ID) {
		if time.Now().After(deadline) {
			t.Fatalf("%d events of the disabled webhook left", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	recs, _, _ := w.s.ListAudit(w.ctx, w.tenant.ID, AuditFilter{EntityType: "webhook", EntityID: wh.ID, Operation: "update"}, "", 10)
	if len(recs) != 1 || !strings.Contains(recs[0].Message, "disabled") {
		t.Fatalf("audit of the disabling: %+v", recs)
	}
	// new events skip it; saving it enables it again
	if _, err := w.s.CreateToken(w.ctx, w.req(), TokenInput{Type: "token", Data: "x"}); err != nil {
		t.Fatal(err)
	}
	if n, _ := w.s.PendingWebhookEvents(w.ctx, w.tenant.ID, wh.ID); n != 0 {
		t.Fatalf("a disabled webhook got %d new events", n)
	}
	up, err := w.s.UpdateWebhook(w.ctx, w.tenant.ID, wh.ID, w.mgmt.ID, WebhookInput{Name: "fixed", URL: "https://a.example", Events: []string{"token.created"}}, nil)
	if err != nil || up.Status != WebhookEnabled {
		t.Fatalf("update: %+v, %v", up, err)
	}
}

// Events written before a restart are delivered after it.
func TestWebhookEventsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, Options{Dir: dir})
	ct := mustCreateTenant(t, s, "hooks", "test")
	wh, err := s.CreateWebhook(context.Background(), ct.Tenant.ID, ct.Application.ID, WebhookInput{Name: "h", URL: "https://a.example", Events: []string{"application.created"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	app, _ := mustCreateApp(t, s, ct.Tenant.ID, privateApp("made before the restart"))
	closeTestStore(t, s)

	s = openTestStore(t, Options{Dir: dir})
	rec := newRecorder(nil)
	stop := s.StartWebhookDelivery(WebhookDeliveryConfig{Deliver: rec.deliver, Poll: 10 * time.Millisecond})
	defer stop()
	waitDelivered(t, rec, 1)
	d := rec.attempts()[0]
	if d.WebhookID != wh.ID || !strings.Contains(string(d.Body), app.ID) {
		t.Fatalf("delivered %+v", d)
	}
}

// A deleted tenant's pending events are dropped, not delivered.
func TestWebhookEventsOfDeletedTenantDropped(t *testing.T) {
	w := newWebhookWorld(t)
	wh := w.hook(t, "token.created")
	if _, err := w.s.CreateToken(w.ctx, w.req(), TokenInput{Type: "token", Data: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := w.s.DeleteTenant(w.ctx, w.tenant.ID); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(nil)
	stop := w.s.StartWebhookDelivery(WebhookDeliveryConfig{Deliver: rec.deliver, Poll: 10 * time.Millisecond})
	defer stop()
	deadline := time.Now().Add(30 * time.Second)
	for len(kvKeys(t, w.s, string(webhookQueuePrefix(w.tenant.ID, wh.ID)))) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the deleted tenant's events are still queued")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(rec.attempts()); n != 0 {
		t.Fatalf("%d deliveries for a deleted tenant", n)
	}
}

// A reload starts a second worker before stopping the first: only one
// delivers, and the old one's stop leaves the new one running.
func TestWebhookWorkerReplaced(t *testing.T) {
	w := newWebhookWorld(t)
	w.hook(t, "token.created")
	old := newRecorder(nil)
	stopOld := w.s.StartWebhookDelivery(WebhookDeliveryConfig{Deliver: old.deliver, Poll: 10 * time.Millisecond})
	cur := newRecorder(nil)
	stopCur := w.s.StartWebhookDelivery(WebhookDeliveryConfig{Deliver: cur.deliver, Poll: 10 * time.Millisecond})
	defer stopCur()
	stopOld()
	if _, err := w.s.CreateToken(w.ctx, w.req(), TokenInput{Type: "token", Data: "x"}); err != nil {
		t.Fatal(err)
	}
	waitDelivered(t, cur, 1)
	if n := len(old.attempts()); n != 0 {
		t.Fatalf("the replaced worker delivered %d events", n)
	}
}

func TestWebhookSigningKeyStable(t *testing.T) {
	w := newWebhookWorld(t)
	k1, err := w.s.WebhookSigningKey(w.ctx, w.tenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	w.hook(t, "token.created")
	k2, err := w.s.WebhookSigningKey(w.ctx, w.tenant.ID)
	if err != nil || k1.ID != k2.ID || k1.PublicKey != k2.PublicKey || k1.Algorithm != "RSA-PSS-SHA256" {
		t.Fatalf("keys %+v then %+v (%v)", k1, k2, err)
	}
	other := mustCreateTenant(t, w.s, "other", "test")
	k3, err := w.s.WebhookSigningKey(w.ctx, other.Tenant.ID)
	if err != nil || k3.ID == k1.ID {
		t.Fatalf("tenants share a signing key: %v", err)
	}
	if strings.Contains(k1.PublicKey, "PRIVATE") {
		t.Fatal("the private key is shown")
	}
}

func TestWebhookBackoff(t *testing.T) {
	c := WebhookDeliveryConfig{RetryBase: time.Second, RetryMax: 10 * time.Second}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 50: 10 * time.Second} {
		if got := c.backoff(n); got != want {
			t.Errorf("backoff(%d) = %s, want %s", n, got, want)
		}
	}
}

// The signing key, the webhooks and the pending events are re-sealed with
// the tenant's other records: after a data key rotation the old key is
// gone and everything still opens and is delivered.
func TestWebhooksAfterDataKeyRotation(t *testing.T) {
	w := newWebhookWorld(t)
	wh := w.hook(t, "token.created")
	before, err := w.s.WebhookSigningKey(w.ctx, w.tenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := w.s.CreateToken(w.ctx, w.req(), TokenInput{Type: "token", Data: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.s.RotateDataKey(w.ctx, w.tenant.ID); err != nil {
		t.Fatal(err)
	}
	st := waitReseal(t, w.s, w.tenant.ID)
	if st.Reseal == nil || st.Reseal.Error != "" || len(st.Versions) != 1 {
		t.Fatalf("re-seal: %+v", st)
	}
	assertAllSealedUnder(t, w.s, w.tenant.ID, st.Current)
	w.s.hooks.keys.put(w.tenant.ID, nil) // read the key from the store again
	after, err := w.s.WebhookSigningKey(w.ctx, w.tenant.ID)
	if err != nil || after.ID != before.ID {
		t.Fatalf("signing key after the rotation: %+v, %v", after, err)
	}
	if _, err := w.s.GetWebhook(w.ctx, w.tenant.ID, wh.ID); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(nil)
	stop := w.s.StartWebhookDelivery(WebhookDeliveryConfig{Deliver: rec.deliver, Poll: 10 * time.Millisecond})
	defer stop()
	waitDelivered(t, rec, 3)
}

// Two nodes on one database: one delivers under the lease, each event
// once, in order; when it stops, the other takes over.
func TestWebhookDeliveryOneNodeAtATime(t *testing.T) {
	nodes := clusterNodes(t, 2, newFakeClock())
	a, b := nodes[0], nodes[1]
	ctx := context.Background()
	ct := mustCreateTenant(t, a, "Cluster hooks", TenantTest)
	app, _ := mustCreateApp(t, a, ct.Tenant.ID, ApplicationInput{Name: "w", Type: AppPrivate, Permissions: []string{"token:create"}})
	if _, err := a.CreateWebhook(ctx, ct.Tenant.ID, ct.Application.ID, WebhookInput{Name: "h", URL: "https://a.example", Events: []string{"token.created"}}, nil); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	byNode := map[string][]string{}
	deliver := func(node string) func(context.Context, *WebhookDelivery) error {
		return func(_ context.Context, d *WebhookDelivery) error {
			mu.Lock()
			defer mu.Unlock()
			byNode[node] = append(byNode[node], d.EventID)
			return nil
		}
	}
	stopA := a.StartWebhookDelivery(WebhookDeliveryConfig{Deliver: deliver("a"), Poll: 10 * time.Millisecond})
	defer stopA()
	stopB := b.StartWebhookDelivery(WebhookDeliveryConfig{Deliver: deliver("b"), Poll: 10 * time.Millisecond})
	defer stopB()
	req := TokenRequest{Tenant: ct.Tenant, Application: app}
	create := func(n int) {
		for range n {
			if _, err := b.CreateToken(ctx, req, TokenInput{Type: "token", Data: "x"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	total := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(byNode["a"]) + len(byNode["b"])
	}
	create(20)
	eventually(t, "20 deliveries", func() bool { return total() >= 20 })
	mu.Lock()
	if len(byNode["a"]) > 0 && len(byNode["b"]) > 0 {
		t.Errorf("both nodes delivered: a %d, b %d", len(byNode["a"]), len(byNode["b"]))
	}
	holder := "a"
	if len(byNode["b"]) > 0 {
		holder = "b"
	}
	mu.Unlock()
	// the holder stops (its lease is released); the other takes over
	if holder == "a" {
		stopA()
	} else {
		stopB()
	}
	create(5)
	other := map[string]string{"a": "b", "b": "a"}[holder]
	eventually(t, "the other node delivers", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(byNode[other]) >= 5
	})
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	seen := map[string]bool{}
	for _, id := range append(byNode["a"], byNode["b"]...) {
		if seen[id] {
			t.Errorf("event %s delivered twice", id)
		}
		seen[id] = true
	}
	if len(seen) != 25 {
		t.Errorf("%d events delivered, want 25", len(seen))
	}
}

// A configuration that starts and then stops without the old one having
// stopped (its start failed elsewhere) gives delivery back to the old one.
func TestWebhookWorkerRestoredWhenNewerStops(t *testing.T) {
	w := newWebhookWorld(t)
	w.hook(t, "token.created")
	old := newRecorder(nil)
	stopOld := w.s.StartWebhookDelivery(WebhookDeliveryConfig{Deliver: old.deliver, Poll: 10 * time.Millisecond})
	defer stopOld()
	failed := newRecorder(nil)
	stopFailed := w.s.StartWebhookDelivery(WebhookDeliveryConfig{Deliver: failed.deliver, Poll: 10 * time.Millisecond})
	stopFailed()
	stopFailed() // twice is harmless
	if _, err := w.s.CreateToken(w.ctx, w.req(), TokenInput{Type: "token", Data: "x"}); err != nil {
		t.Fatal(err)
	}
	waitDelivered(t, old, 1)
	if n := len(failed.attempts()); n != 0 {
		t.Fatalf("the stopped configuration delivered %d events", n)
	}
}

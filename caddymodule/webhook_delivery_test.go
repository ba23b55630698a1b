package caddymodule

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/tokenvault/tokenvault/egress"
	"github.com/tokenvault/tokenvault/vaultstore"
)

// webhookApp is an app with only what delivery needs: a header prefix,
// an egress policy and its transport.
func webhookApp(t *testing.T, p *egress.Policy, cfg *WebhooksConfig) *App {
	t.Helper()
	a := &App{HeaderPrefix: "BT", Webhooks: cfg, egress: p, transport: p.Transport()}
	t.Cleanup(a.transport.CloseIdleConnections)
	return a
}

func loopbackPolicy() *egress.Policy {
	return &egress.Policy{AllowHTTP: true, AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
}

func testDelivery(url string) *vaultstore.WebhookDelivery {
	return &vaultstore.WebhookDelivery{TenantID: "t", WebhookID: "w", URL: url, EventID: "e", EventType: "token.created",
		Attempt: 2, Body: []byte(`{"event":{}}`), Signature: "c2ln", KeyID: "k1"}
}

func TestDeliverWebhook(t *testing.T) {
	var got *http.Request
	var gotBody []byte
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, gotBody = r, nil
		gotBody, _ = io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/fail":
			w.WriteHeader(http.StatusInternalServerError)
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/slow":
			time.Sleep(2 * time.Second)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer recv.Close()
	a := webhookApp(t, loopbackPolicy(), &WebhooksConfig{Timeout: caddy.Duration(500 * time.Millisecond)})
	ctx := context.Background()

	if err := a.deliverWebhook(ctx, testDelivery(recv.URL+"/ok?secret=s3cr3t")); err != nil {
		t.Fatalf("2xx: %v", err)
	}
	for name, want := range map[string]string{"Bt-Signature": "c2ln", "Bt-Signature-Version": "1", "Bt-Signature-Key-Id": "k1",
		"Bt-Webhook-Id": "w", "Bt-Event-Id": "e", "Bt-Event-Type": "token.created", "Bt-Delivery-Attempt": "2", "Content-Type": "application/json"} {
		if v := got.Header.Get(name); v != want {
			t.Errorf("header %s = %q, want %q", name, v, want)
		}
	}
	if got.Method != http.MethodPost || string(gotBody) != `{"event":{}}` {
		t.Errorf("request %s %q", got.Method, gotBody)
	}

	cases := []struct {
		name, url, want string
	}{
		{"receiver answers 500", recv.URL + "/fail?secret=s3cr3t", "the receiver answered 500"},
		{"a redirect is not followed", recv.URL + "/redirect?secret=s3cr3t", "the receiver answered 302"},
		{"no answer in time", recv.URL + "/slow?secret=s3cr3t", "did not answer in time"},
		{"nothing listens", "http://127.0.0.1:1/?secret=s3cr3t", "connecting to the receiver: connect: connection refused"},
		{"metadata address", "http://169.254.169.254/?secret=s3cr3t", "refused by the egress policy"},
		{"not a URL", "::?secret=s3cr3t", "refused by the egress policy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := a.deliverWebhook(ctx, testDelivery(tc.url))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "127.0.0.1:") {
				t.Fatalf("the error names the URL: %v", err)
			}
		})
	}
}

// A name that resolves to a refused address fails at connect, after the
// URL passed the check.
func TestDeliverWebhookRefusedAtConnect(t *testing.T) {
	hits := 0
	recv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits++ }))
	defer recv.Close()
	p := &egress.Policy{AllowHTTP: true, Resolver: mapResolver{"hooks.example": netip.MustParseAddr("127.0.0.1")}}
	a := webhookApp(t, p, nil)
	url := strings.Replace(recv.URL, "127.0.0.1", "hooks.example", 1)
	if _, err := p.CheckURL(url); err != nil {
		t.Fatalf("the URL itself is refused: %v", err)
	}
	err := a.deliverWebhook(context.Background(), testDelivery(url))
	if err == nil || !strings.Contains(err.Error(), "refused by the egress policy at connect") {
		t.Fatalf("error %v", err)
	}
	if hits != 0 {
		t.Fatalf("the receiver got %d requests", hits)
	}
}

func TestWebhooksCaddyfile(t *testing.T) {
	cases := []struct {
		name, input, err string
		want             WebhooksConfig
	}{
		{"all", "vault {\n webhooks {\n retry_base 1s\n retry_max 1m\n retry_for 2h\n timeout 5s\n }\n master_key {env.K}\n}",
			"", WebhooksConfig{RetryBase: caddy.Duration(time.Second), RetryMax: caddy.Duration(time.Minute), RetryFor: caddy.Duration(2 * time.Hour), Timeout: caddy.Duration(5 * time.Second)}},
		{"empty block", "vault {\n webhooks {\n }\n}", "", WebhooksConfig{}},
		{"unknown option", "vault {\n webhooks {\n retries 3\n }\n}", "unrecognized webhooks option", WebhooksConfig{}},
		{"not a duration", "vault {\n webhooks {\n retry_base soon\n }\n}", "not a positive duration", WebhooksConfig{}},
		{"zero", "vault {\n webhooks {\n timeout 0s\n }\n}", "not a positive duration", WebhooksConfig{}},
		{"no value", "vault {\n webhooks {\n retry_for\n }\n}", "wrong argument count", WebhooksConfig{}},
		{"two values", "vault {\n webhooks {\n retry_for 1h 2h\n }\n}", "wrong argument count", WebhooksConfig{}},
		{"argument on the block", "vault {\n webhooks now\n}", "wrong argument count", WebhooksConfig{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var a App
			err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.Webhooks == nil || *a.Webhooks != tc.want {
				t.Fatalf("webhooks %+v, want %+v", a.Webhooks, tc.want)
			}
		})
	}
	neg := &WebhooksConfig{RetryFor: -1}
	if err := neg.validate(); err == nil || !strings.Contains(err.Error(), "retry_for") {
		t.Fatalf("a negative retry_for: %v", err)
	}
	if (*WebhooksConfig)(nil).webhookTimeout() != 10*time.Second {
		t.Fatal("default timeout")
	}
}

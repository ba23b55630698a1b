package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tokenvault/tokenvault/internal/testclock"
	"github.com/tokenvault/tokenvault/internal/testjson"
	"github.com/tokenvault/tokenvault/ratelimit"
)

// TestRateLimitRows drives each row of the Limits table through the HTTP
// handler, alone in its limiter: up to its limit every request passes,
// the next is 429 with Retry-After, a block row keeps refusing until its
// block ends, and after Retry-After the next request passes. (The
// legacy-api-key row needs a legacy key, which Tokenvault never issues;
// the ratelimit package tests it.)
func TestRateLimitRows(t *testing.T) {
	e, _ := newProxyEnv(t, nil)
	dest := newDestination(t)
	r := e.do(tvRoleMgmt, http.MethodPost, "/applications", map[string]any{"name": "pub", "type": "public", "permissions": []string{"token:create"}})
	tvWantStatus(t, r, http.StatusCreated, "public application")
	e.keys["public"] = testjson.Str(r.body, "key")
	r = e.do(tvRoleMgmt, http.MethodPost, "/proxies", map[string]any{"name": "open", "destination_url": dest.srv.URL, "require_auth": false})
	tvWantStatus(t, r, http.StatusCreated, "open proxy")
	openProxyKey := testjson.Str(r.body, "key")

	whitelabel := &ProxyHandler{}
	whitelabel.forward = &forwarder{app: e.h.app, headers: e.h.headers, logger: e.h.logger, limits: &whitelabel.limits, whitelabel: true}
	whitelabel.key = openProxyKey

	type shape struct {
		role, method, path string
		body               any
		handler            http.Handler // nil: the API
	}
	rows := []struct {
		rule  string
		shape shape
	}{
		{ratelimit.RuleTestTenant, shape{role: tvRoleMgmt, method: http.MethodGet, path: "/applications/key"}},
		{ratelimit.RuleTokensSearch, shape{role: "user", method: http.MethodPost, path: "/tokens/search", body: map[string]any{"query": "type:card"}}},
		{ratelimit.RuleTokensList, shape{role: "user", method: http.MethodGet, path: "/tokens"}},
		{ratelimit.RuleTokensCreate, shape{role: "public", method: http.MethodPost, path: "/tokenize", body: map[string]any{"a": map[string]any{"type": "token", "data": "x"}}}},
		{ratelimit.RuleAccountUpdater, shape{role: "user", method: http.MethodGet, path: "/account-updater/jobs"}},
		{ratelimit.RulePrivateApp, shape{role: "user", method: http.MethodGet, path: "/applications/key"}},
		{ratelimit.RulePublicApp, shape{role: "public", method: http.MethodGet, path: "/applications/key"}},
		{ratelimit.RuleManagementApp, shape{role: tvRoleMgmt, method: http.MethodGet, path: "/applications/key"}},
		{ratelimit.RuleProxyKey, shape{method: http.MethodPost, path: "/proxy?svc-proxy-key=" + openProxyKey, body: "ping"}},
		{ratelimit.RuleProxyHostname, shape{method: http.MethodPost, path: "/charges", body: "ping", handler: handlerFunc(whitelabel)}},
		{ratelimit.RuleGlobal, shape{method: http.MethodGet, path: "/tenants/self"}},
		{ratelimit.RuleDocuments, shape{role: "user", method: http.MethodGet, path: "/documents/00000000-0000-4000-8000-000000000000/data"}},
	}
	defaults := map[string]ratelimit.Rule{}
	for _, rule := range ratelimit.DefaultRules() {
		defaults[rule.Name] = rule
	}
	for _, row := range rows {
		t.Run(row.rule, func(t *testing.T) {
			rule, ok := defaults[row.rule]
			if !ok {
				t.Fatalf("no default rule %s", row.rule)
			}
			clock := testclock.New(time.Unix(1_800_000_000, 0))
			limiter := ratelimit.New(ratelimit.Options{Rules: []ratelimit.Rule{rule}, Now: clock.Now})
			e.h.limits.limiter, whitelabel.limits.limiter = limiter, limiter
			t.Cleanup(func() { e.h.limits.limiter, whitelabel.limits.limiter = nil, nil })

			send := func() *httptest.ResponseRecorder {
				body, err := testjson.Body(row.shape.body)
				if err != nil {
					t.Fatal(err)
				}
				req := httptest.NewRequest(row.shape.method, row.shape.path, body)
				req.Host = "pay.example.test"
				if key := e.keys[row.shape.role]; key != "" {
					req.Header.Set("SVC-API-KEY", key)
				}
				if row.shape.body != nil {
					if _, text := row.shape.body.(string); text {
						req.Header.Set("Content-Type", "text/plain")
					} else {
						req.Header.Set("Content-Type", "application/json")
					}
				}
				w := httptest.NewRecorder()
				if row.shape.handler != nil {
					row.shape.handler.ServeHTTP(w, req)
				} else if err := e.h.ServeHTTP(w, req, nil); err != nil {
					t.Fatal(err)
				}
				return w
			}
			for i := 0; i < rule.Limit; i++ {
				w := send()
				if w.Code == http.StatusTooManyRequests {
					t.Fatalf("request %d of %d refused: %s", i+1, rule.Limit, w.Body)
				}
				if got := w.Header().Get("RateLimit-Limit"); got != strconv.Itoa(rule.Limit) {
					t.Fatalf("RateLimit-Limit %q, want %d", got, rule.Limit)
				}
				if got := w.Header().Get("RateLimit-Remaining"); got != strconv.Itoa(rule.Limit-i-1) {
					t.Fatalf("request %d: RateLimit-Remaining %q, want %d", i+1, got, rule.Limit-i-1)
				}
			}
			w := send()
			if w.Code != http.StatusTooManyRequests {
				t.Fatalf("request %d: status %d, want 429", rule.Limit+1, w.Code)
			}
			if !strings.Contains(w.Body.String(), `"status":429`) {
				t.Errorf("429 body: %s", w.Body)
			}
			wait := rule.Block
			if wait == 0 {
				wait = rule.Per / time.Duration(rule.Limit)
			}
			wantRetry := strconv.Itoa(int((wait + time.Second - 1) / time.Second))
			if got := w.Header().Get("Retry-After"); got != wantRetry {
				t.Errorf("Retry-After %q, want %s", got, wantRetry)
			}
			if rule.Block > 0 {
				clock.Advance(rule.Block - time.Millisecond)
				if w := send(); w.Code != http.StatusTooManyRequests {
					t.Errorf("1 ms before the block ends: status %d, want 429", w.Code)
				}
				clock.Advance(time.Millisecond)
			} else {
				clock.Advance(wait)
			}
			if w := send(); w.Code == http.StatusTooManyRequests {
				t.Errorf("after Retry-After: still 429")
			}
		})
	}
	if n := dest.conns.Load(); n == 0 {
		t.Error("the proxy rows never reached the destination")
	}
}

// TestRateLimitsConfig: the Caddyfile's rate_limits option changes the
// table by name.
func TestRateLimitsConfig(t *testing.T) {
	rules, err := (&RateLimits{Rules: map[string]RateLimitRule{
		"global":      {Off: true},
		"test-tenant": {Limit: 5, Per: 60_000_000_000},
	}}).rules()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if r.Name == "global" {
			t.Error("global still on")
		}
		if r.Name == "test-tenant" && (r.Limit != 5 || r.Per != time.Minute) {
			t.Errorf("test-tenant %d per %s", r.Limit, r.Per)
		}
	}
	if len(rules) != len(ratelimit.DefaultRules())-1 {
		t.Errorf("%d rules", len(rules))
	}
	if rules, err := (&RateLimits{Off: true}).rules(); err != nil || rules != nil {
		t.Errorf("off: %v, %v", rules, err)
	}
	if _, err := (&RateLimits{Rules: map[string]RateLimitRule{"nope": {Off: true}}}).rules(); err == nil {
		t.Error("an unknown rule name was accepted")
	}
	if _, err := (&RateLimits{Rules: map[string]RateLimitRule{"global": {Limit: 0}}}).rules(); err == nil {
		t.Error("a zero limit was accepted")
	}
}

func TestClientIP(t *testing.T) {
	tests := map[string]string{
		"192.0.2.7:1234":               "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:443":   "2001:db8:1:2::/64",
		"[::ffff:192.0.2.7]:80":        "192.0.2.7",
		"[fe80::1%eth0]:80":            "fe80::/64",
		"not-an-address":               "not-an-address",
		"[2001:db8:1:2:ffff::1]:65535": "2001:db8:1:2::/64",
	}
	for remote, want := range tests {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		if got := clientIP(r); got != want {
			t.Errorf("clientIP(%s) = %s, want %s", remote, got, want)
		}
	}
}

// handlerFunc adapts a Caddy middleware handler to http.Handler.
func handlerFunc(h interface {
	ServeHTTP(http.ResponseWriter, *http.Request, caddyhttp.Handler) error
}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _ = h.ServeHTTP(w, r, nil) })
}

package caddymodule

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tokenvault/tokenvault/ratelimit"
)

// These tests use a real Redis: TV_TEST_REDIS_ADDR, by default the machine's
// 127.0.0.1:6379, under a random key prefix of their own that they delete.

func testRedisAddr() string {
	if a := os.Getenv("TV_TEST_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// redisTestPrefix checks that the test Redis answers and returns a key
// prefix of the test's own, whose keys are deleted when the test ends.
func redisTestPrefix(t *testing.T) string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testRedisAddr(), DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		t.Fatalf("this test needs a real Redis at %s (set TV_TEST_REDIS_ADDR to use another): %v", testRedisAddr(), err)
	}
	var b [6]byte
	rand.Read(b[:])
	prefix := "tokenvault-test:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	return prefix
}

// redisGate forwards connections to Redis while open; while shut it drops
// them, as a network cut would.
type redisGate struct {
	ln    net.Listener
	mu    sync.Mutex
	shut  bool
	conns map[net.Conn]bool
}

func newRedisGate(t *testing.T) *redisGate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &redisGate{ln: ln, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); g.set(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go g.pipe(c)
		}
	}()
	return g
}

func (g *redisGate) pipe(c net.Conn) {
	g.mu.Lock()
	shut := g.shut
	g.mu.Unlock()
	if shut {
		c.Close()
		return
	}
	up, err := net.DialTimeout("tcp", testRedisAddr(), 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	g.mu.Lock()
	g.conns[c], g.conns[up] = true, true
	g.mu.Unlock()
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
	c.Close()
}

// set shuts or opens the gate; shutting drops every connection.
func (g *redisGate) set(shut bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shut = shut
	if shut {
		for c := range g.conns {
			c.Close()
		}
		clear(g.conns)
	}
}

// redisTestApp provisions the Redis part of a vault app, logging to an
// observer, as Provision does.
func redisTestApp(t *testing.T, cfg *RateLimitRedis) (*App, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	a := &App{RateLimitRedis: cfg, logger: zap.New(core)}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(func() { cancel(); a.cleanupRateLimitRedis() })
	if err := a.provisionRateLimitRedis(ctx); err != nil {
		t.Fatal(err)
	}
	if a.rateLimitRedis == nil {
		t.Fatal("no Redis after provisioning")
	}
	return a, logs
}

// metricValue reads a gauge or a counter.
func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if g := out.GetGauge(); g != nil {
		return g.GetValue()
	}
	return out.GetCounter().GetValue()
}

// testTenantRequest is a request of a test tenant's private application.
func testTenantRequest(key string) *ratelimit.Request {
	return &ratelimit.Request{IP: "198.51.100.7", APIKey: key, TenantType: "test", AppType: "private", Method: "GET", Path: "/tenants/self"}
}

// TestRateLimitRedisHandlers: handlers of a vault app with rate_limit_redis
// share their counters in Redis, even handlers with limiters of their own
// (different tables); while Redis is cut off they fall back to their local
// limiters, with one log line, the up gauge at 0 and the
// fallback counter counting; once Redis is back the gauge is 1 and the
// budget is shared again.
func TestRateLimitRedisHandlers(t *testing.T) {
	prefix := redisTestPrefix(t)
	gate := newRedisGate(t)
	t.Setenv("TV_TEST_RL_REDIS_URL", "redis://"+gate.ln.Addr().String())
	// a timeout of 5 s: a busy machine must not make Redis look down
	app, logs := redisTestApp(t, &RateLimitRedis{URL: "{env.TV_TEST_RL_REDIS_URL}", KeyPrefix: prefix, Timeout: caddy.Duration(5 * time.Second)})

	// Two handlers with different tables: two limiters in this process.
	// The test tenant's row is 50 per day, so no token comes back during
	// the test, however slow the machine.
	day := RateLimitRule{Limit: 50, Per: caddy.Duration(24 * time.Hour)}
	var api, proxy limits
	if err := api.provision(&RateLimits{Rules: map[string]RateLimitRule{ratelimit.RuleTestTenant: day}}, app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.cleanup() })
	if err := proxy.provision(&RateLimits{Rules: map[string]RateLimitRule{ratelimit.RuleTestTenant: day, ratelimit.RuleGlobal: {Off: true}}}, app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.cleanup() })
	if api.limiter == proxy.limiter {
		t.Fatal("the two tables share a limiter")
	}

	check := func(l *limits, key string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		if err := l.check(w, testTenantRequest(key)); err != nil {
			w.Code = http.StatusTooManyRequests
		}
		return w
	}
	shared := func(key string) {
		t.Helper()
		for i := range 50 {
			l := &api
			if i%2 == 1 {
				l = &proxy
			}
			if w := check(l, key); w.Code != http.StatusOK {
				t.Fatalf("%s: request %d refused", key, i+1)
			}
		}
		w := check(&proxy, key)
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
			t.Fatalf("%s: request 51: %d %v", key, w.Code, w.Header())
		}
	}
	if metricValue(t, rateLimitRedisMetrics.up) != 1 {
		t.Fatal("tokenvault_ratelimit_redis_up is not 1 with Redis answering")
	}
	shared("key-1")
	if api.limiter.Len() != 0 || proxy.limiter.Len() != 0 {
		t.Fatal("the limiters counted locally while Redis answered")
	}

	gate.set(true)
	before := metricValue(t, rateLimitRedisMetrics.fallbacks)
	for i := range 30 {
		if w := check(&api, "key-2"); w.Code != http.StatusOK {
			t.Fatalf("local request %d refused", i+1)
		}
	}
	if got := metricValue(t, rateLimitRedisMetrics.fallbacks) - before; got != 30 {
		t.Errorf("tokenvault_ratelimit_fallback_decisions_total rose by %v, want 30", got)
	}
	if metricValue(t, rateLimitRedisMetrics.up) != 0 {
		t.Error("tokenvault_ratelimit_redis_up is not 0 with Redis cut off")
	}
	if api.limiter.Len() == 0 {
		t.Error("no local counters while Redis is cut off")
	}
	entries := logs.All()
	if len(entries) != 1 || !strings.Contains(entries[0].Message, "redis does not answer") {
		t.Fatalf("logged %v, want one line saying Redis does not answer", entries)
	}
	if ctx := entries[0].ContextMap(); ctx["redis"] != gate.ln.Addr().String() || ctx["key_prefix"] != prefix {
		t.Errorf("the line's fields: %v", ctx)
	}

	gate.set(false)
	deadline := time.Now().Add(60 * time.Second)
	for !app.rateLimitRedis.Up() {
		if time.Now().After(deadline) {
			t.Fatal("Redis answers again but the limiters still decide locally")
		}
		check(&api, "probe")
		time.Sleep(20 * time.Millisecond)
	}
	if metricValue(t, rateLimitRedisMetrics.up) != 1 {
		t.Error("tokenvault_ratelimit_redis_up is not back to 1")
	}
	if entries := logs.All(); len(entries) != 2 || !strings.Contains(entries[1].Message, "redis answers again") {
		t.Errorf("logged %v, want a second line saying Redis answers again", entries)
	}
	shared("key-3")
}

// stringFields renders an entry's fields for a substring check.
func stringFields(e observer.LoggedEntry) string {
	var b strings.Builder
	for k, v := range e.ContextMap() {
		b.WriteString(k + "=")
		if s, ok := v.(string); ok {
			b.WriteString(s)
		}
		b.WriteString(" ")
	}
	return b.String()
}

// TestRateLimitRedisPasswordNeverLogged: a Redis that does not answer is
// logged by address, never by its URL and password.
func TestRateLimitRedisPasswordNeverLogged(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	const password = "s3cret-redis-password"
	t.Setenv("TV_TEST_RL_REDIS_URL", "redis://:"+password+"@"+closed+"/0")
	app, logs := redisTestApp(t, &RateLimitRedis{URL: "{env.TV_TEST_RL_REDIS_URL}", KeyPrefix: "tokenvault-test:closed:"})
	var l limits
	if err := l.provision(nil, app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.cleanup() })
	for range 5 {
		l.check(httptest.NewRecorder(), testTenantRequest("key"))
	}
	entries := logs.All()
	if len(entries) != 1 {
		t.Fatalf("logged %v, want one line", entries)
	}
	for _, e := range entries {
		if strings.Contains(e.Message, password) || strings.Contains(stringFields(e), password) {
			t.Fatalf("the log line holds the password: %v", e)
		}
		if err, _ := e.ContextMap()["error"].(string); strings.Contains(err, password) {
			t.Fatalf("the logged error holds the password: %v", err)
		}
	}
}

// TestRateLimitRedisValidate: a url holding a password must be, or use, a
// placeholder; the timeout is bounded.
func TestRateLimitRedisValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     RateLimitRedis
		wantErr string
	}{
		{name: "placeholder", cfg: RateLimitRedis{URL: "{env.TV_REDIS_URL}"}},
		{name: "file placeholder", cfg: RateLimitRedis{URL: "{file./run/secrets/redis_url}"}},
		{name: "literal without password", cfg: RateLimitRedis{URL: "redis://redis.internal:6379/1", Timeout: caddy.Duration(50 * time.Millisecond)}},
		{name: "password as a placeholder", cfg: RateLimitRedis{URL: "rediss://:{env.TV_REDIS_PASSWORD}@redis.internal:6380"}},
		{name: "user and password as placeholders", cfg: RateLimitRedis{URL: "redis://{env.U}:{env.P}@redis.internal"}},
		{name: "literal password", cfg: RateLimitRedis{URL: "redis://:hunter2@redis.internal:6379"}, wantErr: "must be a placeholder"},
		{name: "literal user and password", cfg: RateLimitRedis{URL: "redis://vault:hunter2@redis.internal"}, wantErr: "must be a placeholder"},
		{name: "no url", cfg: RateLimitRedis{}, wantErr: "url is required"},
		{name: "not redis", cfg: RateLimitRedis{URL: "http://redis.internal"}, wantErr: "redis://"},
		{name: "negative timeout", cfg: RateLimitRedis{URL: "{env.X}", Timeout: -1}, wantErr: "timeout"},
		{name: "long timeout", cfg: RateLimitRedis{URL: "{env.X}", Timeout: caddy.Duration(time.Minute)}, wantErr: "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("want an error containing %q, got %v", tt.wantErr, err)
			case err != nil && strings.Contains(err.Error(), "hunter2"):
				t.Fatalf("the error quotes the password: %v", err)
			}
		})
	}
}

// TestRateLimitRedisUnresolved: a placeholder that resolves to nothing
// stops provisioning rather than silently limiting each node alone.
func TestRateLimitRedisUnresolved(t *testing.T) {
	a := &App{RateLimitRedis: &RateLimitRedis{URL: "{env.TV_TEST_UNSET_REDIS_URL}"}, logger: zap.NewNop()}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	if err := a.provisionRateLimitRedis(ctx); err == nil || !strings.Contains(err.Error(), "resolved to nothing") {
		t.Fatalf("want an error about the placeholder, got %v", err)
	}
}

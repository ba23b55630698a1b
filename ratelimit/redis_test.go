package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// These tests run against a real Redis: TV_TEST_REDIS_ADDR, by default the
// machine's 127.0.0.1:6379. Each test writes only under its own random key
// prefix and deletes what it wrote, so parallel runs do not collide.

func testRedisAddr() string {
	if a := os.Getenv("TV_TEST_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// newTestClient returns a client to addr with the options the vault uses.
func newTestClient(t *testing.T, addr string, timeout time.Duration) *redis.Client {
	t.Helper()
	o, err := RedisClientOptions("redis://"+addr, timeout)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// testPrefix checks that the test Redis answers and returns a key prefix of
// the test's own; the test's keys are deleted when it ends.
func testPrefix(t *testing.T) string {
	t.Helper()
	addr := testRedisAddr()
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		t.Fatalf("these tests need a real Redis at %s (set TV_TEST_REDIS_ADDR to use another): %v", addr, err)
	}
	var b [6]byte
	rand.Read(b[:])
	prefix := "tokenvault-test:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, k := range scanKeys(t, c, prefix) {
			c.Del(ctx, k)
		}
	})
	return prefix
}

// scanKeys lists the keys under prefix.
func scanKeys(t *testing.T, c *redis.Client, prefix string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var keys []string
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("scanning %s*: %v", prefix, err)
	}
	return keys
}

// node is one vault node's limiter on shared Redis state, with what it
// logged and reported.
type node struct {
	l      *Limiter
	shared *Redis
	logs   *observer.ObservedLogs
	local  atomic.Int64 // decisions made locally
	mu     sync.Mutex
	states []bool // OnState calls
}

type nodeOpts struct {
	addr    string // default the test Redis
	prefix  string
	rules   []Rule // default DefaultRules()
	now     func() time.Time
	timeout time.Duration // default 5 s: a busy machine must not make Redis look down
}

func newNode(t *testing.T, o nodeOpts) *node {
	t.Helper()
	if o.addr == "" {
		o.addr = testRedisAddr()
	}
	if o.rules == nil {
		o.rules = DefaultRules()
	}
	if o.timeout == 0 {
		o.timeout = 5 * time.Second
	}
	core, logs := observer.New(zapcore.InfoLevel)
	n := &node{logs: logs}
	shared, err := NewRedis(RedisOptions{
		Client: newTestClient(t, o.addr, o.timeout), Prefix: o.prefix, Timeout: o.timeout,
		RetryMin: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond,
		Logger:  zap.New(core),
		OnLocal: func() { n.local.Add(1) },
		OnState: func(up bool) {
			n.mu.Lock()
			n.states = append(n.states, up)
			n.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	n.shared = shared
	n.l = New(Options{Rules: o.rules, Now: o.now, Redis: shared})
	return n
}

func (n *node) stateChanges() []bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]bool(nil), n.states...)
}

// logLines returns the messages logged, in order.
func (n *node) logLines() []string {
	var lines []string
	for _, e := range n.logs.All() {
		lines = append(lines, e.Message)
	}
	return lines
}

// withPer returns DefaultRules with the named rule's Per changed.
func withPer(name string, per time.Duration) []Rule {
	rules := DefaultRules()
	for i := range rules {
		if rules[i].Name == name {
			rules[i].Per = per
		}
	}
	return rules
}

// TestRedisSharedBudget: two nodes sharing Redis enforce one budget, a test
// tenant's 50 requests per 10 s, whichever node each request lands on.
func TestRedisSharedBudget(t *testing.T) {
	tests := []struct {
		name  string
		rules []Rule
		clock bool          // an injected clock, else the Redis server's
		retry time.Duration // expected RetryAfter of the 51st request; 0: only > 0
	}{
		// On the server's clock a token comes back every 72 s: none does
		// during the test, however slow the machine.
		{name: "server clock, 50 per hour", rules: withPer(RuleTestTenant, time.Hour)},
		{name: "injected clock, the interface's table", clock: true, retry: 200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := testPrefix(t)
			var now func() time.Time
			clk := newClock()
			if tt.clock {
				now = clk.Now
			}
			nodes := []*node{
				newNode(t, nodeOpts{prefix: prefix, rules: tt.rules, now: now}),
				newNode(t, nodeOpts{prefix: prefix, rules: tt.rules, now: now}),
			}
			rng := mrand.New(mrand.NewPCG(1, 2))
			req := rowRequest(t, RuleTestTenant)
			for i := range 50 {
				n := nodes[rng.IntN(2)]
				d := n.l.Allow(req)
				if !d.Allowed || d.Rule != RuleTestTenant || d.Limit != 50 || d.Remaining != 49-i {
					t.Fatalf("request %d: %+v", i+1, d)
				}
			}
			for i, n := range nodes {
				d := n.l.Allow(req)
				if d.Allowed || d.Rule != RuleTestTenant || d.RetryAfter <= 0 || tt.retry != 0 && d.RetryAfter != tt.retry {
					t.Fatalf("request %d, on node %d: %+v", 51+i, i+1, d)
				}
				h := http.Header{}
				d.Headers(h)
				if ra, err := strconv.Atoi(h.Get("Retry-After")); err != nil || ra < 1 || h.Get("RateLimit-Limit") != "50" {
					t.Fatalf("request %d headers: %v", 51+i, h)
				}
			}
			// another key from the same address has its own budget
			other := *req
			other.APIKey = "key-id-8"
			if d := nodes[1].l.Allow(&other); !d.Allowed || d.Remaining != 49 {
				t.Fatalf("another key: %+v", d)
			}
			if tt.clock {
				// one token comes back after 200 ms, for whichever node
				clk.Advance(200 * time.Millisecond)
				if d := nodes[1].l.Allow(req); !d.Allowed || d.Remaining != 0 {
					t.Fatalf("after 200 ms: %+v", d)
				}
				if d := nodes[0].l.Allow(req); d.Allowed {
					t.Fatalf("a second request after 200 ms was allowed: %+v", d)
				}
			}
			for i, n := range nodes {
				if n.l.Len() != 0 || n.local.Load() != 0 || len(n.logs.All()) != 0 {
					t.Errorf("node %d decided locally: %d local counters, %d local decisions, logs %v",
						i+1, n.l.Len(), n.local.Load(), n.logLines())
				}
			}
		})
	}
}

// TestRedisMatchesLocal replays one random trace of requests against the
// local limiter and against Redis, on the same injected clock, and compares
// every decision: the script implements the package's semantics (all or
// nothing, blocks, remaining, reset, retry after), not an approximation.
func TestRedisMatchesLocal(t *testing.T) {
	prefix := testPrefix(t)
	clk := newClock()
	rules := DefaultRules()
	local := New(Options{Rules: rules, Now: clk.Now})
	shared := newNode(t, nodeOpts{prefix: prefix, rules: rules, now: clk.Now})

	rows := []string{RuleTestTenant, RuleTokensSearch, RuleTokensList, RuleTokensCreate, RuleAccountUpdater,
		RulePrivateApp, RulePublicApp, RuleManagementApp, RuleProxyKey, RuleProxyHostname, RuleGlobal, RuleLegacyKey, RuleDocuments}
	var reqs []*Request
	for _, row := range rows {
		for _, ip := range []string{"198.51.100.9", "203.0.113.4"} {
			r := *rowRequest(t, row)
			r.IP = ip
			reqs = append(reqs, &r)
		}
	}
	rng := mrand.New(mrand.NewPCG(3, 4))
	allowed, rejected, blocked := 0, 0, 0
	for i := range 4000 {
		r := reqs[rng.IntN(len(reqs))]
		if rng.IntN(16) == 0 {
			clk.Advance(time.Duration(rng.IntN(200)) * time.Millisecond)
		}
		want, got := local.Allow(r), shared.l.Allow(r)
		// The local bucket counts tokens in floating point and may hold
		// 94.99999998 where Redis, counting whole microseconds, holds 95:
		// Remaining (a whole number of tokens) may then be one less locally.
		if got.Allowed != want.Allowed || got.Rule != want.Rule || got.Limit != want.Limit ||
			got.Remaining != want.Remaining && got.Remaining != want.Remaining+1 ||
			!near(got.Reset, want.Reset) || !near(got.RetryAfter, want.RetryAfter) {
			t.Fatalf("request %d (%+v):\nredis %+v\nlocal %+v", i+1, *r, got, want)
		}
		switch {
		case want.Allowed:
			allowed++
		case want.RetryAfter > 10*time.Second:
			blocked++
			rejected++
		default:
			rejected++
		}
	}
	if allowed == 0 || rejected == 0 || blocked == 0 || shared.local.Load() != 0 {
		t.Errorf("the trace did not exercise every case: %d allowed, %d rejected, %d blocked, %d local",
			allowed, rejected, blocked, shared.local.Load())
	}
}

// near reports whether two durations agree to the microsecond, the
// resolution of the counters in Redis.
func near(a, b time.Duration) bool { return math.Abs(float64(a-b)) <= float64(time.Microsecond) }

// TestRedisKeysHideClients: keys are under the prefix, one per rule and
// client, name neither the address nor the API key, and expire once idle.
func TestRedisKeysHideClients(t *testing.T) {
	prefix := testPrefix(t)
	// periods of a day, so no key expires before the test looks at it
	rules := DefaultRules()
	for i := range rules {
		rules[i].Per = 24 * time.Hour
	}
	n := newNode(t, nodeOpts{prefix: prefix, rules: rules})
	req := rowRequest(t, RuleTestTenant) // test-tenant, private-application, global
	drive(t, n.l, req, 3)
	c := newTestClient(t, testRedisAddr(), 5*time.Second)
	keys := scanKeys(t, c, prefix)
	if len(keys) != 3 {
		t.Fatalf("keys under the prefix: %v", keys)
	}
	for _, k := range keys {
		rule, _, _ := strings.Cut(strings.TrimPrefix(k, prefix), ":")
		switch rule {
		case RuleTestTenant, RulePrivateApp, RuleGlobal:
		default:
			t.Errorf("key %s: not named after an applicable rule", k)
		}
		if strings.Contains(k, req.IP) || strings.Contains(k, req.APIKey) {
			t.Errorf("key %s names the client", k)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ttl, err := c.PTTL(ctx, k).Result()
		cancel()
		// idle once 3 tokens are back: at most 3 × 24 h / 50, the test
		// tenant's
		if err != nil || ttl <= 0 || ttl > 3*24*time.Hour/50+time.Second {
			t.Errorf("key %s expires in %v (%v)", k, ttl, err)
		}
	}
}

// proxy forwards TCP connections to Redis and can cut them off, so a test can
// take Redis away from a limiter without stopping the machine's Redis.
type proxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu    sync.Mutex
	mode  string // "pass", "refuse" (close at once) or "stall" (never answer)
	conns map[net.Conn]bool
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, target: target, mode: "pass", conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.closeConns()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		mode := p.mode
		p.mu.Unlock()
		switch mode {
		case "refuse":
			c.Close()
		case "stall":
			p.track(c)
			go io.Copy(io.Discard, c)
		default:
			go p.pipe(c)
		}
	}
}

func (p *proxy) pipe(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.track(c)
	p.track(up)
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
	c.Close()
}

func (p *proxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = true
	p.mu.Unlock()
}

func (p *proxy) closeConns() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// set changes the mode and drops every connection, as a Redis restart or a
// network cut would.
func (p *proxy) set(mode string) {
	p.mu.Lock()
	p.mode = mode
	p.mu.Unlock()
	p.closeConns()
}

// TestRedisFallback: while Redis does not answer (refused, or stalled past
// the timeout), each node decides with its local limiter, logs one line and
// reports one transition; once Redis answers again the nodes share one
// budget again, and say so once.
func TestRedisFallback(t *testing.T) {
	for _, mode := range []string{"refuse", "stall"} {
		t.Run(mode, func(t *testing.T) {
			prefix := testPrefix(t)
			p := startProxy(t, testRedisAddr())
			// On the Redis server's clock, with the test tenant's 50 per
			// day: no token comes back during the test, however slow the
			// machine. A stalled Redis costs each node one timeout per
			// probe.
			o := nodeOpts{addr: p.addr(), prefix: prefix, rules: withPer(RuleTestTenant, 24*time.Hour), timeout: time.Second}
			nodes := []*node{newNode(t, o), newNode(t, o)}
			req := rowRequest(t, RuleTestTenant)
			keyed := func(k string) *Request { r := *req; r.APIKey = k; return &r }

			// shared: 10 requests over both nodes
			for i := range 10 {
				if d := nodes[i%2].l.Allow(keyed("a")); !d.Allowed || d.Remaining != 49-i {
					t.Fatalf("shared request %d: %+v", i+1, d)
				}
			}

			p.set(mode)
			for i, n := range nodes {
				start := time.Now()
				// each node alone: the local limiter's full budget, then 429
				for j := range 50 {
					if d := n.l.Allow(keyed("b")); !d.Allowed || d.Remaining != 49-j {
						t.Fatalf("node %d, local request %d: %+v", i+1, j+1, d)
					}
				}
				if d := n.l.Allow(keyed("b")); d.Allowed || d.Rule != RuleTestTenant || d.RetryAfter <= 0 {
					t.Fatalf("node %d, local request 51: %+v", i+1, d)
				}
				// 51 decisions cost at most one timeout and a few probes,
				// not a timeout each
				if el := time.Since(start); el > 20*time.Second {
					t.Errorf("node %d: 51 decisions with Redis %sd took %v", i+1, mode, el)
				}
				if got := n.local.Load(); got != 51 {
					t.Errorf("node %d: %d local decisions, want 51", i+1, got)
				}
				lines := n.logLines()
				if len(lines) != 1 || !strings.Contains(lines[0], "redis does not answer") {
					t.Errorf("node %d logged %q, want one line saying Redis does not answer", i+1, lines)
				}
				if got := n.stateChanges(); len(got) != 1 || got[0] {
					t.Errorf("node %d: state changes %v, want [false]", i+1, got)
				}
				if n.shared.Up() {
					t.Errorf("node %d: Up() while Redis is %sd", i+1, mode)
				}
			}

			p.set("pass")
			// Probes are made by decisions: keep deciding until both nodes
			// went back to Redis.
			deadline := time.Now().Add(60 * time.Second)
			for _, n := range nodes {
				for !n.shared.Up() {
					if time.Now().After(deadline) {
						t.Fatalf("Redis answers again but the nodes still decide locally; logs %q", n.logLines())
					}
					n.l.Allow(keyed("probe"))
					time.Sleep(20 * time.Millisecond)
				}
			}
			for i, n := range nodes {
				lines := n.logLines()
				if len(lines) != 2 || !strings.Contains(lines[1], "redis answers again") {
					t.Errorf("node %d logged %q, want a second line saying Redis answers again", i+1, lines)
				}
				if got := n.stateChanges(); len(got) != 2 || !got[1] {
					t.Errorf("node %d: state changes %v, want [false true]", i+1, got)
				}
			}
			// the shared counter kept its 10 requests; 40 more are left
			// over both nodes
			for i := range 40 {
				if d := nodes[i%2].l.Allow(keyed("a")); !d.Allowed || d.Remaining != 39-i {
					t.Fatalf("shared request %d after recovery: %+v", 11+i, d)
				}
			}
			for i, n := range nodes {
				if d := n.l.Allow(keyed("a")); d.Allowed || d.RetryAfter <= 0 {
					t.Fatalf("node %d, shared request 51 after recovery: %+v", i+1, d)
				}
			}
		})
	}
}

// TestRedisUnreachable: a Redis that refuses connections from the start (a
// closed port) leaves the node to its local limiter, with one log line.
func TestRedisUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	n := newNode(t, nodeOpts{addr: closed, prefix: "tokenvault-test:unreachable:", now: newClock().Now})
	req := rowRequest(t, RuleTestTenant)
	drive(t, n.l, req, 50)
	if d := n.l.Allow(req); d.Allowed || d.Rule != RuleTestTenant {
		t.Fatalf("request 51: %+v", d)
	}
	if got := n.local.Load(); got != 51 {
		t.Errorf("%d local decisions, want 51", got)
	}
	if lines := n.logLines(); len(lines) != 1 {
		t.Errorf("logged %q, want one line", lines)
	}
	if e := n.logs.All(); len(e) == 1 && e[0].Level != zapcore.ErrorLevel {
		t.Errorf("the line is logged at %v, want error", e[0].Level)
	}
}

// TestRedisClientOptions: URLs parse into bounded, non-retrying clients, and
// errors never quote the password.
func TestRedisClientOptions(t *testing.T) {
	const secret = "s3cr3t-pw"
	tests := []struct {
		name, url string
		wantErr   bool
		addr      string
		db        int
		tls       bool
	}{
		{name: "plain", url: "redis://127.0.0.1:6379", addr: "127.0.0.1:6379"},
		{name: "password and database", url: "redis://:" + secret + "@redis.internal:6380/2", addr: "redis.internal:6380", db: 2},
		{name: "tls", url: "rediss://user:" + secret + "@redis.internal", addr: "redis.internal:6379", tls: true},
		{name: "bad scheme", url: "http://:" + secret + "@redis.internal", wantErr: true},
		{name: "bad database", url: "redis://:" + secret + "@redis.internal/x", wantErr: true},
		{name: "bad port", url: "redis://:" + secret + "@redis.internal:port", wantErr: true},
		{name: "unknown option", url: "redis://:" + secret + "@redis.internal/0?" + secret + "=1", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := RedisClientOptions(tt.url, 0)
			if tt.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the error quotes the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Addr != tt.addr || o.DB != tt.db || (o.TLSConfig != nil) != tt.tls {
				t.Errorf("addr %s db %d tls %v", o.Addr, o.DB, o.TLSConfig != nil)
			}
			if o.ReadTimeout != DefaultRedisTimeout || o.DialTimeout != DefaultRedisTimeout || o.PoolTimeout != DefaultRedisTimeout ||
				o.MaxRetries != -1 || !o.ContextTimeoutEnabled {
				t.Errorf("the client is not bounded: %+v", o)
			}
		})
	}
}

// TestNewRedisOptions: invalid options are refused.
func TestNewRedisOptions(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testRedisAddr()})
	defer c.Close()
	tests := []struct {
		name string
		o    RedisOptions
	}{
		{name: "no client", o: RedisOptions{}},
		{name: "negative timeout", o: RedisOptions{Client: c, Timeout: -1}},
		{name: "max below min", o: RedisOptions{Client: c, RetryMin: time.Second, RetryMax: time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewRedis(tt.o); err == nil {
				t.Error("accepted")
			}
		})
	}
	if _, err := NewRedis(RedisOptions{Client: c}); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

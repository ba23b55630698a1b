package ratelimit

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testclock"
)

// newClock is the tests' clock: it stands still until a test moves it.
func newClock() *testclock.Clock {
	return testclock.New(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
}

// rowRequest returns a request that the named default rule applies to.
func rowRequest(t *testing.T, name string) *Request {
	t.Helper()
	const ip, key = "198.51.100.9", "key-id-7"
	r := map[string]*Request{
		RuleTestTenant:     {IP: ip, APIKey: key, TenantType: "test", AppType: "private", Method: "GET", Path: "/tenants/self"},
		RuleTokensSearch:   {IP: ip, Method: "POST", Path: "/tokens/search"},
		RuleTokensList:     {IP: ip, Method: "GET", Path: "/tokens"},
		RuleTokensCreate:   {IP: ip, Method: "POST", Path: "/tokenize"},
		RuleAccountUpdater: {IP: ip, Method: "GET", Path: "/account-updater/jobs"},
		RulePrivateApp:     {IP: ip, APIKey: key, AppType: "private", Method: "GET", Path: "/x"},
		RulePublicApp:      {IP: ip, APIKey: key, AppType: "public", Method: "GET", Path: "/x"},
		RuleManagementApp:  {IP: ip, APIKey: key, AppType: "management", Method: "GET", Path: "/x"},
		RuleProxyKey:       {IP: ip, ProxyKey: "proxy-key-digest", Unauthenticated: true, Method: "POST", Path: "/"},
		RuleProxyHostname:  {IP: ip, Hostname: "pay.example.com", Whitelabel: true, Method: "POST", Path: "/"},
		RuleGlobal:         {IP: ip, Method: "GET", Path: "/x"},
		RuleLegacyKey:      {IP: ip, APIKey: key, LegacyKey: true, Method: "GET", Path: "/x"},
		RuleDocuments:      {IP: ip, APIKey: key, AppType: "private", Method: "POST", Path: "/documents"},
	}[name]
	if r == nil {
		t.Fatalf("no request for rule %q", name)
	}
	return r
}

// drive sends n requests that must all be allowed.
func drive(t *testing.T, l *Limiter, r *Request, n int) {
	t.Helper()
	for i := range n {
		if d := l.Allow(r); !d.Allowed {
			t.Fatalf("request %d of %d rejected by %s (retry after %v)", i+1, n, d.Rule, d.RetryAfter)
		}
	}
}

func TestEachDefaultRule(t *testing.T) {
	for _, row := range DefaultRules() {
		t.Run(row.Name, func(t *testing.T) {
			clk := newClock()
			l := New(Options{Rules: []Rule{row}, Now: clk.Now})
			// The same row as a throttle, to show what the bucket alone allows.
			bucketOnly := row
			bucketOnly.Block = 0
			lb := New(Options{Rules: []Rule{bucketOnly}, Now: clk.Now})
			req := rowRequest(t, row.Name)

			for i := range row.Limit {
				d := l.Allow(req)
				if !d.Allowed || d.Rule != row.Name || d.Limit != row.Limit || d.Remaining != row.Limit-1-i {
					t.Fatalf("request %d: %+v, want allowed by %s with %d remaining", i+1, d, row.Name, row.Limit-1-i)
				}
			}
			drive(t, lb, req, row.Limit)

			d := l.Allow(req)
			if d.Allowed || d.Rule != row.Name || d.Limit != row.Limit || d.Remaining != 0 {
				t.Fatalf("request %d: %+v, want rejected by %s", row.Limit+1, d, row.Name)
			}
			oneToken := row.Per / time.Duration(row.Limit)
			want := oneToken
			if row.Block > 0 {
				want = row.Block
			}
			if d.RetryAfter < want || d.RetryAfter > want+time.Microsecond {
				t.Fatalf("RetryAfter = %v, want %v", d.RetryAfter, want)
			}
			h := http.Header{}
			d.Headers(h)
			if got, wantS := h.Get("Retry-After"), strconv.FormatInt(max(1, int64((want+time.Second-1)/time.Second)), 10); got != wantS {
				t.Fatalf("Retry-After = %q, want %q", got, wantS)
			}

			// Just before RetryAfter: still rejected.
			early := time.Microsecond
			if row.Block > 0 {
				early = time.Millisecond
			}
			clk.Advance(d.RetryAfter - early)
			if d2 := l.Allow(req); d2.Allowed || d2.Rule != row.Name {
				t.Fatalf("%v after the rejection: %+v, want still rejected", d.RetryAfter-early, d2)
			} else if row.Block > 0 {
				if d2.RetryAfter != early {
					t.Fatalf("during the block RetryAfter = %v, want %v", d2.RetryAfter, early)
				}
				// The bucket alone would have allowed it: only the block rejects.
				if db := lb.Allow(req); !db.Allowed {
					t.Fatalf("bucket alone rejects at block end minus %v: %+v", early, db)
				}
			}
			clk.Advance(early)
			if d3 := l.Allow(req); !d3.Allowed {
				t.Fatalf("after RetryAfter: %+v, want allowed", d3)
			}
		})
	}
}

func TestBlockRecursAfterPartialRefill(t *testing.T) {
	// public-application: 50/min, block 10 s. After the block the bucket holds
	// 10 s of refill, 8.33 tokens: 8 requests pass, the 9th blocks again.
	clk := newClock()
	rule := DefaultRules()[6]
	if rule.Name != RulePublicApp {
		t.Fatalf("row 6 is %s", rule.Name)
	}
	l := New(Options{Rules: []Rule{rule}, Now: clk.Now})
	req := rowRequest(t, RulePublicApp)
	drive(t, l, req, 50)
	if d := l.Allow(req); d.Allowed || d.RetryAfter != 10*time.Second || d.Reset != 10*time.Second {
		t.Fatalf("51st: %+v, want a 10 s block", d)
	}
	for range 5 { // rejected requests during a block do not extend it
		clk.Advance(time.Second)
		l.Allow(req)
	}
	clk.Advance(5 * time.Second)
	drive(t, l, req, 8)
	if d := l.Allow(req); d.Allowed || d.RetryAfter != 10*time.Second {
		t.Fatalf("9th after the block: %+v, want a new 10 s block", d)
	}
}

func TestLowestRateWins(t *testing.T) {
	clk := newClock()
	l := New(Options{Rules: DefaultRules(), Now: clk.Now})
	const ip = "192.0.2.44"
	create := func(key string) *Request {
		return &Request{IP: ip, APIKey: key, TenantType: "test", AppType: "private", Method: "POST", Path: "/tokens"}
	}

	// The spec's example: POST /tokens on a test tenant gets 50 per 10 s, not
	// the 200 of POST /tokens nor the 2000 of a private application.
	for i := range 50 {
		d := l.Allow(create("A"))
		if !d.Allowed || d.Rule != RuleTestTenant || d.Limit != 50 || d.Remaining != 49-i {
			t.Fatalf("request %d: %+v, want allowed, reported as test-tenant", i+1, d)
		}
	}
	d := l.Allow(create("A"))
	if d.Allowed || d.Rule != RuleTestTenant || d.RetryAfter != 200*time.Millisecond {
		t.Fatalf("51st: %+v, want rejected by test-tenant for 200ms", d)
	}
	// Rejections by test-tenant consume nothing from the per-IP rules.
	for range 500 {
		if d := l.Allow(create("A")); d.Allowed {
			t.Fatal("key A allowed over its limit")
		}
	}
	// So the IP still has 150 of its 200 POST /tokens: three more keys of the
	// same tenant get their 50 each...
	for _, key := range []string{"B", "C", "D"} {
		drive(t, l, create(key), 50)
	}
	// ...and then the per-IP POST /tokens rule binds, for any key.
	d = l.Allow(create("E"))
	if d.Allowed || d.Rule != RuleTokensCreate || d.Limit != 200 || d.RetryAfter != 50*time.Millisecond {
		t.Fatalf("201st POST /tokens from the IP: %+v, want rejected by %s for 50ms", d, RuleTokensCreate)
	}
	// Other resources from that IP are not held back by it.
	if d := l.Allow(&Request{IP: ip, APIKey: "E", TenantType: "test", AppType: "private", Method: "GET", Path: "/tokens"}); !d.Allowed || d.Rule != RuleTestTenant || d.Remaining != 49 {
		t.Fatalf("GET /tokens from the same IP: %+v, want allowed with test-tenant at 49", d)
	}
}

func TestPrivateKeyLimitAcrossIPs(t *testing.T) {
	// A production private key from many IPs is held to 2000 per 10 s by key,
	// below every per-IP limit.
	clk := newClock()
	l := New(Options{Rules: DefaultRules(), Now: clk.Now})
	req := func(i int) *Request {
		return &Request{IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250), APIKey: "prod-key", TenantType: "production", AppType: "private", Method: "GET", Path: "/tenants/self"}
	}
	for i := range 2000 {
		if d := l.Allow(req(i % 20)); !d.Allowed {
			t.Fatalf("request %d: %+v", i+1, d)
		}
	}
	d := l.Allow(req(21))
	if d.Allowed || d.Rule != RulePrivateApp || d.RetryAfter != 5*time.Millisecond {
		t.Fatalf("2001st: %+v, want rejected by %s for 5ms", d, RulePrivateApp)
	}
	clk.Advance(5 * time.Millisecond)
	if d := l.Allow(req(21)); !d.Allowed {
		t.Fatalf("after 5ms: %+v", d)
	}
}

func TestRejectionReportsLongestWait(t *testing.T) {
	clk := newClock()
	byIPRule := func(name string, per time.Duration) Rule {
		return Rule{Name: name, Match: always, Counter: byIP, Limit: 1, Per: per}
	}
	l := New(Options{Rules: []Rule{byIPRule("fast", time.Second), byIPRule("slow", 10*time.Second)}, Now: clk.Now})
	req := &Request{IP: "192.0.2.1"}
	drive(t, l, req, 1)
	d := l.Allow(req)
	if d.Allowed || d.Rule != "slow" || d.RetryAfter != 10*time.Second {
		t.Fatalf("%+v, want rejected by slow for 10s", d)
	}
	clk.Advance(time.Second)
	d = l.Allow(req)
	if d.Allowed || d.Rule != "slow" || d.RetryAfter != 9*time.Second {
		t.Fatalf("after 1s: %+v, want rejected by slow for 9s", d)
	}
	// Both buckets hold 0 after this one; slow takes longer to refill.
	clk.Advance(9 * time.Second)
	if d := l.Allow(req); !d.Allowed || d.Rule != "slow" || d.Reset != 10*time.Second {
		t.Fatalf("after 10s: %+v, want allowed, slow reported", d)
	}
}

func TestNoRuleApplies(t *testing.T) {
	l := New(Options{Rules: DefaultRules()})
	d := l.Allow(&Request{})
	if !d.Allowed || d.Rule != "" || d.Limit != 0 {
		t.Fatalf("%+v, want allowed with no rule", d)
	}
	h := http.Header{}
	d.Headers(h)
	if len(h) != 0 {
		t.Fatalf("headers %v, want none", h)
	}
	if n := l.Len(); n != 0 {
		t.Fatalf("Len = %d, want 0", n)
	}
	if d := New(Options{}).Allow(&Request{IP: "192.0.2.1"}); !d.Allowed {
		t.Fatalf("limiter without rules rejected: %+v", d)
	}
}

func TestNewRejectsInvalidRules(t *testing.T) {
	good := Rule{Name: "r", Match: always, Counter: byIP, Limit: 1, Per: time.Second}
	tests := []struct {
		name  string
		edit  func(*Rule)
		extra bool // add good twice
	}{
		{"no name", func(r *Rule) { r.Name = "" }, false},
		{"no match", func(r *Rule) { r.Match = nil }, false},
		{"no counter", func(r *Rule) { r.Counter = nil }, false},
		{"zero limit", func(r *Rule) { r.Limit = 0 }, false},
		{"zero period", func(r *Rule) { r.Per = 0 }, false},
		{"negative block", func(r *Rule) { r.Block = -time.Second }, false},
		{"duplicate name", func(*Rule) {}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := good
			tt.edit(&r)
			rules := []Rule{r}
			if tt.extra {
				rules = append(rules, good)
			}
			defer func() {
				if recover() == nil {
					t.Fatal("New accepted an invalid rule")
				}
			}()
			New(Options{Rules: rules})
		})
	}
	New(Options{Rules: []Rule{good}}) // and the good one passes
}

func TestConcurrentAllow(t *testing.T) {
	// With a frozen clock, exactly the limit is allowed however the requests
	// interleave, and the lowest rate wins atomically: 8 keys with 50 each
	// share one IP with 200 for POST /tokens, so exactly 200 pass.
	clk := newClock()
	l := New(Options{Rules: DefaultRules(), Now: clk.Now, MaxEntries: 64})
	const workers, perWorker = 8, 100
	var allowed [workers]int
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			req := &Request{IP: "192.0.2.5", APIKey: fmt.Sprint("key-", w), TenantType: "test", AppType: "private", Method: "POST", Path: "/tokens"}
			for range perWorker {
				if l.Allow(req).Allowed {
					allowed[w]++
				}
				l.Len()
			}
		})
	}
	wg.Wait()
	total := 0
	for w := range workers {
		total += allowed[w]
		if allowed[w] > 50 {
			t.Errorf("key %d allowed %d, over its 50", w, allowed[w])
		}
	}
	if total != 200 {
		t.Fatalf("allowed %d, want exactly 200", total)
	}

	// Real clock, many counters, Len racing with Allow: only -race and the
	// bound can fail here.
	l = New(Options{Rules: DefaultRules(), MaxEntries: 100})
	for w := range workers {
		wg.Go(func() {
			for i := range 2000 {
				l.Allow(&Request{IP: fmt.Sprintf("10.%d.%d.%d", w, i/200, i%200), APIKey: fmt.Sprint("k", i%7), TenantType: "test", AppType: "public", Method: "GET", Path: "/tokens"})
				if i%100 == 0 {
					if n := l.Len(); n > len(DefaultRules())*100 {
						t.Errorf("Len = %d over the bound", n)
					}
				}
			}
		})
	}
	wg.Wait()
}

func TestHeadersFromAllow(t *testing.T) {
	clk := newClock()
	l := New(Options{Rules: DefaultRules(), Now: clk.Now})
	get := func(r *Request) http.Header {
		h := http.Header{}
		l.Allow(r).Headers(h)
		return h
	}
	check := func(step string, h http.Header, want map[string]string) {
		t.Helper()
		for _, k := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After"} {
			if got := h.Get(k); got != want[k] {
				t.Errorf("%s: %s = %q, want %q", step, k, got, want[k])
			}
		}
	}
	tt := &Request{IP: "192.0.2.8", APIKey: "k", TenantType: "test", AppType: "private", Method: "GET", Path: "/tokens"}
	check("first", get(tt), map[string]string{"RateLimit-Limit": "50", "RateLimit-Remaining": "49", "RateLimit-Reset": "1"})
	for range 48 {
		l.Allow(tt)
	}
	check("50th", get(tt), map[string]string{"RateLimit-Limit": "50", "RateLimit-Remaining": "0", "RateLimit-Reset": "10"})
	check("51st", get(tt), map[string]string{"RateLimit-Limit": "50", "RateLimit-Remaining": "0", "RateLimit-Reset": "10", "Retry-After": "1"})

	mg := &Request{IP: "192.0.2.9", APIKey: "m", TenantType: "production", AppType: "management", Method: "GET", Path: "/applications"}
	for range 200 {
		l.Allow(mg)
	}
	check("management 201st", get(mg), map[string]string{"RateLimit-Limit": "200", "RateLimit-Remaining": "0", "RateLimit-Reset": "60", "Retry-After": "60"})
	clk.Advance(59500 * time.Millisecond)
	check("management at 59.5s", get(mg), map[string]string{"RateLimit-Limit": "200", "RateLimit-Remaining": "0", "RateLimit-Reset": "1", "Retry-After": "1"})
}

func TestRetryAfterIsExact(t *testing.T) {
	// Odd rates and odd moments: whenever a request is rejected, one at
	// RetryAfter passes and one a microsecond before it does not.
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 150 {
		rule := Rule{Name: "r", Match: always, Counter: byIP,
			Limit: 1 + rng.IntN(500), Per: time.Duration(1+rng.IntN(90_000)) * time.Millisecond}
		if i%3 == 0 {
			rule.Block = time.Duration(rng.IntN(20_000)) * time.Millisecond
		}
		clk := newClock()
		l := New(Options{Rules: []Rule{rule}, Now: clk.Now})
		req := &Request{IP: "192.0.2.1"}
		for range 10 {
			for l.Allow(req).Allowed {
				clk.Advance(time.Duration(rng.Int64N(int64(rule.Per) / int64(rule.Limit) / 4)))
			}
			d := l.Allow(req)
			if d.Allowed || d.RetryAfter <= 0 {
				t.Fatalf("%d/%v block %v: %+v, want rejected with a wait", rule.Limit, rule.Per, rule.Block, d)
			}
			// A probe after a block ended but before a token refilled would
			// exceed the rate again and start a new block; probe early only
			// within a throttle or while the block is what binds.
			if d.RetryAfter > time.Microsecond && (rule.Block == 0 || d.RetryAfter == d.Reset) {
				clk.Advance(d.RetryAfter - time.Microsecond)
				if d2 := l.Allow(req); d2.Allowed {
					t.Fatalf("%d/%v block %v: allowed %v before RetryAfter %v", rule.Limit, rule.Per, rule.Block, time.Microsecond, d.RetryAfter)
				}
				clk.Advance(time.Microsecond)
			} else {
				clk.Advance(d.RetryAfter)
			}
			if d3 := l.Allow(req); !d3.Allowed {
				t.Fatalf("%d/%v block %v: rejected at RetryAfter %v: %+v", rule.Limit, rule.Per, rule.Block, d.RetryAfter, d3)
			}
			clk.Advance(time.Duration(rng.Int64N(int64(rule.Per))))
		}
	}
}

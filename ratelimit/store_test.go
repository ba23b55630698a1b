package ratelimit

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// checkInvariants verifies every shard: within its capacity, map and heap
// holding the same counters, heap ordered on idleAt.
func checkInvariants(t *testing.T, l *Limiter) {
	t.Helper()
	for _, s := range l.stores {
		for i := range s.shards {
			sh := &s.shards[i]
			sh.mu.Lock()
			if len(sh.m) > sh.cap {
				t.Errorf("%s shard %d holds %d, capacity %d", s.rule.Name, i, len(sh.m), sh.cap)
			}
			if len(sh.heap) != len(sh.m) {
				t.Errorf("%s shard %d: heap %d, map %d", s.rule.Name, i, len(sh.heap), len(sh.m))
			}
			seen := make(map[*entry]bool, len(sh.heap))
			for j, sl := range sh.heap {
				if sh.m[sl.e.key] != sl.e || seen[sl.e] {
					t.Errorf("%s shard %d: heap[%d] = %q, not in the map or twice", s.rule.Name, i, j, sl.e.key)
				}
				seen[sl.e] = true
				if sl.at > sl.e.idleAt {
					t.Errorf("%s shard %d: heap[%d] at %d after idleAt %d", s.rule.Name, i, j, sl.at, sl.e.idleAt)
				}
				if j > 0 && sh.heap[(j-1)/arity].at > sl.at {
					t.Errorf("%s shard %d: heap order broken at %d", s.rule.Name, i, j)
				}
			}
			sh.mu.Unlock()
		}
	}
}

func TestCapacitySplit(t *testing.T) {
	tests := []struct{ maxEntries, shards int }{
		{1, 1}, {3, 1}, {31, 1}, {32, 2}, {100, 4}, {1000, 32}, {1024, 64}, {100_000, 64},
	}
	for _, tt := range tests {
		s := newStore(DefaultRules()[0], tt.maxEntries)
		total := 0
		for i := range s.shards {
			total += s.shards[i].cap
		}
		if len(s.shards) != tt.shards || total != tt.maxEntries {
			t.Errorf("MaxEntries %d: %d shards holding %d, want %d shards holding %d",
				tt.maxEntries, len(s.shards), total, tt.shards, tt.maxEntries)
		}
	}
}

func TestMemoryBound(t *testing.T) {
	t.Parallel()
	const maxEntries, requests = 1000, 200_000
	clk := newClock()
	rules := DefaultRules()
	l := New(Options{Rules: rules, MaxEntries: maxEntries, Now: clk.Now})
	// Request shapes that between them reach every rule.
	shape := func(i int) *Request {
		ip := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		key := fmt.Sprint("key-", i)
		switch i % 7 {
		case 0:
			return &Request{IP: ip, APIKey: key, TenantType: "test", AppType: "private", Method: "POST", Path: "/tokens"}
		case 1:
			return &Request{IP: ip, APIKey: key, TenantType: "production", AppType: "public", Method: "POST", Path: "/tokens/search"}
		case 2:
			return &Request{IP: ip, APIKey: key, TenantType: "production", AppType: "management", Method: "GET", Path: "/tokens"}
		case 3:
			return &Request{IP: ip, ProxyKey: key, Hostname: key + ".example.com", Whitelabel: true, Method: "POST", Path: "/tokens"}
		case 4:
			return &Request{IP: ip, APIKey: key, LegacyKey: true, Method: "GET", Path: "/account-updater/jobs"}
		case 5:
			return &Request{IP: ip, APIKey: key, AppType: "private", Method: "GET", Path: "/documents/d1/data"}
		default:
			return &Request{IP: ip, Method: "POST", Path: "/tokenize"}
		}
	}
	bound := len(rules) * maxEntries
	for i := range requests {
		if d := l.Allow(shape(i)); !d.Allowed {
			t.Fatalf("request %d rejected by %s", i, d.Rule)
		}
		clk.Advance(10 * time.Microsecond)
		if i%1000 == 999 {
			if n := l.Len(); n > bound {
				t.Fatalf("after %d requests Len = %d, over %d", i+1, n, bound)
			}
		}
	}
	checkInvariants(t, l)
	// Every rule saw far more distinct counters than it may hold, so every
	// one is full: the bound is reached, not just respected.
	for _, s := range l.stores {
		if n := s.len(); n != maxEntries {
			t.Errorf("%s holds %d counters, want %d", s.rule.Name, n, maxEntries)
		}
	}
	if n := l.Len(); n != bound {
		t.Errorf("Len = %d, want %d", n, bound)
	}
}

func TestRejectedRequestCreatesNoCounters(t *testing.T) {
	clk := newClock()
	l := New(Options{Rules: DefaultRules(), Now: clk.Now})
	mk := func(ip string) *Request {
		return &Request{IP: ip, APIKey: "mgmt", AppType: "management", Method: "GET", Path: "/x"}
	}
	// 200 from 200 IPs exhaust the key; each IP has a global counter.
	for i := range 200 {
		drive(t, l, mk(fmt.Sprint("10.0.0.", i)), 1)
	}
	if n := l.Len(); n != 201 {
		t.Fatalf("Len = %d, want 201", n)
	}
	for i := range 1000 {
		if d := l.Allow(mk(fmt.Sprint("10.0.1.", i))); d.Allowed || d.Rule != RuleManagementApp {
			t.Fatalf("%+v, want rejected by %s", d, RuleManagementApp)
		}
	}
	if n := l.Len(); n != 201 {
		t.Fatalf("after 1000 rejected requests from new IPs Len = %d, want 201", n)
	}
}

// evictionRule is 2 requests per 10 s per IP, blocked 30 s when exceeded.
var evictionRule = Rule{Name: "r", Match: always, Counter: byIP, Limit: 2, Per: 10 * time.Second, Block: 30 * time.Second}

func TestEvictionPrefersIdleCounters(t *testing.T) {
	clk := newClock()
	l := New(Options{Rules: []Rule{evictionRule}, MaxEntries: 3, Now: clk.Now})
	attacker := &Request{IP: "a"}
	drive(t, l, attacker, 2)
	if d := l.Allow(attacker); d.Allowed || d.RetryAfter != 30*time.Second {
		t.Fatalf("attacker: %+v, want blocked 30s", d)
	}
	drive(t, l, &Request{IP: "b"}, 1)
	drive(t, l, &Request{IP: "c"}, 1)
	clk.Advance(6 * time.Second) // b and c are full again: idle
	// A flood of new addresses pushes out the idle ones, then each other, and
	// never the blocked attacker, the least recently used of all.
	for i := range 100 {
		drive(t, l, &Request{IP: fmt.Sprint("new-", i)}, 1)
		checkInvariants(t, l)
		if n := l.Len(); n != 3 {
			t.Fatalf("Len = %d, want 3", n)
		}
	}
	if d := l.Allow(attacker); d.Allowed || d.RetryAfter != 24*time.Second {
		t.Fatalf("attacker after the flood: %+v, want still blocked for 24s", d)
	}
}

func TestEvictionForgetsActiveCounter(t *testing.T) {
	// The documented trade-off: with no idle counter to evict, an active one
	// goes, and its next request starts afresh.
	clk := newClock()
	l := New(Options{Rules: []Rule{evictionRule}, MaxEntries: 1, Now: clk.Now})
	x := &Request{IP: "x"}
	drive(t, l, x, 2)
	if d := l.Allow(x); d.Allowed {
		t.Fatal("x allowed over its limit")
	}
	drive(t, l, &Request{IP: "y"}, 1) // evicts the blocked x
	if d := l.Allow(x); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("x after eviction: %+v, want a fresh bucket", d)
	}
}

func TestHeapUnderRandomTraffic(t *testing.T) {
	clk := newClock()
	rng := rand.New(rand.NewPCG(1, 2))
	rules := []Rule{
		evictionRule,
		{Name: "t", Match: always, Counter: byKey, Limit: 3, Per: time.Second},
	}
	l := New(Options{Rules: rules, MaxEntries: 20, Now: clk.Now})
	allowed := 0
	for i := range 20_000 {
		r := &Request{IP: fmt.Sprint("ip-", rng.IntN(40)), APIKey: fmt.Sprint("k-", rng.IntN(30))}
		if l.Allow(r).Allowed {
			allowed++
		}
		clk.Advance(time.Duration(rng.IntN(200)) * time.Millisecond)
		if i%97 == 0 {
			checkInvariants(t, l)
		}
	}
	checkInvariants(t, l)
	if allowed == 0 || allowed == 20_000 {
		t.Fatalf("allowed %d of 20000: the traffic did not exercise both outcomes", allowed)
	}
}

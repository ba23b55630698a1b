package ratelimit

import (
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkMillionIPs sends 1,000,000 requests, each from a new IP with a new
// key, shaped as a test-tenant private application's POST /tokens (four rules
// apply: test-tenant, api-tokens-create, private-application, global) through
// DefaultRules with the default MaxEntries, then reports the heap the limiter
// holds after a GC.
func BenchmarkMillionIPs(b *testing.B) {
	const n = 1_000_000
	reqs := make([]Request, n)
	for i := range reqs {
		reqs[i] = Request{
			IP:     fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255),
			APIKey: "key-" + strconv.Itoa(i), TenantType: "test", AppType: "private",
			Method: "POST", Path: "/tokens",
		}
	}
	var heap, entries, perRequest float64
	for b.Loop() {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		clk := newClock()
		l := New(Options{Rules: DefaultRules(), Now: clk.Now})
		start := time.Now()
		for i := range reqs {
			if !l.Allow(&reqs[i]).Allowed {
				b.Fatalf("request %d rejected", i)
			}
			clk.Advance(time.Microsecond)
		}
		perRequest = float64(time.Since(start).Nanoseconds()) / n
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		entries = float64(l.Len())
		heap = float64(after.HeapAlloc) - float64(before.HeapAlloc)
		runtime.KeepAlive(l)
	}
	b.ReportMetric(heap, "heap-bytes")
	b.ReportMetric(entries, "entries")
	b.ReportMetric(heap/entries, "bytes/entry")
	b.ReportMetric(perRequest, "ns/request")
}

// BenchmarkAllow measures one decision from parallel goroutines sharing a few
// counters, through DefaultRules.
func BenchmarkAllow(b *testing.B) {
	shapes := func(i int) *Request {
		return &Request{
			IP: "192.0.2." + strconv.Itoa(i%4), APIKey: "key-" + strconv.Itoa(i%4),
			TenantType: "test", AppType: "private", Method: "POST", Path: "/tokens",
		}
	}
	run := func(b *testing.B, rules []Rule) {
		l := New(Options{Rules: rules})
		var next atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			r := shapes(int(next.Add(1)))
			for pb.Next() {
				l.Allow(r)
			}
		})
	}
	// Allowed: the default table with limits too high to reach.
	b.Run("allowed", func(b *testing.B) {
		rules := DefaultRules()
		for i := range rules {
			rules[i].Limit = 1 << 40
		}
		run(b, rules)
	})
	// Rejected: the default table, exhausted after the first moments.
	b.Run("default", func(b *testing.B) { run(b, DefaultRules()) })
}

package transforms

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFairQueueOrder: the order in which waiting runs are given what
// comes free. A ticket is named by its tenant (the letter) and its rank
// of arrival; a trailing "*" marks a ticket that holds a place already
// (counted in its tenant's held). The fake pool has free workers, and
// places behind runs of a given tenant.
func TestFairQueueOrder(t *testing.T) {
	tests := []struct {
		name     string
		limit    int
		held     map[string]int // before the arrivals, "*" tickets not included
		arrivals []string
		free     int            // workers free
		own      map[string]int // young runs of each tenant a capped ticket may queue behind
		want     []string       // placed, in order
	}{
		{
			name: "one tenant, first come first served", limit: 4, free: 3,
			arrivals: []string{"a1", "a2", "a3", "a4"},
			want:     []string{"a1", "a2", "a3"},
		},
		{
			name: "tenants are served round-robin", limit: 4, free: 6,
			arrivals: []string{"a1", "a2", "a3", "a4", "b1", "b2", "c1"},
			want:     []string{"a1", "b1", "c1", "a2", "b2", "a3"},
		},
		{
			name: "a tenant joins the ring at its end", limit: 4, free: 4,
			arrivals: []string{"b1", "b2", "a1", "c1"},
			want:     []string{"b1", "a1", "c1", "b2"},
		},
		{
			name: "a tenant at its cap waits on itself alone", limit: 2, free: 2,
			held:     map[string]int{"a": 2},
			arrivals: []string{"a1", "a2", "a3", "b1", "b2", "b3"},
			want:     []string{"b1", "b2"},
		},
		{
			name: "a tenant reaching its cap leaves the rest free", limit: 2, free: 4,
			arrivals: []string{"a1", "a2", "a3", "a4"},
			want:     []string{"a1", "a2"},
		},
		{
			name: "the cap counts what a tenant held before", limit: 2, free: 4,
			held:     map[string]int{"a": 1},
			arrivals: []string{"a1", "a2", "b1", "b2", "b3"},
			want:     []string{"a1", "b1", "b2"},
		},
		{
			name: "a capped run may queue behind its own tenant's run", limit: 1, free: 0,
			held: map[string]int{"a": 1}, own: map[string]int{"a": 1},
			arrivals: []string{"a1", "a2", "b1"},
			want:     []string{"a1"},
		},
		{
			name: "a capped run is offered after the pool is full", limit: 1, free: 1,
			held: map[string]int{"a": 1}, own: map[string]int{"a": 1},
			arrivals: []string{"a1", "b1", "b2"},
			want:     []string{"a1", "b1"},
		},
		{
			name: "a run that holds a place moves, even at the cap", limit: 1, free: 2,
			arrivals: []string{"a1*", "a2", "b1"},
			want:     []string{"a1*", "b1"},
		},
		{
			name: "nothing free, nothing placed", limit: 2, free: 0,
			arrivals: []string{"a1", "b1"},
			want:     nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f fairQueue
			for name, n := range tc.held {
				f.tenant(name).held = n
			}
			base := time.Unix(1_000_000, 0)
			names := map[*ticket]string{}
			for i, a := range tc.arrivals {
				tk := &ticket{tenant: a[:1], since: base.Add(time.Duration(i) * time.Millisecond)}
				if strings.HasSuffix(a, "*") {
					f.hold(tk)
				}
				names[tk] = a
				f.push(tk)
			}
			free, own := tc.free, maps.Clone(tc.own)
			var got []string
			f.serve(tc.limit, func(tk *ticket) bool {
				switch {
				case !f.mayHold(tk, tc.limit):
					if own[tk.tenant] == 0 {
						return false
					}
					own[tk.tenant]--
				case free == 0:
					return false
				default:
					free--
					f.hold(tk)
				}
				got = append(got, names[tk])
				return true
			})
			if !slices.Equal(got, tc.want) {
				t.Fatalf("placed %v, want %v", got, tc.want)
			}
			for name, tq := range f.tenants {
				if tq.held > tc.limit && tq.held > tc.held[name] {
					t.Errorf("tenant %s holds %d, more than its cap %d", name, tq.held, tc.limit)
				}
			}
			waiting := 0
			f.each(func(*ticket) { waiting++ })
			if want := len(tc.arrivals) - len(tc.want); waiting != want {
				t.Errorf("%d runs waiting, want %d", waiting, want)
			}
		})
	}
}

// TestFairQueueForgetsTenants: a tenant that neither holds nor waits is
// dropped, so the queue's memory follows the tenants active now.
func TestFairQueueForgetsTenants(t *testing.T) {
	var f fairQueue
	a, b := &ticket{tenant: "a"}, &ticket{tenant: "b"}
	f.push(a)
	f.push(b)
	f.serve(1, func(tk *ticket) bool { f.hold(tk); return true })
	if a.waits || b.waits || len(f.ring) != 0 {
		t.Fatalf("after serving: ring %d, waits %v %v", len(f.ring), a.waits, b.waits)
	}
	if !f.unhold(a) || f.unhold(a) {
		t.Fatal("unhold: want true once, then false")
	}
	f.unhold(b)
	if len(f.tenants) != 0 {
		t.Fatalf("tenants left: %v", f.tenants)
	}
	c := &ticket{tenant: "c"}
	f.push(c)
	f.remove(c, false) // gave up
	if len(f.tenants) != 0 || len(f.ring) != 0 {
		t.Fatalf("after a run gave up: tenants %v, ring %d", f.tenants, len(f.ring))
	}
}

func TestMaxWorkersPerTenantOption(t *testing.T) {
	tests := []struct {
		max, perTenant int
		want           int // 0: an error
	}{
		{max: 1, want: 1},
		{max: 2, want: 1},
		{max: 3, want: 2},
		{max: 4, want: 2},
		{max: 5, want: 3},
		{max: 4, perTenant: 4, want: 4},
		{max: 4, perTenant: 1, want: 1},
		{max: 4, perTenant: 5},
		{max: 4, perTenant: -1},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d of %d", tc.perTenant, tc.max), func(t *testing.T) {
			o := testOptions()
			o.MinWorkers, o.MaxWorkers, o.MaxWorkersPerTenant = 1, tc.max, tc.perTenant
			got, err := o.withDefaults()
			switch {
			case tc.want == 0 && err == nil:
				t.Fatalf("MaxWorkersPerTenant %d of %d accepted", tc.perTenant, tc.max)
			case tc.want != 0 && err != nil:
				t.Fatal(err)
			case tc.want != 0 && got.MaxWorkersPerTenant != tc.want:
				t.Fatalf("MaxWorkersPerTenant = %d, want %d", got.MaxWorkersPerTenant, tc.want)
			}
		})
	}
}

// TestHostileTenantWaitsOnItself (R-JS-8): a tenant sends twice as many
// endless loops as the pool has workers. It holds its share, half the
// pool, and no more; its other runs wait on it and fail with KindBusy
// after QueueTimeout. Meanwhile another tenant's trivial transforms all
// succeed, while the loops are still running (they end only when the
// test cancels them), with no wait for a worker.
func TestHostileTenantWaitsOnItself(t *testing.T) {
	const workers, hostileRuns, goodRuns = 4, 8, 60
	p := newTestPool(t, func(o *Options) {
		o.MinWorkers, o.MaxWorkers = 1, workers // the default share: 2
		o.Timeout = MaxTimeout                  // the loops outlive the test's good runs
		o.QueueTimeout = DefaultQueueTimeout
	})
	share := DefaultMaxWorkersPerTenant(workers)
	held := func(tenant string) int {
		p.mu.Lock()
		defer p.mu.Unlock()
		if tq := p.fair.tenants[tenant]; tq != nil {
			return tq.held
		}
		return 0
	}

	goodScope := RealmScope{Tenant: "good", Principal: "app"}
	good := func(i int) (time.Duration, error) {
		args := fmt.Sprintf(`{"body":{"v":%d},"headers":{}}`, i)
		t0 := time.Now()
		res, err := p.Run(context.Background(), Job{Kind: JobRequest, Realm: goodScope, Args: []byte(args),
			Code: `module.exports = (req) => ({ body: { v: req.args.body.v + 1 }, headers: {} })`})
		d := time.Since(t0)
		if err == nil && mustJSON(t, res.Body) != fmt.Sprintf(`{"v":%d}`, i+1) {
			err = fmt.Errorf("body %s", res.Body)
		}
		return d, err
	}
	// goodTraffic runs n good transforms from two callers and returns
	// their latencies; it fails the test on any error.
	goodTraffic := func(phase string, n int) []time.Duration {
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		for c := 0; c < 2; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				for i := c; i < n; i += 2 {
					d, err := good(i)
					if err != nil {
						t.Errorf("%s: good run %d: %v (kind %q)", phase, i, err, kindOf(err))
					}
					if h := held("hostile"); h > share {
						t.Errorf("%s: the hostile tenant holds %d workers, more than its share %d", phase, h, share)
					}
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				}
			}(c)
		}
		wg.Wait()
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return lat
	}

	baseline := goodTraffic("baseline", goodRuns/2)

	hostileCtx, stopHostile := context.WithCancel(context.Background())
	defer stopHostile()
	hostile := Job{Kind: JobReactor, Realm: RealmScope{Tenant: "hostile", Principal: "app"},
		Code: `module.exports = () => { for (;;) {} }`}
	hostileDone := make(chan outcome, hostileRuns)
	for i := 0; i < hostileRuns; i++ {
		go func() {
			res, err := p.Run(hostileCtx, hostile)
			hostileDone <- outcome{res, err}
		}()
	}
	// Its share is busy, the rest of its runs wait (or sit queued behind
	// its own loops, which is waiting on itself too).
	waitStats(t, p, "the hostile tenant to fill its share", func(s Stats) bool {
		return s.Busy == share && s.Waiting+s.Queued == hostileRuns-share
	})
	if h := held("hostile"); h != share {
		t.Fatalf("the hostile tenant holds %d workers, want its share %d", h, share)
	}

	attack := goodTraffic("under attack", goodRuns)

	// The loops are still running (they end only when cancelled, or after
	// MaxTimeout): the hostile runs that ended so far are runs beyond its
	// share that gave up waiting.
	gaveUp := 0
	for drained := false; !drained; {
		select {
		case o := <-hostileDone:
			gaveUp++
			if !errors.Is(o.err, ErrBusy) {
				t.Errorf("a hostile run ended during the good runs: %v", o.err)
			}
		default:
			drained = true
		}
	}
	if s := p.Stats(); s.Busy != share || held("hostile") != share {
		t.Errorf("after the good runs: %+v, hostile holds %d, want its share %d busy", s, held("hostile"), share)
	}
	// The runs beyond its share waited on it alone: each gives up after
	// QueueTimeout with KindBusy (503 at the API), never having had a
	// worker, and the loops hold the same two workers throughout.
	for ; gaveUp < hostileRuns-share; gaveUp++ {
		if o := <-hostileDone; !errors.Is(o.err, ErrBusy) {
			t.Errorf("a hostile run beyond its share: %v, want busy", o.err)
		}
	}
	if s := p.Stats(); s.Busy != share || s.Waiting != 0 || s.Queued != 0 {
		t.Errorf("after the waiting hostile runs gave up: %+v, want only its share busy", s)
	}
	stopHostile()
	for i := 0; i < share; i++ {
		if o := <-hostileDone; kindOf(o.err) != KindTimeout {
			t.Errorf("a hostile loop, cancelled: %v, want a timeout", o.err)
		}
	}
	settled(t, p)
	sharesAtRest(t, p)
	t.Logf("good runs: baseline median %v max %v; under attack median %v max %v",
		baseline[len(baseline)/2], baseline[len(baseline)-1], attack[len(attack)/2], attack[len(attack)-1])
	if m, b := attack[len(attack)/2], baseline[len(baseline)/2]; m > b+time.Second {
		t.Errorf("under attack the good runs' median latency is %v, against %v before", m, b)
	}
}

// watchShares checks, until the returned function is called, that no
// tenant of p holds more than its share.
func watchShares(t *testing.T, p *Pool) (stop func()) {
	t.Helper()
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
			p.mu.Lock()
			for name, tq := range p.fair.tenants {
				if tq.held > p.limit() || tq.held < 0 {
					t.Errorf("tenant %q holds %d workers; its share is %d", name, tq.held, p.limit())
				}
			}
			p.mu.Unlock()
		}
	}()
	return func() { close(done); <-exited }
}

// sharesAtRest checks that a pool with no run under way has no run
// waiting and no tenant holding a worker.
func sharesAtRest(t *testing.T, p *Pool) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, tq := range p.fair.tenants {
		t.Errorf("at rest, tenant %q still holds %d and has %d runs waiting", name, tq.held, len(tq.waiting))
	}
	if len(p.fair.ring) != 0 {
		t.Errorf("at rest, %d tenants are in the ring", len(p.fair.ring))
	}
}

package transforms

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Pipelining (dispatch.go) and R-JS-1, "a worker death fails only that
// request": a job queued behind a run on a busy worker has not started,
// so whatever ends the worker during the run ahead of it must not fail
// it; it runs elsewhere. A death after the hand-over (the result of the
// run ahead has come back) is its own.

// pipelinePool is a pool of one worker, so that a second run queues
// behind the first, with a queue window no test machine reaches: a run
// always queues behind a busy worker, and never moves.
func pipelinePool(t *testing.T, edit func(*Options)) *Pool {
	t.Helper()
	p := newTestPool(t, func(o *Options) {
		o.MinWorkers, o.MaxWorkers = 1, 1
		o.QueueTimeout = 30 * time.Second
		if edit != nil {
			edit(o)
		}
	})
	p.window = time.Hour // before the first run
	return p
}

// gate is a Svc whose calls return once the test opens it: a run that
// awaits a call holds its worker, provably running, until then.
type gate struct {
	open  chan struct{}
	once  sync.Once
	calls atomic.Int32
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) Call(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
	g.calls.Add(1)
	select {
	case <-g.open:
		return json.RawMessage(`{}`), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

// gated is the code of a reactor that waits for its gate, then runs body
// (the body of an async function of req).
func gated(body string) string {
	return "module.exports = async function (req) {\nawait req.svc.tokenize({});\n" + body + "\n}"
}

// doubling is a reactor that returns twice its args.n.
const doubling = `module.exports = (req) => ({ raw: req.args.n * 2 })`

func doubleJob(n int) Job {
	return Job{Kind: JobReactor, Code: doubling, Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}
}

// outcome is what a run started by runAsync returned.
type outcome struct {
	res *Result
	err error
}

// runAsync runs job in the background.
func runAsync(ctx context.Context, p *Pool, job Job) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		res, err := p.Run(ctx, job)
		ch <- outcome{res, err}
	}()
	return ch
}

// waitStats waits until the pool's stats satisfy cond, and returns them.
func waitStats(t *testing.T, p *Pool, what string, cond func(Stats) bool) Stats {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := p.Stats()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: stats %+v", what, s)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// settled waits until no run is under way, queued or waiting (a drain
// ends after the run that left it has returned), and no tenant holds a
// share of the pool.
func settled(t *testing.T, p *Pool) Stats {
	t.Helper()
	return waitStats(t, p, "the pool to settle", func(s Stats) bool {
		p.mu.Lock()
		shares := len(p.fair.tenants)
		p.mu.Unlock()
		return s.Busy == 0 && s.Queued == 0 && s.Waiting == 0 && shares == 0
	})
}

// wantRaw checks that a run succeeded and returned raw.
func wantRaw(t *testing.T, name string, o outcome, raw string) {
	t.Helper()
	if o.err != nil {
		t.Errorf("%s failed: %v", name, o.err)
		return
	}
	if got := mustJSON(t, o.res.Raw); got != raw {
		t.Errorf("%s returned %s, want %s", name, got, raw)
	}
}

func sumKilled(s Stats) uint64 {
	var n uint64
	for _, v := range s.Killed {
		n += v
	}
	return n
}

// TestQueuedRunSurvivesDeathAhead: run A ends its worker in every way a
// worker can end while run B is queued behind it. A fails with its
// kind; B runs on another worker and returns its result.
func TestQueuedRunSurvivesDeathAhead(t *testing.T) {
	tests := []struct {
		name   string
		code   string         // what A does once B is queued
		signal syscall.Signal // sent to the worker then, or 0
		env    string         // added to the worker's environment
		kinds  []string       // A's error
		lost   bool           // A's worker ends with A
	}{
		{name: "worker crashes", code: `for (;;) {}`, signal: syscall.SIGSEGV, kinds: []string{KindCrash}, lost: true},
		{name: "worker killed by the system", code: `for (;;) {}`, signal: syscall.SIGKILL, kinds: []string{KindMemory}, lost: true},
		{name: "one huge allocation", code: `return { raw: 'x'.repeat(2 ** 34).length }`, kinds: []string{KindMemory}, lost: true},
		{name: "allocation loop past the memory cap", code: `const a = []; for (;;) a.push(new Float64Array(1 << 20))`, kinds: []string{KindMemory}, lost: true},
		{name: "native loop killed past the deadline", code: `return { raw: new Array(2 ** 32 - 1).indexOf(1) }`, kinds: []string{KindTimeout}, lost: true},
		{name: "protocol broken", code: `return { raw: '` + breakMarker + `' }`, env: workerBreakEnv + "=1", kinds: []string{KindCrash}, lost: true},
		{name: "loop interrupted at the deadline, worker kept", code: `for (;;) {}`, kinds: []string{KindTimeout}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pipelinePool(t, func(o *Options) {
				o.Timeout = 2 * time.Second
				if tc.env != "" {
					o.Env = append(o.Env, tc.env)
				}
			})
			g := newGate()
			a := runAsync(context.Background(), p, Job{Kind: JobReactor, Svc: g, Code: gated(tc.code)})
			waitStats(t, p, "A to run", func(s Stats) bool { return s.Busy == 1 && g.calls.Load() == 1 })
			pid := anyWorkerPID(t, p)
			b := runAsync(context.Background(), p, doubleJob(21))
			if s := waitStats(t, p, "B to queue", func(s Stats) bool { return s.Queued == 1 }); s.Busy != 1 || s.Waiting != 0 {
				t.Errorf("with B queued: %+v, want 1 busy and none waiting", s)
			}
			g.release()
			if tc.signal != 0 {
				_ = syscall.Kill(pid, tc.signal)
			}
			oa, ob := <-a, <-b
			kinds := tc.kinds
			if raceEnabled && slices.Contains(kinds, KindMemory) && tc.signal == 0 {
				kinds = append(slices.Clone(kinds), KindTimeout) // slow allocation under the race detector
			}
			if !slices.Contains(kinds, kindOf(oa.err)) {
				t.Errorf("A: %v (kind %q), want one of %v", oa.err, kindOf(oa.err), kinds)
			}
			wantRaw(t, "B", ob, "42")
			s := settled(t, p)
			want := map[bool]uint64{false: 0, true: 1}[tc.lost]
			if s.Runs != 2 || s.Requeued != want || sumKilled(s) != want || s.Alive != 1 {
				t.Errorf("after: %+v, want 2 runs, %d requeued and %d killed, 1 alive", s, want, want)
			}
		})
	}
}

// TestDeathDuringQueuedRunFailsIt: once the run ahead has returned, the
// queued run B is the worker's: a death during B fails B (it is not run
// again), and run C, queued behind B meanwhile, runs elsewhere.
func TestDeathDuringQueuedRunFailsIt(t *testing.T) {
	tests := []struct {
		name   string
		code   string         // B's
		signal syscall.Signal // sent to the worker once A has returned, or 0
		kinds  []string       // B's error
	}{
		{name: "B exhausts memory", code: `module.exports = () => ({ raw: 'x'.repeat(2 ** 34).length })`, kinds: []string{KindMemory}},
		{name: "B's worker crashes", code: `module.exports = () => { for (;;) {} }`, signal: syscall.SIGSEGV, kinds: []string{KindCrash}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pipelinePool(t, func(o *Options) { o.Timeout = 5 * time.Second })
			g := newGate()
			a := runAsync(context.Background(), p, Job{Kind: JobReactor, Svc: g, Code: gated(`return { raw: 'A' }`)})
			waitStats(t, p, "A to run", func(s Stats) bool { return s.Busy == 1 && g.calls.Load() == 1 })
			pid := anyWorkerPID(t, p)
			b := runAsync(context.Background(), p, Job{Kind: JobReactor, Code: tc.code})
			waitStats(t, p, "B to queue", func(s Stats) bool { return s.Queued == 1 })
			c := runAsync(context.Background(), p, doubleJob(21))
			if s := waitStats(t, p, "C to wait", func(s Stats) bool { return s.Waiting == 1 }); s.Busy != 1 || s.Queued != 1 {
				t.Errorf("with B queued and C waiting: %+v, want 1 busy, 1 queued", s)
			}
			g.release()
			wantRaw(t, "A", <-a, `"A"`)
			if tc.signal != 0 {
				_ = syscall.Kill(pid, tc.signal)
			}
			kinds := tc.kinds
			if raceEnabled && tc.signal == 0 {
				kinds = append(slices.Clone(kinds), KindTimeout)
			}
			if ob := <-b; !slices.Contains(kinds, kindOf(ob.err)) {
				t.Errorf("B: %v (kind %q), want one of %v", ob.err, kindOf(ob.err), kinds)
			}
			wantRaw(t, "C", <-c, "42")
			if s := settled(t, p); s.Runs != 3 || s.Requeued != 1 || sumKilled(s) != 1 {
				t.Errorf("after: %+v, want 3 runs, C requeued, 1 killed", s)
			}
		})
	}
}

// TestQueuedRunLeaves: a queued run whose context ends, or whose queue
// deadline passes, returns at once; the run ahead goes on undisturbed,
// and the worker skips the queued job: its warm realm is untouched, and
// it makes no svc call.
func TestQueuedRunLeaves(t *testing.T) {
	tests := []struct {
		name         string
		queueTimeout time.Duration
		ctx          func() (context.Context, context.CancelFunc)
		cancel       bool // cancel once the run is queued
		kind         string
		cause        error
	}{
		{name: "context cancelled", ctx: func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			cancel: true, kind: KindTimeout, cause: context.Canceled},
		{name: "context deadline", ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 300*time.Millisecond)
		}, kind: KindTimeout, cause: context.DeadlineExceeded},
		{name: "queue timeout", queueTimeout: 300 * time.Millisecond,
			ctx: func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, kind: KindBusy},
	}
	code := `module.exports = async (req) => {
		if (req.args.slow) { await req.svc.tokenize({}); const end = Date.now() + 300; while (Date.now() < end) {} }
		return { raw: 'x' };
	}`
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pipelinePool(t, func(o *Options) {
				if tc.queueTimeout > 0 {
					o.QueueTimeout = tc.queueTimeout
				}
			})
			for i := 0; i < 2; i++ {
				if _, warm, err := runScoped(t, p, scopeA, code, map[string]any{}); err != nil || warm != (i == 1) {
					t.Fatalf("warm-up run %d: %v, warm %v", i, err, warm)
				}
			}
			g := newGate()
			a := runAsync(context.Background(), p, Job{Kind: JobReactor, Svc: g, Code: gated(`return { raw: 'A' }`)})
			waitStats(t, p, "A to run", func(s Stats) bool { return s.Busy == 1 && g.calls.Load() == 1 })
			ctx, cancel := tc.ctx()
			defer cancel()
			calls := &gate{open: make(chan struct{})}
			calls.release()
			b := runAsync(ctx, p, Job{Kind: JobReactor, Code: code, Args: json.RawMessage(`{"slow":true}`), Svc: calls, Realm: scopeA})
			waitStats(t, p, "B to queue", func(s Stats) bool { return s.Queued == 1 })
			if tc.cancel {
				cancel()
			}
			ob := <-b
			if kindOf(ob.err) != tc.kind || tc.cause != nil && !errors.Is(ob.err, tc.cause) {
				t.Errorf("B: %v, want kind %s caused by %v", ob.err, tc.kind, tc.cause)
			}
			select {
			case oa := <-a:
				t.Fatalf("A ended when B left: %v", oa.err)
			default:
			}
			if s := p.Stats(); s.Busy != 1 || s.Queued != 0 || s.Waiting != 0 {
				t.Errorf("after B left: %+v, want A alone busy", s)
			}
			g.release()
			wantRaw(t, "A", <-a, `"A"`)
			settled(t, p)
			if _, warm, err := runScoped(t, p, scopeA, code, map[string]any{}); err != nil || !warm {
				t.Errorf("after B left: %v, warm %v: B's realm was touched", err, warm)
			}
			if n := calls.calls.Load(); n != 0 {
				t.Errorf("B made %d svc calls", n)
			}
			if s := settled(t, p); s.Runs != 4 || sumKilled(s) != 0 || s.Requeued != 0 {
				t.Errorf("after: %+v, want 4 runs (not B's) and no worker lost", s)
			}
		})
	}
}

// TestQueuedRunDeadlineCountsFromItsStart: a queued run's Timeout counts
// from the moment the worker starts it, not from when it was queued: B,
// queued behind a run that takes most of the Timeout, and itself taking
// most of it, is not killed.
func TestQueuedRunDeadlineCountsFromItsStart(t *testing.T) {
	// each run takes 4 s of the 6 s Timeout: B, queued behind A, would
	// time out if its deadline counted from its queueing (8 s), and has 2 s
	// to spare for a busy machine if it counts from its start
	p := pipelinePool(t, func(o *Options) { o.Timeout = 6 * time.Second })
	busy := func(name string) Job {
		return Job{Kind: JobReactor,
			Code: `module.exports = () => { const end = Date.now() + 4000; while (Date.now() < end) {} return { raw: '` + name + `' } }`}
	}
	a := runAsync(context.Background(), p, busy("A"))
	waitStats(t, p, "A to run", func(s Stats) bool { return s.Busy == 1 })
	b := runAsync(context.Background(), p, busy("B"))
	waitStats(t, p, "B to queue", func(s Stats) bool { return s.Queued == 1 })
	wantRaw(t, "A", <-a, `"A"`)
	wantRaw(t, "B", <-b, `"B"`)
	if s := settled(t, p); s.Runs != 2 || sumKilled(s) != 0 {
		t.Errorf("after: %+v", s)
	}
}

// TestQueuedRunMovesToAWorkerThatComesFree: a run queued behind a slow
// run does not wait for it: past the queue window it takes the first
// worker that comes free, and the slow worker skips its job.
func TestQueuedRunMovesToAWorkerThatComesFree(t *testing.T) {
	// one tenant's runs on both workers: its share is the whole pool
	p := newTestPool(t, func(o *Options) {
		o.MinWorkers, o.MaxWorkers, o.MaxWorkersPerTenant, o.QueueTimeout = 2, 2, 2, 30*time.Second
	})
	p.window = time.Second
	slowGate, shortGate := newGate(), newGate()
	slow := runAsync(context.Background(), p, Job{Kind: JobReactor, Svc: slowGate,
		Code: gated(`const end = Date.now() + 4000; while (Date.now() < end) {} return { raw: 'slow' }`)})
	waitStats(t, p, "the slow run", func(Stats) bool { return slowGate.calls.Load() == 1 })
	short := runAsync(context.Background(), p, Job{Kind: JobReactor, Svc: shortGate,
		Code: gated(`const end = Date.now() + 1500; while (Date.now() < end) {} return { raw: 'short' }`)})
	waitStats(t, p, "the short run", func(Stats) bool { return shortGate.calls.Load() == 1 })
	b := runAsync(context.Background(), p, doubleJob(21))
	waitStats(t, p, "B to queue", func(s Stats) bool { return s.Queued == 1 })
	slowGate.release()
	shortGate.release()
	select {
	case ob := <-b:
		wantRaw(t, "B", ob, "42")
	case o := <-slow:
		t.Fatalf("the slow run (%v) ended before B, queued behind it", o.err)
	}
	wantRaw(t, "the short run", <-short, `"short"`)
	wantRaw(t, "the slow run", <-slow, `"slow"`)
	if s := settled(t, p); s.Runs != 3 || s.Requeued != 1 || sumKilled(s) != 0 {
		t.Errorf("after: %+v, want 3 runs, B moved once, no worker lost", s)
	}
}

// TestQueuedRunPrefersItsWarmRealm: among busy workers, a job queues
// behind the one that keeps its realm warm, as it would take that one if
// idle, even when another is likely to be free first.
func TestQueuedRunPrefersItsWarmRealm(t *testing.T) {
	p := newTestPool(t, func(o *Options) { o.MinWorkers, o.MaxWorkers, o.QueueTimeout = 2, 2, 30*time.Second })
	p.window = time.Hour
	code := `module.exports = async (req) => { if (req.args.gate) await req.svc.tokenize({}); return { raw: req.args.n }; }`
	job := func(scope RealmScope, svc Svc, n int) Job {
		args := fmt.Sprintf(`{"n":%d,"gate":%v}`, n, svc != nil)
		return Job{Kind: JobReactor, Code: code, Realm: scope, Svc: svc, Args: json.RawMessage(args)}
	}
	// One realm on each worker: two runs at once take both workers.
	g0 := newGate()
	x0, y0 := runAsync(context.Background(), p, job(scopeA, g0, 0)), runAsync(context.Background(), p, job(scopeB, g0, 0))
	waitStats(t, p, "two runs at once", func(Stats) bool { return g0.calls.Load() == 2 })
	g0.release()
	wantRaw(t, "warm-up A", <-x0, "0")
	wantRaw(t, "warm-up B", <-y0, "0")
	affA := p.affinity(&jobFrame{Code: code, Realm: scopeA.key()})
	var wa *proc
	p.mu.Lock()
	for w := range p.alive {
		if w.warm.has(affA) {
			wa = w
		}
	}
	p.mu.Unlock()
	if wa == nil {
		t.Fatal("no worker keeps scope A's realm")
	}
	// The worker without A's realm gets the first run, which then started
	// first.
	before := p.Stats()
	gb, ga := newGate(), newGate()
	yb := runAsync(context.Background(), p, job(scopeB, gb, 1))
	waitStats(t, p, "B's run", func(Stats) bool { return gb.calls.Load() == 1 })
	xa := runAsync(context.Background(), p, job(scopeA, ga, 2))
	waitStats(t, p, "A's run", func(Stats) bool { return ga.calls.Load() == 1 })
	queued := runAsync(context.Background(), p, job(scopeA, nil, 3))
	waitStats(t, p, "the run to queue", func(s Stats) bool { return s.Queued == 1 })
	p.mu.Lock()
	behindA := wa.next != nil && wa.next.t != nil
	p.mu.Unlock()
	if !behindA {
		t.Error("the run did not queue behind the worker with its realm")
	}
	gb.release()
	ga.release()
	wantRaw(t, "B's run", <-yb, "1")
	wantRaw(t, "A's run", <-xa, "2")
	wantRaw(t, "the queued run", <-queued, "3")
	after := settled(t, p)
	if runs, warm := after.Runs-before.Runs, after.WarmRuns-before.WarmRuns; runs != 3 || warm != 3 {
		t.Errorf("%d of %d runs were warm, want all 3", warm, runs)
	}
}

// TestPipelineStress: many callers, two workers, trivial runs in three
// scopes mixed with runs that kill their worker, runs interrupted at their
// deadline and callers that give up early. Every trivial run that its
// caller waits for returns its own result (R-JS-1), no tenant ever holds
// more than its share (one worker: the scopes are three tenants, "" among
// them), and the pool's counters come back to rest, its shares too.
func TestPipelineStress(t *testing.T) {
	if testing.Short() {
		t.Skip("the stress test takes several seconds")
	}
	p := newTestPool(t, func(o *Options) {
		o.MinWorkers, o.MaxWorkers, o.QueueTimeout = 1, 2, time.Minute
		// no run here may reach the pool's timeout: the loops end by their
		// context, the memory runs by the limit; a busy machine must not
		// turn a short run into a timeout
		o.Timeout = MaxTimeout
	})
	scopes := []RealmScope{{}, scopeA, scopeB}
	const callers, each = 12, 30
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	stopShares := watchShares(t, p)
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			for i := 0; i < each; i++ {
				n := c*1000 + i
				switch r := rng.IntN(20); {
				case r == 0: // kills its worker
					_, err := p.Run(context.Background(), Job{Kind: JobReactor, Code: `module.exports = () => ({ raw: 'x'.repeat(2 ** 34).length })`})
					if k := kindOf(err); k != KindMemory && k != KindTimeout {
						fail("memory run: %v", err)
					}
				case r == 1: // interrupted at its deadline
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
					_, err := p.Run(ctx, Job{Kind: JobReactor, Code: `module.exports = () => { for (;;) {} }`})
					cancel()
					if kindOf(err) != KindTimeout {
						fail("loop: %v", err)
					}
				case r < 4: // gives up early
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(3000))*time.Microsecond)
					job := doubleJob(n)
					job.Realm = scopes[rng.IntN(len(scopes))]
					res, err := p.Run(ctx, job)
					cancel()
					if err == nil && string(res.Raw) != fmt.Sprint(2*n) || err != nil && kindOf(err) != KindTimeout {
						fail("early exit %d: %v %+v", n, err, res)
					}
				default:
					job := doubleJob(n)
					job.Realm = scopes[rng.IntN(len(scopes))]
					res, err := p.Run(context.Background(), job)
					if err != nil || string(res.Raw) != fmt.Sprint(2*n) {
						fail("run %d: %v %+v", n, err, res)
					}
				}
			}
		}(c)
	}
	wg.Wait()
	stopShares()
	for _, f := range failures {
		t.Error(f)
	}
	settled(t, p)
	// a worker lost by the last runs is replaced in the background
	s := waitStats(t, p, "MinWorkers to be alive", func(s Stats) bool { return s.Alive >= 1 })
	if s.Alive > 2 || s.Runs > callers*each {
		t.Errorf("after: %+v", s)
	}
	sharesAtRest(t, p)
	t.Logf("stats: %+v", s)
}

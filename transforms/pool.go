package transforms

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Pool runs jobs in worker processes. It is safe for concurrent use.
type Pool struct {
	opts Options

	closing chan struct{}
	spawnCh chan spawnReq
	procsWG sync.WaitGroup
	bgWG    sync.WaitGroup
	nextID  atomic.Uint64
	seed    maphash.Seed  // of realm affinity hashes
	window  time.Duration // queueWindow, unless a test set another before the first run

	mu       sync.Mutex
	closed   bool
	idle     []*proc // most recently used last
	alive    map[*proc]bool
	starting int       // workers being started
	fair     fairQueue // runs waiting for a worker or a better place, and what each tenant holds (fairqueue.go)
	busy     int
	queued   int // runs whose job frame is queued in a busy worker's pipe
	started  uint64
	runs     uint64
	warm     uint64
	requeued uint64
	killed   map[string]uint64
	// unconfined is what the last worker started said about its system
	// call filter (see Stats.Unconfined)
	unconfined string
}

// Stats is a snapshot of a pool.
type Stats struct {
	// Alive counts worker processes, busy or idle.
	Alive int
	// Busy counts workers running a job.
	Busy int
	// Waiting counts runs waiting for a free worker.
	Waiting int
	// Queued counts runs whose job is queued in a busy worker's pipe,
	// behind the run under way there (pipelining); they have not started.
	Queued int
	// Started counts workers ever started.
	Started uint64
	// Runs counts runs that reached a worker.
	Runs uint64
	// Requeued counts queued runs that were placed again before they
	// started: their worker was lost during the run ahead of them, or they
	// moved to a worker that came free first.
	Requeued uint64
	// WarmRuns counts the runs (of jobs with a RealmScope) that reused a
	// warm realm.
	WarmRuns uint64
	// Killed counts workers that ended, by cause: KindTimeout, KindMemory,
	// KindCrash (died or broke the protocol), "idle" (stopped after
	// IdleTimeout) and KindClosed.
	Killed map[string]uint64
	// Unconfined is why the most recently started worker runs without its
	// system call filter (seccomp), such as a platform without one; empty
	// when it has it.
	Unconfined string
}

type spawnReq struct {
	cmd *exec.Cmd
	err chan error
}

// NewPool starts a pool and its MinWorkers warm workers. It fails when
// the options are invalid or the first worker cannot be started (a wrong
// Command).
func NewPool(o Options) (*Pool, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Pool{
		opts:    o,
		closing: make(chan struct{}),
		spawnCh: make(chan spawnReq),
		alive:   make(map[*proc]bool),
		killed:  make(map[string]uint64),
		seed:    maphash.MakeSeed(),
		window:  queueWindow,
	}
	p.bgWG.Add(2)
	go p.spawner()
	go p.reaper()
	for i := 0; i < o.MinWorkers; i++ {
		p.mu.Lock()
		p.starting++
		p.mu.Unlock()
		if _, err := p.startWorker(nil); err != nil {
			p.Close()
			return nil, err
		}
	}
	return p, nil
}

// spawner starts every worker from one OS thread that it never releases:
// Linux delivers a worker's parent-death signal when the thread that
// forked it exits, and Go may otherwise end that thread at any time.
func (p *Pool) spawner() {
	defer p.bgWG.Done()
	runtime.LockOSThread()
	// Never unlocked: when the pool closes, this goroutine's exit takes
	// the thread with it, which is fine as all workers are gone by then.
	for {
		select {
		case r := <-p.spawnCh:
			r.err <- r.cmd.Start()
		case <-p.closing:
			return
		}
	}
}

func (p *Pool) spawn(cmd *exec.Cmd) error {
	r := spawnReq{cmd: cmd, err: make(chan error, 1)}
	select {
	case p.spawnCh <- r:
		return <-r.err
	case <-p.closing:
		return errors.New("pool closed")
	}
}

// startWorker starts one worker, for which the caller counted itself in
// p.starting, and registers it as alive: busy with the run of t, or idle
// when t is nil.
func (p *Pool) startWorker(t *ticket) (*proc, error) {
	// Add under the lock, and never once Close has begun waiting.
	p.mu.Lock()
	if p.closed {
		p.starting--
		p.mu.Unlock()
		return nil, newError(KindBusy, "the pool is closed")
	}
	p.procsWG.Add(1)
	p.mu.Unlock()
	w, err := startProc(&p.opts, p.spawn, p.procsWG.Done)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starting--
	if err != nil {
		p.killed[KindCrash]++
		p.dispatch() // a waiting run may try again
		return nil, err
	}
	p.started++
	p.unconfined = w.unconfined
	w.slot = p.freeSlot()
	w.warm = newLRU[uint64, struct{}](realmCacheSize(p.opts.MemoryLimit))
	w.lastUsed = p.opts.now()
	if p.closed {
		w.stop(KindClosed)
		return nil, ErrBusy
	}
	p.alive[w] = true
	if t != nil {
		p.busy++
		w.holder = t
	} else {
		p.idle = append(p.idle, w)
		p.dispatch()
	}
	return w, nil
}

// freeSlot returns the lowest slot number no live worker has. Call with
// p.mu held.
func (p *Pool) freeSlot() int {
	used := make([]bool, p.opts.MaxWorkers+1)
	for w := range p.alive {
		if w.slot < len(used) {
			used[w.slot] = true
		}
	}
	for i, u := range used {
		if !u {
			return i
		}
	}
	return len(used)
}

// reaper stops workers beyond MinWorkers that have been idle for
// IdleTimeout.
func (p *Pool) reaper() {
	defer p.bgWG.Done()
	t := time.NewTicker(max(p.opts.IdleTimeout/2, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-p.closing:
			return
		case <-t.C:
			p.reapIdle()
		}
	}
}

// reapIdle stops the workers beyond MinWorkers that have been idle for
// more than IdleTimeout, by the pool's clock.
func (p *Pool) reapIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.opts.now()
	for len(p.alive) > p.opts.MinWorkers && len(p.idle) > 0 && now.Sub(p.idle[0].lastUsed) > p.opts.IdleTimeout {
		w := p.idle[0]
		p.idle = p.idle[1:]
		delete(p.alive, w)
		p.killed["idle"]++
		w.stop("idle")
	}
}

// Run runs a job in a worker and returns what its function returned.
//
// Errors are *Error values, except for caller mistakes (an unknown
// Job.Kind), which are plain errors. For a thrown CustomHttpResponseError
// Run returns both an *Error (Kind runtime, Custom true, Status) and a
// Result with the response's Body and Headers.
//
// The run is bounded by the pool's Timeout and by ctx: cancelling ctx
// stops the run (KindTimeout, unwrapping to ctx.Err()), killing its
// worker if it has not stopped within Options.KillGrace.
func (p *Pool) Run(ctx context.Context, job Job) (*Result, error) {
	switch job.Kind {
	case JobRequest, JobResponse, JobReactor:
	default:
		return nil, fmt.Errorf("transforms: unknown job kind %q", job.Kind)
	}
	if n := codeChars(job.Code); n > MaxCodeChars {
		return nil, newError(KindInvalidCode, "the code is %d characters long; the limit is %d", n, MaxCodeChars)
	}
	args := job.Args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if len(args) > MaxPayload {
		return nil, newError(KindInvalidInput, "the args are %d bytes; the limit is %d", len(args), MaxPayload)
	}
	config, err := json.Marshal(job.Configuration)
	if err != nil {
		return nil, fmt.Errorf("transforms: configuration: %w", err)
	}
	if len(config) > MaxPayload {
		return nil, newError(KindInvalidInput, "the configuration is %d bytes; the limit is %d", len(config), MaxPayload)
	}
	jf := &jobFrame{Kind: job.Kind, Code: job.Code, Args: args, Config: config, Svc: job.Svc != nil, Realm: job.Realm.key()}
	return p.do(ctx, job.Realm.Tenant, jf, job.Svc, job.Meta)
}

// affinity is the routing hash of a job's realm key (scope and code), or
// 0 when the job has no scope. Only routing depends on it: a collision
// sends a job to a worker without its realm, nothing more.
func (p *Pool) affinity(jf *jobFrame) uint64 {
	if jf.Realm == "" {
		return 0
	}
	var h maphash.Hash
	h.SetSeed(p.seed)
	h.WriteString(jf.Realm)
	h.WriteByte(0)
	h.WriteString(jf.Code)
	return h.Sum64() | 1
}

// codeChars counts the characters of code as far as the MaxCodeChars
// check needs: code of at most MaxCodeChars bytes has no more characters,
// and is not counted (a run's code is counted on every run).
func codeChars(code string) int {
	if len(code) <= MaxCodeChars {
		return len(code)
	}
	return utf8.RuneCountInString(code)
}

// ValidateCode checks code like the package-level ValidateCode, with the
// pool's AllowModules, but parses and compiles it in a worker: hostile
// code then costs a worker, bounded by the pool's Timeout and
// MemoryLimit, rather than the calling process. It returns nil, an *Error
// of KindInvalidCode or KindModule, or the error of a run that failed
// (KindBusy, KindTimeout, KindMemory). The check counts against the share
// of the pool of jobs without a tenant; ValidateTenantCode counts it
// against the tenant whose code it is.
func (p *Pool) ValidateCode(ctx context.Context, code string) error {
	return p.ValidateTenantCode(ctx, "", code)
}

// ValidateTenantCode is ValidateCode for tenant's code: the check takes a
// worker from tenant's share of the pool (MaxWorkersPerTenant), so that a
// tenant saving code that is slow to compile waits on itself alone.
func (p *Pool) ValidateTenantCode(ctx context.Context, tenant, code string) error {
	if n := codeChars(code); n > MaxCodeChars {
		return newError(KindInvalidCode, "the code is %d characters long; the limit is %d", n, MaxCodeChars)
	}
	_, err := p.do(ctx, tenant, &jobFrame{Kind: jobValidate, Code: code}, nil, nil)
	return err
}

// do runs jf for tenant: it takes a worker, or a place in a busy worker's
// pipe (dispatch.go), within tenant's share of the pool (fairqueue.go),
// runs the job there and releases the worker.
func (p *Pool) do(ctx context.Context, tenant string, jf *jobFrame, svc Svc, meta map[string]string) (*Result, error) {
	if p.runTimeout(ctx) <= 0 || ctx.Err() != nil {
		return nil, &Error{Kind: KindTimeout, Message: "the run's context ended before it started", cause: context.Cause(ctx)}
	}
	t := &ticket{tenant: tenant, aff: p.affinity(jf), since: time.Now(), grant: make(chan grant, 1)}
	// Whatever way the run ends, its tenant's share is given back (release
	// does it first for a run that reached a worker).
	defer p.endHold(t)
	g, err := p.acquire(ctx, t, t.since.Add(p.opts.QueueTimeout))
	var left *queued // the run's job frame in a busy worker's pipe
	var timeout time.Duration
	for {
		if left != nil && g.q != left {
			// The run left that place (it failed, or moved): the worker
			// skips the job, and its next release drains the frame.
			_ = left.w.in.write(&frame{T: frameCancel, ID: left.id})
			left = nil
		}
		if err != nil {
			return nil, err
		}
		switch g.kind {
		case grantStart:
			w, err := p.startWorker(t)
			if err != nil {
				var e *Error
				if errors.As(err, &e) {
					return nil, e
				}
				return nil, &Error{Kind: KindCrash, Message: "a transform worker could not be started", cause: err}
			}
			g = grant{kind: grantIdle, w: w}
		case grantQueue:
			timeout = p.frameTimeout(ctx, jf)
			// A failed write means the worker is gone: the end of its
			// current run places this one again.
			_ = g.w.in.write(&frame{T: frameJob, ID: g.q.id, Job: jf})
			left = g.q
			var ok, queued bool
			if g, ok, queued = p.markSent(g.q); !ok {
				g, err = p.wait(ctx, t, t.since.Add(p.opts.QueueTimeout), queued)
			}
			continue
		}
		id, sent := p.nextID.Add(1), false
		if g.kind == grantTurn {
			id, sent = g.q.id, true // timeout is the queued frame's
		} else {
			timeout = p.frameTimeout(ctx, jf)
		}
		res, rerr, healthy := p.runOn(ctx, g.w, id, jf, svc, meta, timeout, sent)
		p.release(g.w, healthy, t.aff, t)
		if rerr != nil {
			return res, rerr
		}
		return res, nil
	}
}

// endHold ends t's hold on its tenant's share, if it still has one (a
// worker it was to start could not be), and gives what it frees to the
// waiting runs.
func (p *Pool) endHold(t *ticket) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fair.unhold(t) {
		p.dispatch()
	}
}

// runTimeout is the time a run may take from now: the pool's Timeout, or
// less when ctx's deadline comes first.
func (p *Pool) runTimeout(ctx context.Context) time.Duration {
	timeout := p.opts.Timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	return timeout
}

// frameTimeout sets jf's timeout for a job frame sent now, and returns it.
// The worker counts it from the moment it starts the job.
func (p *Pool) frameTimeout(ctx context.Context, jf *jobFrame) time.Duration {
	jf.TimeoutMS = max(p.runTimeout(ctx).Milliseconds(), 1)
	return time.Duration(jf.TimeoutMS) * time.Millisecond
}

// runOn runs job jf as run id on a worker and reports whether the worker
// may be reused. sent says that the job frame is in the worker's pipe
// already (it was queued behind the run before, which has ended); else
// runOn sends it. timeout is the frame's: runOn kills the worker when no
// result has come KillGrace after it, counted from now, that is from the
// job's start or later. A nil jf is a drain (Pool.drain): the run's result
// is dropped, and so are its console lines.
func (p *Pool) runOn(ctx context.Context, w *proc, id uint64, jf *jobFrame, svc Svc, meta map[string]string, timeout time.Duration, sent bool) (*Result, error, bool) {
	w.kept, w.ranWarm = false, false
	callCtx, cancelCalls := context.WithCancel(ctx)
	defer cancelCalls()
	if !sent {
		// Frames of an earlier run that arrived after its result (none
		// of a later one: the worker starts that after this one).
		for drained := false; !drained; {
			select {
			case _, ok := <-w.frames:
				if !ok {
					drained = true
				}
			default:
				drained = true
			}
		}
		if err := w.in.write(&frame{T: frameJob, ID: id, Job: jf}); err != nil {
			w.kill(KindCrash)
			<-w.exited
			return nil, w.exitError(), false
		}
		p.mu.Lock()
		w.busySince = time.Now() // a job may now queue behind this one
		p.mu.Unlock()
	}
	kind, quiet := jobDrain, true
	if jf != nil {
		kind, quiet = jf.Kind, false
	}
	hard := time.NewTimer(timeout + p.opts.KillGrace)
	defer hard.Stop()
	done := ctx.Done()
	logs, calls := 0, 0
	for {
		select {
		case f, ok := <-w.frames:
			if !ok {
				<-w.exited
				return nil, w.exitError(), false
			}
			if f.ID != id {
				continue
			}
			switch f.T {
			case frameResult:
				w.kept, w.ranWarm = f.Kept, f.Warm
				res, err, healthy := p.finish(kind, f)
				if err != nil && err.Kind == KindTimeout && ctx.Err() != nil {
					err.cause = context.Cause(ctx)
				}
				if err != nil {
					return res, err, healthy
				}
				return res, nil, healthy
			case frameLog:
				logs++
				if logs <= p.opts.MaxLogLines+1 && p.opts.Logger != nil && !quiet {
					p.opts.Logger(meta, truncate(f.Line, MaxLogLine))
				}
			case frameCall:
				if isModuleFileCall(f.Method) { // the worker bounds its own
					go func(f *frame) { _ = w.in.write(moduleFileReply(&p.opts, f)) }(f)
					continue
				}
				calls++
				if calls > p.opts.MaxSvcCalls {
					_ = w.in.write(&frame{T: frameReply, ID: id, Seq: f.Seq,
						Err: &errFrame{Kind: KindRuntime, Status: 429, Message: "too many service calls"}})
					continue
				}
				go func(f *frame) {
					reply := svcReply(callCtx, svc, f)
					if callCtx.Err() == nil { // the worker drops replies of ended runs anyway
						_ = w.in.write(reply)
					}
				}(f)
			default:
				w.kill(KindCrash)
				<-w.exited
				return nil, newError(KindCrash, "the transform worker broke the protocol"), false
			}
		case <-hard.C:
			w.kill(KindTimeout)
			<-w.exited
			err := w.exitError()
			if ctx.Err() != nil {
				err.cause = context.Cause(ctx)
			}
			return nil, err, false
		case <-done:
			// Ask the worker to stop; give it Options.KillGrace to answer.
			done = nil
			_ = w.in.write(&frame{T: frameCancel, ID: id})
			if !hard.Stop() {
				<-hard.C
			}
			hard.Reset(p.opts.KillGrace)
		case <-p.closing:
			w.kill(KindClosed)
			<-w.exited
			return nil, newError(KindClosed, "the pool was closed during the run"), false
		}
	}
}

// finish turns a result frame into the run's outcome. Everything in it
// comes from the worker and is checked again.
func (p *Pool) finish(kind string, f *frame) (*Result, *Error, bool) {
	if kind == jobDrain {
		return nil, nil, f.Err == nil || !f.Err.Retire
	}
	if kind == jobValidate {
		if f.Err == nil {
			return nil, nil, true
		}
	}
	if f.Err == nil {
		res, err := shapeResult(kind, f.Out)
		return res, err, true
	}
	e := f.Err
	healthy := !e.Retire
	switch e.Kind {
	case KindTimeout, KindRuntime, KindModule, KindInvalidCode, KindInvalidResult, KindInvalidInput, KindCrash:
	default:
		return nil, newError(KindCrash, "the transform worker reported an unknown error"), false
	}
	err := &Error{Kind: e.Kind, Message: truncate(e.Message, maxMessage)}
	if e.Kind != KindRuntime {
		return nil, err, healthy
	}
	if e.Status >= 400 && e.Status <= 599 {
		err.Status = e.Status
		err.Errors = boundErrors(e.Errors)
	}
	if e.Custom != nil {
		if e.Custom.Status < 100 || e.Custom.Status > 599 {
			return nil, newError(KindInvalidResult, "CustomHttpResponseError status must be from 100 to 599"), healthy
		}
		body, berr := shapeBody(e.Custom.Body)
		if berr != nil {
			return nil, berr, healthy
		}
		headers, herr := shapeHeaders(e.Custom.Headers)
		if herr != nil {
			return nil, herr, healthy
		}
		err.Status, err.Custom, err.Errors = e.Custom.Status, true, nil
		return &Result{Body: body, Headers: headers}, err, healthy
	}
	return nil, err, healthy
}

// boundErrors caps a reactor error's errors map: 50 properties of at most
// 20 messages of at most 1 KiB.
func boundErrors(in map[string][]string) map[string][]string {
	if len(in) == 0 {
		return nil
	}
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make(map[string][]string, min(len(in), 50))
	for _, k := range keys[:min(len(keys), 50)] {
		msgs := in[k]
		bounded := make([]string, 0, min(len(msgs), 20))
		for _, m := range msgs[:min(len(msgs), 20)] {
			bounded = append(bounded, truncate(m, maxMessage))
		}
		out[truncate(k, 200)] = bounded
	}
	return out
}

// Stats returns a snapshot of the pool.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Alive: len(p.alive), Busy: p.busy, Queued: p.queued, Started: p.started, Runs: p.runs, WarmRuns: p.warm,
		Requeued: p.requeued, Killed: make(map[string]uint64, len(p.killed)), Unconfined: p.unconfined}
	p.fair.each(func(t *ticket) {
		if t.queue == nil { // a queued run that rejoined the waiting ones counts as queued
			s.Waiting++
		}
	})
	for k, v := range p.killed {
		s.Killed[k] = v
	}
	return s
}

// Close stops every worker (runs under way fail with KindClosed) and
// waits for their processes to end. Runs after Close fail with KindBusy.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for w := range p.alive {
		closed := KindClosed
		w.killedFor.CompareAndSwap(nil, &closed)
	}
	close(p.closing)
	for _, w := range p.idle {
		w.stop(KindClosed)
		delete(p.alive, w)
		p.killed[KindClosed]++
	}
	p.idle = nil
	p.mu.Unlock()
	p.procsWG.Wait()
	p.bgWG.Wait()
	return nil
}

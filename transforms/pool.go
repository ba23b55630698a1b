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

	slots   chan struct{} // one per run under way or worker being started
	closing chan struct{}
	spawnCh chan spawnReq
	procsWG sync.WaitGroup
	bgWG    sync.WaitGroup
	nextID  atomic.Uint64
	seed    maphash.Seed // of realm affinity hashes

	mu      sync.Mutex
	closed  bool
	idle    []*proc // most recently used last
	alive   map[*proc]bool
	busy    int
	waiting int
	started uint64
	runs    uint64
	warm    uint64
	killed  map[string]uint64
}

// Stats is a snapshot of a pool.
type Stats struct {
	// Alive counts worker processes, busy or idle.
	Alive int
	// Busy counts workers running a job.
	Busy int
	// Waiting counts runs waiting for a free worker.
	Waiting int
	// Started counts workers ever started.
	Started uint64
	// Runs counts runs that reached a worker.
	Runs uint64
	// WarmRuns counts the runs (of jobs with a RealmScope) that reused a
	// warm realm.
	WarmRuns uint64
	// Killed counts workers that ended, by cause: KindTimeout, KindMemory,
	// KindCrash (died or broke the protocol), "idle" (stopped after
	// IdleTimeout) and "closed".
	Killed map[string]uint64
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
		slots:   make(chan struct{}, o.MaxWorkers),
		closing: make(chan struct{}),
		spawnCh: make(chan spawnReq),
		alive:   make(map[*proc]bool),
		killed:  make(map[string]uint64),
		seed:    maphash.MakeSeed(),
	}
	p.bgWG.Add(2)
	go p.spawner()
	go p.reaper()
	for i := 0; i < o.MinWorkers; i++ {
		w, err := p.startWorker()
		if err != nil {
			p.Close()
			return nil, err
		}
		p.mu.Lock()
		p.idle = append(p.idle, w)
		p.mu.Unlock()
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

// startWorker starts one worker and registers it as alive.
func (p *Pool) startWorker() (*proc, error) {
	// Add under the lock, and never once Close has begun waiting.
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, newError(KindBusy, "the pool is closed")
	}
	p.procsWG.Add(1)
	p.mu.Unlock()
	w, err := startProc(&p.opts, p.spawn, p.procsWG.Done)
	if err != nil {
		p.mu.Lock()
		p.killed[KindCrash]++
		p.mu.Unlock()
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started++
	w.slot = p.freeSlot()
	w.warm = newLRU[uint64, struct{}](realmCacheSize(p.opts.MemoryLimit))
	p.alive[w] = true
	w.lastUsed = time.Now()
	if p.closed {
		w.stop("closed")
		delete(p.alive, w)
		return nil, ErrBusy
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
			p.mu.Lock()
			for len(p.alive) > p.opts.MinWorkers && len(p.idle) > 0 && time.Since(p.idle[0].lastUsed) > p.opts.IdleTimeout {
				w := p.idle[0]
				p.idle = p.idle[1:]
				delete(p.alive, w)
				p.killed["idle"]++
				w.stop("idle")
			}
			p.mu.Unlock()
		}
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
// worker if it has not stopped within KillGrace.
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
	if !json.Valid(args) {
		return nil, newError(KindInvalidInput, "the args are not valid JSON")
	}
	config, err := json.Marshal(job.Configuration)
	if err != nil {
		return nil, fmt.Errorf("transforms: configuration: %w", err)
	}
	if len(config) > MaxPayload {
		return nil, newError(KindInvalidInput, "the configuration is %d bytes; the limit is %d", len(config), MaxPayload)
	}
	jf := &jobFrame{Kind: job.Kind, Code: job.Code, Args: args, Config: config, Svc: job.Svc != nil, Realm: job.Realm.key()}
	return p.do(ctx, jf, job.Svc, job.Meta)
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
// (KindBusy, KindTimeout, KindMemory).
func (p *Pool) ValidateCode(ctx context.Context, code string) error {
	if n := codeChars(code); n > MaxCodeChars {
		return newError(KindInvalidCode, "the code is %d characters long; the limit is %d", n, MaxCodeChars)
	}
	_, err := p.do(ctx, &jobFrame{Kind: jobValidate, Code: code}, nil, nil)
	return err
}

// do acquires a worker, runs jf on it and releases it.
func (p *Pool) do(ctx context.Context, jf *jobFrame, svc Svc, meta map[string]string) (*Result, error) {
	timeout := p.opts.Timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 || ctx.Err() != nil {
		return nil, &Error{Kind: KindTimeout, Message: "the run's context ended before it started", cause: context.Cause(ctx)}
	}
	aff := p.affinity(jf)
	w, err := p.acquire(ctx, aff)
	if err != nil {
		return nil, err
	}
	jf.TimeoutMS = max(timeout.Milliseconds(), 1)
	res, rerr, healthy := p.runOn(ctx, w, jf, svc, meta, timeout)
	p.release(w, healthy, aff)
	if rerr != nil {
		return res, rerr
	}
	return res, nil
}

// acquire takes a slot (waiting at most QueueTimeout) and an idle worker,
// or starts one. For a job with a realm (aff != 0) it prefers an idle
// worker that keeps the job's realm warm, then the worker whose slot the
// hash names, then, like any job, the most recently used.
func (p *Pool) acquire(ctx context.Context, aff uint64) (*proc, error) {
	select {
	case p.slots <- struct{}{}:
	default:
		p.mu.Lock()
		p.waiting++
		p.mu.Unlock()
		timer := time.NewTimer(p.opts.QueueTimeout)
		var err error
		select {
		case p.slots <- struct{}{}:
		case <-timer.C:
			err = ErrBusy
		case <-ctx.Done():
			err = &Error{Kind: KindTimeout, Message: "the run's context ended while it waited for a worker", cause: context.Cause(ctx)}
		case <-p.closing:
			err = newError(KindBusy, "the pool is closed")
		}
		timer.Stop()
		p.mu.Lock()
		p.waiting--
		p.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.slots
		return nil, newError(KindBusy, "the pool is closed")
	}
	for len(p.idle) > 0 {
		i := p.pickIdle(aff)
		w := p.idle[i]
		p.idle = slices.Delete(p.idle, i, i+1)
		if w.alive() {
			p.busy++
			p.mu.Unlock()
			return w, nil
		}
		p.forget(w)
	}
	p.mu.Unlock()
	w, err := p.startWorker()
	if err != nil {
		<-p.slots
		var e *Error
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, &Error{Kind: KindCrash, Message: "a transform worker could not be started", cause: err}
	}
	p.mu.Lock()
	p.busy++
	p.mu.Unlock()
	return w, nil
}

// pickIdle returns the index in p.idle of the worker to run a job with
// affinity aff on. Call with p.mu held and p.idle not empty.
func (p *Pool) pickIdle(aff uint64) int {
	last := len(p.idle) - 1
	if aff == 0 {
		return last
	}
	for i := last; i >= 0; i-- {
		if p.idle[i].warm.has(aff) {
			return i
		}
	}
	slot := int(aff % uint64(p.opts.MaxWorkers))
	for i := last; i >= 0; i-- {
		if p.idle[i].slot == slot {
			return i
		}
	}
	return last
}

// forget drops a dead worker. Call with p.mu held.
func (p *Pool) forget(w *proc) {
	if !p.alive[w] {
		return
	}
	delete(p.alive, w)
	cause := w.cause()
	if cause == "" {
		cause = w.exitError().Kind
		if cause == KindBusy {
			cause = "closed"
		}
	}
	p.killed[cause]++
}

// release returns a worker to the idle list, or drops it, and keeps
// MinWorkers warm. It notes whether the worker kept the realm of aff.
func (p *Pool) release(w *proc, healthy bool, aff uint64) {
	if !healthy && w.alive() {
		w.kill(KindCrash) // retired: its engine state is suspect
		<-w.exited
	}
	p.mu.Lock()
	p.busy--
	p.runs++
	if w.ranWarm {
		p.warm++
	}
	if aff != 0 {
		if w.kept {
			w.warm.put(aff, struct{}{})
		} else {
			w.warm.remove(aff)
		}
	}
	switch {
	case healthy && !p.closed && w.alive():
		w.lastUsed = time.Now()
		p.idle = append(p.idle, w)
	case w.alive(): // the pool closed during the run
		w.kill("closed")
		delete(p.alive, w)
		p.killed["closed"]++
	default:
		p.forget(w)
	}
	replenish := !p.closed && len(p.alive) < p.opts.MinWorkers
	if replenish {
		p.bgWG.Add(1) // under the lock: Close waits only after closing
	}
	p.mu.Unlock()
	<-p.slots
	if replenish {
		go func() {
			defer p.bgWG.Done()
			p.replenish()
		}()
	}
}

// replenish starts workers until MinWorkers are alive, using free slots
// only.
func (p *Pool) replenish() {
	for {
		p.mu.Lock()
		need := !p.closed && len(p.alive) < p.opts.MinWorkers
		p.mu.Unlock()
		if !need {
			return
		}
		select {
		case p.slots <- struct{}{}:
		default:
			return // every slot is in use: the workers are busy anyway
		}
		w, err := p.startWorker()
		if err == nil {
			p.mu.Lock()
			p.idle = append(p.idle, w)
			p.mu.Unlock()
		}
		<-p.slots
		if err != nil {
			return
		}
	}
}

// runOn runs a job on a worker and reports whether the worker may be
// reused.
func (p *Pool) runOn(ctx context.Context, w *proc, jf *jobFrame, svc Svc, meta map[string]string, timeout time.Duration) (*Result, error, bool) {
	id := p.nextID.Add(1)
	// Frames of an earlier run that arrived after its result.
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
	w.kept, w.ranWarm = false, false
	callCtx, cancelCalls := context.WithCancel(ctx)
	defer cancelCalls()
	if err := w.in.write(&frame{T: frameJob, ID: id, Job: jf}); err != nil {
		w.kill(KindCrash)
		<-w.exited
		return nil, w.exitError(), false
	}
	hard := time.NewTimer(timeout + KillGrace)
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
				res, err, healthy := p.finish(jf.Kind, f)
				if err != nil && err.Kind == KindTimeout && ctx.Err() != nil {
					err.cause = context.Cause(ctx)
				}
				if err != nil {
					return res, err, healthy
				}
				return res, nil, healthy
			case frameLog:
				logs++
				if logs <= p.opts.MaxLogLines+1 && p.opts.Logger != nil {
					p.opts.Logger(meta, truncate(f.Line, MaxLogLine))
				}
			case frameCall:
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
			// Ask the worker to stop; give it KillGrace to answer.
			done = nil
			_ = w.in.write(&frame{T: frameCancel, ID: id})
			if !hard.Stop() {
				<-hard.C
			}
			hard.Reset(KillGrace)
		case <-p.closing:
			w.kill("closed")
			<-w.exited
			return nil, newError(KindBusy, "the pool was closed during the run"), false
		}
	}
}

// finish turns a result frame into the run's outcome. Everything in it
// comes from the worker and is checked again.
func (p *Pool) finish(kind string, f *frame) (*Result, *Error, bool) {
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
	s := Stats{Alive: len(p.alive), Busy: p.busy, Waiting: p.waiting, Started: p.started, Runs: p.runs, WarmRuns: p.warm,
		Killed: make(map[string]uint64, len(p.killed))}
	for k, v := range p.killed {
		s.Killed[k] = v
	}
	return s
}

// Close stops every worker (runs under way fail with KindBusy) and waits
// for their processes to end. Runs after Close fail with KindBusy.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for w := range p.alive {
		closed := "closed"
		w.killedFor.CompareAndSwap(nil, &closed)
	}
	close(p.closing)
	for _, w := range p.idle {
		w.stop("closed")
		delete(p.alive, w)
		p.killed["closed"]++
	}
	p.idle = nil
	p.mu.Unlock()
	p.procsWG.Wait()
	p.bgWG.Wait()
	return nil
}

package transforms

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"sync"
	"time"

	"github.com/dlclark/regexp2/v2"
	"github.com/dop251/goja"
)

// exitMemory is the exit code of a worker whose memory watchdog fired.
const exitMemory = 3

// workerGCPercent is a worker's GOGC; its soft memory limit bounds the
// heap near the cap whatever the percentage.
const workerGCPercent = 400

// jobValidate is the internal job kind of Pool.ValidateCode.
const jobValidate = "validate"

// jobDrain stands, in the parent, for the kind of a job whose run left
// before it started (Pool.drain); no worker sees it.
const jobDrain = "drain"

// Cache sizes of a worker.
const (
	programCacheSize = 128 // compiled tenant programs, by code
	moduleCacheSize  = 256 // operator module files, in each of moduleFileCache's caches
)

// compiled is a cached compilation of tenant code, failed or not.
type compiled struct {
	prog *goja.Program
	err  *Error
}

// realmKey identifies the runs that may share a realm: the caller's scope
// (tenant and principal, Job.Realm) and the code itself (Go's maps hash
// and compare it faster than a digest could be computed).
type realmKey struct {
	scope string
	code  string
}

// maxRealmRuns bounds the runs one realm serves: a bound on whatever a
// realm might accumulate that reset does not see.
const maxRealmRuns = 10000

// spareShallowAfter is the number of jobs without a realm scope in a row
// after which a worker stops setting up its spare realm for reuse.
const spareShallowAfter = 1000

// realmCacheSize is how many warm realms a worker with memoryLimit keeps:
// one per 8 MiB of the limit, 1 to 32 (32 with the default 256 MiB). A
// realm set up for reuse holds about 0.8 MiB, so the cache holds about a
// tenth of the limit, which runs of any tenant then do not have.
func realmCacheSize(memoryLimit int64) int {
	return int(min(max(memoryLimit/(8<<20), 1), 32))
}

// workerState is the worker side of a pool: one process, one run at a
// time.
type workerState struct {
	cfg  initConfig
	rcfg runtimeConfig
	out  *frameWriter
	// jobs are the jobs received, run one at a time in order: the parent
	// queues at most one behind the run under way (pipelining), and may
	// send the next as soon as that one's turn has come, before this loop
	// has taken it.
	jobs     chan *frame
	replies  chan *frame
	gone     chan struct{}
	programs *lru[string, compiled]
	modules  *moduleFileCache

	// spare is a runtime set up in advance, between runs, so that setting
	// up a fresh realm (a few ms) is off the path of the next request. It
	// is set up for reuse (deep, which costs about three times as much)
	// once the worker has seen a job with a realm scope, unless the last
	// spareShallowAfter jobs all had none. A job with a scope that finds
	// a shallow spare deepens it.
	spare     *jobRuntime
	sawScoped bool
	unscoped  int // jobs without a realm scope since the last with one
	// realms are the warm realms, by key; a realm is in it only between
	// runs that ended cleanly.
	realms     *lru[realmKey, *jobRuntime]
	live       []metrics.Sample // the heap's live bytes after the last GC
	sinceCheck int              // runs since checkMemory last looked

	mu      sync.Mutex
	current uint64       // id of the run under way, 0 when idle
	stopRun func(string) // stops the run under way
	// cancelled are the ids of the last jobs cancelled before they
	// started (queued behind the run under way): runJob skips them.
	cancelled  [4]uint64
	nCancelled int
}

// ServeWorker is the main loop of a worker process: it reads frames from
// in (the process's stdin) and writes frames to out (its stdout) until in
// ends, which happens when the parent closes it or dies. Nothing else may
// write to out. The program that calls it should do nothing else, and
// exit when it returns; a worker started by a Pool is configured by its
// first frame, applies its limits to the whole process (memory limit,
// RLIMIT_AS, RLIMIT_CORE, no_new_privs on Linux) and exits the process
// with status 3 when its memory watchdog fires.
func ServeWorker(in io.Reader, out io.Writer) error {
	// One P and pipes served by the poller: a worker runs one job at a
	// time on one goroutine, and with more Ps every frame woke an idle
	// thread that found nothing to do (a context switch each way), while
	// a blocking read parked a thread and handed its P over. Measured on
	// 2 cores under load: 30% fewer context switches and 15-20% less CPU
	// per run. The watchdog, the deadline timer and the reader of cancel
	// frames still run within the scheduler's preemption interval (10 ms)
	// when JavaScript keeps the P busy; KillGrace is a second.
	runtime.GOMAXPROCS(1)
	if f, ok := in.(*os.File); ok {
		in = pollable(f)
	}
	if f, ok := out.(*os.File); ok {
		out = pollable(f)
	}
	br := bufio.NewReaderSize(in, 64<<10)
	f, err := readFrame(br, maxFrameToWorker)
	if err != nil {
		return fmt.Errorf("transforms worker: read init frame: %w", err)
	}
	if f.T != frameInit || f.Init == nil {
		return errors.New("transforms worker: the first frame must be init")
	}
	cfg := *f.Init
	if cfg.MemoryLimit <= 0 || cfg.MaxCallStackSize <= 0 || cfg.MaxLogLines <= 0 || cfg.MaxSvcCalls <= 0 {
		return errors.New("transforms worker: incomplete init frame")
	}
	// The Go runtime works to stay below three quarters of the cap, so a
	// run that only churns garbage is not mistaken for one over it. Below
	// that, a GC per 4x the live heap rather than 1x: the live heap (warm
	// realms, compiled code) is small and long-lived, and collecting it
	// after every few hundred runs cost a fifth of a warm run's CPU.
	debug.SetMemoryLimit(cfg.MemoryLimit / 4 * 3)
	debug.SetGCPercent(workerGCPercent)
	debug.SetMaxStack(int(max(cfg.MemoryLimit/2, 16<<20)))
	if _, err := setProcessLimits(4 * cfg.MemoryLimit); err != nil {
		return fmt.Errorf("transforms worker: set limits: %w", err)
	}
	if err := loadJS(); err != nil {
		return err
	}
	// Last: from here on the worker opens nothing, and reaches nothing
	// but its pipes (see confineSyscalls); seccomp is used where the
	// platform has it, and the parent is told when it does not.
	unconfined := ""
	if err := confineSyscalls(); err != nil {
		unconfined = err.Error()
	}
	w := &workerState{
		cfg: cfg,
		rcfg: runtimeConfig{
			maxCallStackSize: cfg.MaxCallStackSize, maxLogLines: cfg.MaxLogLines,
			maxSvcCalls: cfg.MaxSvcCalls, modulesDir: cfg.ModulesDir, allowModules: cfg.AllowModules,
		},
		out:      &frameWriter{w: out},
		jobs:     make(chan *frame, 2),
		replies:  make(chan *frame, cfg.MaxSvcCalls+16),
		gone:     make(chan struct{}),
		programs: newLRU[string, compiled](programCacheSize),
		modules:  newModuleFileCache(moduleCacheSize),
		realms:   newLRU[realmKey, *jobRuntime](realmCacheSize(cfg.MemoryLimit)),
		live:     []metrics.Sample{{Name: "/gc/heap/live:bytes"}},
	}
	if err := w.out.write(&frame{T: frameReady, Pid: os.Getpid(), Unconfined: unconfined}); err != nil {
		return err
	}
	go w.readLoop(br)
	for {
		f := w.next()
		if f == nil {
			return nil
		}
		start := time.Now()
		res := w.runJob(f)
		took := time.Since(start)
		if err := w.out.write(res); err != nil {
			return err
		}
		if res.Err != nil && res.Err.Retire {
			return errors.New("transforms worker: retiring after an engine failure")
		}
		w.checkMemory(took)
	}
}

// next returns the next job, or nil once the parent is gone. A job queued
// behind the last run starts at once; otherwise the worker sets the spare
// realm up before it waits.
func (w *workerState) next() *frame {
	select {
	case <-w.gone:
		return nil
	case f := <-w.jobs:
		return f
	default:
	}
	w.prepare()
	select {
	case f := <-w.jobs:
		return f
	case <-w.gone:
		return nil
	}
}

// prepare sets up the spare runtime of the next run.
func (w *workerState) prepare() {
	if w.spare != nil {
		return
	}
	emit := func(fr *frame) error { return w.out.write(fr) }
	if rt, err := newJobRuntime(&w.rcfg, 0, emit, w.modules, w.sawScoped && w.unscoped < spareShallowAfter); err == nil {
		w.spare = rt
	}
}

// checkMemory drops every warm realm when the live heap (as of the last
// GC) is above half the memory limit: whatever the realms hold (a run can
// make a frozen object hold memory it can never read again, through a
// class's private field) must never leave the next run, of whatever
// tenant, without room. It looks after every run that took a while (it
// takes time to allocate much) and every 16th run; reading the metric
// costs a few µs.
func (w *workerState) checkMemory(took time.Duration) {
	w.sinceCheck++
	if w.realms.len() == 0 || w.sinceCheck < 16 && took < 2*time.Millisecond {
		return
	}
	w.sinceCheck = 0
	metrics.Read(w.live)
	if w.live[0].Value.Kind() == metrics.KindUint64 && w.live[0].Value.Uint64() > uint64(w.cfg.MemoryLimit/2) {
		w.realms.clear()
	}
}

// readLoop dispatches the parent's frames. Cancellations act at once, on
// the run under way; replies wait for the run loop.
func (w *workerState) readLoop(br *bufio.Reader) {
	for {
		f, err := readFrame(br, maxFrameToWorker)
		if err != nil {
			close(w.gone)
			w.stop(0, "parent")
			return
		}
		switch f.T {
		case frameJob:
			w.jobs <- f
		case frameReply:
			select {
			case w.replies <- f:
			default: // more replies than calls: the parent misbehaves; drop
			}
		case frameCancel:
			w.stop(f.ID, "cancel")
		}
	}
}

// stop stops run id (0: whichever is under way). A job cancelled before
// it started is remembered, and skipped when its turn comes.
func (w *workerState) stop(id uint64, reason string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.stopRun != nil && (id == 0 || id == w.current):
		w.stopRun(reason)
	case id != 0 && reason == "cancel":
		w.cancelled[w.nCancelled%len(w.cancelled)] = id
		w.nCancelled++
	}
}

// runJob runs one job and returns its result frame.
func (w *workerState) runJob(f *frame) *frame {
	res := &frame{T: frameResult, ID: f.ID}
	j := f.Job
	if j == nil {
		res.Err = &errFrame{Kind: KindCrash, Message: "job frame without a job"}
		return res
	}

	// Stop the run at its deadline or when the parent cancels it: the
	// interrupt stops JavaScript code, and the stop channel ends the wait
	// for svc replies. Native built-ins ignore the interrupt; the parent
	// kills the worker if it has not answered by the deadline plus
	// KillGrace.
	var (
		stopOnce sync.Once
		stopCh   = make(chan struct{})
		reason   = "timeout"
		rt       *jobRuntime
		detached bool
	)
	stopRun := func(r string) {
		stopOnce.Do(func() {
			reason = r
			close(stopCh)
			if rt != nil {
				rt.vm.Interrupt(r)
			}
		})
	}
	w.mu.Lock()
	if slices.Contains(w.cancelled[:], f.ID) {
		// Cancelled while it was queued behind the run before: it does
		// not start.
		w.mu.Unlock()
		res.Err = &errFrame{Kind: KindTimeout, Message: "the run was cancelled before it started"}
		return res
	}
	w.current, w.stopRun = f.ID, stopRun
	w.mu.Unlock()
	// detach ends the run's exposure to stop: no interrupt reaches the
	// realm after it. It reports whether the run was stopped.
	detach := func() (stopped bool) {
		w.mu.Lock()
		defer w.mu.Unlock()
		detached = true
		w.current, w.stopRun = 0, nil
		select {
		case <-stopCh:
			return true
		default:
			return false
		}
	}
	defer func() {
		if !detached {
			detach()
		}
	}()
	if j.Kind == jobValidate {
		if _, err := w.compile(j.Code); err != nil {
			res.Err = &errFrame{Kind: err.Kind, Message: err.Message}
			return res
		}
		res.Out = []byte("null")
		return res
	}
	// The deadline counts from here, when the job starts, whatever the
	// time it waited in the pipe.
	timeout := time.Duration(j.TimeoutMS) * time.Millisecond
	timeout = min(max(timeout, time.Millisecond), MaxTimeout)
	// Late svc replies of earlier runs.
	for drained := false; !drained; {
		select {
		case <-w.replies:
		default:
			drained = true
		}
	}
	timer := time.AfterFunc(timeout, func() { w.stop(f.ID, "timeout") })
	defer timer.Stop()
	stopWatch := watchMemory(uint64(w.cfg.MemoryLimit), watchInterval, func(uint64) { os.Exit(exitMemory) })
	defer stopWatch()
	// A regular expression that needs backtracking runs on regexp2, which
	// ignores interrupts; its own timeout, a little past the deadline,
	// ends the match so that the interrupt (already set) ends the run
	// without the parent having to kill the worker.
	regexp2.DefaultMatchTimeout = timeout + KillGrace/2

	prog, cerr := w.compile(j.Code)
	if cerr != nil {
		res.Err = &errFrame{Kind: cerr.Kind, Message: cerr.Message}
		return res
	}
	// A job with a realm scope runs in the warm realm of its key when
	// there is one, else in the spare, which is kept after the run if it
	// was set up for reuse and the run ended cleanly.
	keyed := j.Realm != ""
	key := realmKey{scope: j.Realm, code: j.Code}
	var newRT *jobRuntime
	hit := false
	if keyed {
		w.sawScoped, w.unscoped = true, 0
		newRT, hit = w.realms.get(key)
	} else {
		w.unscoped++
	}
	if !hit {
		w.prepare()
		newRT = w.spare
		w.spare = nil
		if keyed && newRT != nil && newRT.deepen() != nil {
			newRT = nil
		}
	}
	if newRT == nil {
		res.Err = &errFrame{Kind: KindCrash, Message: "the runtime could not be set up", Retire: true}
		return res
	}
	newRT.startRun(f.ID)
	w.mu.Lock()
	rt = newRT
	select {
	case <-stopCh:
		rt.vm.Interrupt(reason)
	default:
	}
	w.mu.Unlock()

	sig := jobSignals{
		replies: w.replies, stop: stopCh, gone: w.gone, timeout: timeout,
		reason: func() string { w.mu.Lock(); defer w.mu.Unlock(); return reason },
	}
	o := rt.run(prog, j, sig)
	res.Out, res.Err = o.out, o.err
	stopped := detach()
	keep := keyed && !o.discard && !stopped && (o.err == nil || !o.err.Retire) &&
		rt.runs < maxRealmRuns && rt.finishRun()
	switch {
	case keep && !hit:
		w.realms.put(key, rt)
	case !keep && hit:
		w.realms.remove(key)
	}
	res.Kept, res.Warm = keep, hit
	return res
}

// compile compiles tenant code once per distinct code, remembering
// failures too.
func (w *workerState) compile(code string) (*goja.Program, *Error) {
	if c, ok := w.programs.get(code); ok {
		return c.prog, c.err
	}
	prog, err := compileCode(tenantFile, code, func(name string) bool {
		return moduleAllowed(name, w.cfg.AllowModules)
	})
	w.programs.put(code, compiled{prog: prog, err: err})
	return prog, err
}

package transforms

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/dlclark/regexp2/v2"
	"github.com/dop251/goja"
)

// exitMemory is the exit code of a worker whose memory watchdog fired.
const exitMemory = 3

// jobValidate is the internal job kind of Pool.ValidateCode.
const jobValidate = "validate"

// Cache sizes of a worker.
const (
	programCacheSize = 128 // compiled tenant programs, by code hash
	moduleCacheSize  = 256 // compiled operator module files
)

// compiled is a cached compilation of tenant code, failed or not.
type compiled struct {
	prog *goja.Program
	err  *Error
}

// workerState is the worker side of a pool: one process, one run at a
// time.
type workerState struct {
	cfg      initConfig
	rcfg     runtimeConfig
	out      *frameWriter
	jobs     chan *frame
	replies  chan *frame
	gone     chan struct{}
	programs *lru[[32]byte, compiled]
	modules  *lru[moduleKey, *goja.Program]

	// spare is a runtime set up in advance, between runs, so that setting
	// up a fresh realm (about 2 ms) is off the path of the next request.
	spare *jobRuntime

	mu      sync.Mutex
	current uint64       // id of the run under way, 0 when idle
	stopRun func(string) // stops the run under way
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
	// run that only churns garbage is not mistaken for one over it.
	debug.SetMemoryLimit(cfg.MemoryLimit / 4 * 3)
	debug.SetMaxStack(int(max(cfg.MemoryLimit/2, 16<<20)))
	if _, err := setProcessLimits(4 * cfg.MemoryLimit); err != nil {
		return fmt.Errorf("transforms worker: set limits: %w", err)
	}
	if err := loadJS(); err != nil {
		return err
	}
	w := &workerState{
		cfg: cfg,
		rcfg: runtimeConfig{
			maxCallStackSize: cfg.MaxCallStackSize, maxLogLines: cfg.MaxLogLines,
			maxSvcCalls: cfg.MaxSvcCalls, modulesDir: cfg.ModulesDir, allowModules: cfg.AllowModules,
		},
		out:      &frameWriter{w: out},
		jobs:     make(chan *frame, 1),
		replies:  make(chan *frame, cfg.MaxSvcCalls+16),
		gone:     make(chan struct{}),
		programs: newLRU[[32]byte, compiled](programCacheSize),
		modules:  newLRU[moduleKey, *goja.Program](moduleCacheSize),
	}
	if err := w.out.write(&frame{T: frameReady, Pid: os.Getpid()}); err != nil {
		return err
	}
	go w.readLoop(br)
	for {
		w.prepare()
		select {
		case f := <-w.jobs:
			res := w.runJob(f)
			if err := w.out.write(res); err != nil {
				return err
			}
			if res.Err != nil && res.Err.Retire {
				return errors.New("transforms worker: retiring after an engine failure")
			}
		case <-w.gone:
			return nil
		}
	}
}

// prepare sets up the spare runtime of the next run.
func (w *workerState) prepare() {
	if w.spare != nil {
		return
	}
	emit := func(fr *frame) error { return w.out.write(fr) }
	if rt, err := newJobRuntime(&w.rcfg, 0, emit, w.modules); err == nil {
		w.spare = rt
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

// stop stops run id (0: whichever is under way).
func (w *workerState) stop(id uint64, reason string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopRun != nil && (id == 0 || id == w.current) {
		w.stopRun(reason)
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
	if j.Kind == jobValidate {
		if _, err := w.compile(j.Code); err != nil {
			res.Err = &errFrame{Kind: err.Kind, Message: err.Message}
			return res
		}
		res.Out = []byte("null")
		return res
	}
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
	w.current, w.stopRun = f.ID, stopRun
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.current, w.stopRun = 0, nil
		w.mu.Unlock()
	}()
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
	w.prepare()
	newRT := w.spare
	w.spare = nil
	if newRT == nil {
		res.Err = &errFrame{Kind: KindCrash, Message: "the runtime could not be set up", Retire: true}
		return res
	}
	newRT.id = f.ID
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
	return res
}

// compile compiles tenant code once per distinct code, remembering
// failures too.
func (w *workerState) compile(code string) (*goja.Program, *Error) {
	key := sha256.Sum256([]byte(code))
	if c, ok := w.programs.get(key); ok {
		return c.prog, c.err
	}
	prog, err := compileCode("transform.js", code, func(name string) bool {
		return moduleAllowed(name, w.cfg.AllowModules)
	})
	w.programs.put(key, compiled{prog: prog, err: err})
	return prog, err
}

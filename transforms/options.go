package transforms

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Defaults and bounds of [Options].
const (
	DefaultMinWorkers       = 1
	DefaultMaxWorkers       = 4
	DefaultTimeout          = 30 * time.Second
	MaxTimeout              = 30 * time.Second
	DefaultQueueTimeout     = 5 * time.Second
	DefaultMemoryLimit      = 256 << 20
	DefaultMaxCallStackSize = 1024
	DefaultMaxLogLines      = 100
	DefaultMaxSvcCalls      = 100
	DefaultIdleTimeout      = time.Minute
	// MaxLogLine is the longest console line passed to the Logger, in
	// bytes; longer lines are cut.
	MaxLogLine = 1024
	// KillGrace is how long past its deadline a worker may take to answer
	// before the pool kills it, unless Options.KillGrace says otherwise.
	KillGrace = time.Second
	// startTimeout bounds a worker's start-up handshake. A worker starts
	// in milliseconds; the bound is for one that hangs, and it is
	// generous because a race-built binary on a loaded 2-core machine
	// once took over 10 s (TestAppSharesStoreAcrossReload).
	startTimeout = 30 * time.Second
)

// Options configure a [Pool].
type Options struct {
	// Command starts a worker: a program that calls ServeWorker on its
	// stdin and stdout, such as []string{os.Args[0], "vault",
	// "transform-worker"} for the server binary. Required. A relative
	// program path is resolved against PATH and the current directory when
	// the pool is created.
	Command []string
	// Env is the complete environment of a worker. The server's own
	// environment is NOT inherited (it may hold secrets): nil means an
	// empty environment.
	Env []string
	// MinWorkers are kept started and warm (0 means DefaultMinWorkers).
	MinWorkers int
	// MaxWorkers bound the workers alive at once, and so the runs in
	// parallel (0 means DefaultMaxWorkers).
	MaxWorkers int
	// MaxWorkersPerTenant bounds the workers the runs of one tenant
	// (Job.Realm.Tenant) hold at once: running, starting, or queued in a
	// busy worker's pipe. A tenant's further runs wait for one of its own
	// to end, at most QueueTimeout, while the tenants with runs waiting
	// are served round-robin (see fairqueue.go). 0 means half of
	// MaxWorkers rounded up ([DefaultMaxWorkersPerTenant]); it must not
	// exceed MaxWorkers.
	MaxWorkersPerTenant int
	// Timeout bounds each run, from the moment a worker starts it (0 means
	// DefaultTimeout; more than MaxTimeout is cut to MaxTimeout). A run's
	// context deadline, when earlier, wins.
	Timeout time.Duration
	// QueueTimeout bounds the wait for a worker when MaxWorkers are busy,
	// the time queued behind a busy worker's run included; past it Run
	// fails with KindBusy (0 means DefaultQueueTimeout).
	QueueTimeout time.Duration
	// IdleTimeout: workers beyond MinWorkers that stayed idle this long
	// are stopped (0 means DefaultIdleTimeout).
	IdleTimeout time.Duration
	// KillGrace is how long past its deadline a worker may take to answer
	// before the pool kills it (0 means KillGrace). A longer grace spares
	// workers that are only starved of CPU; tests on busy machines use it.
	KillGrace time.Duration
	// MemoryLimit caps each worker's Go memory, in bytes (0 means
	// DefaultMemoryLimit). A worker over it exits and its run fails with
	// KindMemory.
	MemoryLimit int64
	// MaxCallStackSize bounds the JavaScript call depth (0 means
	// DefaultMaxCallStackSize).
	MaxCallStackSize int
	// ModulesDir is a node_modules-style directory of operator-provided,
	// pure-JavaScript CommonJS packages. Only packages named in
	// AllowModules may be required from it.
	ModulesDir string
	// AllowModules names the packages of ModulesDir that code may require
	// ("lodash", "@scope/name").
	AllowModules []string
	// Logger receives each console.log/info/warn/error/debug line of a
	// run, with the job's Meta: at most MaxLogLines lines of at most
	// MaxLogLine bytes per run, then one line saying that the rest was
	// dropped. Nil drops them all. Lines are tenant output that may hold
	// card data: scrub them like any other. It is called from the run's
	// goroutine and must not block for long.
	Logger func(meta map[string]string, line string)
	// MaxLogLines bounds the console lines per run (0 means
	// DefaultMaxLogLines).
	MaxLogLines int
	// MaxSvcCalls bounds the req.svc calls per run (0 means
	// DefaultMaxSvcCalls).
	MaxSvcCalls int

	// now is the clock of idle times (IdleTimeout); nil means time.Now.
	// Tests set it.
	now func() time.Time
}

// DefaultMaxWorkersPerTenant is the per-tenant cap of a pool of
// maxWorkers workers when Options.MaxWorkersPerTenant is 0: half the
// pool, rounded up. One tenant can then never hold more than half the
// workers, so with two or more workers the other tenants always keep at
// least one that no single tenant can take, while a tenant alone on the
// pool still runs in parallel.
func DefaultMaxWorkersPerTenant(maxWorkers int) int {
	return max((maxWorkers+1)/2, 1)
}

// withDefaults fills in defaults and checks the options.
func (o Options) withDefaults() (Options, error) {
	if len(o.Command) == 0 || o.Command[0] == "" {
		return o, errors.New("transforms: Options.Command is required")
	}
	o.Command = slices.Clone(o.Command)
	path := o.Command[0]
	if !filepath.IsAbs(path) {
		p, err := exec.LookPath(path)
		if err != nil && !strings.Contains(path, string(filepath.Separator)) {
			return o, fmt.Errorf("transforms: worker command: %w", err)
		}
		if err == nil {
			path = p
		}
		if path, err = filepath.Abs(path); err != nil {
			return o, fmt.Errorf("transforms: worker command: %w", err)
		}
		o.Command[0] = path
	}
	if o.Env == nil {
		o.Env = []string{}
	}
	if o.MinWorkers == 0 {
		o.MinWorkers = DefaultMinWorkers
	}
	if o.MaxWorkers == 0 {
		o.MaxWorkers = DefaultMaxWorkers
	}
	if o.MinWorkers < 0 || o.MaxWorkers < 1 || o.MinWorkers > o.MaxWorkers {
		return o, fmt.Errorf("transforms: need 0 <= MinWorkers (%d) <= MaxWorkers (%d) and MaxWorkers >= 1", o.MinWorkers, o.MaxWorkers)
	}
	if o.MaxWorkersPerTenant == 0 {
		o.MaxWorkersPerTenant = DefaultMaxWorkersPerTenant(o.MaxWorkers)
	}
	if o.MaxWorkersPerTenant < 1 || o.MaxWorkersPerTenant > o.MaxWorkers {
		return o, fmt.Errorf("transforms: need 1 <= MaxWorkersPerTenant (%d) <= MaxWorkers (%d)", o.MaxWorkersPerTenant, o.MaxWorkers)
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	o.Timeout = min(o.Timeout, MaxTimeout)
	if o.QueueTimeout <= 0 {
		o.QueueTimeout = DefaultQueueTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.KillGrace <= 0 {
		o.KillGrace = KillGrace
	}
	if o.MemoryLimit <= 0 {
		o.MemoryLimit = DefaultMemoryLimit
	}
	if o.MemoryLimit < 32<<20 {
		return o, fmt.Errorf("transforms: MemoryLimit %d is below the 32 MiB a worker needs", o.MemoryLimit)
	}
	if o.MaxCallStackSize <= 0 {
		o.MaxCallStackSize = DefaultMaxCallStackSize
	}
	if o.MaxLogLines <= 0 {
		o.MaxLogLines = DefaultMaxLogLines
	}
	if o.MaxSvcCalls <= 0 {
		o.MaxSvcCalls = DefaultMaxSvcCalls
	}
	if o.ModulesDir != "" {
		dir, err := filepath.Abs(o.ModulesDir)
		if err != nil {
			return o, fmt.Errorf("transforms: ModulesDir: %w", err)
		}
		o.ModulesDir = dir
	}
	for _, m := range o.AllowModules {
		if !validPackageName(m) {
			return o, fmt.Errorf("transforms: AllowModules: %q is not a package name", m)
		}
		if isBuiltinModule(m) {
			return o, fmt.Errorf("transforms: AllowModules: %q is a built-in module name", m)
		}
	}
	if len(o.AllowModules) > 0 && o.ModulesDir == "" {
		return o, errors.New("transforms: AllowModules needs ModulesDir")
	}
	return o, nil
}

// Package transforms runs tenants' JavaScript — proxy request and response
// transforms and reactors — in a sandbox: worker processes that execute
// goja, in realms that serve one tenant, principal and code and are reset
// between runs, with hard limits on time and memory.
//
// # Threat model
//
// Tenant code is hostile. It runs next to card numbers in a multi-tenant
// vault, so it must not be able to read another tenant's data, stop or
// slow the server, or reach anything beyond its own input and the
// operations of req.svc. goja alone is not a sandbox (security
// requirements R-JS-1..7 and the probes of appendix B):
//
//   - one line kills a Go process with an unrecoverable fatal error:
//     "x".repeat(2**34) (out of memory), JSON.parse("[".repeat(5e6)+...)
//     (stack overflow); no recover() catches either;
//   - Runtime.Interrupt stops JavaScript, not native built-ins: a
//     back-reference regular expression on regexp2, new
//     Array(1e9).fill(0), a quadratic JSON.stringify keep running;
//   - goja has no memory limit, and recursion is unbounded by default;
//   - a Runtime keeps whatever a script did to its intrinsics, and Go values
//     handed to it are live (their methods callable, maps writable);
//   - its parser reads the file a "//# sourceMappingURL=" comment names,
//     unless told not to.
//
// # Design
//
// Processes. Tenant code never runs in the server. A [Pool] starts worker
// processes — the server binary re-executed with a command that calls
// [ServeWorker] — and talks to each over its stdin and stdout in
// length-prefixed frames, multiplexed by run id so that a run can call
// back into the parent for req.svc and the parent can cancel it
// (protocol.go). Frames are JSON, except the job and result frames of
// every run, whose payloads (JSON text already) cross in a binary frame,
// neither escaped nor scanned on the way; the parent checks a result like
// any output of a worker. A worker runs with one P (GOMAXPROCS 1) and
// reads and writes its pipes through the runtime's poller: every OS
// context switch saved on a round trip is CPU the server gets back. Workers
// do not inherit the server's environment, run in /, cannot dump core,
// have no_new_privs, run as nobody when the server runs as root, and die
// with the pool's spawning thread (Linux parent-death signal) or when
// their stdin closes.
//
// System calls (sandbox_linux_amd64.go). Once started, a worker installs
// a seccomp filter on all its threads: what the Go runtime, its pipes and
// random numbers need is allowed, everything else fails with EPERM. It
// cannot open a socket, start a program, trace, read or signal another
// process (the vault runs as the same user: its memory and
// /proc/<pid>/environ would otherwise be in reach of code that escaped the
// engine), or use the filesystem at all: the parent reads operator
// modules for it (module_files.go). Where the platform has no filter, the
// worker says so in its ready frame, and Stats.Unconfined carries the
// reason (the server logs it).
//
// Dispatch (dispatch.go). A worker runs one job at a time, in order. A
// run takes an idle worker, else starts one while fewer than MaxWorkers
// are alive, else is pipelined: its job frame is queued in the pipe of a
// busy worker whose run started less than 10 ms ago (one job per worker),
// which starts it as soon as it has written the result of the run ahead
// instead of idling through a round trip to the pool (in the load
// benchmark at 64 connections, nearly every run found all workers busy).
// Otherwise it waits, for QueueTimeout at most (KindBusy). A queued run still waiting after 10 ms rejoins the waiting
// runs and moves to the first worker or place that comes free, so that a
// slow run does not hold up the one queued behind it. A worker that dies,
// exceeds its memory, misses its deadline or breaks the protocol is killed
// and replaced; only its own run fails, with a Kind that says why
// (R-JS-1). The result frame of the run ahead marks the hand-over to the
// queued run: until it has come back, a death belongs to the run ahead,
// and the queued run, which has not started, runs on another worker;
// after it, a death fails the queued run. A queued run whose caller leaves
// is cancelled before it starts (the worker skips it), and the run ahead
// goes on undisturbed.
//
// Fairness (fairqueue.go, R-JS-8). The runs of one tenant
// (RealmScope.Tenant) hold at most MaxWorkersPerTenant workers at once
// (by default half the pool, rounded up), counting a place queued in a
// busy worker's pipe: a tenant at its cap waits for one of its own runs
// to end, never for another tenant's, and never takes another worker. The
// runs that wait are kept in one queue per tenant, in order of arrival,
// and the tenants are served round-robin as workers come free. A tenant
// that keeps its share busy with endless loops thus slows only itself;
// the other tenants' runs take the rest of the pool as usual.
//
// Time. Each run has a deadline: the pool's Timeout (at most 30 s),
// counted from the moment the worker starts the job, whatever time it
// spent queued, or the context's, if earlier. The worker interrupts the
// VM at the deadline, which stops JavaScript code, and gives regexp2 a
// match timeout just past it; the parent kills the worker if no result
// has come KillGrace (1 s) after the deadline (counted from the hand-over
// for a queued job, which is no earlier than its start), which stops
// everything else.
//
// Memory. A worker sets Go's soft memory limit to 3/4 of MemoryLimit (and
// GOGC to 400 below it: its live heap is small and long-lived) and,
// while a run is under way, samples runtime/metrics every 5 ms; above
// MemoryLimit it exits with status 3. RLIMIT_AS is set to the process's
// size at start-up plus 4 × MemoryLimit, so that a single huge allocation
// fails at once (Go's fatal "out of memory") rather than after the OS has
// handed out gigabytes. The parent maps these exits (status 3, a Go fatal
// error about memory or stacks, a SIGKILL it did not send) to KindMemory;
// see proc.exitError. debug.SetMaxStack bounds Go stacks to half the cap,
// and JSON.parse refuses input nested deeper than 5,000 levels before
// goja's recursive parser sees it.
//
// Realms. A realm (a goja.Runtime) is set up by bootstrap.js before any
// tenant code runs: it sets up the Node-like globals (console, Buffer,
// URL, URLSearchParams, global), replaces eval and the Function
// constructors (including those of async and generator functions) with
// functions that throw, turns the commonly overridden prototype properties
// into accessors (the "override mistake": err.name = 'X' keeps working),
// freezes the intrinsics, and makes the global object's bindings of all
// of these non-writable and non-configurable (JSON = ..., delete Object
// fail). JavaScript call depth is bounded by MaxCallStackSize. Data
// crosses as JSON text: the worker builds req.args, req.configuration
// and svc replies from it with the realm's own constructors, exactly the
// values JSON.parse would build (jsonparse.go), and the result leaves as
// JSON text; bytes cross as ArrayBuffers. No Go value is handed to the
// VM: the host functions that implement console, Buffer's codecs, crypto
// and svc are reachable only from closures of the bootstrap, and a
// field-name mapper hides every field and method of any Go value that
// might still reach it (goja_nodejs's URL keeps its state in a Go
// struct). A worker compiles each distinct code once (an LRU of
// goja.Programs) and sets up the realm of the next run while it waits.
//
// A job without a [RealmScope] runs in a fresh realm, dropped after the
// run. Setting one up and freezing it costs about 2.5 ms of CPU, ten
// times a proxied request, so a job with a scope (tenant, principal)
// runs in a warm realm: each worker keeps an LRU of realms (32 with the
// default 256 MiB MemoryLimit, about 0.8 MiB each) keyed by scope and
// code, and the pool sends a job to an idle worker that has its realm
// (else to the worker its key hashes to, else to any), and queues it, when
// all are busy, behind the busy worker that has its realm in the same
// order of preference. A warm run costs
// tens of µs in the worker. Reuse is safe because nothing a run can
// change survives it (security requirement R-JS-4, "per tenant+transform
// with reset"):
//
//   - a realm set up for reuse is frozen deep: everything reachable from
//     the global object — constructors, prototypes, namespaces, every
//     method function, accessor and what the tamed accessors return —
//     and the realm's require function and req.svc object, which it
//     makes once (TestDeepRealmIsFrozen walks it all); freezing that much
//     costs about three times a fresh realm, so a worker sets its spare
//     realm up deep only once it sees jobs with a scope, and deepens a
//     shallow spare before its first run otherwise; the built-in
//     bindings of the global object are locked;
//   - every run evaluates the module anew (fresh module, exports and
//     closures from the cached Program) and starts with an empty require
//     cache, so module-level state and operator modules start afresh;
//   - after the run, reset deletes every property the run added to the
//     global object (Reflect.ownKeys against the bootstrap's list);
//   - the realm is dropped, never reused, after a run that was
//     interrupted (deadline, cancel), overflowed the stack, failed in the
//     engine, did not settle or left svc calls pending; when a global
//     cannot be deleted, the global object's prototype or extensibility
//     changed, or the realm spent its Symbol.for budget (goja keeps
//     registered symbols for the realm's life); after 10,000 runs; and
//     all realms when the worker's live heap passes half its limit (a
//     run can make a frozen object hold memory no later run can read,
//     through a class's private field);
//   - the interrupt is cleared before every run and no interrupt reaches
//     a realm once its run has ended (R-JS-2);
//   - and by rule a realm never serves two tenants, two principals or two
//     codes, so even a gap in the above could only reach the same
//     tenant's same code acting for the same principal.
//
// TestRealmReuseIsClean is P9 with the realm reused: a run that pollutes
// everything it can, and the next run of its scope, and of other scopes,
// sees none of it.
//
// Code. Code is CommonJS: module.exports is a function, sync or async,
// called with req = {args, configuration, svc?} (svc also as req.bt). It
// is at most 50,000 characters. [ValidateCode] checks code at save time:
// syntax, required module names given as literals, and regular
// expression literals (and RegExp calls with literal patterns) that Go's
// linear-time engine cannot run — back-references, look-around and repeat
// counts above 1000, which goja would hand to the backtracking regexp2.
// Workers apply the same checks before running code. Patterns built at
// run time still reach regexp2 and are bounded by the deadline.
// [Pool.ValidateCode] does the same work in a worker, where hostile code
// (parsing "1+1+...+1" takes seconds, "[[[[..." 100 MB of stack) costs a
// worker rather than the server.
//
// Modules. require offers crypto (hashes, HMACs, random values), buffer,
// url, querystring and the reactor errors module ([ErrorsModule]), all
// frozen, plus the operator's pure-JavaScript CommonJS packages of
// ModulesDir named in AllowModules, whose relative requires stay inside
// the package. Anything else — fs, child_process, net, http, process,
// files of the tenant's own — fails with KindModule. The worker resolves
// a require's name, and asks the parent for the file over a call frame
// (module.resolve, then module.read when its compiled form or JSON text is
// not cached under the file's size and modification time); the parent
// answers only for files that resolve inside an allowed package. A worker
// trusts a resolution for resolveTTL (1 s), so a warm run asks nothing,
// and a file changed on disk is seen within a second.
//
// Results. Transforms return {body, headers}; reactors {raw} and/or
// {tokenize}. The parent checks the shape again (it trusts nothing from a
// worker), drops header names outside [A-Za-z0-9_-], refuses control
// characters in header values and output over 1 MB. A thrown reactor
// error sets Error.Status; a thrown CustomHttpResponseError also returns
// the response to send. Error messages of KindRuntime are the tenant's own
// text: callers scrub them (and console lines) like any tenant output.
//
// # Wiring
//
// The server registers a command that runs the worker loop and nothing
// else, for example "vault transform-worker":
//
//	func runTransformWorker() error { return transforms.ServeWorker(os.Stdin, os.Stdout) }
//
// and creates one pool for its lifetime:
//
//	exe, _ := os.Executable()
//	pool, err := transforms.NewPool(transforms.Options{
//		Command: []string{exe, "vault", "transform-worker"},
//		Logger:  func(meta map[string]string, line string) { /* scrub, then log */ },
//	})
//	defer pool.Close()
//	res, err := pool.Run(ctx, transforms.Job{Kind: transforms.JobRequest, Code: code, Args: args, Svc: svc,
//		Realm: transforms.RealmScope{Tenant: tenantID, Principal: applicationID}})
package transforms

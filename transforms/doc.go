// Package transforms runs tenants' JavaScript — proxy request and response
// transforms and reactors — in a sandbox: worker processes that execute
// goja, one fresh realm per run, with hard limits on time and memory.
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
// length-prefixed JSON frames, multiplexed by run id so that a run can
// call back into the parent for req.svc and the parent can cancel it
// (protocol.go). A worker runs one job at a time; concurrent runs start
// more workers up to MaxWorkers, then wait up to QueueTimeout (KindBusy).
// A worker that dies, exceeds its memory or misses its deadline is killed
// and replaced; only its own run fails, with a Kind that says why. Workers
// do not inherit the server's environment, run in /, cannot dump core,
// have no_new_privs, and die with the pool's spawning thread (Linux
// parent-death signal) or when their stdin closes.
//
// Time. Each run has a deadline (the pool's Timeout, at most 30 s, or the
// context's, if earlier). The worker interrupts the VM at the deadline,
// which stops JavaScript code, and gives regexp2 a match timeout just past
// it; the parent kills the worker if no result has come KillGrace (1 s)
// after the deadline, which stops everything else.
//
// Memory. A worker sets Go's soft memory limit to 3/4 of MemoryLimit and,
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
// Realms. Every run gets a fresh goja.Runtime: nothing one run does to
// its realm survives it. Before tenant code runs, bootstrap.js sets up the
// Node-like globals (console, Buffer, URL, URLSearchParams, global),
// replaces eval and the Function constructors (including those of async
// and generator functions) with functions that throw, turns the commonly
// overridden prototype properties into accessors (the "override
// mistake": err.name = 'X' keeps working), and freezes every constructor,
// prototype and namespace reachable from the global object plus the
// iterator and generator intrinsics. JavaScript call depth is bounded by
// MaxCallStackSize. Data crosses as JSON text that the VM parses itself
// (req.args, req.configuration, svc replies) and leaves as JSON text;
// bytes cross as ArrayBuffers. No Go value is handed to the VM: the host
// functions that implement console, Buffer's codecs, crypto and svc are
// reachable only from closures of the bootstrap, and a field-name mapper
// hides every field and method of any Go value that might still reach it
// (goja_nodejs's URL keeps its state in a Go struct). A worker compiles
// each distinct code once (an LRU of goja.Programs by SHA-256) and reuses
// the Program across realms; it sets up the realm of the next run while
// it waits for it.
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
// files of the tenant's own — fails with KindModule.
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
//	res, err := pool.Run(ctx, transforms.Job{Kind: transforms.JobRequest, Code: code, Args: args, Svc: svc})
package transforms

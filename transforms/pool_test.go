package transforms

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testclock"
)

func TestRunHappyPaths(t *testing.T) {
	p := newTestPool(t, nil)
	tests := []struct {
		name     string
		kind     string
		code     string
		args     any
		config   map[string]string
		body     string // compact JSON of Result.Body
		headers  map[string]string
		raw      string
		tokenize string
	}{
		{
			name: "sync request transform adds a header and rewrites the body",
			kind: JobRequest,
			code: `module.exports = function (req) {
				const { body, headers } = req.args;
				return { body: { card: body.number, amount: body.amount * 100 }, headers: { ...headers, 'X-Added': 'yes' } };
			};`,
			args:    map[string]any{"body": map[string]any{"number": "4242", "amount": 12}, "headers": map[string]string{"Content-Type": "application/json"}, "method": "POST", "path": "/pay", "query": "?a=1"},
			body:    `{"amount":1200,"card":"4242"}`,
			headers: map[string]string{"Content-Type": "application/json", "X-Added": "yes"},
		},
		{
			name: "async response transform masks a field",
			kind: JobResponse,
			code: `module.exports = async function (req) {
				const body = req.args.body;
				body.card.number = body.card.number.slice(0, 6) + '******' + body.card.number.slice(-4);
				await Promise.resolve();
				return { body, headers: req.args.headers };
			};`,
			args:    map[string]any{"body": map[string]any{"card": map[string]any{"number": "4242424242424242"}}, "headers": map[string]string{"a": "b"}},
			body:    `{"card":{"number":"424242******4242"}}`,
			headers: map[string]string{"a": "b"},
		},
		{
			name: "string body and numeric header",
			kind: JobRequest,
			code: `module.exports = (req) => ({ body: 'plain text', headers: { 'Content-Length': 10, 'bad name!': 'dropped', 'x_ok-1': 'kept' } });`,
			args: map[string]any{},
			body: `"plain text"`, headers: map[string]string{"Content-Length": "10", "x_ok-1": "kept"},
		},
		{
			name: "reactor returns raw",
			kind: JobReactor,
			code: `module.exports = async function (req) { return { raw: { echo: req.args.x, n: 1 } }; };`,
			args: map[string]any{"x": "hello"},
			raw:  `{"echo":"hello","n":1}`,
		},
		{
			name:     "reactor returns tokenize",
			kind:     JobReactor,
			code:     `module.exports = async (req) => ({ tokenize: { type: 'card', data: req.args.card } });`,
			args:     map[string]any{"card": map[string]any{"number": "4111"}},
			tokenize: `{"data":{"number":"4111"},"type":"card"}`,
		},
		{
			name:   "configuration is visible",
			kind:   JobReactor,
			code:   `module.exports = (req) => ({ raw: { key: req.configuration.API_KEY, keys: Object.keys(req.configuration) } });`,
			config: map[string]string{"API_KEY": "secret-1", "OTHER": "x"},
			raw:    `{"key":"secret-1","keys":["API_KEY","OTHER"]}`,
		},
		{
			name: "top-level return and exports shorthand",
			kind: JobReactor,
			code: `exports.unused = 1; module.exports = () => ({ raw: typeof require }); return;`,
			raw:  `"function"`,
		},
		{
			name: "thenable is awaited",
			kind: JobReactor,
			code: `module.exports = () => ({ then(resolve) { resolve({ raw: 'thenable' }); } });`,
			raw:  `"thenable"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw, _ := json.Marshal(tc.args)
			res, err := p.Run(context.Background(), Job{Kind: tc.kind, Code: tc.code, Args: raw, Configuration: tc.config})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			check := func(name string, got json.RawMessage, want string) {
				if want == "" {
					if got != nil {
						t.Errorf("%s = %s, want none", name, got)
					}
					return
				}
				if g := mustJSON(t, got); g != want {
					t.Errorf("%s = %s, want %s", name, g, want)
				}
			}
			check("Body", res.Body, tc.body)
			check("Raw", res.Raw, tc.raw)
			check("Tokenize", res.Tokenize, tc.tokenize)
			if tc.kind != JobReactor && mustJSON(t, res.Headers) != mustJSON(t, tc.headers) {
				t.Errorf("Headers = %v, want %v", res.Headers, tc.headers)
			}
		})
	}
}

func TestRunInvalidResults(t *testing.T) {
	p := newTestPool(t, nil)
	tests := []struct {
		name, kind, code, wantKind, wantMsg string
	}{
		{"transform returns a string", JobRequest, `module.exports = () => 'x'`, KindInvalidResult, "must return an object"},
		{"transform returns an array", JobRequest, `module.exports = () => [1]`, KindInvalidResult, "not an array"},
		{"transform returns undefined", JobRequest, `module.exports = () => {}`, KindInvalidResult, "returned undefined"},
		{"body is a number", JobResponse, `module.exports = () => ({ body: 1, headers: {} })`, KindInvalidResult, "body must be an object or a string"},
		{"headers is an array", JobRequest, `module.exports = () => ({ body: {}, headers: ['a'] })`, KindInvalidResult, "headers must be an object"},
		{"header value is an object", JobRequest, `module.exports = () => ({ body: {}, headers: { a: {} } })`, KindInvalidResult, "header a must be a string"},
		{"header value has CRLF", JobRequest, `module.exports = () => ({ body: {}, headers: { a: 'x\r\nInjected: 1' } })`, KindInvalidResult, "control character"},
		{"reactor without raw or tokenize", JobReactor, `module.exports = () => ({ body: 1 })`, KindInvalidResult, "raw and/or tokenize"},
		{"reactor tokenize is a string", JobReactor, `module.exports = () => ({ tokenize: 'x' })`, KindInvalidResult, "tokenize must be an object"},
		{"BigInt is not JSON", JobReactor, `module.exports = () => ({ raw: 1n })`, KindInvalidResult, "cannot be turned into JSON"},
		{"circular value", JobReactor, `module.exports = () => { const o = {}; o.o = o; return { raw: o }; }`, KindInvalidResult, "cannot be turned into JSON"},
		{"output over 1 MB", JobReactor, `module.exports = () => ({ raw: 'x'.repeat(1100000) })`, KindInvalidResult, "the limit is 1048576"},
		{"exports is not a function", JobReactor, `module.exports = 42`, KindInvalidCode, "module.exports must be a function"},
		{"syntax error", JobReactor, `module.exports = function ( {`, KindInvalidCode, "Unexpected"},
		{"never-settling promise", JobReactor, `module.exports = () => new Promise(() => {})`, KindInvalidResult, "never settles"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(t, p, tc.kind, tc.code, map[string]any{})
			if kindOf(err) != tc.wantKind || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("err = %v, want kind %s containing %q", err, tc.wantKind, tc.wantMsg)
			}
		})
	}
}

func TestRunThrown(t *testing.T) {
	p := newTestPool(t, nil)
	sdk := `const E = require('` + ErrorsModule + `');`
	tests := []struct {
		name    string
		code    string
		kind    string
		msg     string
		status  int
		errs    string
		custom  bool
		body    string
		headers map[string]string
	}{
		{name: "Error", code: `module.exports = () => { throw new Error('boom') }`, kind: KindRuntime, msg: "Error: boom"},
		{name: "TypeError from the engine", code: `module.exports = () => null.x`, kind: KindRuntime, msg: "TypeError"},
		{name: "custom Error subclass with name", code: `class MyErr extends Error { constructor(m) { super(m); this.name = 'MyErr'; } }
			module.exports = async () => { throw new MyErr('custom') }`, kind: KindRuntime, msg: "MyErr: custom"},
		{name: "string", code: `module.exports = () => { throw 'just a string' }`, kind: KindRuntime, msg: "uncaught exception: just a string"},
		{name: "number", code: `module.exports = () => { throw 42 }`, kind: KindRuntime, msg: "uncaught exception: 42"},
		{name: "null", code: `module.exports = () => { throw null }`, kind: KindRuntime, msg: "uncaught exception: null"},
		{name: "undefined", code: `module.exports = () => { throw undefined }`, kind: KindRuntime, msg: "uncaught exception: undefined"},
		{name: "symbol", code: `module.exports = () => { throw Symbol('s') }`, kind: KindRuntime, msg: "uncaught exception: Symbol(s)"},
		{name: "plain object", code: `module.exports = () => { throw { code: 7 } }`, kind: KindRuntime, msg: `uncaught exception: {"code":7}`},
		{name: "object with throwing getter", code: `module.exports = () => { throw { get message() { throw 1 }, toJSON() { throw 2 } } }`, kind: KindRuntime, msg: "uncaught exception: [object Object]"},
		{name: "rejected promise", code: `module.exports = () => Promise.reject(new RangeError('nope'))`, kind: KindRuntime, msg: "RangeError: nope"},
		{name: "top-level throw", code: `throw new Error('at load')`, kind: KindRuntime, msg: "Error: at load"},
		{name: "AuthenticationError", code: sdk + `module.exports = () => { throw new E.AuthenticationError('bad key') }`,
			kind: KindRuntime, msg: "Authentication Failed", status: 401, errs: `{"error":["bad key"]}`},
		{name: "AuthorizationError", code: sdk + `module.exports = () => { throw new E.AuthorizationError() }`,
			kind: KindRuntime, msg: "Forbidden", status: 403},
		{name: "BadRequestError with a map", code: sdk + `module.exports = () => { throw new E.BadRequestError({ card: 'invalid', cvc: ['a', 'b'] }) }`,
			kind: KindRuntime, msg: "Bad Request", status: 400, errs: `{"card":["invalid"],"cvc":["a","b"]}`},
		{name: "InvalidPaymentMethodError", code: sdk + `module.exports = () => { throw new E.InvalidPaymentMethodError() }`,
			kind: KindRuntime, msg: "Invalid Payment Method", status: 402},
		{name: "RateLimitError", code: sdk + `module.exports = async () => { throw new E.RateLimitError() }`,
			kind: KindRuntime, msg: "Rate Limit Exceeded", status: 429},
		{name: "CustomHttpResponseError", code: sdk + `module.exports = () => { throw new E.CustomHttpResponseError({ status: 418, headers: { 'X-Teapot': 'yes', 'bad header': 'x' }, body: { reason: 'short and stout' } }) }`,
			kind: KindRuntime, msg: "custom HTTP response", status: 418, custom: true, body: `{"reason":"short and stout"}`, headers: map[string]string{"X-Teapot": "yes"}},
		{name: "CustomHttpResponseError with a bad status", code: sdk + `module.exports = () => { throw new E.CustomHttpResponseError({ status: 42 }) }`,
			kind: KindRuntime, msg: "Error: status is not a valid integer"},
		{name: "reactor error with tampered status", code: sdk + `module.exports = () => { const e = new E.BadRequestError(); e.status = 200; throw e }`,
			kind: KindRuntime, msg: "Bad Request", status: 500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := run(t, p, JobRequest, tc.code, map[string]any{})
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if e.Kind != tc.kind || !strings.Contains(e.Message, tc.msg) || e.Status != tc.status || e.Custom != tc.custom {
				t.Fatalf("err = %+v, want kind %s message %q status %d custom %v", e, tc.kind, tc.msg, tc.status, tc.custom)
			}
			if tc.errs != "" && mustJSON(t, e.Errors) != tc.errs {
				t.Errorf("Errors = %v, want %s", e.Errors, tc.errs)
			}
			if tc.custom {
				if res == nil || mustJSON(t, res.Body) != tc.body || mustJSON(t, res.Headers) != mustJSON(t, tc.headers) {
					t.Fatalf("custom result = %+v", res)
				}
			} else if res != nil {
				t.Errorf("result = %+v, want nil", res)
			}
		})
	}
}

func TestConsoleLog(t *testing.T) {
	sink := &logSink{}
	p := newTestPool(t, func(o *Options) { o.Logger = sink.log; o.MaxLogLines = 5 })
	code := `module.exports = (req) => {
		console.log('hello', 1, { a: [1, 2] }, null, undefined);
		console.error(new TypeError('bad'));
		console.log('x'.repeat(5000));
		for (let i = 0; i < 50; i++) console.info('line', i);
		return { raw: 1 };
	};`
	meta := map[string]string{"tenant": "t1", "reactor": "r1"}
	if _, err := p.Run(context.Background(), Job{Kind: JobReactor, Code: code, Meta: meta}); err != nil {
		t.Fatal(err)
	}
	lines, metas := sink.snapshot()
	if len(lines) != 6 {
		t.Fatalf("got %d lines, want 5 and the truncation notice: %q", len(lines), lines)
	}
	if lines[0] != `hello 1 {"a":[1,2]} null undefined` {
		t.Errorf("line 0 = %q", lines[0])
	}
	if !strings.HasPrefix(lines[1], "TypeError: bad") {
		t.Errorf("line 1 = %q", lines[1])
	}
	if len(lines[2]) != MaxLogLine {
		t.Errorf("long line is %d bytes, want %d", len(lines[2]), MaxLogLine)
	}
	if !strings.Contains(lines[5], "truncated") {
		t.Errorf("last line = %q, want the truncation notice", lines[5])
	}
	for _, m := range metas {
		if m["tenant"] != "t1" || m["reactor"] != "r1" {
			t.Fatalf("meta = %v", m)
		}
	}
}

func TestRunInputChecks(t *testing.T) {
	p := newTestPool(t, nil)
	ok := `module.exports = () => ({ raw: 1 })`
	tests := []struct {
		name string
		job  Job
		want string
	}{
		{"unknown kind", Job{Kind: "other", Code: ok}, "plain"},
		{"code too long", Job{Kind: JobReactor, Code: ok + "//" + strings.Repeat("é", MaxCodeChars)}, KindInvalidCode},
		{"args not JSON", Job{Kind: JobReactor, Code: ok, Args: json.RawMessage(`{`)}, KindInvalidInput},
		{"args too large", Job{Kind: JobReactor, Code: ok, Args: json.RawMessage(`"` + strings.Repeat("a", MaxPayload) + `"`)}, KindInvalidInput},
		{"args nested too deep", Job{Kind: JobReactor, Code: ok, Args: json.RawMessage(strings.Repeat("[", 6000) + strings.Repeat("]", 6000))}, KindInvalidInput},
		{"code at the limit", Job{Kind: JobReactor, Code: ok + "//" + strings.Repeat("é", MaxCodeChars-len(ok)-2)}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Run(context.Background(), tc.job)
			if got := kindOf(err); got != tc.want {
				t.Fatalf("err = %v (kind %q), want kind %q", err, got, tc.want)
			}
		})
	}
}

// TestPoolConcurrencyAndQueue: two runs take both workers; a third waits
// QueueTimeout for one and is refused as busy; the first two finish, and
// the pool keeps its two workers. The first two hold their workers on a
// gate of the test's, not on a clock, so a busy machine cannot reorder
// them.
func TestPoolConcurrencyAndQueue(t *testing.T) {
	p := newTestPool(t, func(o *Options) {
		o.MinWorkers, o.MaxWorkers, o.MaxWorkersPerTenant, o.QueueTimeout = 1, 2, 2, 300*time.Millisecond
		o.Timeout = time.Minute // the gate, not the clock, ends the first two runs
	})
	gate := newGateSvc()
	held := `module.exports = async (req) => { await req.svc.tokenize({}); return { raw: 1 }; }`
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i] = p.Run(context.Background(), Job{Kind: JobReactor, Code: held, Svc: gate})
		}(i)
	}
	if !gate.waitEntered(2, time.Minute) {
		gate.release()
		wg.Wait()
		t.Fatalf("the two runs did not both start: %v, %v; stats %+v", errs[0], errs[1], p.Stats())
	}
	if s := p.Stats(); s.Busy != 2 || s.Alive != 2 {
		t.Errorf("while busy: stats = %+v, want 2 busy of 2 alive", s)
	}
	_, err := run(t, p, JobReactor, `module.exports = () => ({ raw: 1 })`, nil)
	gate.release()
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("first runs: %v, %v", errs[0], errs[1])
	}
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("third run: %v, want busy", err)
	}
	s := p.Stats()
	if s.Started != 2 || s.Alive != 2 || s.Busy != 0 {
		t.Errorf("after: stats = %+v", s)
	}
}

// gateSvc holds every req.svc call until release, counting the calls
// that have reached it.
type gateSvc struct {
	mu      sync.Mutex
	entered int
	changed chan struct{} // closed and replaced when entered changes
	open    chan struct{}
	once    sync.Once
}

func newGateSvc() *gateSvc {
	return &gateSvc{changed: make(chan struct{}), open: make(chan struct{})}
}

func (g *gateSvc) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	g.mu.Lock()
	g.entered++
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-ctx.Done():
	}
	return json.RawMessage(`{}`), nil
}

// waitEntered waits until n calls have reached the gate, or the limit.
func (g *gateSvc) waitEntered(n int, limit time.Duration) bool {
	deadline := time.After(limit)
	for {
		g.mu.Lock()
		entered, changed := g.entered, g.changed
		g.mu.Unlock()
		if entered >= n {
			return true
		}
		select {
		case <-changed:
		case <-deadline:
			return false
		}
	}
}

func (g *gateSvc) release() { g.once.Do(func() { close(g.open) }) }

func TestContextCancel(t *testing.T) {
	p := newTestPool(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(200 * time.Millisecond); cancel() }()
	start := time.Now()
	_, err := p.Run(ctx, Job{Kind: JobReactor, Code: `module.exports = () => { for (;;) {} }`})
	if kindOf(err) != KindTimeout || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want timeout wrapping context.Canceled", err)
	}
	// short of the pool's Timeout (5 s), which would end it otherwise
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("cancel took %v", d)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = p.Run(ctx, Job{Kind: JobReactor, Code: `module.exports = () => { for (;;) {} }`})
	if kindOf(err) != KindTimeout {
		t.Fatalf("err = %v, want timeout", err)
	}
	if _, err := run(t, p, JobReactor, `module.exports = () => ({ raw: 1 })`, nil); err != nil {
		t.Fatalf("the worker is not usable after a cancelled run: %v", err)
	}
	if s := p.Stats(); s.Killed[KindTimeout] != 0 {
		t.Errorf("a worker was killed for interruptible code: %+v", s)
	}
}

func TestPoolClose(t *testing.T) {
	p, err := NewPool(testOptions())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := run(t, p, JobReactor, `module.exports = () => { for (;;) {} }`, nil)
		done <- err
	}()
	for deadline := time.Now().Add(60 * time.Second); p.Stats().Busy == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the run did not reach a worker within 60 s")
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// a run under way is cut short: closed, not busy, since its code ran
	if err := <-done; kindOf(err) != KindClosed || errors.Is(err, ErrBusy) {
		t.Errorf("run during Close: %v, want closed", err)
	}
	if _, err := run(t, p, JobReactor, `module.exports = () => ({ raw: 1 })`, nil); !errors.Is(err, ErrBusy) {
		t.Errorf("run after Close: %v, want busy", err)
	}
	if s := p.Stats(); s.Alive != 0 {
		t.Errorf("after Close: %+v", s)
	}
}

// TestIdleWorkersAreStopped: workers started for a burst stay while they
// have been idle for no more than IdleTimeout, then those beyond
// MinWorkers are stopped. Idle time is read from a fake clock, so the
// machine's speed plays no part; the reaper's pass is called directly.
func TestIdleWorkersAreStopped(t *testing.T) {
	const idle = time.Minute
	clock := testclock.New(time.Unix(1_000_000, 0))
	p := newTestPool(t, func(o *Options) {
		o.MinWorkers, o.MaxWorkers, o.MaxWorkersPerTenant = 1, 3, 3
		o.IdleTimeout = idle
		o.now = clock.Now
	})
	// A burst of three runs that each hold a worker until the gate opens:
	// the pool must start two more workers.
	g := newGate()
	var runs []<-chan outcome
	for i := 0; i < 3; i++ {
		runs = append(runs, runAsync(context.Background(), p, Job{Kind: JobReactor, Svc: g, Code: gated(`return { raw: 1 }`)}))
	}
	waitStats(t, p, "three runs under way", func(s Stats) bool { return s.Busy == 3 && g.calls.Load() == 3 })
	g.release()
	for i, ch := range runs {
		wantRaw(t, fmt.Sprintf("run %d", i), <-ch, "1")
	}
	if s := settled(t, p); s.Alive != 3 || s.Started != 3 {
		t.Fatalf("after a burst: %+v, want 3 started and alive", s)
	}

	clock.Advance(idle) // idle for IdleTimeout exactly: kept
	p.reapIdle()
	if s := p.Stats(); s.Alive != 3 || s.Killed["idle"] != 0 {
		t.Fatalf("idle for IdleTimeout: %+v, want 3 alive", s)
	}
	clock.Advance(time.Second) // past it
	p.reapIdle()
	if s := p.Stats(); s.Alive != 1 || s.Killed["idle"] != 2 {
		t.Fatalf("after idling: %+v, want 1 alive and 2 stopped as idle", s)
	}
	// MinWorkers stay, however long they idle; the one left still runs.
	clock.Advance(time.Hour)
	p.reapIdle()
	if _, err := run(t, p, JobReactor, `module.exports = () => ({ raw: 1 })`, nil); err != nil {
		t.Fatalf("run after idling: %v", err)
	}
	if s := p.Stats(); s.Alive != 1 || s.Killed["idle"] != 2 || s.Started != 3 {
		t.Fatalf("after a run on the warm worker: %+v, want 1 alive, no new worker", s)
	}
}

func TestBadCommand(t *testing.T) {
	_, err := NewPool(Options{Command: []string{"/nonexistent/worker"}})
	if err == nil {
		t.Fatal("NewPool with a missing command succeeded")
	}
	_, err = NewPool(Options{Command: []string{"/bin/true"}, Env: []string{}})
	if err == nil {
		t.Fatal("NewPool with a command that is not a worker succeeded")
	}
	_, err = NewPool(Options{})
	if err == nil {
		t.Fatal("NewPool without a command succeeded")
	}
}

func TestHugeReactorErrorIsBounded(t *testing.T) {
	p := newTestPool(t, func(o *Options) {
		// the bound under test is the error's size, not the time: give a
		// busy machine (and the race detector) all the time a run may have
		o.Timeout = MaxTimeout
	})
	code := `const E = require('` + ErrorsModule + `');
		module.exports = () => {
			const errors = {};
			for (let i = 0; i < 600; i++) errors['k' + i] = Array(100).fill('x'.repeat(5000)); // 300 MB as JSON
			throw new E.BadRequestError(errors);
		};`
	_, err := run(t, p, JobReactor, code, nil)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindRuntime || e.Status != 400 {
		t.Fatalf("err = %v", err)
	}
	if len(e.Errors) != 50 {
		t.Errorf("%d error properties, want 50", len(e.Errors))
	}
	for k, msgs := range e.Errors {
		if len(msgs) != 20 || len(msgs[0]) != maxMessage {
			t.Fatalf("errors[%s] has %d messages of %d bytes", k, len(msgs), len(msgs[0]))
		}
	}
	if s := p.Stats(); s.Killed[KindCrash] != 0 {
		t.Errorf("a worker was lost: %+v", s)
	}
}

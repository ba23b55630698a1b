package transforms

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
	nodeurl "github.com/dop251/goja_nodejs/url"
)

// maxJSONDepth bounds the nesting of JSON that JSON.parse accepts inside a
// run (and so the Args of a job): goja's JSON.parse recurses in Go.
const maxJSONDepth = 5000

//go:embed js/*.js
var jsFiles embed.FS

// jsPrograms are the compiled sources of js/, shared by every runtime of
// the process (a goja.Program may run in many runtimes).
var jsPrograms struct {
	once      sync.Once
	err       error
	bootstrap *goja.Program
	buffer    *goja.Program
	modules   map[string]*goja.Program // crypto, querystring, errors
}

func loadJS() error {
	jsPrograms.once.Do(func() {
		compile := func(name string) *goja.Program {
			src, err := jsFiles.ReadFile("js/" + name + ".js")
			if err == nil {
				prog, perr := goja.Parse(name+".js", string(src), parser.WithDisableSourceMaps)
				if err = perr; err == nil {
					var p *goja.Program
					if p, err = goja.CompileAST(prog, true); err == nil {
						return p
					}
				}
			}
			if jsPrograms.err == nil {
				jsPrograms.err = fmt.Errorf("transforms: built-in %s.js: %w", name, err)
			}
			return nil
		}
		jsPrograms.bootstrap = compile("bootstrap")
		jsPrograms.buffer = compile("buffer")
		jsPrograms.modules = map[string]*goja.Program{
			"crypto":      compile("crypto"),
			"querystring": compile("querystring"),
			"errors":      compile("reactor_errors"),
		}
	})
	return jsPrograms.err
}

// runtimeConfig is what a job runtime needs from the worker's settings.
type runtimeConfig struct {
	maxCallStackSize int
	maxLogLines      int
	maxSvcCalls      int
	modulesDir       string
	allowModules     []string
}

// helpers are the functions bootstrap.js returns.
type helpers struct {
	harden, moduleError, svcError, describeError, parse goja.Callable
	makeReq, settle, stringify, loadBuiltin             goja.Callable
	module, reset, deepen                               goja.Callable
}

// jobRuntime is one goja.Runtime (a realm). A shallow one serves one run
// and is dropped. A deep one (every reachable intrinsic frozen) may serve
// further runs of the same realmKey, with startRun and finishRun around
// each: see the Realms section of the package documentation.
type jobRuntime struct {
	vm            *goja.Runtime
	cfg           *runtimeConfig
	id            uint64
	emit          func(*frame) error // sends log and call frames to the parent
	helpers       helpers
	json          jsonWriter    // writes results; see stringify.go
	stringify     goja.Callable // json.stringify as a function of the realm
	deep          bool          // set up for reuse
	runs          int           // runs started in this realm
	tenantRequire goja.Value    // the tenant code's require, made at its first run

	filename, dirname goja.Value // of the tenant's module, as its code sees them

	bufferCtor  goja.Value
	urlExports  *goja.Object
	modules     map[string]*goja.Object // require cache: id -> module object
	moduleCache *moduleFileCache
	moduleBytes int64

	logLines    int
	svcCalls    int
	moduleCalls int // module file calls (module_files.go)
	nextSeq     uint64
	pending     map[uint64]pendingCall

	// code is the run's tenant code, for the positions of its errors.
	code string

	// sig is the run's signals, for the synchronous module file calls;
	// early holds svc replies that arrived during one, for settle.
	sig   jobSignals
	early []*frame
}

// hiddenFields hides every field and method of any Go value that reaches
// the VM. None should (data crosses as JSON text and ArrayBuffers), but
// goja_nodejs's URL keeps its state in a Go struct whose exported methods
// would otherwise be callable from JavaScript.
type hiddenFields struct{}

func (hiddenFields) FieldName(reflect.Type, reflect.StructField) string { return "" }
func (hiddenFields) MethodName(reflect.Type, reflect.Method) string     { return "" }

// newJobRuntime builds a fresh runtime: Node-like globals, intrinsics
// frozen (with deep, every object reachable from them too), global
// bindings locked, no code generation from strings.
func newJobRuntime(cfg *runtimeConfig, id uint64, emit func(*frame) error, moduleCache *moduleFileCache, deep bool) (rt *jobRuntime, err error) {
	if err := loadJS(); err != nil {
		return nil, err
	}
	defer func() {
		if x := recover(); x != nil {
			rt, err = nil, fmt.Errorf("transforms: runtime setup: %v", x)
		}
	}()
	vm := goja.New()
	vm.SetFieldNameMapper(hiddenFields{})
	vm.SetMaxCallStackSize(cfg.maxCallStackSize)
	rt = &jobRuntime{
		vm: vm, cfg: cfg, id: id, emit: emit, deep: deep,
		filename: vm.ToValue("/transform.js"), dirname: vm.ToValue("/"),
		modules: make(map[string]*goja.Object), moduleCache: moduleCache,
		pending: make(map[uint64]pendingCall),
	}

	host := vm.NewObject()
	for name, fn := range map[string]func(goja.FunctionCall) goja.Value{
		"log":           rt.log,
		"jsonDepthOK":   rt.jsonDepthOK,
		"svcCall":       rt.svcCall,
		"bufEncode":     rt.bufEncode,
		"bufDecode":     rt.bufDecode,
		"bufByteLength": rt.bufByteLength,
		"hashNew":       rt.hashNew,
		"hmacNew":       rt.hmacNew,
		"randomBytes":   rt.randomBytes,
		"randomUUID":    rt.randomUUID,
	} {
		_ = host.Set(name, fn)
	}
	_ = host.Set("maxJSONDepth", maxJSONDepth)

	bufferFactory, err := vm.RunProgram(jsPrograms.buffer)
	if err != nil {
		return nil, err
	}
	if rt.bufferCtor, err = callValue(bufferFactory, goja.Undefined(), host); err != nil {
		return nil, err
	}
	urlModule := vm.NewObject()
	rt.urlExports = vm.NewObject()
	_ = urlModule.Set("exports", rt.urlExports)
	nodeurl.Require(vm, urlModule)

	boot, err := vm.RunProgram(jsPrograms.bootstrap)
	if err != nil {
		return nil, err
	}
	hv, err := callValue(boot, goja.Undefined(), host, rt.bufferCtor, rt.urlExports, vm.ToValue(deep))
	if err != nil {
		return nil, err
	}
	h := hv.ToObject(vm)
	for name, dst := range map[string]*goja.Callable{
		"harden": &rt.helpers.harden, "moduleError": &rt.helpers.moduleError, "svcError": &rt.helpers.svcError,
		"describeError": &rt.helpers.describeError, "parse": &rt.helpers.parse, "makeReq": &rt.helpers.makeReq,
		"settle": &rt.helpers.settle, "stringify": &rt.helpers.stringify, "loadBuiltin": &rt.helpers.loadBuiltin,
		"module": &rt.helpers.module, "reset": &rt.helpers.reset, "deepen": &rt.helpers.deepen,
	} {
		fn, ok := goja.AssertFunction(h.Get(name))
		if !ok {
			return nil, fmt.Errorf("transforms: bootstrap helper %s missing", name)
		}
		*dst = fn
	}
	rt.json = jsonWriter{vm: vm, builtin: rt.helpers.stringify}
	rt.stringify, _ = goja.AssertFunction(vm.ToValue(rt.json.stringify))
	return rt, nil
}

// callValue calls a function value.
func callValue(fn goja.Value, this goja.Value, args ...goja.Value) (goja.Value, error) {
	f, ok := goja.AssertFunction(fn)
	if !ok {
		return nil, errors.New("not a function")
	}
	return f(this, args...)
}

// call calls a helper from inside a native function: an exception is
// rethrown into JavaScript, an interrupt keeps unwinding.
func (rt *jobRuntime) call(fn goja.Callable, args ...goja.Value) goja.Value {
	v, err := fn(goja.Undefined(), args...)
	if err != nil {
		panic(err)
	}
	return v
}

// log(line): one console line to the parent, bounded in length and count.
func (rt *jobRuntime) log(call goja.FunctionCall) goja.Value {
	rt.logLines++
	switch {
	case rt.logLines <= rt.cfg.maxLogLines:
		_ = rt.emit(&frame{T: frameLog, ID: rt.id, Line: truncate(call.Argument(0).String(), MaxLogLine)})
	case rt.logLines == rt.cfg.maxLogLines+1:
		_ = rt.emit(&frame{T: frameLog, ID: rt.id, Line: "[console output truncated: more than " + strconv.Itoa(rt.cfg.maxLogLines) + " lines]"})
	}
	return goja.Undefined()
}

// jsonDepthOK(text) boolean: whether JSON text nests at most maxJSONDepth
// levels. Brackets inside strings do not count.
func (rt *jobRuntime) jsonDepthOK(call goja.FunctionCall) goja.Value {
	return rt.vm.ToValue(jsonDepth(call.Argument(0).String()) <= maxJSONDepth)
}

func jsonDepth(s string) int {
	depth, most, inString := 0, 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			most = max(most, depth)
		case ']', '}':
			depth--
		}
	}
	return most
}

// runOutcome is the end of a run inside the worker.
type runOutcome struct {
	out []byte    // JSON of the settled value
	err *errFrame // or the failure
	// discard: the realm must not serve another run (the run was
	// interrupted, overflowed the stack, failed in the engine, or left
	// work unsettled).
	discard bool
}

// jobSignals are what a run waits on besides its own code.
type jobSignals struct {
	replies <-chan *frame   // svc replies (of any run; others are dropped)
	stop    <-chan struct{} // closed at the deadline or on cancel
	reason  func() string   // why stop was closed: "timeout" or "cancel"
	gone    <-chan struct{} // closed when the parent is gone
	timeout time.Duration
}

// deepen makes a realm set up for one run fit for reuse, as if it had
// been set up deep. Call it before the realm's first run only.
func (rt *jobRuntime) deepen() (err error) {
	if rt.deep {
		return nil
	}
	defer func() {
		if x := recover(); x != nil {
			err = fmt.Errorf("transforms: deepen: %v", x)
		}
	}()
	if rt.runs > 0 {
		return errors.New("transforms: a realm that has run code cannot be deepened")
	}
	if _, err := rt.helpers.deepen(goja.Undefined()); err != nil {
		return err
	}
	rt.deep = true
	return nil
}

// startRun readies the realm for run id: per-run counters and the
// require cache start empty, and a stale interrupt is cleared.
func (rt *jobRuntime) startRun(id uint64) {
	rt.vm.ClearInterrupt()
	rt.id = id
	rt.runs++
	rt.logLines, rt.svcCalls, rt.moduleCalls, rt.moduleBytes = 0, 0, 0, 0
	rt.early = rt.early[:0]
	clear(rt.modules)
	clear(rt.pending)
}

// finishRun resets the realm after a run that ended normally and reports
// whether it may serve another: the globals the run created are deleted,
// and the realm must be as bootstrap left it.
func (rt *jobRuntime) finishRun() (clean bool) {
	defer func() {
		if recover() != nil {
			clean = false
		}
	}()
	if !rt.deep || len(rt.pending) > 0 {
		return false
	}
	clear(rt.modules)
	v, err := rt.helpers.reset(goja.Undefined())
	return err == nil && v.ToBoolean()
}

// run executes compiled tenant code with the job's data and waits for its
// promise to settle.
func (rt *jobRuntime) run(prog *goja.Program, j *jobFrame, sig jobSignals) (res runOutcome) {
	defer func() {
		if x := recover(); x != nil {
			// A Go panic inside the engine: report it, and retire the
			// worker, whose state can no longer be trusted.
			res = runOutcome{err: &errFrame{Kind: KindCrash, Message: "the JavaScript engine failed", Retire: true}}
		}
		if res.err != nil && (res.err.Kind == KindTimeout || res.err.Kind == KindCrash) || len(rt.pending) > 0 {
			res.discard = true
		}
	}()
	fail := func(err error) runOutcome { return rt.failure(err, sig) }
	rt.sig, rt.code = sig, j.Code

	wrapper, err := rt.vm.RunProgram(prog)
	if err != nil {
		return fail(err)
	}
	if rt.tenantRequire == nil {
		// One frozen require function per realm: it keeps no state of its
		// own (the require cache, rt.modules, starts empty every run).
		rt.tenantRequire = rt.call(rt.helpers.harden, rt.makeRequire(moduleScope{virtDir: "/"}))
	}
	exported, err := rt.helpers.module(goja.Undefined(), wrapper, rt.tenantRequire, rt.filename, rt.dirname)
	if err != nil {
		return fail(err)
	}
	fn, ok := goja.AssertFunction(exported)
	if !ok {
		return runOutcome{err: &errFrame{Kind: KindInvalidCode, Message: "module.exports must be a function"}}
	}

	argsText, configText := []byte(j.Args), []byte(j.Config)
	if len(argsText) == 0 {
		argsText = []byte("{}")
	}
	if len(configText) == 0 || string(configText) == "null" {
		configText = []byte("{}")
	}
	args, err := parseJSON(rt.vm, argsText)
	if err == nil {
		var config goja.Value
		if config, err = parseJSON(rt.vm, configText); err == nil {
			var req goja.Value
			if req, err = rt.helpers.makeReq(goja.Undefined(), args, config, rt.vm.ToValue(j.Svc)); err == nil {
				return rt.settle(fn, req, sig)
			}
		}
	}
	// The args are checked here, where they are parsed anyway, rather
	// than scanned once more in the parent. (No message quotes the data.)
	switch {
	case errors.Is(err, errJSONSyntax):
		return runOutcome{err: &errFrame{Kind: KindInvalidInput, Message: "the args are not valid JSON"}}
	case errors.Is(err, errJSONDepth) || errors.Is(err, errJSONRange):
		return runOutcome{err: &errFrame{Kind: KindInvalidInput,
			Message: "the args cannot be parsed by JavaScript (a number out of range, or nesting deeper than " + strconv.Itoa(maxJSONDepth) + " levels)"}}
	}
	return fail(err)
}

// failure is the outcome of a run that the engine ended with err. A stack
// overflow leaves the realm usable in principle, but it is not reused.
func (rt *jobRuntime) failure(err error, sig jobSignals) runOutcome {
	var overflow *goja.StackOverflowError
	return runOutcome{err: rt.errorFrom(err, sig), discard: errors.As(err, &overflow)}
}

// settle calls the tenant's function with req and waits for its promise
// to settle.
func (rt *jobRuntime) settle(fn goja.Callable, req goja.Value, sig jobSignals) runOutcome {
	fail := func(err error) runOutcome { return rt.failure(err, sig) }

	ret, err := fn(goja.Undefined(), req)
	if err != nil {
		return fail(err)
	}
	pv, err := rt.helpers.settle(goja.Undefined(), ret)
	if err != nil {
		return fail(err)
	}
	promise, ok := pv.Export().(*goja.Promise)
	if !ok {
		return runOutcome{err: &errFrame{Kind: KindCrash, Message: "the result is not a promise"}}
	}
	for {
		switch promise.State() {
		case goja.PromiseStateFulfilled:
			return rt.output(promise.Result(), sig)
		case goja.PromiseStateRejected:
			return runOutcome{err: rt.describe(promise.Result(), sig)}
		}
		if len(rt.pending) == 0 {
			return runOutcome{discard: true, err: &errFrame{Kind: KindInvalidResult,
				Message: "the returned promise never settles: nothing is left to wait for"}}
		}
		if len(rt.early) > 0 { // svc replies that came during a module file call
			f := rt.early[0]
			rt.early = rt.early[1:]
			if err := rt.deliver(f); err != nil {
				return fail(err)
			}
			continue
		}
		select {
		case f := <-sig.replies:
			if f.ID != rt.id {
				continue
			}
			if err := rt.deliver(f); err != nil {
				return fail(err)
			}
		case <-sig.stop:
			return runOutcome{err: stopError(sig)}
		case <-sig.gone:
			return runOutcome{err: &errFrame{Kind: KindCrash, Message: "the parent went away"}}
		}
	}
}

// stopError is the error of a run stopped by its deadline or the caller.
func stopError(sig jobSignals) *errFrame {
	if sig.reason() == "cancel" {
		return &errFrame{Kind: KindTimeout, Message: "the run was cancelled"}
	}
	return &errFrame{Kind: KindTimeout, Message: "the code did not finish within " + sig.timeout.String()}
}

// output turns the settled value into JSON text.
func (rt *jobRuntime) output(v goja.Value, sig jobSignals) runOutcome {
	s, err := rt.stringify(goja.Undefined(), v)
	if err != nil {
		var ex *goja.Exception
		if errors.As(err, &ex) {
			return runOutcome{err: &errFrame{Kind: KindInvalidResult, Message: "the returned value cannot be turned into JSON: " + truncate(ex.Value().String(), 300)}}
		}
		return runOutcome{err: rt.errorFrom(err, sig)}
	}
	if goja.IsUndefined(s) {
		return runOutcome{err: &errFrame{Kind: KindInvalidResult, Message: "the function returned undefined"}}
	}
	text := s.String()
	if len(text) > MaxPayload {
		return runOutcome{err: &errFrame{Kind: KindInvalidResult, Message: fmt.Sprintf("the returned value is %d bytes of JSON; the limit is %d", len(text), MaxPayload)}}
	}
	// JSON.stringify's output is JSON; the parent checks it again anyway.
	return runOutcome{out: []byte(text)}
}

// thrown is what describeError in bootstrap.js reports.
type thrown struct {
	Kind    string              `json:"kind"`
	Name    string              `json:"name"`
	Message string              `json:"message"`
	Status  float64             `json:"status"`
	Errors  map[string][]string `json:"errors"`
	Stack   string              `json:"stack"` // the "at" lines of an Error's stack
	Custom  *struct {
		Status  float64 `json:"status"`
		Headers *string `json:"headers"`
		Body    *string `json:"body"`
	} `json:"custom"`
}

// errorFrom classifies an error returned by the engine.
func (rt *jobRuntime) errorFrom(err error, sig jobSignals) *errFrame {
	var (
		interrupted *goja.InterruptedError
		overflow    *goja.StackOverflowError
		exception   *goja.Exception
		syntax      *goja.CompilerSyntaxError
	)
	switch {
	case errors.As(err, &interrupted):
		return stopError(sig)
	case errors.As(err, &overflow):
		return &errFrame{Kind: KindRuntime, Message: "RangeError: Maximum call stack size exceeded"}
	case errors.As(err, &exception):
		if exception.Value() == nil {
			break
		}
		return rt.describe(exception.Value(), sig)
	case errors.As(err, &syntax):
		return &errFrame{Kind: KindInvalidCode, Message: truncate(syntax.Error(), maxMessage)}
	}
	return &errFrame{Kind: KindCrash, Message: "the JavaScript engine failed: " + truncate(err.Error(), 200)}
}

// stackPosition finds the first frame of a stack (goja's "at" lines) in
// the tenant's code, and returns its position in the code of the run.
func (rt *jobRuntime) stackPosition(stack string) (line, col int, ok bool) {
	for frame := range strings.SplitSeq(stack, "\n") {
		m := tenantFramePattern.FindStringSubmatch(frame)
		if m == nil {
			continue
		}
		l, err1 := strconv.Atoi(m[1])
		c, err2 := strconv.Atoi(m[2])
		if err1 != nil || err2 != nil {
			continue
		}
		line, col, _ = codePosition(rt.code, l, c)
		return line, col, true
	}
	return 0, 0, false
}

// tenantFramePattern matches a stack frame in the tenant's code:
// "\tat transform.js:1:113(4)" or "\tat f (transform.js:2:15(2))".
var tenantFramePattern = regexp.MustCompile(`^\s*at (?:.*\()?` + regexp.QuoteMeta(tenantFile) + `:(\d{1,9}):(\d{1,9})`)

// describe turns a thrown value into an error frame.
func (rt *jobRuntime) describe(v goja.Value, sig jobSignals) *errFrame {
	d, err := rt.helpers.describeError(goja.Undefined(), v)
	if err != nil {
		var interrupted *goja.InterruptedError
		if errors.As(err, &interrupted) {
			return stopError(sig)
		}
		return &errFrame{Kind: KindRuntime, Message: "the thrown value could not be read"}
	}
	var t thrown
	if json.Unmarshal([]byte(d.String()), &t) != nil {
		return &errFrame{Kind: KindRuntime, Message: "the thrown value could not be read"}
	}
	msg := t.Message
	if t.Name != "" && t.Kind == KindRuntime && t.Status == 0 && t.Custom == nil {
		msg = t.Name + ": " + t.Message
		if t.Message == "" {
			msg = t.Name
		}
		if line, col, ok := rt.stackPosition(t.Stack); ok {
			msg = truncate(msg, maxMessage-len(positionText(line, col))) + positionText(line, col)
		}
	}
	ef := &errFrame{Kind: KindRuntime, Message: truncate(msg, maxMessage)}
	if t.Kind == KindModule {
		ef.Kind = KindModule
		return ef
	}
	if t.Custom != nil {
		status := int(t.Custom.Status)
		if float64(status) != t.Custom.Status || status < 100 || status > 599 {
			return &errFrame{Kind: KindInvalidResult, Message: "CustomHttpResponseError status must be an integer from 100 to 599"}
		}
		c := &customResponse{Status: status}
		for _, part := range []struct {
			src *string
			dst *json.RawMessage
		}{{t.Custom.Headers, &c.Headers}, {t.Custom.Body, &c.Body}} {
			if part.src == nil {
				continue
			}
			if len(*part.src) > MaxPayload || !utf8.ValidString(*part.src) || !json.Valid([]byte(*part.src)) {
				return &errFrame{Kind: KindInvalidResult, Message: "CustomHttpResponseError headers and body must be JSON of at most 1 MB"}
			}
			*part.dst = json.RawMessage(*part.src)
		}
		ef.Status, ef.Custom, ef.Message = status, c, "custom HTTP response"
		return ef
	}
	if t.Status != 0 {
		status := int(t.Status)
		if float64(status) != t.Status || status < 400 || status > 599 {
			status = 500
		}
		ef.Status = status
		ef.Errors = t.Errors
	}
	return ef
}

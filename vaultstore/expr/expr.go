// Package expr implements Tokenvault's expression language: Liquid templates
// (github.com/osteele/liquid, with all of its standard filters and tags except
// {% include %}) extended with the vault filters reveal_last, reveal, last4,
// pad_left, pad_right, json, stringify (alias json_stringify),
// alias_preserve_format, alias_preserve_length, to_number, to_boolean and
// to_string.
//
// Expressions are used for token masks, id aliases, fingerprint expressions,
// search indexes and detokenization. Bound values are sensitive (card
// numbers, CVCs, ...): no error produced by this package ever contains a
// bound value. Errors may quote the expression source, which is not data.
//
// The json filter uses a small JSONPath evaluator written for this package
// (jsonpath.go) rather than a third-party library.
//
// Liquid has no resource limits, so this package adds them (guard.go):
// filter results are capped, ranges need literal bounds, and rendering and
// loops are charged to a per-evaluation work budget.
//
// Detokenization references ({{ token: <id> | … }}, {{ <id> }} with ids
// that are not Liquid identifiers) are not parsed here: callers rewrite them
// into variable lookups before compiling.
package expr

import (
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/osteele/liquid/expressions"
	"github.com/osteele/liquid/filters"
	"github.com/osteele/liquid/parser"
	"github.com/osteele/liquid/render"
	"github.com/osteele/liquid/tags"
	"github.com/osteele/liquid/values"

	"github.com/tokenvault/tokenvault/internal/bounded"
)

const (
	// maxJSONDepth bounds the nesting EvaluateJSON walks.
	maxJSONDepth = 64
	// maxValueDepth bounds the nesting of bound values that are converted
	// into the engine's representation; deeper values are passed as they are.
	maxValueDepth = 256
	// maxOutput bounds the size of a rendered template.
	maxOutput = 1 << 20
	// maxErrorSource bounds how much expression source an error quotes.
	maxErrorSource = 200
	// cacheSize bounds the compiled-expression cache.
	cacheSize = 1024
	// maxCachedSource is the longest source kept in the cache.
	maxCachedSource = 16 << 10
)

// Error is the error returned for a malformed expression or a failed
// evaluation. Its message is short, suitable for an API 400 response, and
// never contains bound data values.
type Error struct {
	msg string
}

// Error returns the message.
func (e *Error) Error() string { return e.msg }

// errorf builds an *Error. Callers must pass only source-derived or constant
// arguments, never bound values.
func errorf(format string, a ...any) *Error {
	return &Error{msg: fmt.Sprintf(format, a...)}
}

// Expression is a compiled expression. It is immutable and safe for
// concurrent use.
type Expression struct {
	src    string
	single expressions.Expression // set when src is one {{ ... }} output
	fast   *fastPath              // set when single is simple enough for it
	root   render.Node            // set otherwise
}

var (
	// std is the engine every evaluation uses but EvaluateJSONEach's.
	std     *engine
	cfg     render.Config
	exprCfg expressions.Config
	cache   = bounded.New[*Expression](cacheSize)
	// knownFilters caches filter names found registered (positive results
	// only, so it is bounded by the number of registered filters).
	knownFilters sync.Map
)

func init() {
	std = newEngine(vaultFilters)
	cfg, exprCfg = std.render, std.expr
}

// engine is a configuration of the Liquid engine: its tags and filters.
// Expressions are parsed and compiled with the standard one, and can be
// rendered with any, since the engine looks filters up as it renders.
type engine struct {
	render render.Config
	expr   expressions.Config
}

// newEngine configures the engine with the standard filters and tags
// and the vault filters vf.
func newEngine(vf map[string]filterFunc) *engine {
	c := render.NewConfig()
	filters.AddStandardFilters(guardedFilters{&c})
	tags.AddStandardTags(c)
	// {% include %} reads files from the server's file system.
	c.AddTag("include", func(string) (func(io.Writer, render.Context) error, error) {
		return nil, errors.New("the include tag is not supported")
	})
	registerVaultFilters(&c, vf)
	c.AddFilter(outFilter, outValue)
	c.AddFilter(tickFilter, tick)
	return &engine{render: c, expr: c.Config.Config}
}

// IsExpression reports whether s contains Liquid markup ("{{" or "{%") and
// so must be evaluated rather than used literally.
func IsExpression(s string) bool {
	return strings.Contains(s, "{{") || strings.Contains(s, "{%")
}

// Compile parses src once. Compiled expressions are cached by source text in
// a bounded cache, so compiling the same source again is cheap.
func Compile(src string) (*Expression, error) {
	if e, ok := cache.Get(src); ok {
		return e, nil
	}
	e, err := compile(src)
	if err != nil {
		return nil, err
	}
	if len(src) <= maxCachedSource {
		cache.Put(src, e)
	}
	return e, nil
}

func compile(src string) (e *Expression, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, err = nil, errorf("invalid expression: %s", quoteSource(src))
		}
	}()
	if !utf8.ValidString(src) {
		return nil, errorf("invalid expression: source is not valid UTF-8")
	}
	if err := precheck(src); err != nil {
		return nil, err
	}
	loc := parser.SourceLoc{}
	ast, perr := cfg.Parse(src, loc)
	if perr != nil {
		return nil, parseError(perr)
	}
	if obj := singleObject(ast); obj != nil {
		return &Expression{src: src, single: obj.Expr, fast: parseFastPath(obj.Args)}, nil
	}
	root, perr := cfg.Compile(rewriteForBudget(src), loc)
	if perr != nil {
		return nil, parseError(perr)
	}
	return &Expression{src: src, root: root}, nil
}

// precheck rejects unterminated delimiters and unknown filters, which the
// Liquid engine would otherwise render literally or report only when
// evaluated.
func precheck(src string) *Error {
	inRaw, inComment := false, false
	for _, tok := range parser.Scan(src, parser.SourceLoc{}, nil) {
		switch {
		case inComment:
			if tok.Type == parser.TagTokenType && tok.Name == "endcomment" {
				inComment = false
			}
		case inRaw:
			if tok.Type == parser.TagTokenType && tok.Name == "endraw" {
				inRaw = false
			}
		case tok.Type == parser.TextTokenType:
			if strings.Contains(tok.Source, "{{") || strings.Contains(tok.Source, "{%") {
				return errorf("invalid expression: unterminated {{ or {%% in %s", quoteSource(src))
			}
		case tok.Type == parser.ObjTokenType:
			if err := checkArgs(tok.Args); err != nil {
				return err
			}
		case tok.Type == parser.TagTokenType:
			switch tok.Name {
			case "raw":
				inRaw = true
			case "comment":
				inComment = true
			default:
				if err := checkArgs(tok.Args); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkArgs checks the ranges in an object or tag expression and reports
// the first filter ("| name" outside string literals) that is not
// registered.
func checkArgs(args string) *Error {
	code := blankStrings(args)
	if err := checkRanges(code); err != nil {
		return err
	}
	for i := 0; i < len(code); i++ {
		if code[i] != '|' {
			continue
		}
		j := i + 1
		for j < len(code) && (code[j] == ' ' || code[j] == '\t' || code[j] == '\n' || code[j] == '\r') {
			j++
		}
		k := j
		for k < len(code) && isIdentByte(code[k], k == j) {
			k++
		}
		if k < len(code) && code[k] == '?' && k > j {
			k++
		}
		if k == j {
			continue // a syntax error, reported by the parser
		}
		if name := code[j:k]; !filterExists(name) {
			return errorf("invalid expression: unknown filter %q", name)
		}
		i = k - 1
	}
	return nil
}

func isIdentByte(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		return true
	case c >= '0' && c <= '9', c == '-':
		return !first
	}
	return false
}

// filterExists probes the engine for a filter: the engine keeps its filter
// table private, but applying an unknown filter fails with UndefinedFilter.
func filterExists(name string) (ok bool) {
	if _, hit := knownFilters.Load(name); hit {
		return true
	}
	defer func() {
		if r := recover(); r != nil {
			ok = !isUndefinedFilter(r)
		}
		if ok {
			knownFilters.Store(name, struct{}{})
		}
	}()
	x, err := expressions.Parse("x | " + name)
	if err != nil {
		return false
	}
	_, err = x.Evaluate(expressions.NewContext(map[string]any{}, exprCfg))
	return !isUndefinedFilter(err)
}

func isUndefinedFilter(v any) bool {
	var uf expressions.UndefinedFilter
	err, ok := v.(error)
	return ok && errors.As(err, &uf)
}

// singleObject returns the output object when the template is exactly one
// {{ ... }} with only whitespace around it.
func singleObject(ast parser.ASTNode) *parser.ASTObject {
	seq, ok := ast.(*parser.ASTSeq)
	if !ok {
		return nil
	}
	var obj *parser.ASTObject
	for _, c := range seq.Children {
		switch c := c.(type) {
		case *parser.ASTObject:
			if obj != nil {
				return nil
			}
			obj = c
		case *parser.ASTText:
			if strings.TrimSpace(c.Source) != "" {
				return nil
			}
		case *parser.ASTTrim:
		default:
			return nil
		}
	}
	return obj
}

func parseError(err error) *Error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "Liquid error: ")
	if len(msg) > 2*maxErrorSource {
		msg = msg[:2*maxErrorSource]
		for !utf8.ValidString(msg) {
			msg = msg[:len(msg)-1]
		}
		msg += "..."
	}
	return &Error{msg: "invalid expression: " + msg}
}

func quoteSource(src string) string {
	if len(src) > maxErrorSource {
		src = src[:maxErrorSource]
		for !utf8.ValidString(src) {
			src = src[:len(src)-1]
		}
		return strconv.Quote(src) + "..."
	}
	return strconv.Quote(src)
}

// String returns the expression source.
func (e *Expression) String() string { return e.src }

// Evaluate evaluates the expression with the given bindings (typically
// "data", decoded with json.Decoder.UseNumber). If the source is exactly one
// {{ ... }} output (surrounding whitespace allowed) the native value is
// returned: string, json.Number, bool, nil, map[string]any or []any.
// Otherwise the template is rendered to a string.
func (e *Expression) Evaluate(bindings map[string]any) (any, error) {
	return e.evalIn(&env{raw: bindings, eng: std})
}

// env holds the bindings of one evaluation, copied into the engine's
// representation only when an expression needs the engine, and the
// engine configuration it runs with.
type env struct {
	raw    map[string]any
	engine map[string]any
	eng    *engine
	// sorted: EvaluateJSON walks object members in sorted order, so that
	// the alias filters' draws come in the same order every time
	sorted bool
}

func (v *env) engineBindings() map[string]any {
	if v.engine == nil {
		v.engine = toEngineBindings(v.raw)
	}
	return v.engine
}

// evalIn evaluates the expression by its fast path when it has one that
// applies, else with the engine.
func (e *Expression) evalIn(v *env) (any, error) {
	if e.fast != nil {
		if out, ok := e.fast.eval(v.raw); ok {
			return out, nil
		}
	}
	return e.eval(v.engineBindings(), v.eng)
}

func (e *Expression) eval(b map[string]any, eng *engine) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, panicError(r)
		}
	}()
	if e.single != nil {
		v, err := e.single.Evaluate(expressions.NewContext(b, eng.expr))
		if err != nil {
			return nil, runtimeError(err)
		}
		return fromEngine(v, 0)
	}
	w := &limitWriter{}
	if rerr := render.Render(e.root, w, b, eng.render); rerr != nil {
		return nil, runtimeError(rerr)
	}
	return w.b.String(), nil
}

// EvaluateJSON walks a JSON value (map[string]any, []any, string,
// json.Number, bool, nil) and replaces every string that is an expression
// (see IsExpression) by its value, keeping the structure. Nesting deeper than
// 64 levels is an error.
func EvaluateJSON(template any, bindings map[string]any) (any, error) {
	return evalJSON(template, &env{raw: bindings, eng: std}, 0)
}

// EvaluateJSONEach evaluates template as EvaluateJSON does, once for each
// set of bindings, with the same random draws each time: the alias
// filters draw the same characters in the same order in every
// evaluation (object members are evaluated in sorted order), so two
// results differ only where their bindings make them differ. The draws
// come from a fresh random seed on each call, so the aliases are as
// unpredictable as EvaluateJSON's. errs[i] is the i-th evaluation's
// error; random reports whether any evaluation drew random characters,
// so that another call could give other results.
func EvaluateJSONEach(template any, bindings ...map[string]any) (outs []any, errs []error, random bool) {
	var seed [32]byte
	crand.Read(seed[:]) // never fails (Go 1.24+ crashes the program instead)
	se := takeSeededEngine()
	defer se.release()
	se.draws = 0
	outs, errs = make([]any, len(bindings)), make([]error, len(bindings))
	for i, b := range bindings {
		se.rng.Seed(seed)
		outs[i], errs[i] = evalJSON(template, &env{raw: b, eng: se.engine, sorted: true}, 0)
	}
	return outs, errs, se.draws > 0
}

// seededEngine is an engine whose alias filters draw from rng, which
// EvaluateJSONEach seeds before each evaluation, and count their draws.
// One evaluation at a time uses it.
type seededEngine struct {
	*engine
	rng   *rand.ChaCha8
	draws int
}

// seededEngines keeps idle seeded engines; building one takes a while
// (every filter is registered again), so they are kept rather than
// pooled in a sync.Pool, which drops its contents at every collection.
var seededEngines = make(chan *seededEngine, 16)

// takeSeededEngine returns an idle seeded engine, or a new one.
func takeSeededEngine() *seededEngine {
	select {
	case se := <-seededEngines:
		return se
	default:
	}
	se := &seededEngine{rng: rand.NewChaCha8([32]byte{})}
	r := rand.New(se.rng)
	se.engine = newEngine(vaultFiltersDrawing(func(n int) int {
		se.draws++
		return r.IntN(n)
	}))
	return se
}

// release keeps the engine for another evaluation, or drops it when
// enough are kept.
func (se *seededEngine) release() {
	select {
	case seededEngines <- se:
	default:
	}
}

func evalJSON(t any, b *env, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, errorf("expression template nested deeper than %d levels", maxJSONDepth)
	}
	switch t := t.(type) {
	case string:
		if !IsExpression(t) {
			return t, nil
		}
		e, err := Compile(t)
		if err != nil {
			return nil, err
		}
		return e.evalIn(b)
	case map[string]any:
		out := make(map[string]any, len(t))
		if b.sorted {
			for _, k := range slices.Sorted(maps.Keys(t)) {
				r, err := evalJSON(t[k], b, depth+1)
				if err != nil {
					return nil, err
				}
				out[k] = r
			}
			return out, nil
		}
		for k, v := range t {
			r, err := evalJSON(v, b, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, v := range t {
			r, err := evalJSON(v, b, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	default:
		return t, nil
	}
}

// limitWriter is a strings.Builder that fails past maxOutput bytes.
type limitWriter struct{ b strings.Builder }

var errOutputTooLarge = errorf("expression output exceeds %d bytes", maxOutput)

func (w *limitWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > maxOutput {
		return 0, errOutputTooLarge
	}
	return w.b.Write(p)
}

// runtimeError converts an engine error into an *Error without quoting any
// value: only this package's own *Error messages and source-derived names
// pass through.
func runtimeError(err error) *Error {
	var filterName string
	for err != nil {
		switch e := err.(type) {
		case *Error:
			return e
		case expressions.UndefinedFilter:
			return errorf("invalid expression: unknown filter %q", string(e))
		case expressions.FilterError:
			filterName = e.FilterName
			err = e.Err
			continue
		case *values.CallParityError:
			if filterName != "" {
				return errorf("invalid expression: filter %q: %s", filterName, e.Error())
			}
			return errorf("invalid expression: %s", e.Error())
		}
		if c, ok := err.(interface{ Cause() error }); ok && c.Cause() != nil {
			err = c.Cause()
			continue
		}
		err = errors.Unwrap(err)
	}
	if filterName != "" {
		return errorf("expression evaluation failed in filter %q", filterName)
	}
	return errorf("expression evaluation failed")
}

func panicError(r any) *Error {
	if err, ok := r.(error); ok {
		return runtimeError(err)
	}
	return errorf("expression evaluation failed")
}

// object is the engine-side representation of a JSON object: it renders as
// JSON rather than Go's map syntax when output inside a larger template.
type object map[string]any

// String returns the object as JSON.
func (o object) String() string {
	b, err := marshalJSON(map[string]any(o))
	if err != nil {
		return ""
	}
	return string(b)
}

// toEngineBindings copies bindings into the engine's representation: JSON
// objects become object, and json.Number values become int64 or float64
// when that representation prints back the exact same digits (so that they
// compare numerically in Liquid conditions); other numbers stay json.Number.
// It also binds a fresh work budget (see guard.go).
func toEngineBindings(b map[string]any) map[string]any {
	out := make(map[string]any, len(b)+1)
	for k, v := range b {
		out[k] = toEngine(v, 0)
	}
	out[budgetVar] = &budget{left: maxWork}
	return out
}

func toEngine(v any, depth int) any {
	if depth > maxValueDepth {
		return v
	}
	switch v := v.(type) {
	case json.Number:
		return numberToEngine(v)
	case map[string]any:
		o := make(object, len(v))
		for k, x := range v {
			o[k] = toEngine(x, depth+1)
		}
		return o
	case []any:
		a := make([]any, len(v))
		for i, x := range v {
			a[i] = toEngine(x, depth+1)
		}
		return a
	}
	return v
}

// numberToEngine returns int64 or float64 for n when that value formats back
// to n exactly, else n itself.
func numberToEngine(n json.Number) any {
	s := string(n)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		if strconv.FormatInt(i, 10) == s {
			return i
		}
		return n
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && formatFloat(f) == s {
		return f
	}
	return n
}

// formatFloat formats f as the engine prints it (fmt's %v).
func formatFloat(f float64) string {
	return fmt.Sprint(f)
}

// fromEngine converts an engine value into a native JSON value.
func fromEngine(v any, depth int) (any, error) {
	if depth > maxValueDepth {
		return nil, errorf("expression result nested too deeply")
	}
	switch v := v.(type) {
	case nil, string, bool, json.Number:
		return v, nil
	case int64:
		return json.Number(strconv.FormatInt(v, 10)), nil
	case int:
		return json.Number(strconv.Itoa(v)), nil
	case float64:
		return floatNumber(v)
	case object:
		return mapFromEngine(v, depth)
	case map[string]any:
		return mapFromEngine(v, depth)
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			r, err := fromEngine(x, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case []byte:
		return string(v), nil
	case values.Range:
		return fromEngine(v.AsArray(), depth)
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String:
		return rv.String(), nil
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return json.Number(strconv.FormatInt(rv.Int(), 10)), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return json.Number(strconv.FormatUint(rv.Uint(), 10)), nil
	case reflect.Float32, reflect.Float64:
		return floatNumber(rv.Float())
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			r, err := fromEngine(rv.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			break
		}
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			r, err := fromEngine(it.Value().Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[it.Key().String()] = r
		}
		return out, nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		return fromEngine(rv.Elem().Interface(), depth+1)
	}
	return fmt.Sprint(v), nil
}

func mapFromEngine(m map[string]any, depth int) (any, error) {
	out := make(map[string]any, len(m))
	for k, x := range m {
		r, err := fromEngine(x, depth+1)
		if err != nil {
			return nil, err
		}
		out[k] = r
	}
	return out, nil
}

func floatNumber(f float64) (any, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, errorf("expression result is not a finite number")
	}
	return json.Number(formatFloat(f)), nil
}

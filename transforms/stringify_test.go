package transforms

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/dop251/goja"
)

func newTestRealm(tb testing.TB) *jobRuntime {
	tb.Helper()
	rt, err := newJobRuntime(&runtimeConfig{maxCallStackSize: 1024, maxLogLines: 10, maxSvcCalls: 10}, 1,
		func(*frame) error { return nil }, newModuleFileCache(4), false)
	if err != nil {
		tb.Fatal(err)
	}
	return rt
}

// stringifyBoth stringifies a value made by make with the writer and,
// from a fresh value, with the built-in, and returns both outcomes.
func stringifyBoth(tb testing.TB, rt *jobRuntime, make func() goja.Value) (ours, builtin string) {
	tb.Helper()
	outcome := func(v goja.Value, err error) string {
		var ex *goja.Exception
		switch {
		case errors.As(err, &ex):
			return "exception: " + ex.Value().String() // what a run reports
		case err != nil:
			return "error: " + err.Error()
		case goja.IsUndefined(v):
			return "undefined"
		}
		return v.String()
	}
	ours = outcome(rt.stringify(goja.Undefined(), make()))
	builtin = outcome(rt.helpers.stringify(goja.Undefined(), make()))
	return ours, builtin
}

// The writer gives what JSON.stringify gives for values of every kind,
// hostile ones included: getters, toJSON, proxies, wrappers, cycles, lone
// surrogates, symbols, BigInt, deep nesting. Each source runs in a realm
// of its own, twice: once for each stringify, so that side effects show.
func TestJSONWriterMatchesBuiltin(t *testing.T) {
	sources := []string{
		`undefined`, `null`, `true`, `false`, `0`, `-0`, `0.1`, `1e21`, `1e-7`, `NaN`, `Infinity`, `-Infinity`,
		`2**53`, `5e-324`, `123456789012345680000`, `-17`,
		`"plain"`, `"quote\" back\\ ctl\u0001\u001f\n\t\r\b\f"`, `"ñandú ü 😀"`, `"\u2028\u2029<>&'"`,
		`"\ud800x"`, `"x\udc00"`, `"\ud83d\ude00"`, `"\ufffd"`, `""`,
		`{a:1,b:"x",c:[1,2,{d:null}],e:true,f:false}`,
		`{u:undefined,fn:function(){},s:Symbol("x"),n:null}`,
		`[undefined, function(){}, Symbol("x"), 1]`,
		`function(){}`, `Symbol("root")`, `1n`, `{a: 1n}`, `[1n]`,
		`(function(){ let n = 0; return {get a(){ return ++n }, b: 2, get c(){ return n * 10 }} })()`,
		`{get a(){ throw new Error("boom") }}`,
		`{toJSON(k){ return "k=" + k }}`, `{x:{toJSON(k){ return "key:" + k }}}`, `[{toJSON(k){ return "i" + k }}]`,
		`new Date(0)`, `{d: new Date(0)}`, `{toJSON: 5, a: 1}`, `{toJSON(){ return {toJSON(){ return 1 }} }}`,
		`new Proxy({a:1,b:2}, {get(t,k){ return k === "a" ? 10 : t[k] }})`, `{p: new Proxy([1,2], {})}`,
		`new Proxy({}, {ownKeys(){ return ["z","y"] }, getOwnPropertyDescriptor(t,k){ return {value:k, enumerable:true, configurable:true} }, get(t,k){ return k + "!" }})`,
		`new Number(3)`, `new String("s")`, `new Boolean(false)`, `{a: new Number(1), b: new String("x")}`,
		`Object(1n)`, `Object(Symbol("w"))`,
		`(function(){ const a = {}; a.self = a; return a })()`,
		`(function(){ const a = [1]; a.push({b: a}); return a })()`,
		`(function(){ const a = {}; a.d = {toJSON(){ return a }}; return a })()`,
		`(function(){ const a = {}; a.p = new Proxy({q: 1}, {get(){ return a }}); return a })()`,
		`{b:1, 2:2, 1:3, a:4}`, `JSON.parse('{"__proto__": 1, "a": 2}')`,
		`(function(){ const o = Object.create(null); o.x = 1; o.y = [2]; return o })()`,
		`Object.defineProperty({a: 1}, "hidden", {value: 2, enumerable: false})`,
		`{[Symbol("s")]: 1, a: 2}`, `{"\ud800": 1, b: 2}`, `{"\ufffd": 1}`, `{"a\"b\\c\u0000": "d"}`,
		`new (class { constructor(){ this.x = 1 } get y(){ return 2 } })()`,
		`[1,,3]`, `(function(){ const a = [1,2]; a.extra = 3; return a })()`, `new Array(3)`,
		`new Uint8Array([1,2])`, `new Map([[1,2]])`, `new Set([1])`, `/re/g`, `new Error("e")`,
		`(function(){ return arguments })(1, 2)`,
		`(function(){ let v = 1; for (let i = 0; i < 300; i++) v = [v, {k: v}].slice(0, 1); return v })()`,
		`(function(){ let v = {leaf: "x"}; for (let i = 0; i < 250; i++) v = {n: v}; return v })()`,
		`(function(){ Object.prototype.toJSON = function(k){ return "proto:" + k }; return {a: {b: 1}} })()`,
		`(function(){ Array.prototype.toJSON = function(){ return "arr" }; return {a: [1]} })()`,
		`(function(){ Object.defineProperty(Array.prototype, "length", {}); return [1, 2] })()`,
		`(function(){ const a = [1, 2, 3]; a.length = 1; return a })()`,
		`{a: [], b: {}, c: [[]], d: [{}]}`,
	}
	for _, src := range sources {
		t.Run(src, func(t *testing.T) {
			rt := newTestRealm(t)
			prog, err := goja.Compile("t.js", "(function(){ return "+src+" })", false)
			if err != nil {
				t.Fatal(err)
			}
			fn, err := rt.vm.RunProgram(prog)
			if err != nil {
				t.Fatal(err)
			}
			call, _ := goja.AssertFunction(fn)
			ours, builtin := stringifyBoth(t, rt, func() goja.Value {
				v, err := call(goja.Undefined())
				if err != nil {
					t.Fatal(err)
				}
				return v
			})
			if ours != builtin {
				t.Fatalf("writer:  %.400s\nbuilt-in: %.400s", ours, builtin)
			}
		})
	}
}

// The writer walks the values a result is made of itself: a test that
// cannot tell whether the built-in ran proves little, so this one counts.
func TestJSONWriterWalksPlainValues(t *testing.T) {
	rt := newTestRealm(t)
	calls := 0
	builtin := rt.json.builtin
	rt.json.builtin = func(this goja.Value, args ...goja.Value) (goja.Value, error) {
		calls++
		return builtin(this, args...)
	}
	v, err := rt.vm.RunString(`({body: {amount: 1000, card: {number: "4242424242424242", exp: "12/31"}, list: [1, "ü", null, true]}, headers: {"Content-Type": "application/json"}})`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := rt.stringify(goja.Undefined(), v)
	if err != nil || calls != 0 {
		t.Fatalf("stringify: %v, %v; the built-in ran %d times", out, err, calls)
	}
	if want := `{"body":{"amount":1000,"card":{"number":"4242424242424242","exp":"12/31"},"list":[1,"ü",null,true]},"headers":{"Content-Type":"application/json"}}`; out.String() != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
}

// randomJSON is JSON text of random structure and contents, strings with
// every kind of character among them.
func randomJSON(rng *rand.Rand, depth int) string {
	pieces := []string{`"a"`, `""`, `"ü😀"`, `"\u0001\n\"\\"`, `"\ud800"`, `"\udc00\ud800"`, `"\u2028"`, `"\ufffd"`,
		`0`, `-0`, `1.5`, `1e300`, `-12345678901234567890`, `true`, `false`, `null`}
	switch k := rng.IntN(8); {
	case depth > 4 || k < 4:
		return pieces[rng.IntN(len(pieces))]
	case k < 6:
		var b strings.Builder
		b.WriteByte('{')
		for i := rng.IntN(5); i > 0; i-- {
			if b.Len() > 1 {
				b.WriteByte(',')
			}
			keys := []string{`"k"`, `"1"`, `"0"`, `"__proto__"`, `"\ud800"`, `"x y"`, strconv.Quote(fmt.Sprint(rng.IntN(20)))}
			b.WriteString(keys[rng.IntN(len(keys))] + ":" + randomJSON(rng, depth+1))
		}
		b.WriteByte('}')
		return b.String()
	default:
		var parts []string
		for i := rng.IntN(5); i > 0; i-- {
			parts = append(parts, randomJSON(rng, depth+1))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
}

func TestJSONWriterRandomJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	rt := newTestRealm(t)
	for i := 0; i < 3000; i++ {
		text := randomJSON(rng, 0)
		checkWriterOnJSON(t, rt, text)
	}
}

func checkWriterOnJSON(t *testing.T, rt *jobRuntime, text string) {
	t.Helper()
	v, err := parseJSON(rt.vm, []byte(text))
	if err != nil {
		return // not JSON the parser takes: nothing to stringify
	}
	ours, builtin := stringifyBoth(t, rt, func() goja.Value { return v })
	if ours != builtin {
		t.Fatalf("JSON %q\nwriter:   %s\nbuilt-in: %s", text, ours, builtin)
	}
}

func FuzzJSONWriter(f *testing.F) {
	for _, s := range []string{`{"a":[1,"x",null]}`, `"\ud800"`, `{"__proto__":{"b":true}}`, `[[[[]]]]`, `{"\u0000":"\u001f"}`} {
		f.Add(s)
	}
	rt := newTestRealm(f)
	f.Fuzz(func(t *testing.T, text string) {
		checkWriterOnJSON(t, rt, text)
	})
}

// A realm keeps a small output buffer for its next run, never a large one.
func TestJSONWriterKeepsOnlySmallBuffers(t *testing.T) {
	rt := newTestRealm(t)
	for _, tc := range []struct {
		src  string
		kept bool
	}{
		{`({a: "x".repeat(1000)})`, true},
		{`({a: "x".repeat(200000)})`, false},
	} {
		v, err := rt.vm.RunString(tc.src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.stringify(goja.Undefined(), v); err != nil {
			t.Fatal(err)
		}
		if kept := rt.json.buf != nil; kept != tc.kept {
			t.Errorf("%s: buffer of cap %d kept: %v, want %v", tc.src, cap(rt.json.buf), kept, tc.kept)
		}
	}
}

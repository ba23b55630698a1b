package transforms

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dop251/goja"
)

// sameAsJSONParse compares two values deeply, as JavaScript sees them:
// types, prototypes, own keys in order (Reflect.ownKeys), property
// attributes and primitive values (Object.is, so -0 differs from 0).
const sameAsJSONParse = `(function same(a, b) {
	if (typeof a !== typeof b) return false;
	if (a === null || typeof a !== 'object') return Object.is(a, b);
	if (b === null || Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
	const ka = Reflect.ownKeys(a), kb = Reflect.ownKeys(b);
	if (ka.length !== kb.length) return false;
	for (let i = 0; i < ka.length; i++) {
		if (ka[i] !== kb[i]) return false;
		const da = Object.getOwnPropertyDescriptor(a, ka[i]), db = Object.getOwnPropertyDescriptor(b, kb[i]);
		if (da.writable !== db.writable || da.enumerable !== db.enumerable || da.configurable !== db.configurable) return false;
		if (!same(da.value, db.value)) return false;
	}
	return true;
})`

// compareWithJSONParse parses text with parseJSON and goja's JSON.parse
// and reports a difference: in the result, or in whether it failed.
func compareWithJSONParse(t *testing.T, vm *goja.Runtime, same goja.Callable, text string) {
	t.Helper()
	ours, ourErr := parseJSON(vm, []byte(text))
	parse, _ := goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("parse"))
	theirs, theirErr := parse(goja.Undefined(), vm.ToValue(text))
	switch {
	case (ourErr != nil) != (theirErr != nil):
		t.Errorf("%q: parseJSON error %v, JSON.parse error %v", text, ourErr, theirErr)
	case ourErr == nil:
		eq, err := same(goja.Undefined(), ours, theirs)
		if err != nil {
			t.Fatal(err)
		}
		if !eq.ToBoolean() {
			t.Errorf("%q: parseJSON and JSON.parse differ", text)
		}
	}
}

func newJSONCompare(t testing.TB) (*goja.Runtime, goja.Callable) {
	vm := goja.New()
	v, err := vm.RunString(sameAsJSONParse)
	if err != nil {
		t.Fatal(err)
	}
	same, _ := goja.AssertFunction(v)
	return vm, same
}

// TestParseJSONLikeJSONParse: parseJSON builds the values JSON.parse
// builds, including where JavaScript and Go disagree about JSON.
func TestParseJSONLikeJSONParse(t *testing.T) {
	vm, same := newJSONCompare(t)
	for _, text := range []string{
		`{}`, `[]`, `""`, `0`, `-0`, `-0.0`, `1`, `-1.5e10`, `1E-7`, `9007199254740993`, `123456789012345678901234567890`,
		`true`, `false`, `null`, ` { "a" : [ 1 , 2 , { } ] } `,
		`{"__proto__": {"polluted": 1}, "a": 1}`,                   // an own key, not the prototype
		`{"a": 1, "b": 2, "a": 3}`,                                 // first position, last value
		`{"b": 1, "2": 2, "1": 3, "a": 4}`,                         // integer keys first
		`{"toString": 1, "constructor": 2, "__defineGetter__": 3}`, // inherited, frozen or tamed names
		`"\u0041\n\t\"\\\/\b\f\r"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00\ud83d"`, `"\ud83d\u0041"`, `"\ud83dx"`,
		"\"caf\u00e9 \u2603\"", "\"\xff\xfe bad utf-8 \xc3\"", "\"\xed\xa0\x80 surrogate in utf-8\"",
		`{"body":{"card":{"number":"4242424242424242"}},"headers":{"Content-Type":"application/json"}}`,
		// Refused by both.
		``, ` `, `{`, `[1,]`, `{"a":1,}`, `01`, `1.`, `.5`, `+1`, `1e`, `-`, `"\x"`, `"\u12"`, `tru`, `nul`, `{"a" 1}`,
		`[1 2]`, `"a`, "\"\x01\"", `{} {}`, `1e400`, `-1e400`, `NaN`, `'a'`, `{a: 1}`,
	} {
		compareWithJSONParse(t, vm, same, text)
	}
}

// TestParseJSONDepth: nesting beyond maxJSONDepth is an error, not a Go
// stack overflow; at the limit it parses.
func TestParseJSONDepth(t *testing.T) {
	vm := goja.New()
	ok := strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth)
	if _, err := parseJSON(vm, []byte(ok)); err != nil {
		t.Errorf("depth %d: %v", maxJSONDepth, err)
	}
	deep := "[" + ok + "]"
	if _, err := parseJSON(vm, []byte(deep)); err != errJSONDepth {
		t.Errorf("depth %d: %v, want errJSONDepth", maxJSONDepth+1, err)
	}
	if _, err := parseJSON(vm, []byte(strings.Repeat(`{"a":`, 1e6))); err != errJSONDepth {
		t.Errorf("a million open objects: %v, want errJSONDepth", err)
	}
}

// FuzzParseJSON: parseJSON refuses whatever encoding/json refuses (it is
// the only check of job args), and on any input encoding/json accepts,
// parseJSON and JSON.parse agree.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x",true,null,{"b":-0}]}`, `"\ud800\udc00"`, `{"__proto__":1}`, "\"\xff\"", `[1e400]`,
		``, ` `, `{`, `}`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `01`, `-`, `.5`, `1.`, `1e`, `+1`, `0x1`, `tru`, `nul`, `"\u12"`,
		`"\x"`, "\"\x01\"", `"abc`, `[1 2]`, `{"a":1}{}`, `[] x`, `'a'`, `NaN`, `Infinity`, "\"\u2028\"", `{"a":[}]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 1<<16 {
			return
		}
		if !json.Valid([]byte(text)) {
			if _, err := parseJSON(goja.New(), []byte(text)); err == nil {
				t.Fatalf("parseJSON accepted %q, which is not JSON", text)
			}
			return
		}
		if jsonDepth(text) > maxJSONDepth {
			return
		}
		vm, same := newJSONCompare(t)
		compareWithJSONParse(t, vm, same, text)
	})
}

// BenchmarkParseJSON compares parseJSON with goja's JSON.parse on the args
// of a proxy request transform.
func BenchmarkParseJSON(b *testing.B) {
	text := []byte(`{"body":{"number":"4242424242424242","amount":1000,"items":[{"sku":"a-1","qty":2},{"sku":"b-2","qty":1}]},` +
		`"headers":{"Content-Type":"application/json","Accept":"*/*","User-Agent":"bench/1.0","X-Request-Id":"5f0c6c1e"},"method":"POST","path":"/charge","query":""}`)
	vm := goja.New()
	b.Run("parseJSON", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := parseJSON(vm, text); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("JSON.parse", func(b *testing.B) {
		parse, _ := goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("parse"))
		s := vm.ToValue(string(text))
		for i := 0; i < b.N; i++ {
			if _, err := parse(goja.Undefined(), s); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzJSONMembers: for any valid JSON object, jsonMembers finds the
// members encoding/json finds (the last of a repeated key wins), with the
// same raw values.
func FuzzJSONMembers(f *testing.F) {
	for _, s := range []string{`{}`, ` { "a" : [1, {"b": "}"}] , "a\u0062": "x\"y", "c": -1.5e3 , "a": null } `, `{"\ud800":1}`, "{\"\xff\":true}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var want map[string]json.RawMessage
		if jsonType([]byte(text)) != "object" || !json.Valid([]byte(text)) || json.Unmarshal([]byte(text), &want) != nil {
			return
		}
		got := map[string]json.RawMessage{}
		if err := jsonMembers([]byte(text), func(k string, v []byte) { got[k] = v }); err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d members, want %d", text, len(got), len(want))
		}
		for k, v := range want {
			if string(got[k]) != string(v) {
				t.Errorf("%q: member %q = %s, want %s", text, k, got[k], v)
			}
		}
	})
}

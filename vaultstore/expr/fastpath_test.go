package expr

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

func TestParseFastPath(t *testing.T) {
	tests := []struct {
		src    string
		path   []string
		filter bool
		args   []any
	}{
		{src: ` data.number `, path: []string{"data", "number"}},
		{src: `data`, path: []string{"data"}},
		{src: `data.a.b_c.D9`, path: []string{"data", "a", "b_c", "D9"}},
		{src: ` data.number | reveal_last: 4 `, path: []string{"data", "number"}, filter: true, args: []any{4}},
		{src: `data|reveal:7,4,'#',"-"`, path: []string{"data"}, filter: true, args: []any{7, 4, "#", "-"}},
		{src: `detokenized_value | json: '$.number'`, path: []string{"detokenized_value"}, filter: true, args: []any{"$.number"}},
		{src: `data | last4`, path: []string{"data"}, filter: true},
		// left to the engine
		{src: `data.size`},
		{src: `data.first`},
		{src: `data.items.last`},
		{src: `true`},
		{src: `nil`},
		{src: `data.a-b`},
		{src: `data.ok?`},
		{src: `data["number"]`},
		{src: `data[0]`},
		{src: `data.`},
		{src: `.data`},
		{src: `9lives`},
		{src: `data | upcase`},
		{src: `data | reveal_last: 4 | last4`},
		{src: `data | reveal_last: -4`},
		{src: `data | reveal_last: 4.5`},
		{src: `data | reveal_last: 1234567890`},
		{src: `data | reveal_last: x`},
		{src: `data | pad_left: 5, 'a\'b'`},
		{src: `data | pad_left: 5, '{{'`},
		{src: `data | pad_left: 5,`},
		{src: `data | pad_left: 'x`},
		{src: `data == 1`},
		{src: `data and x`},
		{src: `(1..3)`},
		{src: `"literal"`},
		{src: ``},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			fp := parseFastPath(tt.src)
			if tt.path == nil {
				if fp != nil {
					t.Fatalf("want no fast path, got %+v", fp)
				}
				return
			}
			if fp == nil {
				t.Fatal("want a fast path, got none")
			}
			if !reflect.DeepEqual(fp.path, tt.path) || (fp.filter != nil) != tt.filter || !reflect.DeepEqual(fp.args, tt.args) {
				t.Fatalf("got path %q, filter %v, args %#v; want %q, %v, %#v", fp.path, fp.filter != nil, fp.args, tt.path, tt.filter, tt.args)
			}
		})
	}
}

// checkFastPath evaluates src over bindings by the fast path and by the
// engine, and fails unless they agree: the same value when the fast path
// answers, and no answer from it where the engine fails. It reports
// whether the fast path answered.
func checkFastPath(t *testing.T, src string, bindings map[string]any) bool {
	t.Helper()
	e, err := Compile(src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	if e.fast == nil {
		return false
	}
	want, wantErr := e.eval(toEngineBindings(bindings), std)
	got, ok := e.fast.eval(bindings)
	switch {
	case wantErr != nil && ok:
		t.Fatalf("%s over %s: the engine fails (%v), the fast path gives %#v", src, dump(bindings), wantErr, got)
	case ok && !reflect.DeepEqual(got, want):
		t.Fatalf("%s over %s: fast path %#v, engine %#v", src, dump(bindings), got, want)
	}
	// Evaluate, which takes the fast path, must give what the engine gives
	out, err := e.Evaluate(bindings)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(out, want) {
		t.Fatalf("%s over %s: Evaluate gives %#v, %v; the engine %#v, %v", src, dump(bindings), out, err, want, wantErr)
	}
	return ok
}

func dump(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestFastPathMatchesEngine(t *testing.T) {
	data := testjson.Decode(t, `{
		"number": "4242424242424242", "dashed": "3622-7206-2716-5567", "short": "42", "empty": "",
		"unicode": "ñandú-42-ü", "expiration_month": 12, "expiration_year": 2030, "big": 12345678901234567890,
		"f": 8.90, "e": 1e3, "neg": -0, "t": true, "z": null,
		"o": {"a": {"b": "deep"}, "n": 7, "list": [1, "x", null]}, "arr": ["a", "b"]}`)
	bindings := map[string]any{"data": data, "s": "4111-1111-1111-1111", "n": json.Number("5")}
	tests := []struct {
		src  string
		fast bool // the fast path must answer
	}{
		{`{{ data.number | reveal_last: 4 }}`, true},
		{`{{ data.dashed | reveal_last: 4, '#' }}`, true},
		{`{{ data.short | reveal_last: 4 }}`, true},
		{`{{ data.unicode | reveal_last: 2 }}`, true},
		{`{{ data.expiration_month }}`, true},
		{`{{ data.expiration_year }}`, true},
		{`{{ data.big }}`, true},
		{`{{ data.f }}`, true},
		{`{{ data.e }}`, true},
		{`{{ data.neg }}`, true},
		{`{{ data.t }}`, true},
		{`{{ data.z }}`, true},
		{`{{ data.missing }}`, true},
		{`{{ data.o }}`, true},
		{`{{ data.o.a.b }}`, true},
		{`{{ data.arr }}`, true},
		{`{{- data.number -}}`, true},
		{`  {{ data.number }}  `, true},
		{`{{ data }}`, true},
		{`{{ s | reveal: 7, 4, '#', "-" }}`, true},
		{`{{ s | last4 }}`, true},
		{`{{ n | pad_left: 4, '0' }}`, true},
		{`{{ data.expiration_month | pad_left: 4, '0' }}`, true},
		{`{{ data.number | pad_right: 20, '*' }}`, true},
		{`{{ data.big | to_string }}`, true},
		{`{{ data | json: '$.number' }}`, true},
		{`{{ data | json: '$.o.list' }}`, true},
		{`{{ data.missing | reveal_last: 4 }}`, true},
		// the engine answers: its own property rules, or a filter error
		{`{{ data.number.size }}`, false},
		{`{{ data.size }}`, false},
		{`{{ data.o.size }}`, false},
		{`{{ data.o.list.first }}`, false},
		{`{{ data.missing.deeper }}`, false},
		{`{{ data.number.x }}`, false},
		{`{{ data.o | reveal_last: 4 }}`, false},
		{`{{ data.number | reveal_last }}`, false},
		{`{{ data.number | pad_left: 99999999, '0' }}`, false},
		{`{{ data | json: '$[' }}`, false},
		{`{{ data | json: '$.missing' }}`, false},
		{`{{ data.number | pad_right: 20 }}`, false},
	}
	for _, tt := range tests {
		if got := checkFastPath(t, tt.src, bindings); got != tt.fast {
			t.Errorf("%s: the fast path answered: %v, want %v", tt.src, got, tt.fast)
		}
	}
}

// TestFastPathRandom compares the fast path with the engine over random
// data, paths and filter calls.
func TestFastPathRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	words := []string{"number", "a", "b", "n", "x", "list", "size"}
	scalars := []any{"4242424242424242", "3622-7206-2716-5567", "", "a", "ñandú", "12/31", json.Number("0"),
		json.Number("-0"), json.Number("1.50"), json.Number("1e3"), json.Number("12345678901234567890"),
		json.Number("42"), json.Number("-7.25"), true, false, nil}
	var value func(depth int) any
	value = func(depth int) any {
		switch k := rng.IntN(10); {
		case depth == 0 || k < 4 && depth < 3:
			m := map[string]any{}
			for i := rng.IntN(4); i >= 0; i-- {
				m[words[rng.IntN(len(words))]] = value(depth + 1)
			}
			return m
		case k < 7 || depth >= 3:
			return scalars[rng.IntN(len(scalars))]
		default:
			a := make([]any, rng.IntN(3))
			for i := range a {
				a[i] = value(depth + 1)
			}
			return a
		}
	}
	calls := []string{"", " | reveal_last: 4", " | reveal_last: 0", " | reveal_last: 2, '*'", " | reveal: 2, 3",
		" | reveal: 6, 4, '#', \"-\"", " | last4", " | pad_left: 6, '0'", " | pad_right: 3, '.'", " | to_string",
		" | json: '$.number'", " | json: '$..n'", " | json: '$.list[0]'", " | reveal_last: 'x'", " | pad_left: 5, 'ab'"}
	answered := 0
	for i := 0; i < 5000; i++ {
		path := "data"
		for j := rng.IntN(3); j > 0; j-- {
			path += "." + words[rng.IntN(len(words)-1)] // size is never in a fast path
		}
		src := "{{ " + path + calls[rng.IntN(len(calls))] + " }}"
		if checkFastPath(t, src, map[string]any{"data": value(0)}) {
			answered++
		}
	}
	if answered < 1000 {
		t.Fatalf("the fast path answered %d of 5000 evaluations; the comparison proves little", answered)
	}
}

func FuzzFastPath(f *testing.F) {
	f.Add(`{{ data.number | reveal_last: 4 }}`, cardJSON)
	f.Add(`{{ data | reveal: 7, 4, '#', "-" }}`, `"3622-7206-2716-5567"`)
	f.Add(`{{ data.o.a }}`, `{"o": {"a": [1, 2.50, {"b": null}]}}`)
	f.Add(`{{ data | json: '$.number' }}`, cardJSON)
	f.Add(`{{ data.x | pad_left: 8, '0' }}`, `{"x": 12345678901234567890}`)
	f.Fuzz(func(t *testing.T, src, data string) {
		e, err := Compile(src)
		if err != nil || e.fast == nil {
			return
		}
		checkFastPath(t, src, map[string]any{"data": fuzzData(data)})
	})
}

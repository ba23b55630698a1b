package expr

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// FuzzCompileEvaluate compiles arbitrary sources and evaluates them over
// arbitrary JSON data: it must never panic, and every error must be an
// *Error.
func FuzzCompileEvaluate(f *testing.F) {
	for _, s := range []struct{ src, data string }{
		{`{{ data.number | reveal_last: 4 }}`, cardJSON},
		{`{{ data | reveal: 7, 4, '#', "-" }}`, `"3622-7206-2716-5567"`},
		{`{{ data | json: '$.book[?(@.price < 10)].title' }}`, storeJSON},
		{`{{ data | json: '$..author' }}`, storeJSON},
		{`{{ data | stringify }}`, `{"a": [1, 2.5, null, true]}`},
		{`{{ data.email | split: '@' | first | alias_preserve_length }}@{{ data.email | split: '@' | last }}`, `{"email": "a@b.c"}`},
		{`{{ data | alias_preserve_format: 0, 4 }}`, `"4242424242424242"`},
		{`{% if data.n > 5 %}{{ data.n | plus: 1 }}{% else %}{{ data.n | to_string }}{% endif %}`, `{"n": 12345678901234567890}`},
		{`{% for x in data %}{{ x | pad_left: 5, '0' }}{% endfor %}`, `[1, "2", 3.5]`},
		{`{{ data | to_number | to_boolean }}`, `"42"`},
		{`{{ data | slice: 2, 3 | last4 | pad_right: 8, '*' }}`, `"abcdefghij"`},
		{`{% assign x = data | json: '$[0]' %}{{ x }}`, `[{"a": 1}]`},
		{`{{ data.a.b.c }}`, `{"a": {"b": {"c": "d"}}}`},
		{`{% raw %}{{ x }}{% endraw %}{% comment %}{% endcomment %}`, `null`},
		{`{% for i in (1..3) %}{% tablerow j in data cols: 2 %}{% cycle 'a', 'b' %}{{ j }}{% endtablerow %}{% endfor %}`, `[1, 2, 3]`},
		{`{% capture c %}{{ data | join: '-' }}{% endcapture %}{{ c | replace: '-', '+' | size }}`, `["a", "b"]`},
		{`{% case data %}{% when 1 %}one{% else %}{{ data | uniq | sort | first }}{% endcase %}`, `[3, 1, 3]`},
		{`{{`, `{}`},
		{`{% endif %}`, `{}`},
	} {
		f.Add(s.src, s.data)
	}
	f.Fuzz(func(t *testing.T, src, data string) {
		// A hang is a failure too (the work budget must stop every loop);
		// the limit is generous because CI machines are shared.
		tm := time.AfterFunc(30*time.Second, func() { panic(fmt.Sprintf("evaluation hung: %q %q", src, data)) })
		defer tm.Stop()
		e, err := Compile(src)
		if err != nil {
			var xe *Error
			if !errors.As(err, &xe) {
				t.Fatalf("Compile error is %T", err)
			}
			return
		}
		v := fuzzData(data)
		if _, err := e.Evaluate(map[string]any{"data": v}); err != nil {
			var xe *Error
			if !errors.As(err, &xe) {
				t.Fatalf("Evaluate error is %T", err)
			}
		}
		if _, err := EvaluateJSON(map[string]any{"k": []any{src, json.Number("1")}}, map[string]any{"data": v}); err != nil {
			var xe *Error
			if !errors.As(err, &xe) {
				t.Fatalf("EvaluateJSON error is %T", err)
			}
		}
	})
}

// FuzzFilters calls every vault filter with fuzzed input and arguments: no
// filter may panic, and every error must be an *Error.
func FuzzFilters(f *testing.F) {
	f.Add("3622-7206-2716-5567", "7", "4", "#", "-")
	f.Add("4242424242424242", "4", "", "X", "")
	f.Add(`{"a": [1, {"b": 2}]}`, "$.a[1].b", "$..b", "$.a[?(@.b > 1)]", "$['a'][0]")
	f.Add("1234", "6", "0", "", "")
	f.Add("12345678901234567890", "-1", "99999999999", "é", "ab")
	f.Add("true", "$[::-1]", "$[?(!(@ == null) || @.x <= 'y')]", "$.*", "")
	f.Fuzz(func(t *testing.T, in, a1, a2, a3, a4 string) {
		inputs := []any{in, nil, json.Number("42"), int64(7), 8.5, true}
		d := json.NewDecoder(strings.NewReader(in))
		d.UseNumber()
		var v any
		if d.Decode(&v) == nil {
			inputs = append(inputs, v, toEngine(v, 0))
		}
		argSets := [][]any{
			nil,
			{a1},
			{a1, a2},
			{a1, a2, a3, a4},
			{int64(len(a1)), a3},
			{int64(len(a1) % 8), int64(len(a2) % 8), a3, a4},
			{json.Number(a1), nil, 2.0},
		}
		reg := map[string]filterFunc{
			"reveal_last": revealLast, "reveal": reveal, "last4": last4,
			"pad_left": padFilter("pad_left", true), "pad_right": padFilter("pad_right", false),
			"json": jsonFilter, "stringify": stringifyFilter("stringify"),
			"alias_preserve_format": aliasPreserveFormat, "alias_preserve_length": aliasPreserveLength,
			"to_number": toNumber, "to_boolean": toBoolean, "to_string": toString,
		}
		for name, fn := range reg {
			for _, x := range inputs {
				for _, args := range argSets {
					if _, err := fn(x, args...); err != nil {
						var xe *Error
						if !errors.As(err, &xe) {
							t.Fatalf("%s: error is %T", name, err)
						}
					}
				}
			}
		}
		for _, p := range []string{a1, a2, a3, a4} {
			if path, err := compileJSONPath(p); err == nil {
				for _, x := range inputs {
					_, _ = path.eval(x)
				}
			}
		}
	})
}

// fuzzData is a fuzzer's data string as an expression binds it: decoded
// JSON (numbers exact) when it is JSON, else the string itself.
func fuzzData(data string) any {
	d := json.NewDecoder(strings.NewReader(data))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return data
	}
	return v
}

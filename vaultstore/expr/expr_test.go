package expr

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/osteele/liquid"
	"github.com/tokenvault/tokenvault/internal/testjson"
)

func evalSrc(src string, bindings map[string]any) (any, error) {
	e, err := Compile(src)
	if err != nil {
		return nil, err
	}
	return e.Evaluate(bindings)
}

func mustEval(t testing.TB, src string, bindings map[string]any) any {
	t.Helper()
	v, err := evalSrc(src, bindings)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return v
}

const cardJSON = `{"number": "4242424242424242", "expiration_month": 12, "expiration_year": 2030, "cvc": "123"}`

func TestEvaluate(t *testing.T) {
	data := testjson.Decode(t, `{
		"card": "4242424242424242", "n": 12345678901234567890, "i": 42, "f": 8.99, "f0": 8.90, "e": 1e3,
		"t": true, "z": null, "o": {"a": 1, "b": [true, "x"]}, "arr": [1, "x"], "email": "jane@example.com"}`)
	b := map[string]any{"data": data}
	tests := []struct {
		name, src string
		want      any
	}{
		{"string", `{{ data.card }}`, "4242424242424242"},
		{"surrounding whitespace", " \n {{ data.card }}\t ", "4242424242424242"},
		{"trim markers", ` {{- data.i -}} `, json.Number("42")},
		{"big integer exact", `{{ data.n }}`, json.Number("12345678901234567890")},
		{"big integer rendered exact", `n={{ data.n }}`, "n=12345678901234567890"},
		{"float", `{{ data.f }}`, json.Number("8.99")},
		{"float trailing zero kept", `{{ data.f0 }}`, json.Number("8.90")},
		{"float trailing zero rendered", `{{ data.f0 }}!`, "8.90!"},
		{"exponent kept", `{{ data.e }}`, json.Number("1e3")},
		{"bool", `{{ data.t }}`, true},
		{"null", `{{ data.z }}`, nil},
		{"missing", `{{ data.nope }}`, nil},
		{"missing rendered", `[{{ data.nope }}]`, "[]"},
		{"object", `{{ data.o }}`, map[string]any{"a": json.Number("1"), "b": []any{true, "x"}}},
		{"array", `{{ data.arr }}`, []any{json.Number("1"), "x"}},
		{"object rendered as JSON", `o={{ data.o }}`, `o={"a":1,"b":[true,"x"]}`},
		{"whole data", `{{ data.o.b }}`, []any{true, "x"}},
		{"literal", `{{ 'abc' }}`, "abc"},
		{"literal number", `{{ 7 }}`, json.Number("7")},
		{"split native", `{{ data.email | split: '@' }}`, []any{"jane", "example.com"}},
		{"arithmetic", `{{ data.i | plus: 1 }}`, json.Number("43")},
		{"arithmetic float", `{{ data.f | times: 2 }}`, json.Number("17.98")},
		{"concatenation", `{{ data.card | slice: 0, 4 }}-{{ data.card | last4 }}`, "4242-4242"},
		{"two outputs", `{{ data.i }}{{ data.i }}`, "4242"},
		{"plain text", `no expression`, "no expression"},
		{"empty", ``, ""},
		{"numeric comparison", `{% if data.i > 9 %}big{% else %}small{% endif %}`, "big"},
		{"float comparison", `{% if data.f < 9 %}lt{% endif %}`, "lt"},
		{"equality", `{% if data.i == 42 %}eq{% endif %}`, "eq"},
		{"for loop", `{% for x in data.arr %}{{ x }},{% endfor %}`, "1,x,"},
		{"assign", `{% assign l = data.card | last4 %}{{ l }}`, "4242"},
		{"capture", `{% capture c %}{{ data.i }}{% endcapture %}{{ c | append: '!' }}`, "42!"},
		{"case", `{% case data.i %}{% when 42 %}yes{% else %}no{% endcase %}`, "yes"},
		{"unless", `{% unless data.z %}none{% endunless %}`, "none"},
		{"raw", `{% raw %}{{ data.card }}{% endraw %}`, "{{ data.card }}"},
		{"comment", `{% comment %}{{ x | no_such_filter }}{% endcomment %}ok`, "ok"},
		{"upcase", `{{ "abc" | upcase }}`, "ABC"},
		{"bracket access", `{{ data["card"] | last4 }}`, "4242"},
		{"size", `{{ data.card.size }}`, json.Number("16")},
		{"range", `{{ (1..3) }}`, []any{json.Number("1"), json.Number("2"), json.Number("3")}},
		{"range rendered", `{{ (1..3) }}.`, "123."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := mustEval(t, tc.src, b)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("%q\n got %#v (%T)\nwant %#v (%T)", tc.src, got, got, tc.want, tc.want)
			}
		})
	}
}

// TestDetokenizationLookup shows the form detokenization rewrites token
// references into: ids that are not Liquid identifiers are looked up by
// string key, and a whole-string reference embeds the object.
func TestDetokenizationLookup(t *testing.T) {
	b := map[string]any{"tokens": map[string]any{"3f2504e0-4f89-11d3-9a0c-0305e82c3301": testjson.Decode(t, cardJSON)}}
	got, err := EvaluateJSON(testjson.Decode(t, `{"card": "{{ tokens['3f2504e0-4f89-11d3-9a0c-0305e82c3301'] }}",
		"n": "{{ tokens['3f2504e0-4f89-11d3-9a0c-0305e82c3301'] | json: '$.number' }}"}`), b)
	if err != nil {
		t.Fatal(err)
	}
	want := testjson.Decode(t, `{"card": `+cardJSON+`, "n": "4242424242424242"}`)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v", got)
	}
}

func TestEvaluateDoesNotMutateBindings(t *testing.T) {
	data := testjson.Decode(t, `{"n": 1, "o": {"m": 2}}`)
	b := map[string]any{"data": data}
	mustEval(t, `{% assign data = 5 %}{% assign x = 1 %}{{ data }}`, b)
	want := map[string]any{"data": testjson.Decode(t, `{"n": 1, "o": {"m": 2}}`)}
	if !reflect.DeepEqual(b, want) {
		t.Fatalf("bindings changed: %#v", b)
	}
	out := mustEval(t, `{{ data.o }}`, b).(map[string]any)
	out["m"] = "changed"
	if !reflect.DeepEqual(b, want) {
		t.Fatal("result aliases the bindings")
	}
}

func TestEvaluateJSON(t *testing.T) {
	b := map[string]any{"data": testjson.Decode(t, cardJSON)}
	tests := []struct {
		name           string
		template, want string
	}{
		{"card mask",
			`{"number": "{{ data.number | reveal_last: 4 }}", "expiration_month": "{{ data.expiration_month }}", "expiration_year": "{{ data.expiration_year }}"}`,
			`{"number": "XXXXXXXXXXXX4242", "expiration_month": 12, "expiration_year": 2030}`},
		{"string mask", `"{{ data.number | reveal: 6, 4 }}"`, `"424242XXXXXX4242"`},
		{"object embedded", `{"card": "{{ data }}", "n": 1}`,
			`{"card": {"number": "4242424242424242", "expiration_month": 12, "expiration_year": 2030, "cvc": "123"}, "n": 1}`},
		{"object in text is JSON text", `{"s": "card: {{ data.expiration_month }}/{{ data.expiration_year }}"}`, `{"s": "card: 12/2030"}`},
		{"literals kept", `{"a": [1, 2.5, true, null, "plain", "{ not } an expression"], "b": {}}`,
			`{"a": [1, 2.5, true, null, "plain", "{ not } an expression"], "b": {}}`},
		{"arrays", `["{{ data.cvc }}", ["{{ data.cvc | to_number }}"]]`, `["123", [123]]`},
		{"missing is null", `{"x": "{{ data.nope }}"}`, `{"x": null}`},
		{"scalar", `7`, `7`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EvaluateJSON(testjson.Decode(t, tc.template), b)
			if err != nil {
				t.Fatal(err)
			}
			if want := testjson.Decode(t, tc.want); !reflect.DeepEqual(got, want) {
				t.Fatalf("got  %#v\nwant %#v", got, want)
			}
		})
	}
}

func TestEvaluateJSONDepth(t *testing.T) {
	nest := func(n int) any {
		var v any = "{{ data }}"
		for i := range n {
			if i%2 == 0 {
				v = []any{v}
			} else {
				v = map[string]any{"k": v}
			}
		}
		return v
	}
	if _, err := EvaluateJSON(nest(maxJSONDepth), map[string]any{"data": "x"}); err != nil {
		t.Fatalf("depth %d: %v", maxJSONDepth, err)
	}
	_, err := EvaluateJSON(nest(maxJSONDepth+1), map[string]any{"data": "x"})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("depth %d: want *Error, got %v", maxJSONDepth+1, err)
	}
	// Far deeper than any Go stack would tolerate unbounded recursion for.
	if _, err := EvaluateJSON(nest(1_000_000), nil); err == nil {
		t.Fatal("want error")
	}
}

func TestEvaluateJSONError(t *testing.T) {
	b := map[string]any{"data": testjson.Decode(t, cardJSON)}
	_, err := EvaluateJSON(testjson.Decode(t, `{"a": ["{{ data.number | nope }}"]}`), b)
	if err == nil || err.Error() != `invalid expression: unknown filter "nope"` {
		t.Fatalf("got %v", err)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"unknown filter", `{{ data | foo }}`, `invalid expression: unknown filter "foo"`},
		{"unknown filter later", `{{ data | upcase | foo-bar }}`, `invalid expression: unknown filter "foo-bar"`},
		{"unknown filter in tag", `{% assign x = data | nope %}`, `invalid expression: unknown filter "nope"`},
		{"pipe in string is not a filter", `{{ 'a | nope' | upcase }}`, ""},
		{"syntax error", `{{ data. }}`, `invalid expression: syntax error in "data." in {{ data. }}`},
		{"unterminated object", `{{ data`, `invalid expression: unterminated {{ or {% in "{{ data"`},
		{"unterminated tag", `x {% if`, `invalid expression: unterminated {{ or {% in "x {% if"`},
		{"unknown tag", `{% frobnicate %}`, `invalid expression: undefined tag "frobnicate" in {% frobnicate %}`},
		{"unclosed block", `{% if data %}x`, `invalid expression: unterminated "if" block in {% if data %}`},
		{"stray end tag", `{% endif %}`, `invalid expression: endif not inside  in {% endif %}`},
		{"include disabled", `{% include '/etc/passwd' %}`, `invalid expression: the include tag is not supported in {% include '/etc/passwd' %}`},
		{"invalid utf8", "{{ \xff }}", `invalid expression: source is not valid UTF-8`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.src)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("%q: %v", tc.src, err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%q: want *Error, got %v", tc.src, err)
			}
			if e.Error() != tc.want {
				t.Fatalf("%q: got %q, want %q", tc.src, e.Error(), tc.want)
			}
		})
	}
}

// TestErrorsNeverLeakData is the security rule: failing expressions over
// sensitive data produce errors without the data.
func TestErrorsNeverLeakData(t *testing.T) {
	const secret = "4242424242424242"
	data := testjson.Decode(t, `{"card": "4242424242424242", "num": 4242424242424242, "cvc": "4242424242424242",
		"o": {"number": "4242424242424242", "list": ["4242424242424242", 4242424242424242]}, "arr": ["4242424242424242"]}`)
	b := map[string]any{"data": data, "4242424242424242": data}
	srcs := []string{
		`{{ data.card | date: '%Y' | divided_by: 0 }}`,
		`{{ data.card | truncate: data.card }}`,
		`{{ data.card | slice: data.card }}`,
		`{{ data.num | slice: data.num }}`,
		`{{ data.card | plus: data.card | divided_by: 0 }}`,
		`{{ data.card | times: data.o }}`,
		`{{ data.card | divided_by: 0 }}`,
		`{{ data.card | modulo: 0 | stringify | to_number | json: '$' | reveal_last: -1 }}`,
		`{{ data.card | reveal_last: data.card }}`,
		`{{ data.card | reveal_last: 4, data.card }}`,
		`{{ data.card | reveal: 1, 2, data.card }}`,
		`{{ data.card | reveal: data.card }}`,
		`{{ data.card | pad_left: data.card, '0' }}`,
		`{{ data.card | pad_left: 20, data.card }}`,
		`{{ data.card | alias_preserve_format: data.card }}`,
		`{{ data.card | alias_preserve_length: 1, data.card }}`,
		`{{ data.o | reveal_last: 4 }}`,
		`{{ data.o | last4 }}`,
		`{{ data.card | to_boolean }}`,
		`{{ data.o | to_number }}`,
		`{{ data.card | json: data.card }}`,
		`{{ data.card | json: '$.x' }}`,
		`{{ data.o | json: '$..*' }}`,
		`{{ data.o | json: '$.list[?(@ == 4242424242424242)].x' }}`,
		`{{ data | json: data.o.number }}`,
		`{{ data.card | upcase: data.card, data.card }}`,
		`{{ data.card | split: data.card | join: data.card | date: data.card | nope_filter_is_compile_error }}`,
		`{% for x in data.arr limit: data.card %}{{ x }}{% endfor %}`,
		`{% for x in data.arr offset: data.card %}{{ x }}{% endfor %}`,
		`{% tablerow x in data.arr cols: data.card %}{{ x }}{% endtablerow %}`,
		`{% cycle data.card %}`,
		`{{ data.card | sort: data.card | map: data.card }}`,
		`{{ data.o.list | sort }}`,
		`{{ data.card | url_decode | divided_by: data.card }}`,
		`{{ data.card | date: data.card | abs | divided_by: 0 }}`,
	}
	for _, src := range srcs {
		t.Run(src, func(t *testing.T) {
			_, err := evalSrc(src, b)
			if err == nil {
				t.Skip("no error for this input")
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("want *Error, got %T %v", err, err)
			}
			for _, leak := range []string{secret, "424242424242"} {
				if strings.Contains(err.Error(), leak) {
					t.Fatalf("error leaks data: %q", err.Error())
				}
			}
		})
	}
	// At least the typical leaking paths must actually be errors.
	for _, src := range srcs[:3] {
		if _, err := evalSrc(src, b); err == nil {
			t.Errorf("%s: want an error", src)
		}
	}
}

func TestPanicsBecomeErrors(t *testing.T) {
	b := map[string]any{"data": testjson.Decode(t, `{"s": "abc", "n": 99999999999, "card": "4242424242424242"}`)}
	tests := []struct{ src, want string }{
		// The engine's slice filter panics (index out of range, with the
		// bound value in the panic message).
		{`{{ data.s | slice: data.n }}`, "expression evaluation failed"},
		{`{{ data.card | slice: data.card }}`, "expression evaluation failed"},
		{`{{ data.s | slice: 1, -5 }}`, "expression evaluation failed"},
		{`{{ data.n | uniq }}`, "expression evaluation failed"},
		{`{% endfor %}{% if %}`, "invalid expression: endfor not inside  in {% endfor %}"},
		{`{% for %}{% endfor %}`, `invalid expression: syntax error in "%loop " in {% for %}`},
	}
	for _, tc := range tests {
		t.Run(tc.src, func(t *testing.T) {
			_, err := evalSrc(tc.src, b)
			var e *Error
			if !errors.As(err, &e) || e.Error() != tc.want {
				t.Fatalf("got %T %v, want %q", err, err, tc.want)
			}
		})
	}
}

// TestResourceLimits checks the guards that keep a hostile expression from
// exhausting memory or CPU (Liquid itself has no limits).
func TestResourceLimits(t *testing.T) {
	kb := strings.Repeat("x", 2048)
	b := map[string]any{"data": kb, "n": json.Number("1000000000")}
	doubling := func(step string) string {
		return strings.Repeat(step, 64)
	}
	tests := []struct{ name, src, want string }{
		{"output budget", `{% for i in (1..99999) %}{{ data }}{% endfor %}`, "expression output exceeds"},
		{"captured output budget", `{% capture c %}{% for i in (1..99999) %}{{ data }}{% endfor %}{% endcapture %}`, "expression exceeds its work limit"},
		{"empty nested loops", `{% for a in (1..99999) %}{% for b in (1..99999) %}{% endfor %}{% endfor %}`, "expression exceeds its work limit"},
		{"loop text", `{% capture c %}{% for a in (1..99999) %}` + kb + `{% endfor %}{% endcapture %}`, "expression exceeds its work limit"},
		{"tablerow", `{% tablerow a in (1..99999) %}{% tablerow b in (1..99999) %}{% endtablerow %}{% endtablerow %}`, "exceeds"},
		{"capture doubling", `{% capture x %}ab{% endcapture %}` + doubling(`{% capture x %}{{ x }}{{ x }}{% endcapture %}`), "expression exceeds its work limit"},
		{"append doubling", `{% assign x = 'ab' %}` + doubling(`{% assign x = x | append: x %}`), "append: result too large"},
		{"concat doubling", `{% assign x = data | split: '' %}` + doubling(`{% assign x = x | concat: x %}`), "concat: result too large"},
		{"append doubling in loop", `{% assign x = 'ab' %}{% for i in (1..64) %}{% assign x = x | append: x %}{% endfor %}`, "append: result too large"},
		{"replace blow-up", `{{ data | replace: '', data }}`, "replace: result too large"},
		{"join blow-up", `{{ data | split: '' | join: data }}`, "join: result too large"},
		{"single output replace", `{{ data | replace: 'x', data }}`, "replace: result too large"},
		{"variable range", `{% for i in (1..n) %}{% endfor %}`, "invalid expression: ranges must have literal integer bounds"},
		{"huge range", `{{ (1..100000000000) | join }}`, "invalid expression: ranges are limited to 100000 values"},
		{"huge range literal", `{% for i in (1..99999999999999999999) %}{% endfor %}`, "invalid expression: ranges are limited to 100000 values"},
		{"budget variable reassigned", `{% assign __tv_budget? = 1 %}{{ data }}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := evalSrc(tc.src, b)
			if tc.want == "" {
				return // must merely not panic or hang
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	for _, src := range []string{
		`{% for i in (1..5) %}{{ i }}{% endfor %}`, `{{ (1..3) | join: ',' }}`, `{{ (-2..2) | join: ',' }}`,
		`{{ 'a..b' }}`, `{% for i in (1..99999) %}{% endfor %}`, `{{ data | replace: 'x', 'yy' }}`,
	} {
		if _, err := evalSrc(src, b); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}
}

// TestRenderMatchesLiquid checks that the rewriting done for the work budget
// leaves Liquid's output unchanged.
func TestRenderMatchesLiquid(t *testing.T) {
	data := testjson.Decode(t, `{"s": "Hello", "i": 3, "t": true, "z": null, "arr": ["a", "b", "c"], "nested": [["x", "y"], "z"]}`)
	engine := liquid.NewEngine()
	for _, src := range []string{
		`a {{ data.s }} b`,
		`{{ data.s == "Hello" }}|{{ data.i > 2 }}|{{ data.z and data.t }}|{{ data.t or data.z }}|{{ data.s contains "ell" }}`,
		`{{ data.z }}{{ data.missing }}-`,
		`{{ data.arr }}{{ data.nested }}`,
		`a  {{- data.s -}}  b {{ data.i }}`,
		"{%- for x in data.arr -%}\n  {{ x }}\n{%- endfor -%}\n!",
		`{% for x in data.arr %}{{ forloop.index }}{{ x }}{% if forloop.last %}.{% endif %}{% endfor %}`,
		`{% for x in data.arr reversed limit: 2 %}{{ x }}{% else %}none{% endfor %}`,
		`{% for x in data.none %}{{ x }}{% else %}none{% endfor %}`,
		`{% for x in data.arr %}{% if x == "b" %}{% continue %}{% endif %}{{ x }}{% endfor %}`,
		`{% for x in data.arr %}{% if x == "b" %}{% break %}{% endif %}{{ x }}{% endfor %}`,
		`{% for x in data.arr %}{% cycle "odd", "even" %}{% endfor %}`,
		`{% tablerow x in data.arr cols: 2 %}{{ x }}{% endtablerow %}`,
		`{% capture c %}[{{ data.s | upcase }}]{% endcapture %}{{ c }}{{ c.size }}`,
		`{% raw %}{{ data.s }}{% for %}{% endraw %}{{ data.s }}`,
		`{% comment %}{{ data.s }}{% endcomment %}{{ data.s }}`,
		`{% raw %}{% comment %}{% endcomment %}{{ data.s }}{% endraw %}{{ data.s }}`,
		`{% comment %}{% raw %}{% endraw %}{{ data.s }}{% endcomment %}{{ data.s }}`,
		`{% for a in (1..3) %}{% for b in data.arr %}{{ a }}{{ b }} {% endfor %}{% endfor %}`,
		`{% case data.i %}{% when 1, 3 %}one-or-three{% else %}other{% endcase %}`,
		`{% unless data.t %}no{% else %}yes{% endunless %}`,
		`{{ (1..4) | join: "+" }} {{ data.arr | join: ", " | prepend: "<" | append: ">" }}`,
	} {
		t.Run(src, func(t *testing.T) {
			// The reference sees the same value representation (numbers as
			// int64/float64) as the vault's engine.
			want, err := engine.ParseAndRenderString(src, map[string]any{"data": toEngine(data, 0)})
			if err != nil {
				t.Fatal(err)
			}
			got := mustEval(t, src+"{% if true %}{% endif %}", map[string]any{"data": data})
			if got != want {
				t.Fatalf("got %q, liquid renders %q", got, want)
			}
		})
	}
}

func TestIsExpression(t *testing.T) {
	for s, want := range map[string]bool{
		"{{ data }}": true, "x {{ y": true, "{% if x %}y{% endif %}": true,
		"plain": false, "{ x }": false, "": false, "}}": false,
	} {
		if got := IsExpression(s); got != want {
			t.Errorf("IsExpression(%q) = %v", s, got)
		}
	}
}

func TestCompileCache(t *testing.T) {
	a, err := Compile("{{ data | last4 }}")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Compile("{{ data | last4 }}")
	if a != b {
		t.Fatal("same source compiled twice")
	}
	if a.String() != "{{ data | last4 }}" {
		t.Fatalf("String() = %q", a.String())
	}
	for i := range cacheSize + 100 {
		if _, err := Compile(fmt.Sprintf("{{ data | slice: %d }}", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := cache.Len(); n > cacheSize {
		t.Fatalf("cache grew to %d entries", n)
	}
	long := "{{ data }}" + strings.Repeat(" ", maxCachedSource)
	if _, err := Compile(long); err != nil {
		t.Fatal(err)
	}
	if _, ok := cache.Get(long); ok {
		t.Fatal("oversized source cached")
	}
}

func TestConcurrentEvaluate(t *testing.T) {
	tmpl := testjson.Decode(t, `{"number": "{{ data.number | reveal_last: 4 }}", "m": "{{ data.expiration_month }}", "a": "{{ data.number | alias_preserve_format: 0, 4 }}"}`)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				b := map[string]any{"data": testjson.Decode(t, cardJSON)}
				out, err := EvaluateJSON(tmpl, b)
				if err != nil {
					errs <- err
					return
				}
				if out.(map[string]any)["number"] != "XXXXXXXXXXXX4242" {
					errs <- fmt.Errorf("goroutine %d iteration %d: %v", g, i, out)
					return
				}
				if _, err := Compile(fmt.Sprintf("{{ data.number | slice: %d }}", g*1000+i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func BenchmarkEvaluateMask(b *testing.B) {
	tmpl := testjson.Decode(b, `{"number": "{{ data.number | reveal_last: 4 }}", "expiration_month": "{{ data.expiration_month }}", "expiration_year": "{{ data.expiration_year }}"}`)
	bindings := map[string]any{"data": testjson.Decode(b, cardJSON)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EvaluateJSON(tmpl, bindings); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReveal(b *testing.B) {
	bindings := map[string]any{"data": "3622-7206-2716-5567"}
	b.Run("expression", func(b *testing.B) {
		e, err := Compile(`{{ data | reveal: 7, 4, '#', "-" }}`)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.Evaluate(bindings); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("filter", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := reveal("3622-7206-2716-5567", 7, 4, "#", "-"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

package strictjson

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// nest returns a value nested depth levels deep, alternating arrays and
// objects.
func nest(depth int) string {
	var b strings.Builder
	for i := 0; i < depth; i++ {
		if i%2 == 0 {
			b.WriteString("[")
		} else {
			b.WriteString(`{"k":`)
		}
	}
	b.WriteString("1")
	for i := depth - 1; i >= 0; i-- {
		if i%2 == 0 {
			b.WriteString("]")
		} else {
			b.WriteString("}")
		}
	}
	return b.String()
}

func manyKeys(n int, dupOf int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"key%d":%d`, i, i)
	}
	if dupOf >= 0 {
		fmt.Fprintf(&b, `,"key%d":0`, dupOf)
	}
	b.WriteString("}")
	return b.String()
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		lim     Limits
		field   string // expected Error.Field; "" means the body must be accepted
		message string // expected Error.Message; "" means any
	}{
		// Accepted values.
		{name: "empty object", body: `{}`},
		{name: "empty array", body: `[]`},
		{name: "scalars", body: `[0,-0,1.5,-2e10,3E-7,4e+2,"s",true,false,null]`},
		{name: "surrounding whitespace", body: " \t\r\n{ \"a\" : [ 1 , 2 ] } \n"},
		{name: "top-level string", body: `"hello"`},
		{name: "top-level number", body: `12345678901234567890`},
		{name: "escapes", body: `"\"\\\/\b\f\n\r\t\u00e9\u0000"`},
		{name: "utf8 text", body: `{"näme":"日本語 €𝄞"}`},
		{name: "long ascii string", body: `"` + strings.Repeat("abcdefgh", 100) + `"`},

		// Depth.
		{name: "depth at limit arrays", body: strings.Repeat("[", 32) + strings.Repeat("]", 32)},
		{name: "depth over limit arrays", body: strings.Repeat("[", 33) + strings.Repeat("]", 33), field: "body", message: "nesting deeper than 32"},
		{name: "depth at limit mixed", body: nest(32)},
		{name: "depth over limit mixed", body: nest(33), field: "body", message: "nesting deeper than 32"},
		{name: "custom depth at limit", body: `[[1]]`, lim: Limits{MaxDepth: 2}},
		{name: "custom depth over limit", body: `[[[1]]]`, lim: Limits{MaxDepth: 2}, field: "body", message: "nesting deeper than 2"},
		{name: "scalar has depth zero", body: `1`, lim: Limits{MaxDepth: 1}},
		{name: "unterminated deep", body: strings.Repeat("[", 10), field: "body", message: "unexpected end of JSON input"},

		// Value count.
		{name: "values at limit", body: `[1,{"a":2}]`, lim: Limits{MaxValues: 4}},
		{name: "values over limit", body: `[1,{"a":2},3]`, lim: Limits{MaxValues: 4}, field: "body", message: "more than 4 values"},
		{name: "default values at limit", body: "[" + strings.Repeat("0,", DefaultMaxValues-2) + "0]"},
		{name: "default values over limit", body: "[" + strings.Repeat("0,", DefaultMaxValues-1) + "0]", field: "body", message: "more than 100000 values"},

		// Duplicate member names.
		{name: "duplicate", body: `{"a":1,"a":2}`, field: "a", message: `duplicate member name "a"`},
		{name: "duplicate nested", body: `{"x":{"b":1,"a":2,"a":3}}`, field: "x.a", message: `duplicate member name "a"`},
		{name: "duplicate in array element", body: `[{},{"a":1,"a":1}]`, field: "[1].a", message: `duplicate member name "a"`},
		{name: "duplicate via escape", body: `{"a":1,"\u0061":2}`, field: "a", message: `duplicate member name "a"`},
		{name: "duplicate both escaped", body: `{"\u00e9":1,"\u00E9":2}`, field: "é", message: `duplicate member name "é"`},
		{name: "duplicate utf8 vs escape", body: `{"é":1,"\u00e9":2}`, message: `duplicate member name "é"`, field: "é"},
		{name: "duplicate surrogate pair", body: `{"😀":1,"\ud83d\ude00":2}`, message: `duplicate member name "😀"`, field: `["😀"]`},
		{name: "duplicate after nested object", body: `{"a":{"a":1},"a":2}`, field: "a", message: `duplicate member name "a"`},
		{name: "duplicate empty name", body: `{"":1,"":2}`, field: `[""]`, message: `duplicate member name ""`},
		{name: "duplicate odd name", body: `{"a.b":1,"a.b":2}`, field: `["a.b"]`, message: `duplicate member name "a.b"`},
		{name: "same name in sibling objects", body: `{"a":{"b":1},"c":{"b":2}}`},
		{name: "same name at different depths", body: `{"a":{"a":{"a":1}}}`},
		{name: "same name in array elements", body: `[{"a":1},{"a":2}]`},
		{name: "case variants are distinct", body: `{"containers":1,"Containers":2}`},
		{name: "many distinct keys", body: manyKeys(500, -1)},
		{name: "many keys duplicate first", body: manyKeys(500, 0), field: "key0", message: `duplicate member name "key0"`},
		{name: "many keys duplicate last", body: manyKeys(500, 499), field: "key499", message: `duplicate member name "key499"`},
		{name: "keys at linear threshold", body: manyKeys(linearMax, linearMax-1), field: fmt.Sprintf("key%d", linearMax-1)},
		{name: "duplicate in nested large objects", body: `{"o":` + manyKeys(40, -1) + `,"p":` + manyKeys(40, 7) + `}`, field: "p.key7"},

		// UTF-8.
		{name: "invalid byte in string", body: "\"\xff\"", field: "body", message: "invalid UTF-8"},
		{name: "invalid byte in member value", body: "{\"a\":[\"ok\",\"x\xffy\"]}", field: "a[1]", message: "invalid UTF-8"},
		{name: "invalid byte in member name", body: "{\"o\":{\"\xff\":1}}", field: "o", message: "invalid UTF-8"},
		{name: "truncated sequence", body: "\"\xc3\"", field: "body", message: "invalid UTF-8"},
		{name: "overlong encoding", body: "\"\xc0\xaf\"", field: "body", message: "invalid UTF-8"},
		{name: "utf8-encoded surrogate", body: "\"\xed\xa0\x80\"", field: "body", message: "invalid UTF-8"},
		{name: "beyond U+10FFFF", body: "\"\xf4\x90\x80\x80\"", field: "body", message: "invalid UTF-8"},
		{name: "raw 0xff", body: "\xff", field: "body", message: "invalid JSON at offset 0"},
		{name: "raw 0xff after value", body: "{}\xff", field: "body", message: "trailing data at offset 2"},
		{name: "invalid byte in long string", body: "\"" + strings.Repeat("a", 37) + "\x80" + strings.Repeat("b", 20) + "\"", field: "body", message: "invalid UTF-8"},

		// UTF-16 surrogate escapes.
		{name: "lone high surrogate", body: `{"data":"\ud800"}`, field: "data", message: "unpaired UTF-16 surrogate escape"},
		{name: "lone low surrogate", body: `"\udc00"`, field: "body", message: "unpaired UTF-16 surrogate escape"},
		{name: "high then text", body: `"\ud83dx"`, field: "body", message: "unpaired UTF-16 surrogate escape"},
		{name: "high then non-surrogate escape", body: `"\ud83d\u0041"`, field: "body", message: "unpaired UTF-16 surrogate escape"},
		{name: "high then high", body: `"\ud83d\ud83d"`, field: "body", message: "unpaired UTF-16 surrogate escape"},
		{name: "reversed pair", body: `"\ude00\ud83d"`, field: "body", message: "unpaired UTF-16 surrogate escape"},
		{name: "high then other escape", body: `"\ud83d\n"`, field: "body", message: "unpaired UTF-16 surrogate escape"},
		{name: "lone surrogate in name", body: `{"\ud800":1}`, field: "body", message: "unpaired UTF-16 surrogate escape"},
		{name: "valid pair", body: `"\ud83d\ude00"`},
		{name: "valid pair uppercase", body: `"\uD83D\uDE00"`},
		{name: "high then truncated", body: `"\ud83d\ude0`, field: "body", message: "unexpected end of JSON input"},

		// Syntax.
		{name: "empty body", body: ``, field: "body", message: "unexpected end of JSON input"},
		{name: "whitespace only", body: " \n ", field: "body", message: "unexpected end of JSON input"},
		{name: "missing colon", body: `{"a" 1}`, field: "body", message: "invalid JSON at offset 5"},
		{name: "unquoted name", body: `{a:1}`, field: "body", message: "invalid JSON at offset 1"},
		{name: "single quotes", body: `{'a':1}`, field: "body", message: "invalid JSON at offset 1"},
		{name: "trailing comma array", body: `[1,]`, field: "body", message: "invalid JSON at offset 3"},
		{name: "trailing comma object", body: `{"a":1,}`, field: "body", message: "invalid JSON at offset 7"},
		{name: "missing comma", body: `[1 2]`, field: "body", message: "invalid JSON at offset 3"},
		{name: "leading zero", body: `[01]`, field: "body", message: "invalid JSON at offset 2"},
		{name: "bare dot", body: `[1.]`, field: "body", message: "invalid JSON at offset 3"},
		{name: "leading dot", body: `.5`, field: "body", message: "invalid JSON at offset 0"},
		{name: "plus sign", body: `+1`, field: "body", message: "invalid JSON at offset 0"},
		{name: "bad exponent", body: `1e`, field: "body", message: "unexpected end of JSON input"},
		{name: "bad exponent char", body: `[1ex]`, field: "body", message: "invalid JSON at offset 3"},
		{name: "minus alone", body: `-`, field: "body", message: "unexpected end of JSON input"},
		{name: "NaN", body: `NaN`, field: "body", message: "invalid JSON at offset 0"},
		{name: "bad literal", body: `[trve]`, field: "body", message: "invalid JSON at offset 3"},
		{name: "truncated literal", body: `nul`, field: "body", message: "unexpected end of JSON input"},
		{name: "unterminated string", body: `"abc`, field: "body", message: "unexpected end of JSON input"},
		{name: "bad escape", body: `"a\x"`, field: "body", message: "invalid JSON at offset 3"},
		{name: "bad unicode escape", body: `"\u12g4"`, field: "body", message: "invalid JSON at offset 5"},
		{name: "control char in string", body: "\"a\tb\"", field: "body", message: "invalid JSON at offset 2"},
		{name: "mismatched brackets", body: `[1}`, field: "body", message: "invalid JSON at offset 2"},
		{name: "close without open", body: `]`, field: "body", message: "invalid JSON at offset 0"},
		{name: "comment", body: `{} // x`, field: "body", message: "trailing data at offset 3"},

		// Trailing data.
		{name: "two objects", body: `{} {}`, field: "body", message: "trailing data at offset 3"},
		{name: "two numbers", body: `1 2`, field: "body", message: "trailing data at offset 2"},
		{name: "trailing garbage", body: `{"a":1}x`, field: "body", message: "trailing data at offset 7"},
		{name: "trailing NUL", body: "{}\x00", field: "body", message: "trailing data at offset 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate([]byte(tc.body), tc.lim)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: unexpected error %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Validate: got %v (%T), want *Error", err, err)
			}
			if e.Field != tc.field || (tc.message != "" && e.Message != tc.message) {
				t.Fatalf("Validate: got Field=%q Message=%q, want Field=%q Message=%q", e.Field, e.Message, tc.field, tc.message)
			}
		})
	}
}

// TestValidateHugeNesting checks that a megabyte of opening brackets is
// rejected quickly and without deep recursion.
func TestValidateHugeNesting(t *testing.T) {
	for _, unit := range []string{"[", `{"a":`, `[{"a":`} {
		body := []byte(strings.Repeat(unit, 1_000_000/len(unit)))
		t.Run(unit, func(t *testing.T) {
			start := time.Now()
			err := Validate(body, DefaultLimits)
			var e *Error
			if !errors.As(err, &e) || e.Message != "nesting deeper than 32" {
				t.Fatalf("got %v, want nesting error", err)
			}
			if d := time.Since(start); d > time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
	// Even with an absurd limit the scanner uses no recursion.
	body := []byte(strings.Repeat("[", 1_000_000) + strings.Repeat("]", 1_000_000))
	if err := Validate(body, Limits{MaxDepth: 2_000_000, MaxValues: 2_000_000}); err != nil {
		t.Fatalf("deep but allowed body: %v", err)
	}
}

func TestValidateZeroLimitsUseDefaults(t *testing.T) {
	if err := Validate([]byte(nest(32)), Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := Validate([]byte(nest(33)), Limits{}); err == nil {
		t.Fatal("depth 33 accepted with zero Limits")
	}
}

func TestErrorMessagesDoNotLeakValues(t *testing.T) {
	const pan = "4242424242424242"
	bodies := []string{
		`{"card":"` + pan + `\ud800"}`,
		"{\"card\":\"" + pan + "\xff\"}",
		`{"card":"` + pan + `"} ` + pan,
		`{"card":` + pan + `,"card":` + pan + `}`,
		`{"card":"` + pan + `\q"}`,
		`{"card":` + pan + `x}`,
		`{"card":"` + pan,
	}
	for i, b := range bodies {
		err := Validate([]byte(b), DefaultLimits)
		if err == nil {
			t.Fatalf("body %d accepted", i)
		}
		if strings.Contains(err.Error(), pan) || strings.Contains(err.Error(), "4242") {
			t.Errorf("body %d: error %q leaks the value", i, err)
		}
	}
}

func TestLongNamesAreTruncatedInErrors(t *testing.T) {
	name := strings.Repeat("n", 10000)
	err := Validate([]byte(`{"`+name+`":1,"`+name+`":2}`), DefaultLimits)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v", err)
	}
	if len(e.Error()) > 300 {
		t.Fatalf("error is %d bytes long", len(e.Error()))
	}
}

func TestValidateDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	body := []byte(realisticBody(1 << 10))
	Validate(body, DefaultLimits) // warm the pool
	allocs := testing.AllocsPerRun(100, func() {
		if err := Validate(body, DefaultLimits); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Fatalf("Validate allocates %v times per run", allocs)
	}
}

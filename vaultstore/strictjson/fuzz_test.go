package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

func FuzzValidate(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `{"a":1,"a":2}`, `{"a":{"b":1},"c":{"b":2}}`, `{"data":"\ud800"}`,
		`"\ud83d\ude00"`, "\xff", `{"containers":1,"Containers":2}`, `[1,2,{"x":[true,false,null]}]`,
		`-0.5e-10`, `"\u0000\n\t"`, `{"\u0061":1,"a":2}`, "[[[[[[", `{"a":1} x`, realisticBody(1 << 10),
		manyKeys(20, 3), `1.`, `01`, `"\ud800\udc00"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		lim := Limits{MaxDepth: 16, MaxValues: 1000}
		err := Validate(body, lim)
		checkMarked(t, body, lim, err)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Field == "" || e.Message == "" {
				t.Fatalf("Validate returned %#v", err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("Validate accepted %q but json.Valid rejects it", body)
		}
		if !utf8.Valid(body) {
			t.Fatalf("Validate accepted invalid UTF-8 %q", body)
		}
		// Accepted bodies decode, and duplicates never reach the decoder.
		v, err := DecodeValue(body, lim)
		if err != nil {
			t.Fatalf("DecodeValue(%q): %v", body, err)
		}
		if _, err := json.Marshal(v); err != nil {
			t.Fatalf("re-marshal %q: %v", body, err)
		}
		var c caseTarget
		err = Decode(body, &c, lim)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Field == "" || e.Message == "" {
				t.Fatalf("Decode returned %#v", err)
			}
		}
	})
}

// checkMarked checks ValidateMarked against Validate's verdict err, with
// every "a" of body marked: the same error, or string literals in order,
// each holding a mark.
func checkMarked(t *testing.T, body []byte, lim Limits, err error) {
	var marks []int
	for i, c := range body {
		if c == 'a' {
			marks = append(marks, i)
		}
	}
	marked, merr := ValidateMarked(body, lim, marks)
	if (merr == nil) != (err == nil) || merr != nil && merr.Error() != err.Error() {
		t.Fatalf("ValidateMarked(%q): %v, Validate: %v", body, merr, err)
	}
	prev := 0
	for _, m := range marked {
		var s string
		if m.Start < prev || json.Unmarshal(body[m.Start:m.End], &s) != nil {
			t.Fatalf("ValidateMarked(%q) reported %d-%d, not a string literal after %d", body, m.Start, m.End, prev)
		}
		if !bytes.Contains(body[m.Start:m.End], []byte("a")) {
			t.Fatalf("ValidateMarked(%q) reported %q, which holds no mark", body, body[m.Start:m.End])
		}
		prev = m.End
	}
}

package strictjson

import (
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

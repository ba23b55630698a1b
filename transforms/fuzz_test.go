package transforms

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// FuzzValidateCode: validation never panics, never hangs, and only ever
// returns nil or an *Error of a validation kind.
func FuzzValidateCode(f *testing.F) {
	for _, tc := range validateCases {
		f.Add(tc.code)
	}
	for _, tc := range hostileCorpus {
		f.Add("module.exports = async function (req) {\n" + tc.code + "\n}")
	}
	f.Add("/(?")
	f.Add("require(`${x}`)")
	f.Add("new RegExp('[')")
	f.Add("`${`${`${1}`}`}`")
	f.Fuzz(func(t *testing.T, code string) {
		done := make(chan error, 1)
		go func() { done <- ValidateCode(code) }()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("ValidateCode(%q) hangs", code)
		}
		switch kindOf(err) {
		case "", KindInvalidCode, KindModule:
		default:
			t.Fatalf("ValidateCode(%q) = %v", code, err)
		}
	})
}

// FuzzArgs sends arbitrary bytes as Args through a transform that returns
// them as its body: valid JSON must come back equal (as JavaScript numbers
// see it), anything else must be refused as invalid input, never crash a
// worker.
func FuzzArgs(f *testing.F) {
	for _, s := range []string{`{}`, `{"body":{"a":[1,2,{"b":null}]},"headers":{}}`, `[]`, `"x"`, `1e400`, `{"a":"\ud800"}`,
		`{"a":1,"a":2}`, `[[[[[[[[[[]]]]]]]]]]`, `{"n":12345678901234567890}`, "{\"s\":\"\xff\"}", ``, `{`, `nul`} {
		f.Add([]byte(s))
	}
	o := testOptions()
	o.Timeout = 500 * time.Millisecond
	p, err := NewPool(o)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { p.Close() })
	f.Fuzz(func(t *testing.T, args []byte) {
		res, err := p.Run(context.Background(), Job{Kind: JobRequest, Args: args,
			Code: `module.exports = (req) => ({ body: { args: req.args }, headers: {} })`})
		if len(args) == 0 {
			args = []byte(`{}`)
		}
		var want, got struct{ Args any }
		goOK := json.Unmarshal([]byte(`{"args":`+string(args)+`}`), &want) == nil
		if !json.Valid(args) || jsonDepth(string(args)) > maxJSONDepth || !goOK {
			// Valid JSON that Go cannot hold (a number out of range)
			// cannot be parsed by goja either.
			if kindOf(err) != KindInvalidInput {
				t.Fatalf("args %q: err = %v, want invalid input", args, err)
			}
			if e := err.(*Error); contains(e.Message, string(args)) && len(args) > 3 {
				t.Fatalf("the message quotes the args: %v", err)
			}
			return
		}
		if err != nil {
			if kindOf(err) == KindInvalidResult && len(args) > MaxPayload/2 {
				return // escaping can grow the output past the limit
			}
			t.Fatalf("args %q: %v", args, err)
		}
		if err := json.Unmarshal(res.Body, &got); err != nil {
			t.Fatalf("body %q: %v", res.Body, err)
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("args %q came back as %q", args, res.Body)
		}
	})
}

package vaultstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
	"github.com/tokenvault/tokenvault/vaultstore/strictjson"
)

func (w *tokenWorld) detokenizeJSON(app, perm string, body []byte, opts DetokenizeOptions) ([]byte, *DetokenizeResult, error) {
	w.tb.Helper()
	opts.Permission = perm
	// a buffer with old contents: every test also checks that the output
	// written into it shows none of them
	dst := bytes.Repeat([]byte("#"), 4096)
	out, res, err := w.s.DetokenizeJSON(w.ctx, w.req(app), opts, body, dst)
	return out, res, noSecretIn(w.tb, err)
}

// TestExpressionCandidates: the scan of a body looks only into strings
// that hold a "{{" or "\u007", which expressionCandidates finds wherever
// they are, one per quote at most, in order.
func TestExpressionCandidates(t *testing.T) {
	long := strings.Repeat(`"f":"abcdefgh",`, 2000)
	for _, tc := range []struct {
		body string
		want []int
	}{
		{``, nil},
		{`{"a": "plain {x} }}"}`, nil},
		{`{{`, []int{0}},
		{`{"a": "{{ x }}"}`, []int{7}},
		{`{"a": "{{{ x }} {{ y }}"}`, []int{7}},
		{`["{{", "\u007b"]`, []int{2, 8}},
		{`["\u007B", "{{"]`, []int{2, 12}},
		{`["\u007b{", "{\u007b", "{{"]`, []int{2, 14, 24}},
		{`["a\"{{", "{{"]`, []int{5, 11}},
		{`["{{\"{{"]`, []int{2, 6}}, // after an escaped quote: a second offset in the same string, harmless
		{`{` + long + `"z": "{{ x }}"}`, []int{len(long) + 7}},
		{`{"z": "{{ x }}",` + long + `"y": "\u007b"}`, []int{7, len(long) + 22}},
		{`["` + strings.Repeat("{", 100000) + `"]`, []int{2}},
	} {
		if got := expressionCandidates([]byte(tc.body)); !slices.Equal(got, tc.want) {
			t.Errorf("expressionCandidates(%.40q…) = %v, want %v", tc.body, got, tc.want)
		}
	}
}

func TestDetokenizeJSONBytes(t *testing.T) {
	w := newDetokenizeWorld(t)
	card := `{"cvc":"9173","expiration_month":12,"expiration_year":2030,"number":"4242424242424242"}`
	obj := `{"list":[1,2],"n":` + bigNumber + `,"name":"Jane <&>"}`
	for _, tc := range []struct {
		name, body, want string
		ids              []string // placeholders
	}{
		{"white space and order kept", "{ \"z\" : 1.50e2 ,\n\t\"card\" :  \"{{ CARD | json: '$.number' }}\" ,\"a\":[ 1 , -0.0E+1 ] }\r\n",
			"{ \"z\" : 1.50e2 ,\n\t\"card\" :  \"4242424242424242\" ,\"a\":[ 1 , -0.0E+1 ] }\r\n", []string{"CARD"}},
		{"object embedded", `{"b": 1, "card": "{{ CARD }}", "a": 2}`, `{"b": 1, "card": ` + card + `, "a": 2}`, []string{"CARD"}},
		{"object embedded, white space around", `{"card": "  {{ CARD }}\n"}`, `{"card": ` + card + `}`, []string{"CARD"}},
		{"whole token data", `["{{ token: OBJ | json: '$.data' }}"]`, `[` + obj + `]`, []string{"OBJ"}},
		{"expression inside text", `{"pan": "x{{ CARD | json: '$.number' }}y"}`, `{"pan": "x4242424242424242y"}`, []string{"CARD"}},
		{"several expressions", `"{{ CARD | json: '$.expiration_month' }}/{{ CARD | json: '$.expiration_year' }} {{ STR }}"`,
			`"12/2030 hello"`, []string{"CARD", "STR"}},
		{"exact big number", `{"n": "{{ OBJ | json: '$.n' }}"}`, `{"n": ` + bigNumber + `}`, []string{"OBJ"}},
		{"exact number in text", `{"n": "n={{ OBJ | json: '$.n' }}"}`, `{"n": "n=` + bigNumber + `"}`, []string{"OBJ"}},
		{"number keeps its spelling", `["{{ UUID }}"]`, `[7.50]`, []string{"UUID"}},
		{"object with a big number, not HTML-escaped", `{"o": "{{ OBJ }}"}`, `{"o": ` + obj + `}`, []string{"OBJ"}},
		{"object in text is compact JSON", `{"o": "x{{ OBJ }}"}`, `{"o": "x` + strings.ReplaceAll(obj, `"`, `\"`) + `"}`, []string{"OBJ"}},
		{"member names untouched", `{"{{ STR }}": "{{ STR }}", "k{{": "v{{STR}}"}`, `{"{{ STR }}": "hello", "k{{": "vhello"}`, []string{"STR"}},
		{"escaped braces", `["\u007b\u007b STR }}", "{\u007B STR }}", "\u007b{ STR }}!"]`, `["hello", "hello", "hello!"]`, []string{"STR"}},
		{"escaped backslash is no brace", `{"a": "\\u007b\\u007b STR }}", "b": "{{ STR }}"}`, `{"a": "\\u007b\\u007b STR }}", "b": "hello"}`, []string{"STR"}},
		{"escaped id", `"{{ \u0073tr-1 }}"`, `"hello"`, []string{"STR"}},
		{"HTML characters stay", `{"h": "<a href='x'>{{ STR }}</a> & more"}`, `{"h": "<a href='x'>hello</a> & more"}`, []string{"STR"}},
		{"escapes of a replaced string", `{"q": "say \"{{ STR }}\"\n\u00e9\/"}`, `{"q": "say \"hello\"\né/"}`, []string{"STR"}},
		{"untouched strings keep their escapes", `{"e": "caf\u00e9 \/ \"x\" \u2028", "s": "{{ STR }}", "t": "\u003c{ }}"}`,
			`{"e": "caf\u00e9 \/ \"x\" \u2028", "s": "hello", "t": "\u003c{ }}"}`, []string{"STR"}},
		{"arrays and nested objects", `{"a": [1, "{{ STR }}", {"b": ["{{ STR }}-{{ STR }}", true, null, []]}], "c": {"d": {"e": "{{ UUID }}"}}, "f": "plain"}`,
			`{"a": [1, "hello", {"b": ["hello-hello", true, null, []]}], "c": {"d": {"e": 7.50}}, "f": "plain"}`, []string{"STR", "UUID"}},
		{"top-level string", "\t\"{{ STR }}\" ", "\t\"hello\" ", []string{"STR"}},
		{"last expression at the end, after the last raw braces", `{"a": "{{ STR }}", "b": [{"c": "\u007b{ STR }}"}]}`,
			`{"a": "hello", "b": [{"c": "hello"}]}`, []string{"STR"}},
		{"last candidate inside a member name", `{"x": "{{ STR }}", "k{{": 1, "y": ["plain"]}`, `{"x": "hello", "k{{": 1, "y": ["plain"]}`, []string{"STR"}},
		{"same string twice", `["{{ STR }}", "{{ STR }}"]`, `["hello", "hello"]`, []string{"STR"}},
		{"tags left alone", `"{% if x %}{{ STR }}{% endif %}"`, `"{% if x %}hello{% endif %}"`, []string{"STR"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := w.fill(tc.body)
			in := []byte(body)
			out, res, err := w.at(t).detokenizeJSON("admin", "token:use", in, DetokenizeOptions{Limit: 20})
			if err != nil {
				t.Fatalf("DetokenizeJSON: %v", err)
			}
			if want := w.fill(tc.want); string(out) != want {
				t.Errorf("got\n%s\nwant\n%s", out, want)
			}
			if string(in) != body {
				t.Errorf("the input was modified")
			}
			var want []string
			for _, p := range tc.ids {
				want = append(want, w.fill(p))
			}
			slices.Sort(want)
			if !slices.Equal(res.TokenIDs, want) {
				t.Errorf("TokenIDs = %q, want %q", res.TokenIDs, want)
			}
		})
	}
}

// A body in which no string holds "{{" comes back as the same slice,
// allocating nothing but the result beyond what Validate does.
func TestDetokenizeJSONUnchangedBodies(t *testing.T) {
	w := newDetokenizeWorld(t)
	for _, body := range []string{
		`{}`, `"plain"`, `12`, `null`,
		`{"a": ["b", 1.5, {"c": "}} {% x %} { {"}], "d": "\u007b", "e": "\\u007b{"}`,
		`{"{{ STR }}": 1, "k": {"{{": ["x"]}}`, // member names only
	} {
		in := []byte(w.fill(body))
		out, res, err := w.at(t).detokenizeJSON("admin", "token:use", in, DetokenizeOptions{})
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if len(out) != len(in) || &out[0] != &in[0] {
			t.Errorf("%s: not the same slice", body)
		}
		if res == nil || len(res.TokenIDs) != 0 {
			t.Errorf("%s: result %v", body, res)
		}
	}
	// no storage is touched: a request for an unknown tenant, without an
	// application, would fail any read
	out, _, err := w.s.DetokenizeJSON(w.ctx, TokenRequest{Tenant: &Tenant{ID: "no-such-tenant"}}, DetokenizeOptions{}, []byte(`["x"]`), nil)
	if err != nil || string(out) != `["x"]` {
		t.Errorf("unknown tenant, nothing to do: %s, %v", out, err)
	}

	body := []byte(`{"a": ["b", 1, {"c": "d }} {% x %}"}], "e": null, "f": true, "g": "\u00e9"}`)
	req := w.req("admin")
	opts := DetokenizeOptions{Permission: "token:use", Limit: 5}
	validate := testing.AllocsPerRun(100, func() {
		if strictjson.Validate(body, strictjson.DefaultLimits) != nil {
			t.Fatal("invalid")
		}
	})
	allocs := testing.AllocsPerRun(100, func() {
		out, _, err := w.s.DetokenizeJSON(w.ctx, req, opts, body, nil)
		if err != nil || &out[0] != &body[0] {
			t.Fatal(err)
		}
	})
	if allocs > validate+1 && !raceEnabled { // the result; the race detector allocates on its own
		t.Errorf("%v allocations for a body without expressions (Validate: %v)", allocs, validate)
	}
}

func TestDetokenizeJSONErrors(t *testing.T) {
	w := newDetokenizeWorld(t)
	asSecret("4000056655665556")
	for _, tc := range []struct {
		name, body string
		fields     []string
		inMessage  string
	}{
		{"unknown token in an array", `{"items": [{"card": "{{ CARD }}"}, {"card": "{{ nope-1 | json: '$.number' }}"}]}`, []string{"items[1].card"}, `"nope-1"`},
		{"top-level string", `"{{ nope-1 }}"`, []string{"body"}, "nope-1"},
		{"array at the top", `[1, ["x", "{{ nope-1 }}"]]`, []string{"[1][1]"}, "nope-1"},
		{"escaped member name", `{"c\u0061rd": {"n": "{{ nope-1 }}"}}`, []string{"card.n"}, "nope-1"},
		{"member name that could be data", `{"4000056655665556": "{{ nope-1 }}"}`, []string{"*"}, ""},
		{"member name with a dot", `{"a.b": {"c": "{{ nope-1 }}"}}`, []string{"*.c"}, ""},
		{"first reference named", `{"a": "{{ nope-1 }}", "b": ["{{ nope-1 }}"]}`, []string{"a"}, ""},
		{"several unknown", `{"a": "{{ x-1 }}", "b": ["{{ x-2 }}"]}`, []string{"a", "b[0]"}, ""},
		{"syntax errors", `{"a": "{{ STR", "b": "{{ }}", "c": "{{ token_intent: x }}"}`, []string{"a", "b", "c"}, "unterminated"},
		{"failing filter", `{"ok": "{{ STR }}", "x": ["{{ OBJ | json: '$.list[*]' }}"]}`, []string{"x[0]"}, "matched 2 values"},
		{"digits not quoted", `{"a": "4000056655665556", "b": "{{ 4000056655665556 }}"}`, []string{"b"}, "not shown"},
		{"more tokens than the limit", `["{{ STR }}", "{{ OBJ }}", {"c": "{{ CARD }}"}]`, []string{"body"}, "at most 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(w.fill(tc.body))
			out, res, err := w.at(t).detokenizeJSON("admin", "token:use", body, DetokenizeOptions{Limit: 2})
			wantFieldErrors(t, err, tc.fields...)
			if out != nil || res != nil {
				t.Errorf("got %s, %v with the error", out, res)
			}
			text := fmt.Sprint(err.(*ValidationError).Fields)
			if !strings.Contains(text, tc.inMessage) {
				t.Errorf("messages %s do not mention %q", text, tc.inMessage)
			}
			if strings.Contains(text, "hello") || strings.Contains(text, "4242") {
				t.Errorf("an error quotes token data: %s", text)
			}
		})
	}

	// invalid bodies: strictjson's error, as it is
	for _, body := range []string{``, `{`, `{"a": "{{ STR }}",}`, `{"a": 1, "a": "{{ STR }}"}`, `"{{ STR }}" x`, "\"\xff{{ STR }}\"", `"\ud800{{ STR }}"`,
		strings.Repeat("[", strictjson.DefaultMaxDepth+1) + `"{{ STR }}"` + strings.Repeat("]", strictjson.DefaultMaxDepth+1)} {
		out, res, err := w.detokenizeJSON("admin", "token:use", []byte(w.fill(body)), DetokenizeOptions{})
		var se *strictjson.Error
		if !errors.As(err, &se) || out != nil || res != nil {
			t.Errorf("%q: %v (%T), want a *strictjson.Error", body, err, err)
		}
		if want := strictjson.Validate([]byte(w.fill(body)), strictjson.DefaultLimits); fmt.Sprint(err) != fmt.Sprint(want) {
			t.Errorf("%q: %v, Validate says %v", body, err, want)
		}
	}

	// forbidden
	out, res, err := w.detokenizeJSON("plain", "token:use", []byte(w.fill(`{"a": "{{ STR }}"}`)), DetokenizeOptions{})
	wantErrorIs(t, err, ErrForbidden)
	if out != nil || res != nil {
		t.Errorf("forbidden: %s, %v", out, res)
	}
	_, _, err = w.detokenizeJSON("pci", "token:read", []byte(w.fill(`["{{ CARD }}", "{{ STR }}"]`)), DetokenizeOptions{})
	wantErrorIs(t, err, ErrForbidden)
}

// The data substituted is what the caller's transform shows.
func TestDetokenizeJSONTransforms(t *testing.T) {
	w := newDetokenizeWorld(t)
	out, _, err := w.detokenizeJSON("masker", "token:read", []byte(w.fill(`{"pan": "{{ CARD | json: '$.number' }}"}`)), DetokenizeOptions{})
	if err != nil || string(out) != `{"pan": "XXXXXXXXXXXX4242"}` {
		t.Errorf("masked: %s, %v", out, err)
	}
	out, _, err = w.detokenizeJSON("redactor", "token:read", []byte(w.fill(`["{{ CARD }}", "a{{ CARD }}b"]`)), DetokenizeOptions{})
	if err != nil || string(out) != `[null, "ab"]` {
		t.Errorf("redacted: %s, %v", out, err)
	}
}

// One audit record per request, naming the token ids and nothing of the
// data or the body; none for a request that fails or references nothing.
func TestDetokenizeJSONAudit(t *testing.T) {
	w := newDetokenizeWorld(t)
	records := func() []*AuditRecord {
		t.Helper()
		recs, _, err := w.s.ListAudit(w.ctx, w.tenant.ID, AuditFilter{Operation: "detokenize"}, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	before := len(records())
	audit := &AuditRecord{ActorID: "proxy-1", ActorType: ActorProxy, EntityType: "proxy", EntityID: "proxy-1", Operation: "detokenize", Destination: "api.example.com"}
	opts := DetokenizeOptions{Limit: 10, Audit: audit}
	body := w.fill(`{"secret-member": "body-value-1234", "pan": "{{ CARD | json: '$.number' }}", "o": ["{{ OBJ }}", "{{ STR }} {{ CARD | json: '$.cvc' }}"]}`)
	out, res, err := w.detokenizeJSON("admin", "token:use", []byte(body), opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{w.card, w.obj, w.str}
	slices.Sort(want)
	if !slices.Equal(res.TokenIDs, want) {
		t.Errorf("TokenIDs = %q, want %q", res.TokenIDs, want)
	}
	recs := records()
	if len(recs) != before+1 {
		t.Fatalf("%d audit records written, want 1", len(recs)-before)
	}
	rec := recs[0]
	if !slices.Equal(rec.TokenIDs, want) || rec.Operation != "detokenize" || rec.Destination != "api.example.com" || rec.TenantID != w.tenant.ID || rec.ID == "" || rec.CreatedAt == nil {
		t.Errorf("audit record %+v", rec)
	}
	raw, _ := json.Marshal(rec)
	for _, s := range []string{"42424242", testCVC, "hello", "Jane", bigNumber, "body-value", "secret-member", "{{"} {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("the audit record holds %q: %s", s, raw)
		}
	}
	if audit.ID != "" || audit.TokenIDs != nil {
		t.Errorf("opts.Audit was modified: %+v", audit)
	}
	if !bytes.Contains(out, []byte(`"pan": "4242424242424242"`)) {
		t.Errorf("output %s", out)
	}
	// failures and bodies without references write nothing
	if _, _, err := w.detokenizeJSON("admin", "token:use", []byte(w.fill(`["{{ STR }}", "{{ nope-1 }}"]`)), opts); err == nil {
		t.Error("no error")
	}
	if _, _, err := w.detokenizeJSON("plain", "token:use", []byte(w.fill(`["{{ STR }}"]`)), opts); err == nil {
		t.Error("no error")
	}
	if _, _, err := w.detokenizeJSON("admin", "token:use", []byte(`{"{{ x }}": "plain"}`), opts); err != nil {
		t.Error(err)
	}
	if n := len(records()); n != before+1 {
		t.Errorf("%d more audit records", n-before-1)
	}
}

// DetokenizeJSON's output, decoded, is what Detokenize makes of the
// decoded body; errors agree too.
func TestDetokenizeJSONMatchesDetokenize(t *testing.T) {
	w := newDetokenizeWorld(t)
	for _, body := range []string{
		`"{{ STR }}"`,
		` [ "{{ CARD }}" , "{{ CARD | json: '$.number' }}", "{{ token: OBJ | json: '$.data' }}" ] `,
		`{"a": [1, "{{ STR }}", {"b": ["{{ STR }}-{{ OBJ }}", true, null]}], "c": {"d": {"e": "{{ UUID }}"}}, "f": "plain", "g": 1e400}`,
		`{"{{ STR }}": "{{ STR }}", "n": "{{ OBJ | json: '$.n' }}", "x": "<{{ OBJ | json: '$.name' }}>"}`,
		`["\u007b\u007b STR }}", "\\u007b{ STR }}", "caf\u00e9 {{ UUID }}\n", "\ud83d\ude00{{STR}}"]`,
		`{"deep": [[[[{"x": [["{{ token: CARD | json: '$.data.expiration_year' }}"]]}]]]]}`,
		`{"a": "{{ nope-1 }}"}`,
		`[["{{ STR"]]`,
		`{"m": {"4000056655665556": "{{ CARD | json: '$.x' }}"}}`,
		`{"a": "{{ STR }}{{ OBJ }}{{ CARD }}"}`,
		`{"q": "\"{{ STR | append: '\"<&>' }}\""}`,
	} {
		t.Run(body, func(t *testing.T) {
			raw := []byte(w.fill(body))
			got, _, gotErr := w.at(t).detokenizeJSON("admin", "token:use", raw, DetokenizeOptions{Limit: 2})
			want, _, wantErr := w.at(t).detokenize("admin", "token:use", decodeJSON(t, string(raw)), 2)
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Fatalf("DetokenizeJSON: %v, Detokenize: %v", gotErr, wantErr)
			}
			var gv, wv *ValidationError
			if errors.As(gotErr, &gv) && errors.As(wantErr, &wv) && !reflect.DeepEqual(gv.Fields, wv.Fields) {
				t.Errorf("DetokenizeJSON: %v, Detokenize: %v", gv.Fields, wv.Fields)
			}
			if gotErr != nil {
				return
			}
			wantRaw, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := testjson.Decode(t, string(got)), testjson.Decode(t, string(wantRaw)); !reflect.DeepEqual(g, w) {
				t.Errorf("DetokenizeJSON %s\nDetokenize   %s", got, wantRaw)
			}
		})
	}
}

func TestDetokenizeFields(t *testing.T) {
	w := newDetokenizeWorld(t)
	req := w.req("admin")
	opts := DetokenizeOptions{Permission: "token:use", Limit: 4}
	fields := []DetokenizeField{
		{Path: "card.number", Text: w.fill("{{ CARD | json: '$.number' }}")},
		{Path: "amount", Text: w.fill(" {{ UUID }} ")},
		{Path: "plain", Text: "no expressions }}"},
		{Path: "items[2]", Text: w.fill("{{ OBJ }}")},
		{Path: "note", Text: w.fill("x {{ OBJ | json: '$.list' }} {{ STR }}")},
		{Path: "again", Text: w.fill(" {{ UUID }} ")},
	}
	out, res, err := w.s.DetokenizeFields(w.ctx, req, opts, fields)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"4242424242424242", json.Number("7.50"), "no expressions }}", nil, "x [1,2] hello", json.Number("7.50")}
	want[3] = decodeJSON(t, `{"list":[1,2],"n":`+bigNumber+`,"name":"Jane <&>"}`)
	if encodeJSON(t, out) != encodeJSON(t, want) {
		t.Errorf("got %s, want %s", encodeJSON(t, out), encodeJSON(t, want))
	}
	if _, ok := out[1].(json.Number); !ok {
		t.Errorf("amount is %T", out[1])
	}
	if len(res.TokenIDs) != 4 {
		t.Errorf("TokenIDs %q", res.TokenIDs)
	}
	// errors name the fields' paths
	_, _, err = w.s.DetokenizeFields(w.ctx, req, opts, []DetokenizeField{{Path: "a", Text: w.fill("{{ STR }}")}, {Path: "card.number", Text: "{{ nope-1 }}"}})
	wantFieldErrors(t, noSecretIn(t, err), "card.number")
	_, _, err = w.s.DetokenizeFields(w.ctx, req, opts, []DetokenizeField{{Path: "a", Text: "{{ STR"}, {Path: "items[2]", Text: w.fill("{{ OBJ | nope }}")}})
	wantFieldErrors(t, noSecretIn(t, err), "a")
	_, _, err = w.s.DetokenizeFields(w.ctx, req, opts, []DetokenizeField{{Path: "a", Text: w.fill("{{ STR }}")}, {Path: "items[2]", Text: w.fill("x {{ OBJ | nope }}")}})
	wantFieldErrors(t, noSecretIn(t, err), "items[2]")
	// nothing to do: no storage touched
	out, res, err = w.s.DetokenizeFields(w.ctx, TokenRequest{Tenant: &Tenant{ID: "no-such-tenant"}}, opts, []DetokenizeField{{Path: "a", Text: "x"}, {Path: "b", Text: ""}})
	if err != nil || !reflect.DeepEqual(out, []any{"x", ""}) || res == nil || res.TokenIDs != nil {
		t.Errorf("nothing to do: %v, %v, %v", out, res, err)
	}
	out, _, err = w.s.DetokenizeFields(w.ctx, req, opts, nil)
	if err != nil || len(out) != 0 {
		t.Errorf("no fields: %v, %v", out, err)
	}
}

// FuzzDetokenizeJSON checks that DetokenizeJSON never panics, returns
// strictjson's error for an invalid body and valid JSON otherwise, and
// agrees with Detokenize of the decoded body.
func FuzzDetokenizeJSON(f *testing.F) {
	w := newTokenWorld(f, nil)
	w.mustCreate("admin", TokenInput{ID: "card-1", Type: "card", Data: cardData(testVisa, testCVC)})
	w.mustCreate("admin", TokenInput{ID: "obj-1", Type: "token", Data: map[string]any{"a": []any{json.Number("1"), "x <&>"}, "n": json.Number("1234567890123456789012")}})
	for _, s := range []string{
		`"{{ card-1 }}"`,
		`{"pan": "{{ card-1 | json: '$.number' }}", "x": ["{{ obj-1 | json: '$.a[1]' }}", 1.0e3]}`,
		`{"{{ card-1 }}": "{{ token: card-1 | json: '$.data.number' | reveal_last: 4 }}"}`,
		`["\u007b\u007b obj-1 }}", "\\u007b{ obj-1 }}", "{\u007B obj-1 | json: '$.n' }}"]`,
		`{"a": "{{ nope-1 }}", "b": "{{ token_intent: x }}"}`,
		`[[[[{"deep": "x{{ obj-1 }}y"}]]]]`,
		`{"a": "{{ card-1", "b": "\"}}{{|}}\""}`,
		`{"plain": "text", "n": -0.5e-3, "t": true, "f": false, "z": null}`,
		` "{{ obj-1 | json: '$' | stringify | size }}" `,
		`"{{ card-1 | json: '$.number' | slice: 1, 2 }} \ud83d\ude00"`,
	} {
		f.Add([]byte(s))
	}
	req := w.req("admin")
	f.Fuzz(func(t *testing.T, body []byte) {
		in := bytes.Clone(body)
		out, res, err := w.s.DetokenizeJSON(w.ctx, req, DetokenizeOptions{Permission: "token:use", Limit: 5}, body, nil)
		noSecretIn(t, err)
		if !bytes.Equal(in, body) {
			t.Fatal("the input was modified")
		}
		if verr := strictjson.Validate(body, strictjson.DefaultLimits); verr != nil {
			var se *strictjson.Error
			if !errors.As(err, &se) {
				t.Fatalf("invalid body: error %v (%T), want %v", err, err, verr)
			}
			return
		}
		var v *ValidationError
		switch {
		case err == nil:
			if res == nil || !json.Valid(out) {
				t.Fatalf("output %q is not valid JSON (result %v)", out, res)
			}
			if len(expressionCandidates(body)) == 0 && (len(out) != len(body) || len(body) > 0 && &out[0] != &body[0]) {
				t.Fatal("a body without expressions was copied")
			}
		case errors.As(err, &v):
		default:
			t.Fatalf("error %v (%T) is not a ValidationError", err, err)
		}
		// Detokenize agrees (which of several paths an error names may
		// differ: Detokenize walks objects in map order)
		value, derr := strictjson.DecodeValue(body, strictjson.DefaultLimits)
		if derr != nil {
			t.Fatalf("DecodeValue of a valid body: %v", derr)
		}
		want, _, werr := w.s.Detokenize(w.ctx, req, DetokenizeOptions{Permission: "token:use", Limit: 5}, value)
		if (err == nil) != (werr == nil) || err != nil && reflect.TypeOf(err) != reflect.TypeOf(werr) {
			t.Fatalf("DetokenizeJSON: %v, Detokenize: %v", err, werr)
		}
		if err == nil {
			wantRaw, merr := json.Marshal(want)
			if merr != nil {
				t.Fatal(merr)
			}
			if g, w := testjson.Decode(t, string(out)), testjson.Decode(t, string(wantRaw)); !reflect.DeepEqual(g, w) {
				t.Fatalf("DetokenizeJSON %s\nDetokenize   %s", out, wantRaw)
			}
		}
	})
}

// jsonBenchBody returns a JSON body of about size bytes holding refs
// (under "card") and items to fill the rest.
func jsonBenchBody(b *testing.B, size int, refs []string) []byte {
	b.Helper()
	var items []any
	body := map[string]any{
		"merchant": map[string]any{"id": "m_1234567890", "name": "Example Store", "url": "https://shop.example.com"},
		"amount":   12345, "currency": "USD",
		"metadata": map[string]any{"order": "ORD-2024-0001", "note": "no expressions here, just text \"quoted\" <b>"},
	}
	fields := []string{"number", "cvc", "holder", "exp", "extra"}
	src := map[string]any{}
	for i, r := range refs {
		src[fields[i]] = r
	}
	body["card"] = src
	for {
		body["items"] = items
		raw, _ := json.MarshalIndent(body, "", " ")
		if len(raw) >= size-200 {
			if len(raw) > size {
				b.Fatalf("body is %d bytes, want %d", len(raw), size)
			}
			body["pad"] = strings.Repeat("x", max(0, size-len(raw)-len(",\n \"pad\": \"\"")))
			raw, _ = json.MarshalIndent(body, "", " ")
			return raw
		}
		i := len(items)
		items = append(items, map[string]any{"sku": fmt.Sprintf("SKU-%05d", i), "qty": i + 1, "price": 19.99, "description": "A plain product description"})
	}
}

// BenchmarkDetokenizeJSON detokenizes 1 KB and 64 KB JSON bodies with no,
// one and five token references (five distinct tokens); "validate" is
// strictjson.Validate alone, the floor of the "none" case.
func BenchmarkDetokenizeJSON(b *testing.B) {
	w := newTokenBenchWorld(b, false)
	var ids []string
	for i := range 5 {
		ids = append(ids, w.mustCreate("admin", TokenInput{Type: "card", Data: benchCard(i)}).ID)
	}
	one := []string{"{{ " + ids[0] + " | json: '$.number' }}"}
	five := []string{
		"{{ " + ids[0] + " | json: '$.number' }}",
		"{{ " + ids[1] + " | json: '$.cvc' }}",
		"{{ token: " + ids[2] + " | json: '$.data.number' }}",
		"{{ " + ids[3] + " | json: '$.expiration_month' }}/{{ " + ids[3] + " | json: '$.expiration_year' }}",
		"{{ " + ids[4] + " }}",
	}
	req := w.req("admin")
	opts := DetokenizeOptions{Permission: "token:use", Limit: 20}
	for _, size := range []int{1 << 10, 64 << 10} {
		for _, tc := range []struct {
			name string
			refs []string
		}{{"validate", nil}, {"none", nil}, {"one", one}, {"five", five}} {
			b.Run(fmt.Sprintf("%dKB/%s", size>>10, tc.name), func(b *testing.B) {
				body := jsonBenchBody(b, size, tc.refs)
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				if tc.name == "validate" {
					for b.Loop() {
						if err := strictjson.Validate(body, strictjson.DefaultLimits); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				for b.Loop() {
					out, res, err := w.s.DetokenizeJSON(w.ctx, req, opts, body, nil)
					if err != nil || len(res.TokenIDs) != min(len(tc.refs), 5) || len(out) == 0 {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkFindJSONExpressions validates a 64 KB object of short string
// members and finds the five references spread through it, the shape of
// the load command's "/proxy 64KB 5 refs" body, where no search can stop
// early.
func BenchmarkFindJSONExpressions(b *testing.B) {
	var body bytes.Buffer
	body.WriteString(`{"amount":1000,"currency":"usd"`)
	for m := 0; body.Len() < 64<<10-200; m++ {
		if m%160 == 80 {
			fmt.Fprintf(&body, `,"card_%d":{"number":"{{ tok_%d | json: '$.number' }}","exp":"12/31"}`, m, m)
		}
		fmt.Fprintf(&body, `,"f%04d":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"`, m)
	}
	body.WriteString(`}`)
	raw := body.Bytes()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		marked, err := strictjson.ValidateMarked(raw, strictjson.DefaultLimits, expressionCandidates(raw))
		if err != nil {
			b.Fatal(err)
		}
		if spans, _ := jsonExpressions(raw, marked); len(spans) != 5 {
			b.Fatalf("%d expressions, want 5", len(spans))
		}
	}
}

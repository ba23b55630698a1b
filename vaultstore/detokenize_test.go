package vaultstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/strictjson"
)

// detokenizeWorld is a token world with the tokens the detokenization tests use.
type detokenizeWorld struct {
	*tokenWorld
	card, obj, str, uuid string // token ids
}

// bigNumber must come back with exactly these digits.
const bigNumber = "12345678901234567890123"

func newDetokenizeWorld(tb testing.TB) *detokenizeWorld {
	tb.Helper()
	w := &detokenizeWorld{tokenWorld: newTokenWorld(tb, nil)}
	// a caller id with "-", "." , ":" and an inner space
	w.card = w.mustCreate("admin", TokenInput{ID: "card-1.visa:main x", Type: "card", Data: cardData(testVisa, testCVC)}).ID
	w.obj = w.mustCreate("admin", TokenInput{ID: "obj_1", Type: "token",
		Data: map[string]any{"n": json.Number(bigNumber), "name": "Jane <&>", "list": []any{json.Number("1"), json.Number("2")}}}).ID
	w.str = w.mustCreate("admin", TokenInput{ID: "str-1", Type: "token", Data: "hello"}).ID
	w.uuid = w.mustCreate("admin", TokenInput{Type: "token", Data: json.Number("7.50")}).ID
	return w
}

// fill replaces CARD, OBJ, STR and UUID by the token ids.
func (w *detokenizeWorld) fill(s string) string {
	return strings.NewReplacer("CARD", w.card, "OBJ", w.obj, "STR", w.str, "UUID", w.uuid).Replace(s)
}

func (w *tokenWorld) detokenize(app, perm string, body any, limit int) (any, *DetokenizeResult, error) {
	w.tb.Helper()
	out, res, err := w.s.Detokenize(w.ctx, w.req(app), DetokenizeOptions{Permission: perm, Limit: limit}, body)
	return out, res, noSecretIn(w.tb, err)
}

func (w *tokenWorld) detokenizeString(app, perm, text string, limit int) (string, *DetokenizeResult, error) {
	w.tb.Helper()
	out, res, err := w.s.DetokenizeString(w.ctx, w.req(app), DetokenizeOptions{Permission: perm, Limit: limit}, text)
	return out, res, noSecretIn(w.tb, err)
}

// detokenizeAsProxy detokenizes as a proxy (token:use) would, as the admin.
func (w *detokenizeWorld) detokenizeAsProxy(tb testing.TB, body string, limit int) (any, *DetokenizeResult, error) {
	tb.Helper()
	return w.at(tb).detokenize("admin", "token:use", decodeJSON(tb, w.fill(body)), limit)
}

func TestDetokenizeForms(t *testing.T) {
	w := newDetokenizeWorld(t)
	card := `{"number":"4242424242424242","expiration_month":12,"expiration_year":2030,"cvc":"9173"}`
	obj := `{"list":[1,2],"n":` + bigNumber + `,"name":"Jane <&>"}`
	for _, tc := range []struct {
		name, body, want string
		ids              []string // placeholders
	}{
		{"data, whole string", `"{{ STR }}"`, `"hello"`, []string{"STR"}},
		{"uuid id", `"{{ UUID }}"`, `7.50`, []string{"UUID"}},
		{"object embedded", `{"card": "{{ CARD }}"}`, `{"card":` + card + `}`, []string{"CARD"}},
		{"no spaces", `"{{CARD|json:'$.number'}}"`, `"4242424242424242"`, []string{"CARD"}},
		{"much space", "\" \\t {{  \\n CARD \\t |  json: '$.number'   }}  \"", `"4242424242424242"`, []string{"CARD"}},
		{"data json filter", `{"pan": "{{ CARD | json: '$.number' }}"}`, `{"pan":"4242424242424242"}`, []string{"CARD"}},
		{"cvc while retained", `"{{ CARD | json: '$.cvc' }}"`, `"9173"`, []string{"CARD"}},
		{"exact big number", `{"n": "{{ OBJ | json: '$.n' }}"}`, `{"n":` + bigNumber + `}`, []string{"OBJ"}},
		{"number kept as number", `["{{ CARD | json: '$.expiration_year' }}"]`, `[2030]`, []string{"CARD"}},
		{"whole token", `"{{ token: CARD | json: '$.data.number' }}"`, `"4242424242424242"`, []string{"CARD"}},
		{"whole token, no space", `"{{token:CARD|json:'$.type'}}"`, `"card"`, []string{"CARD"}},
		{"whole token id and container", `["{{ token: OBJ | json: '$.id' }}", "{{ token : OBJ | json: '$.containers[0]' }}"]`,
			`["obj_1","/general/high/"]`, []string{"OBJ"}},
		{"whole token data", `"{{ token: OBJ | json: '$.data' }}"`, obj, []string{"OBJ"}},
		{"reveal_last", `"{{ CARD | json: '$.number' | reveal_last: 4 }}"`, `"XXXXXXXXXXXX4242"`, []string{"CARD"}},
		{"object in a string", `"x{{ OBJ }}y"`, `"x` + strings.ReplaceAll(obj, `"`, `\"`) + `y"`, []string{"OBJ"}},
		{"number in a string", `"n={{ OBJ | json: '$.n' }}"`, `"n=` + bigNumber + `"`, []string{"OBJ"}},
		{"two expressions", `"{{ CARD | json: '$.expiration_month' }}/{{ CARD | json: '$.expiration_year' }}"`, `"12/2030"`, []string{"CARD"}},
		{"two tokens in one string", `"{{ STR }} {{ UUID }}!"`, `"hello 7.50!"`, []string{"STR", "UUID"}},
		{"nested", `{"a": [1, "{{ STR }}", {"b": ["{{ STR }}-{{ STR }}", true, null]}], "c": {"d": {"e": "{{ UUID }}"}}, "f": "plain"}`,
			`{"a":[1,"hello",{"b":["hello-hello",true,null]}],"c":{"d":{"e":7.50}},"f":"plain"}`, []string{"STR", "UUID"}},
		{"member names untouched", `{"{{ STR }}": "{{ STR }}"}`, `{"{{ STR }}":"hello"}`, []string{"STR"}},
		{"tags left alone", `"{% if x %}{{ STR }}{% endif %}"`, `"{% if x %}hello{% endif %}"`, []string{"STR"}},
		{"liquid filters", `"{{ STR | upcase | append: '!' }}"`, `"HELLO!"`, []string{"STR"}},
		{"no expressions", `{"a": ["b", 1.5, {"c": "}}"}]}`, `{"a":["b",1.5,{"c":"}}"}]}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := decodeJSON(t, w.fill(tc.body))
			before := encodeJSON(t, body)
			out, res, err := w.at(t).detokenize("admin", "token:use", body, 20)
			if err != nil {
				t.Fatalf("Detokenize: %v", err)
			}
			if !jsonEqual(t, out, w.fill(tc.want)) {
				t.Errorf("got %s, want %s", encodeJSON(t, out), w.fill(tc.want))
			}
			var want []string
			for _, p := range tc.ids {
				want = append(want, w.fill(p))
			}
			slices.Sort(want)
			if !slices.Equal(res.TokenIDs, want) {
				t.Errorf("TokenIDs = %q, want %q", res.TokenIDs, want)
			}
			if encodeJSON(t, body) != before {
				t.Errorf("the input was modified")
			}
		})
	}
}

func TestDetokenizeExactNumbers(t *testing.T) {
	w := newDetokenizeWorld(t)
	out, _, err := w.detokenizeAsProxy(t, `{"n": "{{ OBJ | json: '$.n' }}", "all": "{{ OBJ }}"}`, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := out.(map[string]any)
	if n, ok := m["n"].(json.Number); !ok || string(n) != bigNumber {
		t.Errorf("n = %#v, want json.Number %s", m["n"], bigNumber)
	}
	if n := m["all"].(map[string]any)["n"]; n != json.Number(bigNumber) {
		t.Errorf("all.n = %#v", n)
	}
}

func TestDetokenizeString(t *testing.T) {
	w := newDetokenizeWorld(t)
	for _, tc := range []struct{ name, text, want string }{
		{"form", "pan={{ CARD | json: '$.number' }}&exp={{ CARD | json: '$.expiration_month' }}%2F{{CARD|json:'$.expiration_year'}}",
			"pan=4242424242424242&exp=12%2F2030"},
		{"object as JSON", "card: {{ token: OBJ | json: '$.data' }}", `card: {"list":[1,2],"n":` + bigNumber + `,"name":"Jane <&>"}`},
		{"whole string stays text", "  {{ UUID }}\n", "  7.50\n"},
		{"no expressions", "a } b {% x %} }}", "a } b {% x %} }}"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := w.at(t).detokenizeString("admin", "token:use", w.fill(tc.text), 20)
			if err != nil {
				t.Fatalf("DetokenizeString: %v", err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	_, _, err := w.detokenizeString("admin", "token:use", "x {{ nope-id }}", 20)
	wantFieldErrors(t, err, "body")
	_, _, err = w.detokenizeString("plain", "token:use", w.fill("{{ STR }}"), 20)
	wantErrorIs(t, err, ErrForbidden)
}

func TestDetokenizeCountsDistinctTokens(t *testing.T) {
	w := newDetokenizeWorld(t)
	out, res, err := w.detokenizeAsProxy(t, `["{{ STR }}", "{{ STR }}{{STR}}", {"a": "{{ token: STR | json: '$.data' }}"}]`, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, out, `["hello","hellohello",{"a":"hello"}]`) || !slices.Equal(res.TokenIDs, []string{w.str}) {
		t.Errorf("got %s, %q", encodeJSON(t, out), res.TokenIDs)
	}
	// limit 0 means no limit
	if _, res, err = w.detokenizeAsProxy(t, `"{{ STR }}{{ OBJ }}{{ CARD }}{{ UUID }}"`, 0); err != nil || len(res.TokenIDs) != 4 {
		t.Errorf("no limit: %v, %v", res, err)
	}
	_, _, err = w.detokenizeAsProxy(t, `["{{ STR }}", "{{ OBJ }}", "{{ STR }}"]`, 2)
	if err != nil {
		t.Errorf("two tokens, limit 2: %v", err)
	}
	_, _, err = w.detokenizeAsProxy(t, `["{{ STR }}", "{{ OBJ }}", "{{ CARD }}"]`, 2)
	wantFieldErrors(t, err, "body")
	if msg := err.(*ValidationError).Fields["body"][0]; !strings.Contains(msg, "at most 2") || !strings.Contains(msg, "3") {
		t.Errorf("limit message %q", msg)
	}
}

func TestDetokenizeErrors(t *testing.T) {
	w := newDetokenizeWorld(t)
	other := newTokenWorldOn(t, w.s, w.clock, w.dir, nil)
	other.mustCreate("admin", TokenInput{ID: "foreign-1", Type: "token", Data: "theirs"})
	w.mustCreate("admin", TokenInput{ID: "expiring-1", Type: "card", Data: cardData(testMastercard, ""), ExpiresAt: w.expiresIn(time.Hour)})
	if _, _, err := w.detokenizeAsProxy(t, `"{{ expiring-1 }}"`, 0); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	w.clock.Advance(2 * time.Hour)
	for _, tc := range []struct {
		name, body string
		fields     []string
		inMessage  string
	}{
		{"unknown id", `{"card": {"number": "{{ no-such-token | json: '$.number' }}"}}`, []string{"card.number"}, `"no-such-token"`},
		{"unknown uuid", `"{{ 1c0e4f9e-6b3a-4c5e-9d2f-7a8b9c0d1e2f }}"`, []string{"body"}, "1c0e4f9e"},
		{"other tenant's token", `["{{ STR }}", "{{ foreign-1 }}"]`, []string{"[1]"}, "foreign-1"},
		{"expired token", `{"a": "{{ STR }}", "b": "{{ token: expiring-1 | json: '$.data' }}"}`, []string{"b"}, "expiring-1"},
		{"several unknown", `{"a": "{{ x-1 }}", "b": ["{{ x-2 }}"]}`, []string{"a", "b[0]"}, ""},
		{"digits not quoted", `"{{ 4000056655665556 }}"`, []string{"body"}, "not shown"},
		{"invalid id", `"{{ a/b }}"`, []string{"body"}, "not a valid"},
		{"empty id", `"{{ }}"`, []string{"body"}, "names no token"},
		{"empty token: id", `"{{ token: | json: '$.id' }}"`, []string{"body"}, "names no token"},
		{"token intent", `"{{ token_intent: abc | json: '$.data' }}"`, []string{"body"}, "not supported"},
		{"unterminated", `{"a": "{{ STR"}`, []string{"a"}, "unterminated"},
		{"unknown filter", `"{{ CARD | no_such_filter }}"`, []string{"body"}, "no_such_filter"},
		{"json two matches", `{"x": "{{ OBJ | json: '$.list[*]' }}"}`, []string{"x"}, "matched 2 values"},
		{"json two matches, recursive", `{"x": "{{ token: CARD | json: '$..number' }}"}`, []string{"x"}, ""},
		{"json no match", `"a {{ CARD | json: '$.nope' }}"`, []string{"body"}, "matched no value"},
		{"to_boolean on a number", `"{{ CARD | json: '$.number' | to_boolean }}"`, []string{"body"}, "to_boolean"},
		{"bad filter syntax", `"{{ CARD | json: }}"`, []string{"body"}, ""},
		{"empty filter", `"{{ CARD | }}"`, []string{"body"}, ""},
		{"member name with digits", `{"4242424242424242": "{{ CARD | json: '$.x' }}"}`, []string{"*"}, ""},
		{"too deep", "", []string{"body"}, "deeply"}, // built below
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.body == "" {
				body = w.fill("{{ STR }}")
				for range strictjson.DefaultMaxDepth + 1 {
					body = []any{body}
				}
			} else {
				body = decodeJSON(t, w.fill(tc.body))
			}
			before := encodeJSON(t, body)
			out, res, err := w.at(t).detokenize("admin", "token:use", body, 20)
			wantFieldErrors(t, err, tc.fields...)
			t.Logf("%v", err.(*ValidationError).Fields)
			if out != nil || res != nil {
				t.Errorf("got %v, %v with the error", out, res)
			}
			if !strings.Contains(fmt.Sprint(err.(*ValidationError).Fields), tc.inMessage) {
				t.Errorf("messages %v do not mention %q", err.(*ValidationError).Fields, tc.inMessage)
			}
			if encodeJSON(t, body) != before {
				t.Errorf("the input was modified")
			}
			if text := fmt.Sprint(err.(*ValidationError).Fields); strings.Contains(text, "hello") || strings.Contains(text, "theirs") {
				t.Errorf("an error quotes token data: %s", text)
			}
		})
	}
}

func TestDetokenizePermissions(t *testing.T) {
	w := newDetokenizeWorld(t)
	general := mustDTApp(t, w, AccessRule{Priority: 1, Container: "/general/", Transform: TransformReveal, Permissions: []string{"token:use"}})
	for _, tc := range []struct {
		name, app, perm, body string
		want                  error
	}{
		{"plain token:read lacks token:use", "plain", "token:use", `"{{ STR }}"`, ErrForbidden},
		{"pci rule does not cover /general/", "pci", "token:read", `["{{ CARD }}", "{{ STR }}"]`, ErrForbidden},
		{"token:use rule on /general/ only", general, "token:use", `["{{ STR }}", "{{ CARD | json: '$.number' }}"]`, ErrForbidden},
		{"token:use is not token:read", general, "token:read", `"{{ STR }}"`, ErrForbidden},
		{"writer", "writer", "token:use", `"{{ STR }}"`, ErrForbidden},
		{"unknown beats forbidden", "plain", "token:use", `["{{ STR }}", "{{ nope-1 }}"]`, &ValidationError{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := decodeJSON(t, w.fill(tc.body))
			before := encodeJSON(t, body)
			out, res, err := w.at(t).detokenize(tc.app, tc.perm, body, 20)
			var v *ValidationError
			if errors.As(tc.want, &v) {
				if !errors.As(err, &v) {
					t.Fatalf("error %v, want a ValidationError", err)
				}
			} else {
				wantErrorIs(t, err, tc.want)
			}
			if out != nil || res != nil || encodeJSON(t, body) != before {
				t.Errorf("something was substituted: %v, %v", out, res)
			}
		})
	}
	// allowed
	out, _, err := w.detokenize(general, "token:use", decodeJSON(t, w.fill(`"{{ STR }}"`)), 20)
	if err != nil || out != "hello" {
		t.Errorf("general app: %v, %v", out, err)
	}
	out, _, err = w.detokenize("pci", "token:read", decodeJSON(t, w.fill(`"{{ CARD | json: '$.cvc' }}"`)), 20)
	if err != nil || out != testCVC {
		t.Errorf("pci reader: %v", err)
	}
}

// mustDTApp creates an application with access rules and returns the name
// the world knows it by.
func mustDTApp(t *testing.T, w *detokenizeWorld, rules ...AccessRule) string {
	t.Helper()
	name := fmt.Sprintf("dt-app-%d", len(w.apps))
	app, _ := mustCreateApp(t, w.s, w.tenant.ID, ApplicationInput{Name: name, Type: AppPrivate, Rules: rules})
	w.apps[name] = app
	return name
}

// A masking or redacting rule is honoured: the data substituted is what a
// read would show, never more.
func TestDetokenizeTransforms(t *testing.T) {
	w := newDetokenizeWorld(t)
	out, _, err := w.at(t).detokenize("masker", "token:read", decodeJSON(t, w.fill(`{"pan": "{{ CARD | json: '$.number' }}", "all": "{{ CARD }}"}`)), 20)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, out, `{"pan":"XXXXXXXXXXXX4242","all":{"number":"XXXXXXXXXXXX4242","expiration_month":12,"expiration_year":2030}}`) {
		t.Errorf("masked: %s", encodeJSON(t, out))
	}
	// plain token:read masks too
	out, _, err = w.detokenize("plain", "token:read", decodeJSON(t, w.fill(`"{{ token: CARD | json: '$.data.number' }}"`)), 20)
	if err != nil || out != "XXXXXXXXXXXX4242" {
		t.Errorf("plain read: %v, %v", out, err)
	}
	out, _, err = w.detokenize("redactor", "token:read", decodeJSON(t, w.fill(`["{{ CARD }}", "a{{ CARD }}b"]`)), 20)
	if err != nil || !jsonEqual(t, out, `[null, "ab"]`) {
		t.Errorf("redacted: %s, %v", encodeJSON(t, out), err)
	}
}

func TestDetokenizeMarksTokensActive(t *testing.T) {
	w := newDetokenizeWorld(t)
	isActive := func(id string) bool {
		err := w.s.kv.View(w.ctx, func(r Reader) error {
			_, err := r.Get(activeTokenKey(w.tenant.ID, w.clock.Peek(), id))
			return err
		})
		return err == nil
	}
	// a month on, nothing has been active
	w.clock.Advance(40 * 24 * time.Hour)
	if isActive(w.str) {
		t.Fatal("active before use")
	}
	if _, _, err := w.detokenizeAsProxy(t, `["{{ STR }}", "{{ UUID }}"]`, 0); err != nil {
		t.Fatal(err)
	}
	if !isActive(w.str) || !isActive(w.uuid) || isActive(w.obj) {
		t.Errorf("active: str %v uuid %v obj %v", isActive(w.str), isActive(w.uuid), isActive(w.obj))
	}
	// a failed request marks nothing
	if _, _, err := w.detokenizeAsProxy(t, `["{{ OBJ }}", "{{ OBJ | nope }}"]`, 0); err == nil {
		t.Fatal("no error")
	}
	if isActive(w.obj) {
		t.Error("a failed detokenization marked its token active")
	}
}

func TestDetokenizeFastPathDoesNotAllocate(t *testing.T) {
	w := newDetokenizeWorld(t)
	body := decodeJSON(t, `{"a": ["b", 1, {"c": "d }} {% x %}"}], "e": null, "f": true}`)
	req := w.req("admin")
	allocs := testing.AllocsPerRun(100, func() {
		out, _, err := w.s.Detokenize(w.ctx, req, DetokenizeOptions{Permission: "token:use", Limit: 5}, body)
		if err != nil || out == nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 { // the result
		t.Errorf("%v allocations for a body without expressions", allocs)
	}
}

// No error a detokenization provokes quotes token data (noSecretIn scans
// every error for the registered secrets).
func TestDetokenizeErrorsNeverContainSecrets(t *testing.T) {
	w := newDetokenizeWorld(t)
	num := asSecret("6011000990139424")
	cvc := asSecret("8529")
	w.mustCreate("admin", TokenInput{ID: "secret-card", Type: "card", Data: cardData(num, cvc)})
	w.mustCreate("admin", TokenInput{ID: "secret-str", Type: "token", Data: num})
	for _, body := range []string{
		`"{{ secret-card | json: '$.number' | to_boolean }}"`,
		`"{{ secret-card | json: '$.number' | to_number | divided_by: 0 }}"`,
		`"{{ secret-card | json: '$.*' }}"`,
		`"{{ secret-card | json: '$.cvc' | json: '$.x' }}"`,
		`"{{ secret-card | json: '$.number' | reveal_last: 'x' }}"`,
		`"{{ secret-card | json: '$.number' | pad_left: 99999999 }}"`,
		`"{{ secret-card | json: '$.number' | alias_preserve_format: 'a' }}"`,
		`"{{ token: secret-card | json: '$.data.number' | split: '' | json: '$[*]' }}"`,
		`"{{ secret-card | stringify | to_number }}"`,
		`"{{ secret-card | json: '$.number' | append: 'x' | json: '$.y' }}"`,
		`"{{ secret-str | to_boolean }}"`,
		`"{{ 6011000990139424 }}"`,
		`{"6011000990139424": "{{ secret-card | nope }}"}`,
	} {
		t.Run(body, func(t *testing.T) {
			if _, _, err := w.detokenizeAsProxy(t, body, 0); err == nil {
				t.Errorf("no error")
			}
		})
	}
}

func FuzzDetokenizeString(f *testing.F) {
	w := newTokenWorld(f, nil)
	w.mustCreate("admin", TokenInput{ID: "card-1", Type: "card", Data: cardData(testVisa, testCVC)})
	w.mustCreate("admin", TokenInput{ID: "obj-1", Type: "token", Data: map[string]any{"a": []any{json.Number("1"), "x"}}})
	for _, s := range []string{
		"{{ card-1 }}",
		"pan={{ card-1 | json: '$.number' }}&x={{ obj-1 | json: '$.a[1]' }}",
		"{{ token: card-1 | json: '$.data.number' | reveal_last: 4 }}",
		"{{ token_intent: x }}",
		"{{ card-1 | json: '$.*' }}",
		"{{{{ }}}}",
		"{{ card-1",
		"}}{{|}}",
		"{{ obj-1 | json: '$' | stringify | size }}",
		"{{ card-1 | json: '$.number' | slice: 1, 2 }} {% for %}",
		"{{ token:token: card-1 }}",
	} {
		f.Add(s)
	}
	req := w.req("admin")
	f.Fuzz(func(t *testing.T, text string) {
		out, res, err := w.s.DetokenizeString(w.ctx, req, DetokenizeOptions{Permission: "token:use", Limit: 5}, text)
		noSecretIn(t, err)
		var v *ValidationError
		switch {
		case err == nil:
			if res == nil {
				t.Fatal("no result")
			}
			if !strings.Contains(text, "{{") && out != text {
				t.Fatalf("text without expressions changed: %q -> %q", text, out)
			}
		case errors.As(err, &v):
		default:
			t.Fatalf("error %v (%T) is not a ValidationError", err, err)
		}
	})
}

// benchBody is a body of about 1 KB (padded to 1024 bytes when the
// references are short) holding refs.
func benchBody(b *testing.B, refs []string) any {
	b.Helper()
	items := make([]any, 0, 6)
	for i := range 6 {
		items = append(items, map[string]any{"sku": fmt.Sprintf("SKU-%05d", i), "qty": i + 1, "price": 19.99, "description": "A plain product description"})
	}
	body := map[string]any{
		"merchant": map[string]any{"id": "m_1234567890", "name": "Example Store", "url": "https://shop.example.com"},
		"amount":   12345, "currency": "USD", "items": items,
		"metadata": map[string]any{"order": "ORD-2024-0001", "note": "no expressions here, just text"},
	}
	fields := []string{"number", "cvc", "holder", "exp", "extra"}
	src := map[string]any{}
	for i, r := range refs {
		src[fields[i]] = r
	}
	body["card"] = src
	raw, _ := json.Marshal(body)
	if pad := 1024 - len(raw) - len(`,"pad":""`); pad > 0 {
		body["pad"] = strings.Repeat("x", pad)
		raw, _ = json.Marshal(body)
	}
	if len(raw) < 1000 || len(raw) > 1200 {
		b.Fatalf("body is %d bytes", len(raw))
	}
	return decodeJSON(b, string(raw))
}

// BenchmarkDetokenizeBody detokenizes a 1 KB JSON body with one and with
// five token references (five distinct tokens).
func BenchmarkDetokenizeBody(b *testing.B) {
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
	for _, tc := range []struct {
		name string
		refs []string
	}{{"none", nil}, {"one", one}, {"five", five}} {
		b.Run(tc.name, func(b *testing.B) {
			body := benchBody(b, tc.refs)
			req := w.req("admin")
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := w.s.Detokenize(w.ctx, req, DetokenizeOptions{Permission: "token:use", Limit: 20}, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

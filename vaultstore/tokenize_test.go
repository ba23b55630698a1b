package vaultstore

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
)

// shapeOf renders a tokenize answer with token ids as "id" and token
// objects as "tok:<type>", keeping names and order.
func shapeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "id"
	case *Token:
		return "tok:" + x.Type
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ":" + shapeOf(x[k])
		}
		return "{" + strings.Join(parts, ",") + "}"
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = shapeOf(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return fmt.Sprintf("?%T", v)
}

// checkTokenized walks a tokenize body and its answer together and checks
// that every token reads back as the data it was made from; it returns
// how many tokens it saw.
func (w *tokenWorld) checkTokenized(path string, body, answer any) int {
	w.tb.Helper()
	switch b := body.(type) {
	case nil:
		if answer != nil {
			w.tb.Errorf("%s: null answered with %v", path, answer)
		}
		return 0
	case map[string]any:
		_, hasType := b["type"]
		_, hasData := b["data"]
		if hasType && hasData {
			tok, ok := answer.(*Token)
			if !ok {
				w.tb.Errorf("%s: token-create answered with %T", path, answer)
				return 0
			}
			if tok.Data != nil {
				w.tb.Errorf("%s: the answer carries data %s", path, encodeJSON(w.tb, tok.Data))
			}
			got := w.mustGet("admin", tok.ID)
			if got.Type != b["type"] || !sameJSON(w.tb, got.Data, b["data"]) {
				w.tb.Errorf("%s: token %s reads %s %s, want %v %s", path, tok.ID, got.Type, encodeJSON(w.tb, got.Data), b["type"], encodeJSON(w.tb, b["data"]))
			}
			return 1
		}
		a, ok := answer.(map[string]any)
		if !ok || len(a) != len(b) {
			w.tb.Errorf("%s: object answered with %s", path, shapeOf(answer))
			return 0
		}
		n := 0
		for k, sub := range b {
			n += w.checkTokenized(path+"."+k, sub, a[k])
		}
		return n
	case []any:
		a, ok := answer.([]any)
		if !ok || len(a) != len(b) {
			w.tb.Errorf("%s: array answered with %s", path, shapeOf(answer))
			return 0
		}
		n := 0
		for i, sub := range b {
			n += w.checkTokenized(fmt.Sprintf("%s[%d]", path, i), sub, a[i])
		}
		return n
	default:
		id, ok := answer.(string)
		if !ok {
			w.tb.Errorf("%s: primitive answered with %T", path, answer)
			return 0
		}
		got := w.mustGet("admin", id)
		if got.Type != "token" || !sameJSON(w.tb, got.Data, body) || !slices.Equal(got.Containers, []string{"/general/high/"}) {
			w.tb.Errorf("%s: token %s = %+v, want a generic token of %v", path, id, got, body)
		}
		return 1
	}
}

const cardJSON = `{"number":"4242424242424242","expiration_month":12,"expiration_year":2030,"cvc":"9173"}`

func TestTokenizeShapes(t *testing.T) {
	w := newTokenWorld(t, nil)
	for _, tc := range []struct {
		name, body, shape string
	}{
		{"string", `"secret"`, "id"},
		{"number", `42.5`, "id"},
		{"boolean", `true`, "id"},
		{"null", `null`, "null"},
		{"card", `{"type":"card","data":` + cardJSON + `}`, "tok:card"},
		{"bank", `{"type":"bank","data":{"routing_number":"021000021","account_number":"98765432101234"}}`, "tok:bank"},
		{"generic token with options", `{"type":"token","data":{"a":"b"},"metadata":{"k":"v"},"containers":["/general/low/"],"search_indexes":["{{ data.a }}"]}`, "tok:token"},
		{"object traversed", `{"name":"Jo","ssn":"123-45-6789","nested":{"x":true,"n":null}}`, "{name:id,nested:{n:null,x:id},ssn:id}"},
		{"array in order", `["a","b",["c"]]`, "[id,id,[id]]"},
		{"type without data is traversed", `{"type":"card"}`, "{type:id}"},
		{"data without type is traversed", `{"data":"x"}`, "{data:id}"},
		{"mixed", `{"cards":[{"type":"card","data":` + cardJSON + `},"raw"],"meta":{"n":1},"list":[{"k":[{"type":"token","data":"deep"}]}]}`,
			"{cards:[tok:card,id],list:[{k:[tok:token]}],meta:{n:id}}"},
		{"empty object", `{}`, "{}"},
		{"empty array", `[]`, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := w.at(t)
			before := w.total()
			body := decodeJSON(t, tc.body)
			got, err := w.tokenize("admin", body)
			if err != nil {
				t.Fatalf("Tokenize: %v", err)
			}
			if s := shapeOf(got); s != tc.shape {
				t.Fatalf("answer shape %s, want %s", s, tc.shape)
			}
			n := w.checkTokenized("$", body, got)
			if after := w.total(); after-before != n {
				t.Errorf("%d tokens listed for %d in the answer", after-before, n)
			}
			if raw := encodeJSON(t, got); strings.Contains(raw, testVisa) || holdsCVC(raw) || strings.Contains(raw, testAccount) {
				t.Errorf("the answer reveals data: %s", raw)
			}
		})
	}
}

// A token object in a tokenize answer leaves the data out; a card shows its
// evaluated mask, and the request's fields come back.
func TestTokenizeTokenObject(t *testing.T) {
	w := newTokenWorld(t, nil)
	body := decodeJSON(t, `{"card":{"type":"card","data":`+cardJSON+`,"metadata":{"order":"o-1"},"search_indexes":["{{ data.number | last4 }}"],"fingerprint_expression":"{{ data.number }}"},
		"bank":{"type":"bank","data":{"routing_number":"021000021","account_number":"98765432101234"}},
		"gen":{"type":"token","data":"x"}}`)
	out, err := w.tokenize("admin", body)
	if err != nil {
		t.Fatal(err)
	}
	m := out.(map[string]any)
	card := m["card"].(*Token)
	if card.Data != nil || !jsonEqual(t, card.Mask, `{"number":"XXXXXXXXXXXX4242","expiration_month":12,"expiration_year":2030}`) {
		t.Errorf("card answer data %s mask %s", encodeJSON(t, card.Data), encodeJSON(t, card.Mask))
	}
	if card.Type != "card" || card.TenantID != w.tenant.ID || !isID(card.ID) || card.CreatedAt == nil || card.CreatedBy != w.app("admin").ID ||
		card.Metadata["order"] != "o-1" || !slices.Equal(card.SearchIndexes, []string{"{{ data.number | last4 }}"}) ||
		card.FingerprintExpression != "{{ data.number }}" || card.Fingerprint == "" {
		t.Errorf("card answer = %+v", card)
	}
	if bank := m["bank"].(*Token); bank.Data != nil || !jsonEqual(t, bank.Mask, `{"routing_number":"021000021","account_number":"XXXXXXXXXX1234"}`) {
		t.Errorf("bank answer data %s mask %s", encodeJSON(t, bank.Data), encodeJSON(t, bank.Mask))
	}
	if gen := m["gen"].(*Token); gen.Data != nil || gen.Mask != nil {
		t.Errorf("generic answer data %v mask %v", gen.Data, gen.Mask)
	}
	// a caller that may only create gets the same masked answer
	out, err = w.tokenize("writer", decodeJSON(t, `[{"type":"card","data":`+cardJSON+`}]`))
	if err != nil {
		t.Fatal(err)
	}
	if c := out.([]any)[0].(*Token); c.Data != nil || !jsonEqual(t, c.Mask, `{"number":"XXXXXXXXXXXX4242","expiration_month":12,"expiration_year":2030}`) {
		t.Errorf("writer's card answer data %s mask %s", encodeJSON(t, c.Data), encodeJSON(t, c.Mask))
	}
}

func TestTokenizeLimit(t *testing.T) {
	if DefaultQuotas.TokenizeLimit != 5 {
		t.Fatalf("default tokenize limit = %d, want 5", DefaultQuotas.TokenizeLimit)
	}
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"five primitives", `["a","b","c","d","e"]`, true},
		{"five mixed", `{"a":"x","b":[{"type":"card","data":` + cardJSON + `},"y"],"c":{"d":"z","e":"w"}}`, true},
		{"six primitives", `["a","b","c","d","e","f"]`, false},
		{"six nested", `{"a":["x","y",{"type":"card","data":` + cardJSON + `}],"b":{"c":"z","d":["w","v"]}}`, false},
		{"six token objects", `[` + strings.Repeat(`{"type":"token","data":"t"},`, 5) + `{"type":"token","data":"t"}]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newTokenWorld(t, nil)
			body := decodeJSON(t, tc.body)
			out, err := w.tokenize("admin", body)
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				if n := w.checkTokenized("$", body, out); n != 5 || w.total() != 5 {
					t.Errorf("%d tokens in the answer, %d listed, want 5", n, w.total())
				}
				return
			}
			if out != nil {
				t.Errorf("answer beside the error: %v", out)
			}
			var v *ValidationError
			if !errors.As(err, &v) {
				t.Fatalf("error %v, want a ValidationError", err)
			}
			if n := w.total(); n != 0 {
				t.Errorf("%d tokens created over the limit", n)
			}
			if rep := w.usage().TokenReport; rep.TotalTokens != 0 || rep.MonthlyActiveTokens != 0 {
				t.Errorf("usage after a refused tokenize = %+v", rep)
			}
		})
	}
}

// A tokenize request creates every token or none.
func TestTokenizeAllOrNothing(t *testing.T) {
	three := `{"type":"card","data":` + cardJSON + `},"plain",{"type":"bank","data":{"routing_number":"021000021","account_number":"98765432101234"}}`
	for _, tc := range []struct {
		name, app, body string
		check           func(t *testing.T, err error)
	}{
		{"invalid fourth", "admin", `[` + three + `,{"type":"card","data":{"number":"4242424242424241"}}]`,
			func(t *testing.T, err error) { wantFieldErrors(t, err, "[3].data.number") }},
		{"invalid fourth in an object", "admin", `{"a":[` + three + `],"b":{"type":"bank","data":{"routing_number":"021000022","account_number":"1"}}}`,
			func(t *testing.T, err error) { wantFieldErrors(t, err, "b.data.routing_number") }},
		{"fourth of an unknown type", "admin", `[` + three + `,{"type":"cash","data":"1"}]`,
			func(t *testing.T, err error) { wantFieldErrors(t, err, "[3].type") }},
		{"fourth with a bad id", "admin", `[` + three + `,{"type":"token","data":"1","id":"a/b"}]`,
			func(t *testing.T, err error) { wantFieldErrors(t, err, "[3].id") }},
		{"fourth repeats an id", "admin", `[{"type":"token","data":"1","id":"same-id"},"x","y",{"type":"token","data":"2","id":"same-id"}]`,
			func(t *testing.T, err error) { wantErrorIs(t, err, ErrConflict) }},
		{"fourth in a forbidden container", "pci", `[{"type":"card","data":` + cardJSON + `},{"type":"card","data":` + cardJSON + `},{"type":"card","data":` + cardJSON + `},{"type":"token","data":"x"}]`,
			func(t *testing.T, err error) { wantErrorIs(t, err, ErrForbidden) }},
		{"fourth with a bad field type", "admin", `[` + three + `,{"type":"token","data":"1","metadata":"m"}]`,
			func(t *testing.T, err error) {
				if fields := validationFields(t, err); len(fields) != 1 || !strings.HasPrefix(fields[0], "[3].") {
					t.Errorf("fields = %v, want one under [3].", fields)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newTokenWorld(t, nil)
			out, err := w.tokenize(tc.app, decodeJSON(t, tc.body))
			if err == nil {
				t.Fatalf("Tokenize succeeded: %s", shapeOf(out))
			}
			tc.check(t, err)
			if n := w.total(); n != 0 {
				t.Errorf("%d tokens left by a failed tokenize", n)
			}
			rep := w.usage().TokenReport
			if rep.TotalTokens != 0 || rep.MonthlyActiveTokens != 0 || len(rep.MetricsByType) != 0 {
				t.Errorf("usage after a failed tokenize = %+v", rep)
			}
			if keys := kvKeys(t, w.s, string(tenantDataPrefix(w.tenant.ID))+"tok"); len(keys) != 0 {
				t.Errorf("token records left: %d", len(keys))
			}
		})
	}
}

func TestTokenizeDeduplicates(t *testing.T) {
	w := newTokenWorld(t, nil)
	existing := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, testCVC), DeduplicateToken: boolPtr(true)})
	card := `{"type":"card","data":` + cardJSON + `,"deduplicate_token":true}`
	other := `{"type":"card","data":{"number":"5555555555554444"},"deduplicate_token":true}`
	out, err := w.tokenize("admin", decodeJSON(t, `[`+card+`,`+other+`,`+other+`]`))
	if err != nil {
		t.Fatal(err)
	}
	toks := out.([]any)
	first, second, third := toks[0].(*Token), toks[1].(*Token), toks[2].(*Token)
	if first.ID != existing.ID || first.Extras == nil || !first.Extras.Deduplicated {
		t.Errorf("tokenize of an existing card = %s extras %+v, want %s deduplicated", first.ID, first.Extras, existing.ID)
	}
	if second.Extras != nil || third.ID != second.ID || third.Extras == nil || !third.Extras.Deduplicated {
		t.Errorf("two identical cards in one request: %s %+v, %s %+v", second.ID, second.Extras, third.ID, third.Extras)
	}
	if n := w.total(); n != 2 {
		t.Errorf("%d tokens, want 2", n)
	}
}

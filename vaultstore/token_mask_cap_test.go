package vaultstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Issue 20: a mask or a token id must not show more of a card number
// than its BIN and last four digits, or of a bank account number more
// than its last four. These tests use the store's API only, as an
// application would.

// capCard is a card number whose hidden digits (between the 8-digit BIN
// and the last four) are all different from their neighbours, so a leak
// of any of them shows; capAmex a 15-digit one (BIN of 6); capYear a
// card whose hidden digits are its expiry year, 2030.
var (
	capCard    = asSecret(luhnNumber("4123456789", 12345, 16)) // 41234567 8912 345x
	capAmex    = asSecret(luhnNumber("3712345", 6789012, 15))  // 371234 56789 012x
	capYear    = asSecret(luhnNumber("45671234", 2030987, 16)) // 45671234 2030 987x
	capAccount = asSecret("6655443322119")
)

// capUpdater may update and read tokens masked, and create them.
var capUpdater = ApplicationInput{Rules: []AccessRule{testRule(1, "/", TransformMask, "token:create", "token:read", "token:update")}}

// newMaskCapWorld is a token world with the applications of these tests.
func newMaskCapWorld(tb testing.TB) *tokenWorld {
	w := newTokenWorld(tb, nil)
	for name, in := range map[string]ApplicationInput{
		"cap-updater":   capUpdater,
		"cap-writeonly": {Rules: []AccessRule{testRule(1, "/", TransformMask, "token:create", "token:update")}},
		"cap-plain":     {Permissions: []string{"token:create", "token:read", "token:update", "token:use"}},
	} {
		in.Name, in.Type = name, AppPrivate
		w.apps[name], _ = mustCreateApp(tb, w.s, w.tenant.ID, in)
	}
	return w
}

// hiddenDigits returns the digits of a card or account number a mask may
// not show.
func hiddenDigits(number string, bank bool) string {
	if bank {
		return number[:len(number)-4]
	}
	bin := 6
	if len(number) >= 16 {
		bin = 8
	}
	return number[bin : len(number)-4]
}

// revealsHidden reports whether a value, as JSON, shows a hidden digit
// run of the number: the run itself, reversed, or the whole number
// spaced out, anywhere in its digits.
func revealsHidden(tb testing.TB, v any, number string, bank bool) bool {
	tb.Helper()
	if v == nil {
		return false
	}
	// the expiry is shown by design (capYear's hidden digits are its
	// year)
	raw := strings.NewReplacer(`"expiration_year":2030`, "", `"expiration_month":12`, "").Replace(encodeJSON(tb, v))
	var digits strings.Builder
	for _, r := range raw {
		if r >= '0' && r <= '9' {
			digits.WriteRune(r)
		}
	}
	d := digits.String()
	hidden := hiddenDigits(number, bank)
	rev := []byte(hidden)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return strings.Contains(d, hidden) || strings.Contains(d, string(rev)) || strings.Contains(d, number)
}

// wantFieldProblem fails unless err is a ValidationError naming field.
func wantFieldProblem(tb testing.TB, err error, field, what string) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("%s: accepted, want a validation error on %q", what, field)
	}
	var v *ValidationError
	if !errors.As(err, &v) {
		tb.Fatalf("%s: error %v (%T), want a validation error on %q", what, err, err, field)
	}
	if _, ok := v.Fields[field]; !ok {
		tb.Fatalf("%s: error names %v, want %q", what, validationFields(tb, err), field)
	}
}

// hostileMask is a mask an attacker sets on a token, and the token it
// is set on.
type hostileMask struct {
	name   string
	typ    string
	number string // the card or account number the token holds
	mask   any
}

func hostileMasks() []hostileMask {
	c, amex, acct := capCard, capAmex, capAccount
	digitToLetter := "{{ data.number | slice: 8, 4"
	for d := 0; d <= 9; d++ {
		digitToLetter += fmt.Sprintf(" | replace: '%d', '%c'", d, 'a'+d)
	}
	digitToLetter += " }}"
	return []hostileMask{
		{"whole number", "card", c, map[string]any{"number": "{{ data.number }}"}},
		{"reveal_last the length", "card", c, map[string]any{"number": "{{ data.number | reveal_last: 16 }}"}},
		{"reveal_last 8", "card", c, "{{ data.number | reveal_last: 8 }}"},
		{"reveal first 10", "card", c, "{{ data.number | reveal: 10, 4 }}"},
		{"json path", "card", c, "{{ data | json: '$.number' }}"},
		{"whole data", "card", c, "{{ data }}"},
		{"stringify", "card", c, "{{ data | stringify }}"},
		{"to_string of data", "card", c, "{{ data | to_string }}"},
		{"slice of the hidden digits", "card", c, "{{ data.number | slice: 8, 4 }}"},
		{"slice BIN and hidden", "card", c, "{{ data.number | slice: 0, 12 }}"},
		{"split and join with spaces", "card", c, "{{ data.number | split: '' | join: ' ' }}"},
		{"reversed", "card", c, "{{ data.number | split: '' | reverse | join: '' }}"},
		{"spaced with dashes", "card", c, "{{ data.number | slice: 0, 4 }}-{{ data.number | slice: 4, 4 }}-{{ data.number | slice: 8, 4 }}-{{ data.number | slice: 12, 4 }}"},
		{"append", "card", c, "{{ data.number | last4 | append: data.number }}"},
		{"prepend to last4", "card", c, "{{ data.number | last4 | prepend: data.number }}"},
		{"pad_left", "card", c, "{{ data.number | pad_left: 24, '*' }}"},
		{"pad_right", "card", c, "{{ data.number | pad_right: 24, '*' }}"},
		{"upcase", "card", c, "{{ data.number | upcase }}"},
		{"digits as letters", "card", c, digitToLetter},
		{"arithmetic", "card", c, "{{ data.number | slice: 8, 4 | plus: 1111 }}"},
		{"one digit per member", "card", c, map[string]any{
			"a": "{{ data.number | slice: 8, 1 }}", "b": "{{ data.number | slice: 9, 1 }}",
			"c": "{{ data.number | slice: 10, 1 }}", "d": "{{ data.number | slice: 11, 1 }}"}},
		{"split over an array", "card", c, []any{"{{ data.number | slice: 0, 8 }}", "{{ data.number | slice: 8, 8 }}"}},
		{"nested member", "card", c, map[string]any{"n": map[string]any{"v": "{{ data | json: '$.number' | slice: 6, 6 }}"}}},
		{"branch on a digit", "card", c, "{% assign d = data.number | slice: 8, 1 %}{% case d %}{% when '0' %}zero{% when '1' %}one{% when '2' %}two{% when '3' %}three{% when '4' %}four{% when '5' %}five{% when '6' %}six{% when '7' %}seven{% when '8' %}eight{% else %}nine{% endcase %}"},
		{"loop over the digits", "card", c, "{% assign ds = data.number | split: '' %}{% for d in ds %}{{ d }}.{% endfor %}"},
		{"behind an alias branch", "card", c, "{% assign r = data.number | alias_preserve_length | slice: 0, 1 %}{% if r == 'a' %}XXXX{% else %}{{ data.number | slice: 8, 4 }}{% endif %}"},
		{"alias keeping the hidden digits", "card", c, "{{ data.number | alias_preserve_format: 12, 0 }}"},
		{"number written in the template", "card", c, map[string]any{"note": c[:4] + " " + c[4:8] + " " + c[8:12] + " " + c[12:]}},
		{"number in a comment", "card", c, "{% comment %}" + c + "{% endcomment %}{{ data.number | last4 }}"},
		{"the number spelled out from allowed parts", "card", capYear, "{{ data.number | slice: 0, 8 }}{{ data.expiration_year }}{{ data.number | last4 }}"},
		{"amex BIN of 8", "card", amex, "{{ data.number | slice: 0, 8 }}"},
		{"amex reveal 6, 5", "card", amex, "{{ data.number | reveal: 6, 5 }}"},
		{"account number", "bank", acct, map[string]any{"account_number": "{{ data.account_number }}"}},
		{"account reveal_last 5", "bank", acct, "{{ data.account_number | reveal_last: 5 }}"},
		{"account stringify", "bank", acct, "{{ data | stringify }}"},
		{"account reversed", "bank", acct, "{{ data.account_number | split: '' | reverse | join: '' }}"},
	}
}

// capData is token data holding number.
func capData(typ, number string) map[string]any {
	if typ == "bank" {
		return bankData(testRouting, number)
	}
	return cardData(number, testCVC)
}

// TestMaskCapRefusesHostileMasks: a mask that could show more of the
// number than allowed is refused on create, tokenize and update, and the
// token keeps showing only what is allowed.
func TestMaskCapRefusesHostileMasks(t *testing.T) {
	w := newMaskCapWorld(t)
	for _, tc := range hostileMasks() {
		t.Run(tc.name, func(t *testing.T) {
			w := w.at(t)
			bank := tc.typ == "bank"
			for _, app := range []string{"cap-writeonly", "cap-updater", "admin"} {
				tok, err := w.create(app, TokenInput{Type: tc.typ, Data: capData(tc.typ, tc.number), Mask: tc.mask})
				if err == nil && revealsHidden(t, tok.Data, tc.number, bank) {
					t.Errorf("the create answer to %s shows the number: %s", app, encodeJSON(t, tok.Data))
				}
				wantFieldProblem(t, err, "mask", "create by "+app)
			}
			_, err := w.tokenize("cap-writeonly", map[string]any{"x": map[string]any{
				"type": tc.typ, "data": capData(tc.typ, tc.number), "mask": tc.mask}})
			wantFieldProblem(t, err, "x.mask", "tokenize")

			tok := w.mustCreate("admin", TokenInput{Type: tc.typ, Data: capData(tc.typ, tc.number)})
			got, err := w.update("admin", tok.ID, map[string]any{"mask": tc.mask})
			if err == nil && revealsHidden(t, got.Data, tc.number, bank) {
				t.Errorf("the update answer shows the number: %s", encodeJSON(t, got.Data))
			}
			wantFieldProblem(t, err, "mask", "update")
			if read := w.mustGet("cap-updater", tok.ID); revealsHidden(t, read.Data, tc.number, bank) {
				t.Errorf("a masked read shows the number: %s", encodeJSON(t, read.Data))
			}
		})
	}
}

// TestMaskCapKeepsAllowedMasks: masks that show at most the BIN, the
// last four and the other members work, including ones whose digits
// happen to equal hidden digits (the expiry year of capYear).
func TestMaskCapKeepsAllowedMasks(t *testing.T) {
	w := newMaskCapWorld(t)
	tests := []struct {
		name, typ, number string
		mask              any
		want              string // the masked data as JSON; "" to skip (random)
	}{
		{"default", "card", capCard, nil, `{"expiration_month":12,"expiration_year":2030,"number":"XXXXXXXXXXXX` + capCard[12:] + `"}`},
		{"last4", "card", capCard, "{{ data.number | last4 }}", `"` + capCard[12:] + `"`},
		{"BIN and last4", "card", capCard, "{{ data.number | reveal: 8, 4 }}", `"` + capCard[:8] + `XXXX` + capCard[12:] + `"`},
		{"BIN of 6 and last4", "card", capCard, "{{ data.number | reveal: 6, 4, '*' }}", `"` + capCard[:6] + `******` + capCard[12:] + `"`},
		{"BIN slice", "card", capCard, map[string]any{"bin": "{{ data.number | slice: 0, 8 }}", "l": "{{ data.number | last4 }}"},
			`{"bin":"` + capCard[:8] + `","l":"` + capCard[12:] + `"}`},
		{"amex BIN of 6", "card", capAmex, "{{ data.number | reveal: 6, 4 }}", `"` + capAmex[:6] + `XXXXX` + capAmex[11:] + `"`},
		{"length", "card", capCard, "{{ data.number | size }}", `16`},
		{"expiry", "card", capCard, "{{ data.expiration_month }}/{{ data.expiration_year }} {{ data.number | last4 }}", `"12/2030 ` + capCard[12:] + `"`},
		{"expiry equal to hidden digits", "card", capYear,
			map[string]any{"n": "{{ data.number | reveal: 8, 4 }}", "y": "{{ data.expiration_year }}", "exp": "{{ data.expiration_month }}/{{ data.expiration_year }}"},
			`{"exp":"12/2030","n":"` + capYear[:8] + `XXXX` + capYear[12:] + `","y":2030}`},
		{"alias keeping BIN and last4", "card", capCard, "{{ data.number | alias_preserve_format: 8, 4 }}", ""},
		{"two aliases", "card", capCard, map[string]any{"a": "{{ data.number | alias_preserve_length: 0, 4 }}", "b": "{{ data.number | alias_preserve_format: 6, 4 }}"}, ""},
		{"literal text", "card", capCard, map[string]any{"brand": "visa", "n": "**** {{ data.number | last4 }}"}, `{"brand":"visa","n":"**** ` + capCard[12:] + `"}`},
		{"bank default", "bank", capAccount, nil, `{"account_number":"XXXXXXXXX` + capAccount[9:] + `","routing_number":"` + testRouting + `"}`},
		{"bank last4 and routing", "bank", capAccount, "{{ data.routing_number }}/{{ data.account_number | last4 }}", `"` + testRouting + `/` + capAccount[9:] + `"`},
		{"short account whole", "bank", "987", "{{ data.account_number }}", `"987"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := w.at(t)
			tok := w.mustCreate("cap-updater", TokenInput{Type: tc.typ, Data: capData(tc.typ, tc.number), Mask: tc.mask})
			got := w.mustGet("cap-updater", tok.ID)
			if got.Data == nil {
				t.Fatalf("a masked read left the data out")
			}
			if tc.want != "" && !jsonEqual(t, got.Data, tc.want) {
				t.Errorf("masked data %s, want %s", encodeJSON(t, got.Data), tc.want)
			}
			if tc.mask != nil {
				other := w.mustCreate("admin", TokenInput{Type: tc.typ, Data: capData(tc.typ, tc.number)})
				w.mustUpdate("admin", other.ID, map[string]any{"mask": tc.mask})
			}
		})
	}
}

// TestMaskCapOnRead: a mask stored before the vault refused them shows
// no data to a masked reader, and a mask template holding the number is
// not shown to a reader who may not see the data.
func TestMaskCapOnRead(t *testing.T) {
	w := newMaskCapWorld(t)
	tok := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(capCard, testCVC), Metadata: map[string]string{"k": "v"}})
	written := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(capCard, "")})
	// store hostile masks as an older vault would have
	w.storeMask(t, tok.ID, map[string]any{"number": "{{ data.number }}", "y": "{{ data.expiration_year }}"})
	w.storeMask(t, written.ID, map[string]any{"note": capCard})

	for _, app := range []string{"cap-updater", "cap-plain", "redactor"} {
		got := w.mustGet(app, tok.ID)
		if got.Data != nil {
			t.Errorf("%s: a masked read of a hostile mask shows data: %s", app, encodeJSON(t, got.Data))
		}
		got = w.mustGet(app, written.ID)
		if revealsHidden(t, got.Data, capCard, false) || revealsHidden(t, got.Mask, capCard, false) {
			t.Errorf("%s: a read shows the number written in the mask: %s", app, encodeJSON(t, got))
		}
		toks, _ := w.mustList(app, TokenFilter{}, 0, 10)
		for _, got := range toks {
			if revealsHidden(t, got.Data, capCard, false) || revealsHidden(t, got.Mask, capCard, false) {
				t.Errorf("%s: a list shows the number: %s", app, encodeJSON(t, got))
			}
		}
	}
	// an update that leaves the mask and the data alone still works
	if got := w.mustUpdate("admin", tok.ID, map[string]any{"metadata": map[string]any{"k": "w"}}); revealsHidden(t, got.Data, capCard, false) {
		t.Errorf("the update answer shows the number: %s", encodeJSON(t, got.Data))
	}
	// the owner restores a safe mask
	w.mustUpdate("admin", tok.ID, map[string]any{"mask": nil})
	if got := w.mustGet("cap-updater", tok.ID); stringAt(got.Data, "number") != "XXXXXXXXXXXX"+capCard[12:] {
		t.Errorf("after the default mask is restored: %s", encodeJSON(t, got.Data))
	}
}

// stringAt returns member k of an object as a string.
func stringAt(v any, k string) string {
	m, _ := v.(map[string]any)
	s, _ := m[k].(string)
	return s
}

// storeMask overwrites a token's stored mask, bypassing every check.
func (w *tokenWorld) storeMask(tb testing.TB, id string, mask any) {
	tb.Helper()
	rec, err := w.record(id)
	if err != nil {
		tb.Fatal(err)
	}
	rec.Mask = mask
	tk := w.keys()
	err = w.s.kv.Update(w.ctx, func(wr Writer) error {
		return putSealed(wr, tk, "token", w.tenant.ID, id, tokenKey(w.tenant.ID, id), rec)
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// TestMaskCapCheckedAgainstPatchedData: a mask that shows nothing for the
// data it was set over cannot be turned into one that shows the number by
// an update of the data alone.
func TestMaskCapCheckedAgainstPatchedData(t *testing.T) {
	w := newMaskCapWorld(t)
	mask := "{% if data.expiration_year == 2031 %}{{ data.number }}{% else %}{{ data.number | last4 }}{% endif %}"
	tok := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(capCard, ""), Mask: mask})
	_, err := w.update("cap-updater", tok.ID, patchBody(t, `{"data":{"expiration_year":2031}}`))
	wantFieldProblem(t, err, "mask", "a data patch that turns the mask into a leak")
	if got := w.mustGet("cap-updater", tok.ID); revealsHidden(t, got.Data, capCard, false) {
		t.Errorf("a masked read shows the number: %s", encodeJSON(t, got.Data))
	}
	w.mustUpdate("cap-updater", tok.ID, patchBody(t, `{"data":{"expiration_year":2032}}`))
}

// TestMaskChangeNeedsReveal: changing an existing token's mask takes
// token:update and the right to read the token revealed.
func TestMaskChangeNeedsReveal(t *testing.T) {
	w := newMaskCapWorld(t)
	safe := "{{ data.number | reveal: 6, 4 }}"
	tests := []struct {
		name, app string
		patch     map[string]any
		forbidden bool
	}{
		{"masked reader sets a mask", "cap-updater", map[string]any{"mask": safe}, true},
		{"writer without read sets a mask", "cap-writeonly", map[string]any{"mask": safe}, true},
		{"plain permissions set a mask", "cap-plain", map[string]any{"mask": safe}, true},
		{"masked reader removes the mask", "cap-updater", map[string]any{"mask": nil}, true},
		{"masked reader merges a member", "cap-updater", map[string]any{"mask": map[string]any{"extra": "x"}}, true},
		{"revealing reader sets a mask", "admin", map[string]any{"mask": safe}, false},
		{"masked reader sends the same mask", "cap-updater", map[string]any{"mask": map[string]any{"number": "{{ data.number | last4 }}"}}, false},
		{"masked reader patches metadata", "cap-updater", map[string]any{"metadata": map[string]any{"k": "v"}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := w.at(t)
			tok := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(capCard, ""),
				Mask: map[string]any{"number": "{{ data.number | last4 }}"}})
			_, err := w.update(tc.app, tok.ID, tc.patch)
			if tc.forbidden != errors.Is(err, ErrForbidden) || (!tc.forbidden && err != nil) {
				t.Fatalf("update by %s: %v, want forbidden %v", tc.app, err, tc.forbidden)
			}
			got := w.mustGet("admin", tok.ID)
			if tc.forbidden && !jsonEqual(t, got.Mask, `{"number":"{{ data.number | last4 }}"}`) {
				t.Errorf("a refused update changed the mask to %s", encodeJSON(t, got.Mask))
			}
		})
	}
}

// TestTokenIDCannotShowNumber: a card or bank token's id, literal or an
// expression, may not hold the number, the account number or a
// Luhn-valid run of 13 to 19 digits, on every path that creates tokens.
func TestTokenIDCannotShowNumber(t *testing.T) {
	w := newMaskCapWorld(t)
	c, acct := capCard, capAccount
	rev := []byte(c)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	tests := []struct{ name, typ, number, id string }{
		{"number expression", "card", c, "{{ data.number }}"},
		{"json expression", "card", c, "{{ data | json: '$.number' }}"},
		{"literal number", "card", c, c},
		{"literal number with dashes", "card", c, c[:4] + "-" + c[4:8] + "-" + c[8:12] + "-" + c[12:]},
		{"literal number inside", "card", c, "tok_" + c + "_x"},
		{"literal number among letters", "card", c, "n" + strings.Join(strings.Split(c, ""), "x")},
		{"number reversed", "card", c, string(rev)},
		{"expression with a prefix", "card", c, "card-{{ data.number }}"},
		{"expression spaced", "card", c, "{{ data.number | split: '' | join: ' ' }}"},
		{"BIN and hidden digits", "card", c, "{{ data.number | slice: 0, 12 }}"},
		{"hidden digits alone", "card", c, "x{{ data.number | slice: 8, 4 }}"},
		{"expression reversed", "card", c, "{{ data.number | split: '' | reverse | join: '' }}"},
		{"alias keeping the number", "card", c, "{{ data.number | alias_preserve_format: 16, 0 }}"},
		{"another Luhn-valid card", "card", c, testVisa2},
		{"another card spaced", "card", c, "id " + testVisa2[:4] + " " + testVisa2[4:8] + " " + testVisa2[8:12] + " " + testVisa2[12:]},
		{"Luhn-valid 13 digits", "card", c, "x" + luhnNumber("401288", 888, 13)},
		{"Luhn-valid 19 digits", "card", c, luhnNumber("6011", 1234, 19)},
		{"account expression", "bank", acct, "{{ data.account_number }}"},
		{"account literal", "bank", acct, "acct-" + acct},
		{"account hidden digits", "bank", acct, "a{{ data.account_number | slice: 0, 5 }}"},
		{"Luhn-valid id on a bank token", "bank", acct, testVisa2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := w.at(t)
			data := capData(tc.typ, tc.number)
			_, err := w.create("cap-writeonly", TokenInput{Type: tc.typ, ID: tc.id, Data: data})
			wantFieldProblem(t, err, "id", "create")
			dd := true
			_, err = w.create("cap-writeonly", TokenInput{Type: tc.typ, ID: tc.id, Data: data, DeduplicateToken: &dd})
			wantFieldProblem(t, err, "id", "create with deduplication")
			_, err = w.tokenize("cap-writeonly", map[string]any{"pay": map[string]any{"card": map[string]any{"type": tc.typ, "id": tc.id, "data": data}}})
			wantFieldProblem(t, err, "pay.card.id", "tokenize, nested")
			_, err = w.tokenize("cap-writeonly", []any{"plain", map[string]any{"type": tc.typ, "id": tc.id, "data": data}})
			wantFieldProblem(t, err, "[1].id", "tokenize, in an array")
			if n := w.total(); n != 0 {
				t.Fatalf("%d tokens were created", n)
			}
		})
	}
}

// TestTokenIDAliasesKeepWorking: the alias filters make card and bank
// ids that never hold the number or a Luhn-valid run, and never fail for
// it, however often they are drawn.
func TestTokenIDAliasesKeepWorking(t *testing.T) {
	w := newMaskCapWorld(t)
	tests := []struct{ typ, number, id string }{
		{"card", capCard, "{{ data.number | alias_preserve_format: 0, 4 }}"},
		{"card", capCard, "{{ data.number | alias_preserve_format: 8, 4 }}"},
		{"card", capCard, "{{ data.number | alias_preserve_length: 6, 4 }}"},
		{"card", capAmex, "{{ data.number | alias_preserve_format: 6, 4 }}"},
		{"bank", capAccount, "{{ data.account_number | alias_preserve_format: 0, 4 }}"},
	}
	for _, tc := range tests {
		for i := range 40 {
			tok, err := w.create("cap-writeonly", TokenInput{Type: tc.typ, ID: tc.id, Data: capData(tc.typ, tc.number)})
			if err != nil {
				t.Fatalf("%s, draw %d: %v", tc.id, i, err)
			}
			if strings.Contains(tok.ID, tc.number) || (len(tok.ID) >= 13 && len(tok.ID) <= 19 && isASCIIDigits(tok.ID) && luhnValid(tok.ID)) {
				t.Fatalf("%s gave an id that shows a card number", tc.id)
			}
			// deleted, so that a later draw may give the same id
			if err := w.del("admin", tok.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	// literal ids that hold no card-shaped run keep working
	for _, id := range []string{"order-2024-000123", "f47ac10b-58cc-4372-a567-0e02b2c3d479", "x" + testBadLuhn, "12345678901234567890123"} {
		if _, err := w.create("cap-writeonly", TokenInput{Type: "card", ID: id, Data: cardData(capCard, "")}); err != nil {
			t.Errorf("id %q: %v", id, err)
		}
	}
}

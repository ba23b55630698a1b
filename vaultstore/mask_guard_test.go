package vaultstore

import (
	"slices"
	"strings"
	"testing"
)

func TestHiddenNumberOf(t *testing.T) {
	tests := []struct {
		name, typ string
		data      any
		ok        bool
		hidden    string
	}{
		{"16 digits: BIN of 8", "card", cardData(testVisa2, ""), true, testVisa2[8:12]},
		{"19 digits: BIN of 8", "card", cardData(luhnNumber("6011", 1234, 19), ""), true, luhnNumber("6011", 1234, 19)[8:15]},
		{"15 digits: BIN of 6", "card", cardData(testAmex, ""), true, testAmex[6:11]},
		{"13 digits: BIN of 6", "card", cardData(luhnNumber("401288", 888, 13), ""), true, luhnNumber("401288", 888, 13)[6:9]},
		{"bank: all but the last four", "bank", bankData(testRouting, testAccount), true, testAccount[:len(testAccount)-4]},
		{"bank: five digits", "bank", bankData(testRouting, "12345"), true, "1"},
		{"bank: four digits, nothing hidden", "bank", bankData(testRouting, "1234"), false, ""},
		{"generic token", "token", map[string]any{"number": testVisa}, false, ""},
		{"card without number", "card", map[string]any{}, false, ""},
		{"card data not an object", "card", testVisa, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, ok := hiddenNumberOf(tc.typ, tc.data)
			if ok != tc.ok || (ok && h.digits[h.lo:h.hi] != tc.hidden) {
				t.Fatalf("hiddenNumberOf = %v (hidden %d..%d), want %v", ok, h.lo, h.hi, tc.ok)
			}
		})
	}
}

func TestDigitRunsAndLuhnRuns(t *testing.T) {
	tests := []struct {
		in   string
		runs []string
		luhn bool
	}{
		{"abc", nil, false},
		{"4242 4242-4242 4242", []string{testVisa}, true},
		{"4242  4242 4242 4242", []string{"4242", "424242424242"}, false},
		{"x" + testVisa2 + "y", []string{testVisa2}, true},
		{"４２４２４２４２４２４２４２４２", []string{testVisa}, true},
		{"order-2024-000123", []string{"2024000123"}, false},
		{testBadLuhn, []string{testBadLuhn}, false},
		{"1" + testVisa2 + "1234", []string{"1" + testVisa2 + "1234"}, false}, // 21 digits: not a card number
		{"-12 34-", []string{"1234"}, false},
	}
	for _, tc := range tests {
		if got := digitRuns(tc.in); !slices.Equal(got, tc.runs) {
			t.Errorf("digitRuns(%q) = %q, want %q", tc.in, got, tc.runs)
		}
		if got := luhnRunIn(tc.in); got != tc.luhn {
			t.Errorf("luhnRunIn(%q) = %v, want %v", tc.in, got, tc.luhn)
		}
	}
}

// TestGuardedIDsNeverFailAtRandom: id expressions made of the alias
// filters pass every time, and never give an id that shows a card number,
// although one draw in ten of a 16-digit alias passes the Luhn check.
func TestGuardedIDsNeverFailAtRandom(t *testing.T) {
	card := cardData(capCard, "")
	tests := []struct{ typ, src string }{
		{"card", "{{ data.number | alias_preserve_format: 0, 4 }}"},
		{"card", "{{ data.number | alias_preserve_format: 8, 4 }}"},
		{"card", "{{ data.number | alias_preserve_format: 6, 4 }}"},
		{"card", "{{ data.number | alias_preserve_length }}"},
		{"card", "tok_{{ data.number | alias_preserve_format: 0, 4 }}"},
		{"bank", "{{ data.account_number | alias_preserve_format: 0, 4 }}"},
		{"bank", "{{ data.account_number | alias_preserve_format: 0, 2 }}"},
	}
	for _, tc := range tests {
		data := card
		if tc.typ == "bank" {
			data = bankData(testRouting, "98765432")
		}
		h, _ := hiddenNumberOf(tc.typ, data)
		for i := range 2000 {
			id, err := evaluateTokenID(tc.typ, tc.src, data)
			if err != nil {
				t.Fatalf("%s, draw %d: %v", tc.src, i, err)
			}
			if luhnRunIn(id) || strings.Contains(id, h.digits) {
				t.Fatalf("%s gave an id that shows a card or account number", tc.src)
			}
		}
	}
}

// TestGuardedIDKeepsHiddenDigitsOut: an alias that keeps digits a mask
// may not show is refused, as the digits themselves would be.
func TestGuardedIDKeepsHiddenDigitsOut(t *testing.T) {
	tests := []struct{ typ, src string }{
		{"card", "{{ data.number | alias_preserve_format: 10, 4 }}"},
		{"card", "{{ data.number | alias_preserve_format: 0, 6 }}"},
		{"bank", "{{ data.account_number | alias_preserve_format: 2, 2 }}"},
	}
	for _, tc := range tests {
		data := cardData(capCard, "")
		if tc.typ == "bank" {
			data = bankData(testRouting, "98765432")
		}
		_, err := evaluateTokenID(tc.typ, tc.src, data)
		wantFieldProblem(t, err, "id", tc.src)
	}
}

// TestGuardedIDRefusalIsQuick: an id expression that fails the same way
// twice is not drawn again.
func TestGuardedIDRefusalIsQuick(t *testing.T) {
	data := cardData(testVisa2, "")
	_, err := evaluateTokenID("card", "{{ 'x' }}"+testVisa, data)
	wantFieldProblem(t, err, "id", "a Luhn-valid run written in the expression")
}

// TestMaskGuardProbesDoNotFlagSafeMasks: the guard never refuses a mask
// that shows only what is allowed, however often it runs.
func TestMaskGuardProbesDoNotFlagSafeMasks(t *testing.T) {
	data := cardData(capYear, "")
	masks := []any{
		"{{ data.number | reveal: 8, 4 }}",
		map[string]any{"n": "{{ data.number | alias_preserve_format: 8, 4 }}", "m": "{{ data.number | alias_preserve_length: 0, 4 }}", "y": "{{ data.expiration_year }}"},
		"{{ data.expiration_year }}{{ data.number | last4 }}",
	}
	for _, mask := range masks {
		for i := range 500 {
			if err := checkMask("card", mask, data); err != nil {
				t.Fatalf("mask %v, run %d: %v", mask, i, err)
			}
		}
	}
}

// A mask never shows the CVC, and a mask that fails on a token's data
// hides that token's data instead of failing the read.
func TestMaskNeverSeesCVC(t *testing.T) {
	w := newTokenWorld(t, nil)
	showsCVC := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, "9173"),
		Mask: map[string]any{"c": "{{ data.cvc }}", "n": "{{ data.number | last4 }}"}})
	got := w.mustGet("masker", showsCVC.ID)
	if raw := encodeJSON(t, got.Data); strings.Contains(raw, "9173") {
		t.Fatalf("a masked read shows the cvc: %s", raw)
	}
	failing := w.mustCreate("admin", TokenInput{Type: "token", Data: map[string]any{"a": "x", "b": "y"},
		Mask: "{{ data | json: '$.*' }}"})
	got, err := w.get("masker", failing.ID)
	if err != nil {
		t.Fatalf("a failing mask failed the read: %v", err)
	}
	if got.Data != nil {
		t.Fatalf("a failing mask returned data: %v", got.Data)
	}
	if _, n := w.mustList("masker", TokenFilter{}, 0, 100); n != 2 {
		t.Fatalf("list total %d, want 2", n)
	}
}

package vaultstore

import (
	"maps"
	"testing"
)

// TestIsDefaultMask: a mask is the default only when it has the default's
// members with the same templates, whatever map it arrives in.
func TestIsDefaultMask(t *testing.T) {
	card, _ := LookupTokenType(TokenTypeCard)
	bank, _ := LookupTokenType(TokenTypeBank)
	cardMask := maps.Clone(card.DefaultMask.(map[string]any))
	changed := maps.Clone(cardMask)
	changed["number"] = "{{ data.number | reveal_last: 6 }}"
	extra := maps.Clone(cardMask)
	extra["cvc"] = "{{ data.cvc }}"
	missing := maps.Clone(cardMask)
	delete(missing, "expiration_year")
	renamed := maps.Clone(missing)
	renamed["expiry_year"] = cardMask["expiration_year"]
	notString := maps.Clone(cardMask)
	notString["expiration_month"] = map[string]any{"m": "{{ data.expiration_month }}"}
	for _, tc := range []struct {
		name      string
		tokenType string
		mask      any
		want      bool
	}{
		{"card default, another map", TokenTypeCard, cardMask, true},
		{"bank default", TokenTypeBank, maps.Clone(bank.DefaultMask.(map[string]any)), true},
		{"card default on a bank", TokenTypeBank, cardMask, false},
		{"a template changed", TokenTypeCard, changed, false},
		{"a member more", TokenTypeCard, extra, false},
		{"a member less", TokenTypeCard, missing, false},
		{"a member renamed", TokenTypeCard, renamed, false},
		{"a member not a string", TokenTypeCard, notString, false},
		{"a string mask", TokenTypeCard, "{{ data.number | reveal_last: 4 }}", false},
		{"no mask", TokenTypeCard, nil, false},
		{"token type has no default", TokenTypeToken, cardMask, false},
	} {
		if got := isDefaultMask(tc.tokenType, tc.mask); got != tc.want {
			t.Errorf("%s: isDefaultMask = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// BenchmarkIsDefaultMask: the check a card create makes three times.
func BenchmarkIsDefaultMask(b *testing.B) {
	card, _ := LookupTokenType(TokenTypeCard)
	mask := maps.Clone(card.DefaultMask.(map[string]any))
	b.ReportAllocs()
	for b.Loop() {
		if !isDefaultMask(TokenTypeCard, mask) {
			b.Fatal("not the default")
		}
	}
}

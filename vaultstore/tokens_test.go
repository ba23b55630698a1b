package vaultstore

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCreateTokenValidation(t *testing.T) {
	w := newTokenWorld(t, nil)
	long := strings.Repeat("x", MaxMetadataValueLength+1)
	for _, tc := range []struct {
		name  string
		in    TokenInput
		valid []string // nil: valid
	}{
		{"token string", TokenInput{Type: "token", Data: "plain secret"}, nil},
		{"token object", TokenInput{Type: "token", Data: map[string]any{"a": json.Number("1"), "b": []any{"x", true}}}, nil},
		{"token number", TokenInput{Type: "token", Data: json.Number("12.5")}, nil},
		{"token false", TokenInput{Type: "token", Data: false}, nil},
		{"token without data", TokenInput{Type: "token"}, []string{"data"}},
		{"unknown type", TokenInput{Type: "cards", Data: "x"}, []string{"type"}},
		{"no type", TokenInput{Data: "x"}, []string{"type"}},
		{"card visa with cvc", TokenInput{Type: "card", Data: cardData(testVisa, testCVC)}, nil},
		{"card mastercard without cvc", TokenInput{Type: "card", Data: cardData(testMastercard, "")}, nil},
		{"card amex 15 digits 3-digit cvc", TokenInput{Type: "card", Data: cardData(testAmex, "123")}, nil},
		{"card number only", TokenInput{Type: "card", Data: map[string]any{"number": testVisa2}}, nil},
		{"card 13 digits", TokenInput{Type: "card", Data: map[string]any{"number": asSecret(luhnNumber("4", 1, 13))}}, nil},
		{"card 19 digits", TokenInput{Type: "card", Data: map[string]any{"number": asSecret(luhnNumber("4", 1, 19))}}, nil},
		{"card 12 digits", TokenInput{Type: "card", Data: map[string]any{"number": asSecret(luhnNumber("4", 1, 12))}}, []string{"data.number"}},
		{"card 20 digits", TokenInput{Type: "card", Data: map[string]any{"number": asSecret(luhnNumber("4", 1, 20))}}, []string{"data.number"}},
		{"card Luhn failure", TokenInput{Type: "card", Data: cardData(testBadLuhn, testCVC)}, []string{"data.number"}},
		{"card number with spaces", TokenInput{Type: "card", Data: map[string]any{"number": asSecret("4242 4242 4242 4242")}}, []string{"data.number"}},
		{"card number as a JSON number", TokenInput{Type: "card", Data: map[string]any{"number": json.Number(testVisa)}}, []string{"data.number"}},
		{"card without number", TokenInput{Type: "card", Data: map[string]any{"expiration_month": json.Number("1")}}, []string{"data.number"}},
		{"card month 0", TokenInput{Type: "card", Data: map[string]any{"number": testVisa, "expiration_month": json.Number("0")}}, []string{"data.expiration_month"}},
		{"card month 13", TokenInput{Type: "card", Data: map[string]any{"number": testVisa, "expiration_month": json.Number("13")}}, []string{"data.expiration_month"}},
		{"card month as string", TokenInput{Type: "card", Data: map[string]any{"number": testVisa, "expiration_month": "12"}}, []string{"data.expiration_month"}},
		{"card two-digit year", TokenInput{Type: "card", Data: map[string]any{"number": testVisa, "expiration_year": json.Number("30")}}, []string{"data.expiration_year"}},
		{"card five-digit year", TokenInput{Type: "card", Data: map[string]any{"number": testVisa, "expiration_year": json.Number("20301")}}, []string{"data.expiration_year"}},
		{"card cvc 2 digits", TokenInput{Type: "card", Data: cardData(testVisa, "91")}, []string{"data.cvc"}},
		{"card cvc 5 digits", TokenInput{Type: "card", Data: cardData(testVisa, "91735")}, []string{"data.cvc"}},
		{"card cvc letters", TokenInput{Type: "card", Data: cardData(testVisa, "91a")}, []string{"data.cvc"}},
		{"card cvc as number", TokenInput{Type: "card", Data: map[string]any{"number": testVisa, "cvc": json.Number("917")}}, []string{"data.cvc"}},
		{"card unknown member", TokenInput{Type: "card", Data: map[string]any{"number": testVisa, "pin": "1234"}}, []string{"data.pin"}},
		{"card data not an object", TokenInput{Type: "card", Data: testVisa}, []string{"data"}},
		{"bank", TokenInput{Type: "bank", Data: bankData(testRouting, testAccount)}, nil},
		{"bank one-digit account", TokenInput{Type: "bank", Data: bankData(testRouting2, "7")}, nil},
		{"bank 17-digit account", TokenInput{Type: "bank", Data: bankData(testRouting, "12345678901234567")}, nil},
		{"bank 18-digit account", TokenInput{Type: "bank", Data: bankData(testRouting, "123456789012345678")}, []string{"data.account_number"}},
		{"bank account with letters", TokenInput{Type: "bank", Data: bankData(testRouting, "12345abc")}, []string{"data.account_number"}},
		{"bank without account", TokenInput{Type: "bank", Data: map[string]any{"routing_number": testRouting}}, []string{"data.account_number"}},
		{"bank ABA checksum failure", TokenInput{Type: "bank", Data: bankData("021000022", testAccount)}, []string{"data.routing_number"}},
		{"bank 8-digit routing", TokenInput{Type: "bank", Data: bankData("02100002", testAccount)}, []string{"data.routing_number"}},
		{"bank without routing", TokenInput{Type: "bank", Data: map[string]any{"account_number": testAccount}}, []string{"data.routing_number"}},
		{"container without slashes", TokenInput{Type: "token", Data: "x", Containers: []string{"general"}}, []string{"containers[0]"}},
		{"container with a dot", TokenInput{Type: "token", Data: "x", Containers: []string{"/general/a.b/"}}, []string{"containers[0]"}},
		{"two containers", TokenInput{Type: "token", Data: "x", Containers: []string{"/general/", "/general/low/"}}, []string{"containers"}},
		{"metadata value too long", TokenInput{Type: "token", Data: "x", Metadata: map[string]string{"k": long}}, []string{"metadata.k"}},
		{"mask does not parse", TokenInput{Type: "token", Data: "x", Mask: "{{ data | no_such_filter }}"}, []string{"mask"}},
		{"expires_at not a date", TokenInput{Type: "token", Data: "x", ExpiresAt: "tomorrow"}, []string{"expires_at"}},
		{"fingerprint expression evaluates to nothing", TokenInput{Type: "token", Data: "x", FingerprintExpression: "{{ data.nothing }}"}, []string{"fingerprint_expression"}},
		{"search index evaluates to nothing", TokenInput{Type: "token", Data: "x", SearchIndexes: []string{"{{ data.nothing }}"}}, []string{"search_indexes[0]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := w.at(t)
			before := w.total()
			tok, err := w.create("admin", tc.in)
			if tc.valid != nil {
				wantFieldErrors(t, err, tc.valid...)
				if after := w.total(); after != before {
					t.Errorf("a refused create changed the token count %d -> %d", before, after)
				}
				return
			}
			if err != nil {
				t.Fatalf("CreateToken: %v", err)
			}
			if tok.ID == "" || tok.TenantID != w.tenant.ID || tok.Type != tc.in.Type || tok.CreatedAt == nil || tok.CreatedBy != w.app("admin").ID {
				t.Errorf("created token = %+v", tok)
			}
			got := w.mustGet("admin", tok.ID)
			if !sameJSON(t, got.Data, tc.in.Data) {
				t.Errorf("revealed data = %s, want %s", encodeJSON(t, got.Data), encodeJSON(t, tc.in.Data))
			}
		})
	}
}

// Each type has its default container, mask and fingerprint expression.
func TestCreateTokenTypeDefaults(t *testing.T) {
	for _, tc := range []struct {
		typ         string
		data        any
		container   string
		masked      string // JSON; "" means the masked read leaves data out
		fingerprint string // the type's default fingerprint expression
	}{
		{"token", map[string]any{"secret": "value"}, "/general/high/", "", "{{ data | stringify }}"},
		{"card", cardData(testVisa, testCVC), "/pci/high/",
			`{"number":"XXXXXXXXXXXX4242","expiration_month":12,"expiration_year":2030}`, "{{ data.number }}"},
		{"bank", bankData(testRouting, testAccount), "/bank/high/",
			`{"routing_number":"021000021","account_number":"XXXXXXXXXX1234"}`, "{{ data.account_number }}|{{ data.routing_number }}"},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			w := newTokenWorld(t, nil)
			tok := w.mustCreate("admin", TokenInput{Type: tc.typ, Data: tc.data})
			if !slices.Equal(tok.Containers, []string{tc.container}) {
				t.Errorf("containers = %v, want [%s]", tok.Containers, tc.container)
			}
			if tok.Fingerprint != "" {
				t.Errorf("fingerprinted without fingerprint_tokens or an expression: %q", tok.Fingerprint)
			}
			masked := w.mustGet("masker", tok.ID)
			if tc.masked == "" {
				if masked.Data != nil {
					t.Errorf("masked read of a type without a mask = %s, want no data", encodeJSON(t, masked.Data))
				}
			} else if !jsonEqual(t, masked.Data, tc.masked) {
				t.Errorf("masked data = %s, want %s", encodeJSON(t, masked.Data), tc.masked)
			}

			// fingerprint_tokens uses the type's default expression
			w.setSettings(map[string]string{"fingerprint_tokens": "true"})
			auto := w.mustCreate("admin", TokenInput{Type: tc.typ, Data: tc.data})
			explicit := w.mustCreate("admin", TokenInput{Type: tc.typ, Data: tc.data, FingerprintExpression: tc.fingerprint})
			if auto.Fingerprint == "" || auto.Fingerprint != explicit.Fingerprint {
				t.Errorf("automatic fingerprint %q, with the default expression given %q: want equal and non-empty", auto.Fingerprint, explicit.Fingerprint)
			}
		})
	}
}

func TestCreateTokenContainers(t *testing.T) {
	w := newTokenWorld(t, nil)
	for _, tc := range []struct {
		name, typ string
		in, want  []string
	}{
		{"default token", "token", nil, []string{"/general/high/"}},
		{"empty list is the default", "token", []string{}, []string{"/general/high/"}},
		{"root", "token", []string{"/"}, []string{"/"}},
		{"lower-cased", "token", []string{"/General/LOW_1-a/"}, []string{"/general/low_1-a/"}},
		{"card elsewhere", "card", []string{"/pci/low/"}, []string{"/pci/low/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := w.at(t)
			data := any("x")
			if tc.typ == "card" {
				data = cardData(testVisa, "")
			}
			tok := w.mustCreate("admin", TokenInput{Type: tc.typ, Data: data, Containers: tc.in})
			if !slices.Equal(tok.Containers, tc.want) {
				t.Errorf("containers = %v, want %v", tok.Containers, tc.want)
			}
			if got := w.mustGet("admin", tok.ID); !slices.Equal(got.Containers, tc.want) {
				t.Errorf("containers read back = %v, want %v", got.Containers, tc.want)
			}
		})
	}
}

func TestCreateTokenIDs(t *testing.T) {
	w := newTokenWorld(t, nil)
	for _, tc := range []struct {
		name string
		id   string
		ok   bool
	}{
		{"three characters", "abc", true},
		{"two characters", "ab", false},
		{"empty gives a uuid", "", true},
		{"400 characters", strings.Repeat("a", 400), true},
		{"401 characters", strings.Repeat("a", 401), false},
		{"400 two-byte characters", strings.Repeat("é", 400), true},
		{"unicode", "ñandú-1", true},
		{"spaces inside", "my token", true},
		{"only whitespace", "     ", false},
		{"control character", "ab\x01cd", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := w.at(t)
			tok, err := w.create("admin", TokenInput{ID: tc.id, Type: "token", Data: "v"})
			if !tc.ok {
				wantFieldErrors(t, err, "id")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.id == "" {
				if !isID(tok.ID) {
					t.Errorf("generated id %q is not a UUID", tok.ID)
				}
			} else if tok.ID != tc.id {
				t.Errorf("id = %q, want %q", tok.ID, tc.id)
			}
			if got := w.mustGet("admin", tok.ID); got.Data != "v" {
				t.Errorf("read by id: data = %v", got.Data)
			}
		})
	}
	for _, c := range tokenIDForbidden {
		t.Run(fmt.Sprintf("forbidden %q", c), func(t *testing.T) {
			w := w.at(t)
			_, err := w.create("admin", TokenInput{ID: "abc" + string(c) + "def", Type: "token", Data: "v"})
			wantFieldErrors(t, err, "id")
		})
	}
	t.Run("duplicate", func(t *testing.T) {
		w := w.at(t)
		first := w.mustCreate("admin", TokenInput{ID: "dup-id", Type: "token", Data: "first"})
		before := w.total()
		_, err := w.create("admin", TokenInput{ID: "dup-id", Type: "card", Data: cardData(testVisa, testCVC)})
		wantErrorIs(t, err, ErrConflict)
		if got := w.mustGet("admin", first.ID); got.Data != "first" || got.Type != "token" {
			t.Errorf("the duplicate changed the first token: %+v", got)
		}
		if w.total() != before {
			t.Errorf("a refused duplicate changed the count")
		}
		// another tenant may use the same id
		other := newTokenWorldOn(t, w.s, w.clock, w.dir, nil)
		if _, err := other.create("admin", TokenInput{ID: "dup-id", Type: "token", Data: "other"}); err != nil {
			t.Errorf("the same id in another tenant: %v", err)
		}
	})
	t.Run("expression", func(t *testing.T) {
		w := w.at(t)
		data := asSecret("4111111111111111")
		tok := w.mustCreate("admin", TokenInput{ID: "{{ data | alias_preserve_format: 0, 4 }}", Type: "token", Data: data})
		if len(tok.ID) != len(data) || !isASCIIDigits(tok.ID) || !strings.HasSuffix(tok.ID, "1111") || tok.ID == data {
			t.Errorf("id from alias_preserve_format: 0, 4 = %q (%d chars)", tok.ID, len(tok.ID))
		}
		if got := w.mustGet("admin", tok.ID); got.Data != data {
			t.Errorf("read by the evaluated id: %v", got.Data)
		}
	})
	t.Run("expression yielding a forbidden character", func(t *testing.T) {
		w := w.at(t)
		_, err := w.create("admin", TokenInput{ID: "{{ data }}", Type: "token", Data: asSecret("5105105105105100/x")})
		wantFieldErrors(t, err, "id")
	})
	t.Run("expression yielding too short an id", func(t *testing.T) {
		w := w.at(t)
		_, err := w.create("admin", TokenInput{ID: "{{ data | last4 | slice: 0, 2 }}", Type: "token", Data: "abcdef"})
		wantFieldErrors(t, err, "id")
	})
	t.Run("expression that does not parse", func(t *testing.T) {
		w := w.at(t)
		_, err := w.create("admin", TokenInput{ID: "{{ data | no_such_filter }}", Type: "token", Data: "abcdef"})
		wantFieldErrors(t, err, "id")
	})
}

// Reads come back revealed, masked or redacted by the first access rule
// that covers the token's container and grants token:read.
func TestGetTokenAccessRules(t *testing.T) {
	w := newTokenWorld(t, nil)
	card := cardData(testVisa, testCVC)
	bank := bankData(testRouting, testAccount)
	const (
		cardMasked = `{"number":"XXXXXXXXXXXX4242","expiration_month":12,"expiration_year":2030}`
		bankMasked = `{"routing_number":"021000021","account_number":"XXXXXXXXXX1234"}`
		withMask   = `"XX-XX-XXXret"`
	)
	toks := map[string]*Token{
		"card":          w.mustCreate("admin", TokenInput{Type: "card", Data: card}),
		"card-low":      w.mustCreate("admin", TokenInput{Type: "card", Data: card, Containers: []string{"/pci/low/"}}),
		"card-root-pci": w.mustCreate("admin", TokenInput{Type: "card", Data: card, Containers: []string{"/pci/"}}),
		"bank":          w.mustCreate("admin", TokenInput{Type: "bank", Data: bank}),
		"token":         w.mustCreate("admin", TokenInput{Type: "token", Data: "my-secret"}),
		"token-masked":  w.mustCreate("admin", TokenInput{Type: "token", Data: "my-my-secret", Mask: "{{ data | reveal_last: 3 }}"}),
	}
	revealed := map[string]string{
		"card": encodeJSON(t, card), "card-low": encodeJSON(t, card), "card-root-pci": encodeJSON(t, card),
		"bank": encodeJSON(t, bank), "token": `"my-secret"`, "token-masked": `"my-my-secret"`,
	}
	masked := map[string]string{
		"card": cardMasked, "card-low": cardMasked, "card-root-pci": cardMasked,
		"bank": bankMasked, "token": "", "token-masked": withMask,
	}
	const forbidden = "forbidden"
	for _, tc := range []struct {
		app  string
		want map[string]string // token -> reveal, mask, redact or forbidden
	}{
		{"admin", map[string]string{"card": "reveal", "card-low": "reveal", "card-root-pci": "reveal", "bank": "reveal", "token": "reveal", "token-masked": "reveal"}},
		{"masker", map[string]string{"card": "mask", "card-low": "mask", "card-root-pci": "mask", "bank": "mask", "token": "mask", "token-masked": "mask"}},
		{"redactor", map[string]string{"card": "redact", "card-low": "redact", "card-root-pci": "redact", "bank": "redact", "token": "redact", "token-masked": "redact"}},
		{"pci", map[string]string{"card": "reveal", "card-low": "reveal", "card-root-pci": "reveal", "bank": forbidden, "token": forbidden, "token-masked": forbidden}},
		{"pcihigh", map[string]string{"card": "reveal", "card-low": forbidden, "card-root-pci": forbidden, "bank": forbidden, "token": forbidden, "token-masked": forbidden}},
		{"mixed", map[string]string{"card": "mask", "card-low": "mask", "card-root-pci": "mask", "bank": "redact", "token": "reveal", "token-masked": "reveal"}},
		{"priority", map[string]string{"card": "redact", "card-low": "reveal", "card-root-pci": "reveal", "bank": "mask", "token": "mask", "token-masked": "mask"}},
		{"fallthrough", map[string]string{"card": "mask", "card-low": "mask", "card-root-pci": "mask", "bank": "mask", "token": "mask", "token-masked": "mask"}},
		{"writer", map[string]string{"card": forbidden, "card-low": forbidden, "card-root-pci": forbidden, "bank": forbidden, "token": forbidden, "token-masked": forbidden}},
		{"plain", map[string]string{"card": "mask", "card-low": "mask", "card-root-pci": "mask", "bank": "mask", "token": "mask", "token-masked": "mask"}},
	} {
		for name, want := range tc.want {
			t.Run(tc.app+"/"+name, func(t *testing.T) {
				w := w.at(t)
				got, err := w.get(tc.app, toks[name].ID)
				if want == forbidden {
					wantErrorIs(t, err, ErrForbidden)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				var wantData string
				switch want {
				case "reveal":
					wantData = revealed[name]
				case "mask":
					wantData = masked[name]
				}
				switch {
				case wantData == "" && got.Data != nil:
					t.Errorf("%s: data = %s, want none", want, encodeJSON(t, got.Data))
				case wantData != "" && !jsonEqual(t, got.Data, wantData):
					t.Errorf("%s: data = %s, want %s", want, encodeJSON(t, got.Data), wantData)
				}
				if got.ID != toks[name].ID || got.Type == "" || got.TenantID != w.tenant.ID || len(got.Containers) != 1 {
					t.Errorf("token = %+v", got)
				}
			})
		}
	}
	t.Run("unknown id", func(t *testing.T) {
		_, err := w.at(t).get("admin", "no-such-token")
		wantErrorIs(t, err, ErrNotFound)
	})
	t.Run("another tenant's token", func(t *testing.T) {
		other := newTokenWorldOn(t, w.s, w.clock, w.dir, nil)
		_, err := other.get("admin", toks["card"].ID)
		wantErrorIs(t, err, ErrNotFound)
	})
}

// A create answers with data masked at most, and refuses a container the
// caller may not create in.
func TestCreateTokenAnswer(t *testing.T) {
	w := newTokenWorld(t, nil)
	const cardMasked = `{"number":"XXXXXXXXXXXX4242","expiration_month":12,"expiration_year":2030}`
	for _, tc := range []struct {
		app, typ string
		data     any
		want     string // JSON data of the answer, "" for none, "forbidden"
	}{
		{"admin", "card", cardData(testVisa, testCVC), cardMasked},
		{"admin", "bank", bankData(testRouting, testAccount), `{"routing_number":"021000021","account_number":"XXXXXXXXXX1234"}`},
		{"admin", "token", "secret", ""},
		{"masker", "card", cardData(testVisa, testCVC), cardMasked},
		{"redactor", "card", cardData(testVisa, testCVC), ""},
		{"writer", "card", cardData(testVisa, testCVC), cardMasked},
		{"pci", "card", cardData(testVisa, testCVC), cardMasked},
		{"pci", "token", "secret", "forbidden"},
		{"pci", "bank", bankData(testRouting, testAccount), "forbidden"},
		{"pcihigh", "card-low", cardData(testVisa, testCVC), "forbidden"},
		{"mixed", "token", "secret", ""},
	} {
		t.Run(tc.app+"/"+tc.typ, func(t *testing.T) {
			w := w.at(t)
			in := TokenInput{Type: tc.typ, Data: tc.data}
			if tc.typ == "card-low" {
				in.Type, in.Containers = "card", []string{"/pci/low/"}
			}
			before := w.total()
			tok, err := w.create(tc.app, in)
			if tc.want == "forbidden" {
				wantErrorIs(t, err, ErrForbidden)
				if w.total() != before {
					t.Errorf("a forbidden create stored a token")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" && tok.Data != nil {
				t.Errorf("answer data = %s, want none", encodeJSON(t, tok.Data))
			} else if tc.want != "" && !jsonEqual(t, tok.Data, tc.want) {
				t.Errorf("answer data = %s, want %s", encodeJSON(t, tok.Data), tc.want)
			}
			if raw := encodeJSON(t, tok); strings.Contains(raw, testVisa) || holdsCVC(raw) || strings.Contains(raw, testAccount) {
				t.Errorf("the create answer reveals data: %s", raw)
			}
			if tok.Extras != nil {
				t.Errorf("a fresh token has _extras %+v", tok.Extras)
			}
		})
	}
}

func TestFingerprints(t *testing.T) {
	w := newTokenWorld(t, nil)
	t.Run("none without setting or expression", func(t *testing.T) {
		w := w.at(t)
		for _, in := range []TokenInput{
			{Type: "card", Data: cardData(testVisa, "")},
			{Type: "bank", Data: bankData(testRouting, testAccount)},
			{Type: "token", Data: "x"},
			{Type: "card", Data: cardData(testVisa, ""), DeduplicateToken: boolPtr(false)},
		} {
			if tok := w.mustCreate("admin", in); tok.Fingerprint != "" {
				t.Errorf("%s fingerprinted: %q", in.Type, tok.Fingerprint)
			}
		}
	})
	fp := func(w *tokenWorld, in TokenInput) string {
		w.tb.Helper()
		tok := w.mustCreate("admin", in)
		if got := w.mustGet("admin", tok.ID).Fingerprint; got != tok.Fingerprint {
			w.tb.Errorf("fingerprint read back %q, created %q", got, tok.Fingerprint)
		}
		return tok.Fingerprint
	}
	t.Run("with an expression", func(t *testing.T) {
		w := w.at(t)
		a := fp(w, TokenInput{Type: "card", Data: cardData(testVisa, testCVC), FingerprintExpression: "{{ data.number }}"})
		b := fp(w, TokenInput{Type: "card", Data: cardData(testVisa, testCVC2), FingerprintExpression: "{{ data.number }}"})
		c := fp(w, TokenInput{Type: "card", Data: cardData(testVisa2, testCVC), FingerprintExpression: "{{ data.number }}"})
		if a == "" || a != b {
			t.Errorf("same number: fingerprints %q and %q", a, b)
		}
		if a == c {
			t.Errorf("different numbers share fingerprint %q", a)
		}
		plain := sha256.Sum256([]byte(testVisa))
		for _, unkeyed := range []string{testVisa, hex.EncodeToString(plain[:]), base64.RawURLEncoding.EncodeToString(plain[:]), base64.StdEncoding.EncodeToString(plain[:])} {
			if a == unkeyed {
				t.Errorf("fingerprint is an unkeyed function of the number")
			}
		}
		if w.keys().fingerprintOf("card", testVisa) != a {
			t.Errorf("fingerprint is not the tenant's keyed HMAC of the evaluated expression")
		}
	})
	t.Run("automatic with fingerprint_tokens", func(t *testing.T) {
		w := newTokenWorld(t, map[string]string{"fingerprint_tokens": "true"})
		a := fp(w, TokenInput{Type: "card", Data: cardData(testVisa, testCVC)})
		b := fp(w, TokenInput{Type: "card", Data: map[string]any{"number": testVisa}})
		if a == "" || a != b {
			t.Errorf("same card number: fingerprints %q and %q", a, b)
		}
		if x, y := fp(w, TokenInput{Type: "bank", Data: bankData(testRouting, testAccount)}), fp(w, TokenInput{Type: "bank", Data: bankData(testRouting2, testAccount)}); x == "" || x == y {
			t.Errorf("bank accounts with different routing numbers: fingerprints %q and %q", x, y)
		}
		if x, y := fp(w, TokenInput{Type: "token", Data: map[string]any{"a": "1", "b": "2"}}), fp(w, TokenInput{Type: "token", Data: map[string]any{"b": "2", "a": "1"}}); x == "" || x != y {
			t.Errorf("the same object: fingerprints %q and %q", x, y)
		}
	})
	t.Run("per type", func(t *testing.T) {
		w := w.at(t)
		card := fp(w, TokenInput{Type: "card", Data: map[string]any{"number": testVisa}, FingerprintExpression: "{{ data.number }}"})
		generic := fp(w, TokenInput{Type: "token", Data: map[string]any{"number": testVisa}, FingerprintExpression: "{{ data.number }}"})
		if card == generic {
			t.Errorf("a card and a generic token with the same value share fingerprint %q", card)
		}
	})
	t.Run("per tenant", func(t *testing.T) {
		other := newTokenWorldOn(t, w.s, w.clock, w.dir, nil)
		in := TokenInput{Type: "card", Data: cardData(testVisa, ""), FingerprintExpression: "{{ data.number }}"}
		if a, b := fp(w.at(t), in), fp(other, in); a == b {
			t.Errorf("two tenants share fingerprint %q", a)
		}
	})
	t.Run("with dedupe requested", func(t *testing.T) {
		w := w.at(t)
		a := fp(w, TokenInput{Type: "bank", Data: bankData(testRouting2, testAccount2), DeduplicateToken: boolPtr(true)})
		if a == "" || a != w.keys().fingerprintOf("bank", testAccount2+"|"+testRouting2) {
			t.Errorf("dedupe fingerprint %q is not the default expression's", a)
		}
	})
	t.Run("over metadata", func(t *testing.T) {
		w := w.at(t)
		a := fp(w, TokenInput{Type: "token", Data: "x", Metadata: map[string]string{"customer": "c-1"}, FingerprintExpression: "{{ metadata.customer }}"})
		if a != w.keys().fingerprintOf("token", "c-1") {
			t.Errorf("fingerprint over metadata = %q", a)
		}
	})
}

func TestDeduplicateToken(t *testing.T) {
	t.Run("requested", func(t *testing.T) {
		w := newTokenWorld(t, nil)
		first := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, testCVC), DeduplicateToken: boolPtr(true), Metadata: map[string]string{"n": "1"}})
		if first.Extras != nil {
			t.Errorf("first create has _extras %+v", first.Extras)
		}
		again := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, testCVC2), DeduplicateToken: boolPtr(true), Metadata: map[string]string{"n": "2"}})
		if again.ID != first.ID || again.Extras == nil || !again.Extras.Deduplicated {
			t.Fatalf("second create = id %s extras %+v, want id %s deduplicated", again.ID, again.Extras, first.ID)
		}
		if again.Metadata["n"] != "1" {
			t.Errorf("deduplicated answer metadata = %v, want the existing token's", again.Metadata)
		}
		if !jsonEqual(t, again.Data, `{"number":"XXXXXXXXXXXX4242","expiration_month":12,"expiration_year":2030}`) {
			t.Errorf("deduplicated answer data = %s, want masked", encodeJSON(t, again.Data))
		}
		if got := w.mustGet("admin", first.ID).Data.(map[string]any)["cvc"]; got != testCVC {
			t.Errorf("dedupe changed the stored token")
		}
		// not deduplicated: without the flag, another number, another type
		other := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, "")})
		number2 := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa2, ""), DeduplicateToken: boolPtr(true)})
		generic := w.mustCreate("admin", TokenInput{Type: "token", Data: testVisa, DeduplicateToken: boolPtr(true), FingerprintExpression: "{{ data }}"})
		for _, tok := range []*Token{other, number2, generic} {
			if tok.ID == first.ID || tok.Extras != nil {
				t.Errorf("token %+v deduplicated against the first", tok)
			}
		}
		if n := w.total(); n != 4 {
			t.Errorf("%d tokens, want 4", n)
		}
		if n := w.usage().TokenReport.MetricsByType["card"].Count; n != 3 {
			t.Errorf("card count = %d, want 3", n)
		}
	})
	t.Run("tenant setting", func(t *testing.T) {
		w := newTokenWorld(t, map[string]string{"deduplicate_tokens": "true"})
		first := w.mustCreate("admin", TokenInput{Type: "bank", Data: bankData(testRouting, testAccount)})
		again := w.mustCreate("admin", TokenInput{Type: "bank", Data: bankData(testRouting, testAccount)})
		if again.ID != first.ID || again.Extras == nil || !again.Extras.Deduplicated {
			t.Errorf("with deduplicate_tokens: second create id %s extras %+v, want %s deduplicated", again.ID, again.Extras, first.ID)
		}
		off := w.mustCreate("admin", TokenInput{Type: "bank", Data: bankData(testRouting, testAccount), DeduplicateToken: boolPtr(false)})
		if off.ID == first.ID || off.Extras != nil {
			t.Errorf("deduplicate_token false was deduplicated")
		}
	})
	t.Run("caller without token:read", func(t *testing.T) {
		w := newTokenWorld(t, nil)
		first := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, testCVC), DeduplicateToken: boolPtr(true),
			Metadata: map[string]string{"customer": "c-1"}, SearchIndexes: []string{"{{ data.number | last4 }}"}})
		again := w.mustCreate("writer", TokenInput{Type: "card", Data: cardData(testVisa, testCVC), DeduplicateToken: boolPtr(true)})
		if again.ID != first.ID {
			t.Fatalf("not deduplicated")
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(encodeJSON(t, again)), &m); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if want := []string{"_extras", "containers", "fingerprint", "id", "tenant_id", "type"}; !slices.Equal(keys, want) {
			t.Errorf("answer without token:read has fields %v, want %v", keys, want)
		}
		if again.Fingerprint != first.Fingerprint || again.Type != "card" || again.TenantID != w.tenant.ID || !slices.Equal(again.Containers, first.Containers) {
			t.Errorf("answer = %+v", again)
		}
	})
	t.Run("redacting reader", func(t *testing.T) {
		w := newTokenWorld(t, nil)
		w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, ""), DeduplicateToken: boolPtr(true), Metadata: map[string]string{"k": "v"}})
		again := w.mustCreate("redactor", TokenInput{Type: "card", Data: cardData(testVisa, ""), DeduplicateToken: boolPtr(true)})
		if again.Extras == nil || !again.Extras.Deduplicated || again.Data != nil || again.Metadata["k"] != "v" {
			t.Errorf("answer to a redacting reader = %+v", again)
		}
	})
}

// Concurrent identical creates with dedupe make one token.
func TestDeduplicateTokenConcurrent(t *testing.T) {
	w := newTokenWorld(t, nil)
	const n = 20
	ids := make([]string, n)
	errs := make([]error, n)
	req := w.req("admin")
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := w.s.CreateToken(w.ctx, req, TokenInput{Type: "card", Data: cardData(testMastercard, testCVC), DeduplicateToken: boolPtr(true)})
			errs[i] = err
			if err == nil {
				ids[i] = tok.ID
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if noSecretIn(t, err) != nil {
			t.Fatalf("concurrent create: %v", err)
		}
	}
	if distinct := slices.Compact(slices.Sorted(slices.Values(ids))); len(distinct) != 1 {
		t.Errorf("%d concurrent identical creates made %d tokens", n, len(distinct))
	}
	if total := w.total(); total != 1 {
		t.Errorf("listed %d tokens, want 1", total)
	}
	if c := w.usage().TokenReport.MetricsByType["card"].Count; c != 1 {
		t.Errorf("card count = %d, want 1", c)
	}
}

// Dedupe finds any live token with the fingerprint, not only the first
// that held it: once that one is deleted or changed, the others remain.
func TestDeduplicateAfterFirstHolderGone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove func(w *tokenWorld, id string)
	}{
		{"deleted", func(w *tokenWorld, id string) {
			if err := w.del("admin", id); err != nil {
				w.tb.Fatal(err)
			}
		}},
		{"updated to another number", func(w *tokenWorld, id string) {
			if _, err := w.update("admin", id, map[string]any{"data": map[string]any{"number": testVisa2}}); err != nil {
				w.tb.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newTokenWorld(t, map[string]string{"fingerprint_tokens": "true"})
			a := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, "")})
			b := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, "")})
			if a.Fingerprint == "" || a.Fingerprint != b.Fingerprint || a.ID == b.ID {
				t.Fatalf("setup: %+v %+v", a, b)
			}
			tc.remove(w, a.ID)
			c := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, ""), DeduplicateToken: boolPtr(true)})
			if c.ID != b.ID || c.Extras == nil || !c.Extras.Deduplicated {
				t.Errorf("dedupe created %s (extras %+v) although token %s holds the same fingerprint", c.ID, c.Extras, b.ID)
			}
		})
	}
}

func TestListTokens(t *testing.T) {
	w := newTokenWorld(t, nil)
	type made struct {
		tok  *Token
		kind string
	}
	var all []made
	add := func(kind string, in TokenInput) *Token {
		tok := w.mustCreate("admin", in)
		all = append(all, made{tok, kind})
		return tok
	}
	c1 := add("card", TokenInput{Type: "card", Data: cardData(testVisa, testCVC), Metadata: map[string]string{"customer": "Alice", "plan": "Gold"}})
	g1 := add("token", TokenInput{Type: "token", Data: "g1", Metadata: map[string]string{"customer": "alice", "plan": "silver"}})
	b1 := add("bank", TokenInput{Type: "bank", Data: bankData(testRouting, testAccount), Metadata: map[string]string{"customer": "ALICE"}})
	c2 := add("card", TokenInput{Type: "card", Data: cardData(testVisa2, ""), Metadata: map[string]string{"customer": "Bob", "plan": "gold"}})
	g2 := add("token", TokenInput{Type: "token", Data: "g2", Metadata: map[string]string{"customer": "alicea"}})
	c3 := add("card", TokenInput{Type: "card", Data: cardData(testMastercard, ""), Containers: []string{"/pci/low/"}})
	ids := func(toks ...*Token) []string { return idsOf(toks) }

	t.Run("sorted by created_at", func(t *testing.T) {
		toks, total := w.at(t).mustList("admin", TokenFilter{}, 0, 100)
		if want := ids(c1, g1, b1, c2, g2, c3); !slices.Equal(idsOf(toks), want) || total != 6 {
			t.Errorf("list = %v total %d, want %v total 6", idsOf(toks), total, want)
		}
		for i := 1; i < len(toks); i++ {
			if toks[i].CreatedAt.Before(toks[i-1].CreatedAt.Time) {
				t.Errorf("token %d created before token %d", i, i-1)
			}
		}
	})
	for _, tc := range []struct {
		name          string
		app           string
		f             TokenFilter
		offset, limit int
		want          []string
		total         int
	}{
		{"first page", "admin", TokenFilter{}, 0, 2, ids(c1, g1), 6},
		{"second page", "admin", TokenFilter{}, 2, 2, ids(b1, c2), 6},
		{"last page", "admin", TokenFilter{}, 4, 2, ids(g2, c3), 6},
		{"partial last page", "admin", TokenFilter{}, 5, 2, ids(c3), 6},
		{"past the end", "admin", TokenFilter{}, 6, 2, nil, 6},
		{"far past the end", "admin", TokenFilter{}, 100, 10, nil, 6},
		{"ids, in created order", "admin", TokenFilter{IDs: []string{c3.ID, c1.ID, "missing-id", c1.ID}}, 0, 10, ids(c1, c3), 2},
		{"ids paged", "admin", TokenFilter{IDs: []string{c3.ID, c1.ID, g1.ID}}, 1, 1, ids(g1), 3},
		{"metadata case-insensitive value", "admin", TokenFilter{Metadata: map[string]string{"customer": "alice"}}, 0, 10, ids(c1, g1, b1), 3},
		{"metadata exact, not prefix", "admin", TokenFilter{Metadata: map[string]string{"customer": "alic"}}, 0, 10, nil, 0},
		{"metadata ANDed", "admin", TokenFilter{Metadata: map[string]string{"customer": "Alice", "plan": "GOLD"}}, 0, 10, ids(c1), 1},
		{"metadata key is exact", "admin", TokenFilter{Metadata: map[string]string{"Customer": "alice"}}, 0, 10, nil, 0},
		{"metadata paged", "admin", TokenFilter{Metadata: map[string]string{"customer": "alice"}}, 1, 1, ids(g1), 3},
		{"metadata and ids", "admin", TokenFilter{IDs: []string{b1.ID, c2.ID}, Metadata: map[string]string{"customer": "alice"}}, 0, 10, ids(b1), 1},
		{"pci only", "pci", TokenFilter{}, 0, 10, ids(c1, c2, c3), 3},
		{"pci only paged", "pci", TokenFilter{}, 1, 1, ids(c2), 3},
		{"pci only by ids", "pci", TokenFilter{IDs: []string{g1.ID, c2.ID, b1.ID}}, 0, 10, ids(c2), 1},
		{"pci only by metadata", "pci", TokenFilter{Metadata: map[string]string{"customer": "alice"}}, 0, 10, ids(c1), 1},
		{"sub-container rule", "pcihigh", TokenFilter{}, 0, 10, ids(c1, c2), 2},
		{"cannot read anything", "writer", TokenFilter{}, 0, 10, nil, 0},
		{"mixed rules", "mixed", TokenFilter{}, 0, 10, ids(c1, g1, b1, c2, g2, c3), 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			toks, total := w.at(t).mustList(tc.app, tc.f, tc.offset, tc.limit)
			if got := idsOf(toks); !slices.Equal(got, tc.want) || total != tc.total {
				t.Errorf("list = %v total %d, want %v total %d", got, total, tc.want, tc.total)
			}
		})
	}
	t.Run("shaped per rule", func(t *testing.T) {
		w := w.at(t)
		toks, _ := w.mustList("mixed", TokenFilter{}, 0, 10)
		for _, tok := range toks {
			switch tok.Type {
			case "card":
				m, ok := tok.Data.(map[string]any)
				if !ok || !strings.HasPrefix(fmt.Sprint(m["number"]), "XXXXXXXXXXXX") || m["cvc"] != nil {
					t.Errorf("card listed as %s, want masked", encodeJSON(t, tok.Data))
				}
			case "bank":
				if tok.Data != nil {
					t.Errorf("bank listed as %s, want redacted", encodeJSON(t, tok.Data))
				}
			case "token":
				if s, _ := tok.Data.(string); s != "g1" && s != "g2" {
					t.Errorf("generic token listed as %v, want revealed", tok.Data)
				}
			}
		}
		revealed, _ := w.mustList("admin", TokenFilter{IDs: []string{c1.ID}}, 0, 1)
		if m, _ := revealed[0].Data.(map[string]any); m["number"] != testVisa || m["cvc"] != testCVC {
			t.Errorf("admin list of a card = %s, want revealed with cvc", encodeJSON(t, revealed[0].Data))
		}
		redacted, _ := w.mustList("redactor", TokenFilter{}, 0, 10)
		for _, tok := range redacted {
			if tok.Data != nil {
				t.Errorf("redactor sees data of %s", tok.ID)
			}
		}
	})
	_ = all
}

func TestDeleteToken(t *testing.T) {
	w := newTokenWorld(t, map[string]string{"fingerprint_tokens": "true"})
	expires := w.clock.Peek().Add(24 * time.Hour).Truncate(time.Second).Format(time.RFC3339)
	tok := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, testCVC), SearchIndexes: []string{"{{ data.number | last4 }}"}, ExpiresAt: expires})
	keep := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa2, "")})
	if got, want := w.indexEntries(tok.ID), []string{"exp", "fpc", "fpx", "six", "tok", "tokc"}; !slices.Equal(got, want) {
		t.Fatalf("entries of a new token = %v, want %v", got, want)
	}
	if err := w.del("writer", tok.ID); !errors.Is(err, ErrForbidden) {
		t.Errorf("delete without token:delete: %v, want ErrForbidden", err)
	}
	if err := w.del("pcihigh", w.mustCreate("admin", TokenInput{Type: "token", Data: "other"}).ID); !errors.Is(err, ErrForbidden) {
		t.Errorf("delete outside the caller's containers: %v, want ErrForbidden", err)
	}
	other := newTokenWorldOn(t, w.s, w.clock, w.dir, nil)
	if err := other.del("admin", tok.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete from another tenant: %v, want ErrNotFound", err)
	}
	if err := w.del("pci", tok.ID); err != nil {
		t.Fatalf("DeleteToken: %v", err)
	}
	_, err := w.get("admin", tok.ID)
	wantErrorIs(t, err, ErrNotFound)
	if got := w.indexEntries(tok.ID); len(got) != 0 {
		t.Errorf("entries left after delete: %v", got)
	}
	if err := w.del("admin", tok.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	if _, err := w.update("admin", tok.ID, map[string]any{"metadata": map[string]any{"a": "b"}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("update after delete: %v, want ErrNotFound", err)
	}
	if n := w.usage().TokenReport.MetricsByType["card"].Count; n != 1 {
		t.Errorf("card count after delete = %d, want 1", n)
	}
	toks, _ := w.mustList("admin", TokenFilter{}, 0, 10)
	if slices.Contains(idsOf(toks), tok.ID) || !slices.Contains(idsOf(toks), keep.ID) {
		t.Errorf("list after delete = %v", idsOf(toks))
	}
}

// Search indexes are stored as keyed hashes of their evaluated values only.
func TestSearchIndexesStoredAsHashes(t *testing.T) {
	w := newTokenWorld(t, nil)
	tok := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testAmex, testCVC),
		SearchIndexes: []string{"{{ data.number }}", "{{ data.number | last4 }}", "{{ data.number }}", "Customer-ABC"}})
	tk := w.keys()
	var want []string
	for _, v := range []string{testAmex, "0005", "customer-abc"} {
		want = append(want, string(searchIndexKey(w.tenant.ID, tk.searchHashOf(v), tok.ID)))
	}
	sort.Strings(want)
	got := kvKeys(t, w.s, string(tenantDataPrefix(w.tenant.ID))+"six/")
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("search index keys = %v, want %v", got, want)
	}
	for _, k := range kvKeys(t, w.s, "") {
		if strings.Contains(k, testAmex) || strings.Contains(strings.ToLower(k), "customer-abc") {
			t.Errorf("a KV key holds a search index value in clear: %q", strings.ReplaceAll(k, testAmex, "<NUMBER>"))
		}
	}
	if rec, err := w.record(tok.ID); err != nil || len(rec.IndexHashes) != 3 {
		t.Errorf("record index hashes = %v, %v", rec, err)
	}
}

// No error a token operation returns quotes a card number, cvc or account
// number from its input. (Every other token test checks its own errors
// the same way through noSecretIn.) Each case must be refused as it says,
// else it would scan nothing. A mask that fails at a read is no error:
// the data is left out (TestMaskNeverSeesCVC).
func TestTokenErrorsNeverContainSecrets(t *testing.T) {
	w := newTokenWorld(t, nil)
	existing := w.mustCreate("admin", TokenInput{ID: "existing-id", Type: "card", Data: cardData(testVisa, testCVC)})
	num := asSecret("6011000990139424")
	acct := asSecret("55554444333322")
	cvc := asSecret("8529")
	for _, tc := range []struct {
		name string
		run  func() error
		want error // nil: a *ValidationError
	}{
		{"bad Luhn", func() error {
			_, err := w.create("admin", TokenInput{Type: "card", Data: cardData(testBadLuhn, cvc)})
			return err
		}, nil},
		{"number in a member name", func() error {
			_, err := w.create("admin", TokenInput{Type: "card", Data: map[string]any{"number": num, num: cvc}})
			return err
		}, nil},
		{"cvc too long", func() error {
			_, err := w.create("admin", TokenInput{Type: "card", Data: cardData(num, asSecret("85291"))})
			return err
		}, nil},
		{"bad month beside a number", func() error {
			_, err := w.create("admin", TokenInput{Type: "card", Data: map[string]any{"number": num, "cvc": cvc, "expiration_month": num}})
			return err
		}, nil},
		{"account too long", func() error {
			_, err := w.create("admin", TokenInput{Type: "bank", Data: bankData("021000022", asSecret(acct+"8888"))})
			return err
		}, nil},
		{"account with letters", func() error {
			_, err := w.create("admin", TokenInput{Type: "bank", Data: bankData(testRouting, asSecret(acct+"x"))})
			return err
		}, nil},
		{"id expression with a forbidden character", func() error {
			_, err := w.create("admin", TokenInput{ID: "{{ data.number }}#{{ data.cvc }}", Type: "card", Data: cardData(num, cvc)})
			return err
		}, nil},
		{"id expression too long", func() error {
			_, err := w.create("admin", TokenInput{ID: strings.Repeat("{{ data.number }}", 30), Type: "card", Data: cardData(num, cvc)})
			return err
		}, nil},
		{"id expression equal to an existing id", func() error {
			_, err := w.create("admin", TokenInput{ID: "{{ data.number | slice: 0, 0 }}existing-id", Type: "card", Data: cardData(num, cvc)})
			return err
		}, ErrConflict},
		{"fingerprint expression failing in a filter", func() error {
			_, err := w.create("admin", TokenInput{Type: "card", Data: cardData(num, cvc), FingerprintExpression: "{{ data.number | json: '$.a' }}"})
			return err
		}, nil},
		{"fingerprint expression to_boolean", func() error {
			_, err := w.create("admin", TokenInput{Type: "card", Data: cardData(num, cvc), FingerprintExpression: "{{ data.cvc | to_boolean }}"})
			return err
		}, nil},
		{"search index failing", func() error {
			_, err := w.create("admin", TokenInput{Type: "bank", Data: bankData(testRouting, acct), SearchIndexes: []string{"{{ data.account_number | json: '$.a' }}"}})
			return err
		}, nil},
		{"update to a bad number", func() error {
			_, err := w.update("admin", existing.ID, map[string]any{"data": map[string]any{"number": asSecret("4000056655665557")}})
			return err
		}, nil},
		{"update with a bad cvc", func() error {
			_, err := w.update("admin", existing.ID, map[string]any{"data": map[string]any{"cvc": asSecret("12345")}})
			return err
		}, nil},
		{"tokenize with a bad card", func() error {
			_, err := w.tokenize("admin", map[string]any{"c": map[string]any{"type": "card", "data": cardData(testBadLuhn, cvc)}})
			return err
		}, nil},
		{"tokenize with a secret as a member name", func() error {
			_, err := w.tokenize("admin", map[string]any{num: map[string]any{"type": "bank", "data": bankData("021000022", acct)}})
			return err
		}, nil},
		{"tokenize with a secret as a data member name", func() error {
			_, err := w.tokenize("admin", []any{map[string]any{"type": "card", "data": map[string]any{"number": num, acct: cvc}}})
			return err
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w.tb = t
			defer func() { w.tb = nil }()
			// noSecretIn inside the helpers does the scanning
			err := tc.run()
			var v *ValidationError
			switch {
			case err == nil:
				t.Fatal("no error: the case provokes nothing to scan")
			case tc.want == nil && !errors.As(err, &v):
				t.Fatalf("error %v, want a validation error", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("error %v, want %v", err, tc.want)
			}
		})
	}
}

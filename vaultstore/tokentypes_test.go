package vaultstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// luhnWithPrefix appends the Luhn check digit to a string of digits.
func luhnWithPrefix(prefix string) string {
	for d := byte('0'); d <= '9'; d++ {
		if s := prefix + string(d); luhnValid(s) {
			return s
		}
	}
	panic("unreachable")
}

// luhnOff returns a Luhn-valid number with its check digit moved by one.
func luhnOff(valid string) string {
	last := valid[len(valid)-1]
	if last == '9' {
		last = '0'
	} else {
		last++
	}
	return valid[:len(valid)-1] + string(last)
}

// validateType runs a type's validation and returns its failures.
func validateType(t *testing.T, typ string, data any) map[string][]string {
	t.Helper()
	tt, ok := LookupTokenType(typ)
	if !ok {
		t.Fatalf("no token type %q", typ)
	}
	v := &ValidationError{}
	tt.Validate(data, v)
	return v.Fields
}

// wantFieldsEqual checks the failing fields are exactly want.
func wantFieldsEqual(t *testing.T, got map[string][]string, want []string) {
	t.Helper()
	var names []string
	for f := range got {
		names = append(names, f)
	}
	slices.Sort(names)
	w := slices.Clone(want)
	slices.Sort(w)
	if !slices.Equal(names, w) {
		t.Errorf("failing fields = %v (%v), want %v", names, got, w)
	}
}

func TestTokenTypeDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, container, fingerprint string
		mask                         any
	}{
		{"token", "/general/high/", "{{ data | stringify }}", nil},
		{"card", "/pci/high/", "{{ data.number }}", map[string]any{
			"number":           "{{ data.number | reveal_last: 4 }}",
			"expiration_month": "{{ data.expiration_month }}",
			"expiration_year":  "{{ data.expiration_year }}",
		}},
		{"bank", "/bank/high/", "{{ data.account_number }}|{{ data.routing_number }}", map[string]any{
			"routing_number": "{{ data.routing_number }}",
			"account_number": "{{ data.account_number | reveal_last: 4 }}",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tt, ok := LookupTokenType(tc.name)
			if !ok {
				t.Fatal("not found")
			}
			if tt.Name != tc.name || tt.DefaultContainer != tc.container || tt.DefaultFingerprint != tc.fingerprint {
				t.Errorf("got %+v", tt)
			}
			if !reflect.DeepEqual(tt.DefaultMask, tc.mask) {
				t.Errorf("mask = %#v, want %#v", tt.DefaultMask, tc.mask)
			}
			if c, ok := NormalizeContainer(tt.DefaultContainer); !ok || c != tt.DefaultContainer {
				t.Errorf("default container %q is not normalized", tt.DefaultContainer)
			}
			if tt.Validate == nil {
				t.Error("no Validate")
			}
			// The mask must marshal to JSON as the interface documents it.
			if _, err := json.Marshal(tt.DefaultMask); err != nil {
				t.Error(err)
			}
		})
	}
	for _, name := range []string{"", "Card", "CARD", "card_number", "bank_account", "unknown"} {
		t.Run("unknown "+name, func(t *testing.T) {
			if tt, ok := LookupTokenType(name); ok || tt != nil {
				t.Errorf("LookupTokenType(%q) = %v, %v", name, tt, ok)
			}
		})
	}
	t.Run("names", func(t *testing.T) {
		for _, n := range TokenTypeNames() {
			if _, ok := LookupTokenType(n); !ok {
				t.Errorf("%q listed but not found", n)
			}
		}
		if len(TokenTypeNames()) != 3 {
			t.Errorf("names = %v", TokenTypeNames())
		}
	})
}

func TestTokenTypeDefaultMaskIsACopy(t *testing.T) {
	a, _ := LookupTokenType("card")
	a.DefaultMask.(map[string]any)["number"] = "changed"
	b, _ := LookupTokenType("card")
	if b.DefaultMask.(map[string]any)["number"] != "{{ data.number | reveal_last: 4 }}" {
		t.Error("modifying one lookup's mask changed the next")
	}
}

func TestTokenGenericData(t *testing.T) {
	for _, tc := range []struct {
		name string
		data any
		want []string
	}{
		{"null", nil, []string{"data"}},
		{"string", "value", nil},
		{"empty string", "", nil},
		{"number", json.Number("12345678901234567890"), nil},
		{"bool", false, nil},
		{"array", testjson.Decode(t, `[1, null, "x"]`), nil},
		{"empty array", []any{}, nil},
		{"object", testjson.Decode(t, `{"a": {"b": null}}`), nil},
		{"empty object", map[string]any{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantFieldsEqual(t, validateType(t, "token", tc.data), tc.want)
		})
	}
}

func TestTokenCardData(t *testing.T) {
	n12 := luhnWithPrefix("42424242424")
	n13 := luhnWithPrefix("422222222222")
	n19 := luhnWithPrefix("622222222222222222")
	n20 := luhnWithPrefix("6222222222222222222")
	for _, n := range []string{n12, n13, n19, n20} {
		if !luhnValid(n) {
			t.Fatalf("helper made an invalid number of length %d", len(n))
		}
	}
	for _, tc := range []struct {
		name string
		json string
		want []string
	}{
		// number
		{"minimal", `{"number": "4242424242424242"}`, nil},
		{"full", `{"number": "4242424242424242", "expiration_month": 12, "expiration_year": 2030, "cvc": "123"}`, nil},
		{"13 digits", `{"number": "` + n13 + `"}`, nil},
		{"19 digits", `{"number": "` + n19 + `"}`, nil},
		{"12 digits", `{"number": "` + n12 + `"}`, []string{"data.number"}},
		{"20 digits", `{"number": "` + n20 + `"}`, []string{"data.number"}},
		{"luhn off by one", `{"number": "4242424242424241"}`, []string{"data.number"}},
		{"luhn off by one 13", `{"number": "` + luhnOff(n13) + `"}`, []string{"data.number"}},
		{"luhn off by one 19", `{"number": "` + luhnOff(n19) + `"}`, []string{"data.number"}},
		{"transposed digits", `{"number": "4242424242424224"}`, []string{"data.number"}},
		{"number missing", `{"expiration_month": 1}`, []string{"data.number"}},
		{"number null", `{"number": null}`, []string{"data.number"}},
		{"number empty", `{"number": ""}`, []string{"data.number"}},
		{"number as JSON number", `{"number": 4242424242424242}`, []string{"data.number"}},
		{"number as bool", `{"number": true}`, []string{"data.number"}},
		{"number as object", `{"number": {"n": "4242424242424242"}}`, []string{"data.number"}},
		{"number with spaces", `{"number": "4242 4242 4242 4242"}`, []string{"data.number"}},
		{"number with dashes", `{"number": "4242-4242-4242-4242"}`, []string{"data.number"}},
		{"number padded", `{"number": " 4242424242424242"}`, []string{"data.number"}},
		{"number full-width", `{"number": "４２４２４２４２４２４２４２４２"}`, []string{"data.number"}},
		{"number arabic-indic", `{"number": "٤٢٤٢٤٢٤٢٤٢٤٢٤٢٤٢"}`, []string{"data.number"}},
		{"number letters", `{"number": "424242424242424a"}`, []string{"data.number"}},
		// expiration_month
		{"month 1", `{"number": "4242424242424242", "expiration_month": 1}`, nil},
		{"month 12", `{"number": "4242424242424242", "expiration_month": 12}`, nil},
		{"month 0", `{"number": "4242424242424242", "expiration_month": 0}`, []string{"data.expiration_month"}},
		{"month 13", `{"number": "4242424242424242", "expiration_month": 13}`, []string{"data.expiration_month"}},
		{"month -1", `{"number": "4242424242424242", "expiration_month": -1}`, []string{"data.expiration_month"}},
		{"month fraction", `{"number": "4242424242424242", "expiration_month": 1.5}`, []string{"data.expiration_month"}},
		{"month 1.0", `{"number": "4242424242424242", "expiration_month": 1.0}`, []string{"data.expiration_month"}},
		{"month exponent", `{"number": "4242424242424242", "expiration_month": 1e1}`, []string{"data.expiration_month"}},
		{"month string", `{"number": "4242424242424242", "expiration_month": "12"}`, []string{"data.expiration_month"}},
		{"month null", `{"number": "4242424242424242", "expiration_month": null}`, []string{"data.expiration_month"}},
		{"month huge", `{"number": "4242424242424242", "expiration_month": 99999999999999999999999}`, []string{"data.expiration_month"}},
		// expiration_year
		{"year 1000", `{"number": "4242424242424242", "expiration_year": 1000}`, nil},
		{"year 9999", `{"number": "4242424242424242", "expiration_year": 9999}`, nil},
		{"year 999", `{"number": "4242424242424242", "expiration_year": 999}`, []string{"data.expiration_year"}},
		{"year 10000", `{"number": "4242424242424242", "expiration_year": 10000}`, []string{"data.expiration_year"}},
		{"year two digits", `{"number": "4242424242424242", "expiration_year": 30}`, []string{"data.expiration_year"}},
		{"year fraction", `{"number": "4242424242424242", "expiration_year": 2030.5}`, []string{"data.expiration_year"}},
		{"year 2030.0", `{"number": "4242424242424242", "expiration_year": 2030.0}`, []string{"data.expiration_year"}},
		{"year string", `{"number": "4242424242424242", "expiration_year": "2030"}`, []string{"data.expiration_year"}},
		{"year negative", `{"number": "4242424242424242", "expiration_year": -2030}`, []string{"data.expiration_year"}},
		// cvc
		{"cvc 3", `{"number": "4242424242424242", "cvc": "123"}`, nil},
		{"cvc 4", `{"number": "4242424242424242", "cvc": "1234"}`, nil},
		{"cvc leading zero", `{"number": "4242424242424242", "cvc": "012"}`, nil},
		{"cvc 2", `{"number": "4242424242424242", "cvc": "12"}`, []string{"data.cvc"}},
		{"cvc 5", `{"number": "4242424242424242", "cvc": "12345"}`, []string{"data.cvc"}},
		{"cvc full-width", `{"number": "4242424242424242", "cvc": "１２３"}`, []string{"data.cvc"}},
		{"cvc letters", `{"number": "4242424242424242", "cvc": "12a"}`, []string{"data.cvc"}},
		{"cvc empty", `{"number": "4242424242424242", "cvc": ""}`, []string{"data.cvc"}},
		{"cvc as JSON number", `{"number": "4242424242424242", "cvc": 123}`, []string{"data.cvc"}},
		{"cvc null", `{"number": "4242424242424242", "cvc": null}`, []string{"data.cvc"}},
		// unknown members and shape
		{"unknown foo", `{"number": "4242424242424242", "foo": 1}`, []string{"data.foo"}},
		{"unknown name", `{"number": "4242424242424242", "name": "A"}`, []string{"data.name"}},
		{"unknown exp_month", `{"number": "4242424242424242", "exp_month": 1}`, []string{"data.exp_month"}},
		{"unknown Number", `{"number": "4242424242424242", "Number": "4242424242424242"}`, []string{"data.Number"}},
		{"unknown routing_number", `{"number": "4242424242424242", "routing_number": "021000021"}`, []string{"data.routing_number"}},
		{"two unknown", `{"number": "4242424242424242", "a": 1, "b": 2}`, []string{"data.a", "data.b"}},
		{"unknown digits key", `{"number": "4242424242424242", "4111111111111111": 1}`, []string{"data"}},
		{"unknown odd key", `{"number": "4242424242424242", "a b": 1}`, []string{"data"}},
		{"not an object: string", `"4242424242424242"`, []string{"data"}},
		{"not an object: array", `["4242424242424242"]`, []string{"data"}},
		{"not an object: number", `4242424242424242`, []string{"data"}},
		{"null", `null`, []string{"data"}},
		{"empty object", `{}`, []string{"data.number"}},
		{"everything wrong", `{"number": 4242, "expiration_month": 13, "expiration_year": 99, "cvc": 1, "x": 1}`,
			[]string{"data.number", "data.expiration_month", "data.expiration_year", "data.cvc", "data.x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantFieldsEqual(t, validateType(t, "card", testjson.Decode(t, tc.json)), tc.want)
		})
	}
}

func TestTokenCardDataWithoutUseNumber(t *testing.T) {
	// Data decoded with float64 numbers still validates integers.
	var data any
	if err := json.Unmarshal([]byte(`{"number": "4242424242424242", "expiration_month": 12, "expiration_year": 2030}`), &data); err != nil {
		t.Fatal(err)
	}
	wantFieldsEqual(t, validateType(t, "card", data), nil)
	if err := json.Unmarshal([]byte(`{"number": "4242424242424242", "expiration_month": 1.5}`), &data); err != nil {
		t.Fatal(err)
	}
	wantFieldsEqual(t, validateType(t, "card", data), []string{"data.expiration_month"})
}

func TestTokenLuhn(t *testing.T) {
	for _, tc := range []struct {
		n    string
		want bool
	}{
		{"4242424242424242", true},
		{"4111111111111111", true},
		{"5555555555554444", true},
		{"378282246310005", true},
		{"6011111111111117", true},
		{"4000056655665556", true},
		{"4242424242424241", false},
		{"4111111111111112", false},
		{"1234567812345678", false},
		{"79927398713", true},
		{"79927398710", false},
	} {
		t.Run(tc.n, func(t *testing.T) {
			if got := luhnValid(tc.n); got != tc.want {
				t.Errorf("luhnValid = %v", got)
			}
		})
	}
}

func TestTokenBankData(t *testing.T) {
	for _, tc := range []struct {
		name string
		json string
		want []string
	}{
		{"valid", `{"routing_number": "021000021", "account_number": "1234567890"}`, nil},
		{"valid other routing", `{"routing_number": "011000015", "account_number": "1"}`, nil},
		{"valid 122105155", `{"routing_number": "122105155", "account_number": "12345678901234567"}`, nil},
		{"account 17", `{"routing_number": "021000021", "account_number": "12345678901234567"}`, nil},
		{"account 18", `{"routing_number": "021000021", "account_number": "123456789012345678"}`, []string{"data.account_number"}},
		{"account empty", `{"routing_number": "021000021", "account_number": ""}`, []string{"data.account_number"}},
		{"account missing", `{"routing_number": "021000021"}`, []string{"data.account_number"}},
		{"account null", `{"routing_number": "021000021", "account_number": null}`, []string{"data.account_number"}},
		{"account JSON number", `{"routing_number": "021000021", "account_number": 1234567890}`, []string{"data.account_number"}},
		{"account letters", `{"routing_number": "021000021", "account_number": "12345A"}`, []string{"data.account_number"}},
		{"account dashes", `{"routing_number": "021000021", "account_number": "123-456"}`, []string{"data.account_number"}},
		{"account full-width", `{"routing_number": "021000021", "account_number": "１２３４"}`, []string{"data.account_number"}},
		{"routing checksum last digit", `{"routing_number": "021000022", "account_number": "1234"}`, []string{"data.routing_number"}},
		{"routing checksum first digit", `{"routing_number": "121000021", "account_number": "1234"}`, []string{"data.routing_number"}},
		{"routing checksum transposed", `{"routing_number": "012000021", "account_number": "1234"}`, []string{"data.routing_number"}},
		{"routing 8 digits", `{"routing_number": "02100002", "account_number": "1234"}`, []string{"data.routing_number"}},
		{"routing 10 digits", `{"routing_number": "0210000210", "account_number": "1234"}`, []string{"data.routing_number"}},
		{"routing JSON number", `{"routing_number": 21000021, "account_number": "1234"}`, []string{"data.routing_number"}},
		{"routing full-width", `{"routing_number": "０２１０００００２１", "account_number": "1234"}`, []string{"data.routing_number"}},
		{"routing missing", `{"account_number": "1234"}`, []string{"data.routing_number"}},
		{"routing null", `{"routing_number": null, "account_number": "1234"}`, []string{"data.routing_number"}},
		{"unknown foo", `{"routing_number": "021000021", "account_number": "1234", "foo": "x"}`, []string{"data.foo"}},
		{"unknown account_type", `{"routing_number": "021000021", "account_number": "1234", "account_type": "checking"}`, []string{"data.account_type"}},
		{"unknown number", `{"routing_number": "021000021", "account_number": "1234", "number": "4242424242424242"}`, []string{"data.number"}},
		{"unknown digits key", `{"routing_number": "021000021", "account_number": "1234", "123456789": 1}`, []string{"data"}},
		{"not an object", `"021000021"`, []string{"data"}},
		{"null", `null`, []string{"data"}},
		{"empty", `{}`, []string{"data.routing_number", "data.account_number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantFieldsEqual(t, validateType(t, "bank", testjson.Decode(t, tc.json)), tc.want)
		})
	}
}

// digitRun matches what could be a leaked card, account or routing
// number in an error.
var digitRun = regexp.MustCompile(`[0-9０-９]{5,}`)

func TestTokenValidationMessagesDoNotContainData(t *testing.T) {
	const pan = "4242424242424241" // Luhn-invalid
	for _, tc := range []struct {
		typ, json, secret string
	}{
		{"card", `{"number": "` + pan + `"}`, pan},
		{"card", `{"number": "424242424242"}`, "424242424242"},
		{"card", `{"number": ` + pan + `}`, pan},
		{"card", `{"number": "4242 4242 4242 4242"}`, "4242"},
		{"card", `{"number": "４２４２４２４２４２４２４２４２"}`, "４２４２"},
		{"card", `{"number": "4242424242424242", "cvc": "98765"}`, "98765"},
		{"card", `{"number": "4242424242424242", "cvc": 987}`, "987"},
		{"card", `{"number": "4242424242424242", "expiration_year": 20301}`, "20301"},
		{"card", `{"number": "4242424242424242", "` + pan + `": "x"}`, pan},
		{"card", `{"number": "4242424242424242", "card` + pan + `": "x"}`, pan},
		{"card", `"` + pan + `"`, pan},
		{"bank", `{"routing_number": "021000022", "account_number": "98765432109876543"}`, "021000022"},
		{"bank", `{"routing_number": "021000021", "account_number": "987654321098765432"}`, "987654321098765432"},
		{"bank", `{"routing_number": "021000021", "account_number": 98765432109}`, "98765432109"},
		{"bank", `{"routing_number": "021000021", "account_number": "1", "acct_98765432109": 1}`, "98765432109"},
	} {
		t.Run(tc.typ+" "+tc.json, func(t *testing.T) {
			tt, _ := LookupTokenType(tc.typ)
			v := &ValidationError{}
			tt.Validate(testjson.Decode(t, tc.json), v)
			err := v.OrNil()
			if err == nil {
				t.Fatal("no error")
			}
			checkNoLeak(t, v, tc.secret)
		})
	}
}

func checkNoLeak(t *testing.T, v *ValidationError, secret string) {
	t.Helper()
	if strings.Contains(v.Error(), secret) || digitRun.MatchString(v.Error()) {
		t.Errorf("Error() leaks data: %q", v.Error())
	}
	for field, msgs := range v.Fields {
		if strings.Contains(field, secret) || digitRun.MatchString(field) {
			t.Errorf("field name leaks data: %q", field)
		}
		for _, m := range msgs {
			if strings.Contains(m, secret) || digitRun.MatchString(m) {
				t.Errorf("message on %s leaks data: %q", field, m)
			}
		}
	}
}

func TestTokenID(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   string
		ok   bool
	}{
		{"3 chars", "abc", true},
		{"uuid", "2b0fd8b2-4c0b-4d1e-9a57-5b1d6e9a7a3a", true},
		{"400 chars", strings.Repeat("a", 400), true},
		{"400 multibyte chars", strings.Repeat("é", 400), true},
		{"3 multibyte chars", "日本語", true},
		{"alias shape", "4242XXXXXXXX4242", true},
		{"email shape", "jane.doe@example.com", true},
		{"allowed specials", "a-b_c.d~e!f*g'h(i)j;k:l@m$n,o", true},
		{"inner spaces", "a b c", true},
		{"2 chars", "ab", false},
		{"2 multibyte chars", "日本", false},
		{"empty", "", false},
		{"401 chars", strings.Repeat("a", 401), false},
		{"whitespace only", "   ", false},
		{"unicode whitespace only", "\u2003\u2003\u2003", false},
		{"tab", "ab\tc", false},
		{"newline", "abc\n", false},
		{"nul", "ab\x00c", false},
		{"del", "ab\x7fc", false},
		{"c1 control", "ab\u0085c", false},
		{"invalid utf-8", "ab\xffc", false},
		{"unevaluated expression", "{{ data | alias_preserve_format: 0, 4 }}", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkIDRule(t, tc.id, tc.ok)
		})
	}
	for _, c := range `#/\+?[]|&=%<>{}^` {
		t.Run("forbidden "+string(c), func(t *testing.T) {
			checkIDRule(t, "abc"+string(c)+"def", false)
			checkIDRule(t, string(c)+"abc", false)
		})
	}
}

func checkIDRule(t *testing.T, id string, ok bool) {
	t.Helper()
	err := ValidateTokenID(id)
	if ok {
		if err != nil {
			t.Errorf("ValidateTokenID(%q) = %v", id, err)
		}
		return
	}
	var v *ValidationError
	if !errors.As(err, &v) {
		t.Fatalf("ValidateTokenID(%q) = %v, want a ValidationError", id, err)
	}
	if len(v.Fields) != 1 || len(v.Fields["id"]) == 0 {
		t.Errorf("fields = %v, want only id", v.Fields)
	}
	for _, m := range v.Fields["id"] {
		if len(id) >= 3 && strings.Contains(m, id) {
			t.Errorf("message quotes the id: %q", m)
		}
	}
}

func TestTokenContainers(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want []string
		bad  []string
	}{
		{"nil", nil, nil, nil},
		{"empty", []string{}, nil, nil},
		{"root", []string{"/"}, []string{"/"}, nil},
		{"one", []string{"/pci/high/"}, []string{"/pci/high/"}, nil},
		{"lower-cased", []string{"/PCI/High/"}, []string{"/pci/high/"}, nil},
		{"segments", []string{"/customer-123/pii_x/"}, []string{"/customer-123/pii_x/"}, nil},
		{"two", []string{"/a/", "/b/"}, []string{"/a/", "/b/"}, []string{"containers"}},
		{"two, one bad", []string{"/a/", "b"}, []string{"/a/", "b"}, []string{"containers", "containers[1]"}},
		{"no leading slash", []string{"pci/"}, []string{"pci/"}, []string{"containers[0]"}},
		{"no trailing slash", []string{"/pci"}, []string{"/pci"}, []string{"containers[0]"}},
		{"empty string", []string{""}, []string{""}, []string{"containers[0]"}},
		{"double slash", []string{"/pci//"}, []string{"/pci//"}, []string{"containers[0]"}},
		{"space", []string{"/p ci/"}, []string{"/p ci/"}, []string{"containers[0]"}},
		{"dot", []string{"/../"}, []string{"/../"}, []string{"containers[0]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &ValidationError{}
			got := NormalizeContainers(tc.in, v)
			if !slices.Equal(got, tc.want) || (tc.want == nil) != (got == nil) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
			wantFieldsEqual(t, v.Fields, tc.bad)
		})
	}
}

func TestTokenMetadata(t *testing.T) {
	many := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[strings.Repeat("k", 1+i%50)+string(rune('a'+i/50))] = "v"
		}
		if len(m) != n {
			panic("bad helper")
		}
		return m
	}
	long := strings.Repeat("k", 101)
	for _, tc := range []struct {
		name string
		in   map[string]string
		bad  []string
	}{
		{"nil", nil, nil},
		{"empty", map[string]string{}, nil},
		{"simple", map[string]string{"customer": "abc", "note": ""}, nil},
		{"100 keys", many(100), nil},
		{"101 keys", many(101), []string{"metadata"}},
		{"key 1 char", map[string]string{"k": "v"}, nil},
		{"key 100 chars", map[string]string{strings.Repeat("k", 100): "v"}, nil},
		{"key 100 multibyte chars", map[string]string{strings.Repeat("é", 100): "v"}, nil},
		{"key 101 chars", map[string]string{long: "v"}, []string{"metadata." + strings.Repeat("k", 100) + "..."}},
		{"empty key", map[string]string{"": "v"}, []string{"metadata"}},
		{"value 500 chars", map[string]string{"k": strings.Repeat("v", 500)}, nil},
		{"value 500 multibyte chars", map[string]string{"k": strings.Repeat("é", 500)}, nil},
		{"value 501 chars", map[string]string{"k": strings.Repeat("v", 501)}, []string{"metadata.k"}},
		{"two bad values", map[string]string{"a": strings.Repeat("v", 501), "b": strings.Repeat("v", 501), "c": "ok"},
			[]string{"metadata.a", "metadata.b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &ValidationError{}
			ValidateMetadata(tc.in, v)
			wantFieldsEqual(t, v.Fields, tc.bad)
		})
	}
	t.Run("values not quoted", func(t *testing.T) {
		secret := "4242424242424242" + strings.Repeat("9", 490)
		v := &ValidationError{}
		ValidateMetadata(map[string]string{"card": secret}, v)
		if v.OrNil() == nil {
			t.Fatal("no error")
		}
		checkNoLeak(t, v, "4242424242424242")
	})
}

func FuzzValidateCard(f *testing.F) {
	for _, s := range []string{
		`{"number": "4242424242424242", "expiration_month": 12, "expiration_year": 2030, "cvc": "123"}`,
		`{"number": 4242424242424242}`,
		`{"number": "４２４２４２４２４２４２４２４２"}`,
		`{"number": "4242424242424241", "foo": {"bar": [1, 2]}}`,
		`{"expiration_month": 1e400, "expiration_year": -0, "cvc": null}`,
		`{"routing_number": "021000021", "account_number": "123"}`,
		`[]`, `null`, `"x"`, `12.5`, `{}`,
	} {
		f.Add([]byte(s))
	}
	card, _ := LookupTokenType("card")
	bank, _ := LookupTokenType("bank")
	token, _ := LookupTokenType("token")
	f.Fuzz(func(t *testing.T, b []byte) {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var data any
		if err := dec.Decode(&data); err != nil {
			return
		}
		for _, tt := range []*TokenType{card, bank, token} {
			v := &ValidationError{}
			tt.Validate(data, v)
			checkNoLeak(t, v, "\x00never")
			if tt == card && v.OrNil() == nil {
				m := data.(map[string]any)
				n := m["number"].(string)
				if len(n) < 13 || len(n) > 19 || !isASCIIDigits(n) || !luhnValid(n) {
					t.Errorf("accepted card number of length %d", len(n))
				}
			}
		}
	})
}

// FuzzMetadataUnmarshal: the one-pass decoding of metadata gives the
// same metadata, and the same error, as decoding member by member.
func FuzzMetadataUnmarshal(f *testing.F) {
	for _, s := range []string{`{}`, `null`, `{"a":"b"}`, `{"a":null}`, `{"a":"null"}`, `{"nullable":"x"}`, `{"a":1}`,
		`{"b":1,"a":null}`, `{"a":"x","a":"y"}`, `[]`, `"x"`, `5`, `{"a":{"b":"c"}}`, `{"a":"\u0000"}`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast, slow Metadata
		errFast := fast.UnmarshalJSON(b)
		errSlow := slow.unmarshalMembers(b)
		if string(b) == "null" {
			return // handled before either path
		}
		if fmt.Sprint(errFast) != fmt.Sprint(errSlow) {
			t.Fatalf("%q: error %v, member by member %v", b, errFast, errSlow)
		}
		if errFast == nil && !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: %v, member by member %v", b, fast, slow)
		}
	})
}

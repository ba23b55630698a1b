package vaultstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Token type names.
const (
	TokenTypeToken = "token"
	TokenTypeCard  = "card"
	TokenTypeBank  = "bank"
)

// TokenType holds a token type's defaults and the validation of its data.
//
// DefaultMask is a JSON value (nil, a string or a map[string]any) whose
// strings are expressions; nil means the type has no default mask, so a
// masked read redacts. Validate checks decoded data (json.Decoder with
// UseNumber: objects are map[string]any, numbers json.Number) and records
// failures on fields named "data" or "data.<member>"; its messages never
// contain the submitted values.
type TokenType struct {
	Name               string
	DefaultContainer   string
	DefaultMask        any
	DefaultFingerprint string
	Validate           func(data any, v *ValidationError)
}

// LookupTokenType returns the named token type. Each call returns a fresh
// value, so a caller may keep or modify DefaultMask freely.
func LookupTokenType(name string) (*TokenType, bool) {
	switch name {
	case TokenTypeToken:
		return &TokenType{
			Name:               TokenTypeToken,
			DefaultContainer:   "/general/high/",
			DefaultMask:        nil,
			DefaultFingerprint: "{{ data | stringify }}",
			Validate:           validateGenericData,
		}, true
	case TokenTypeCard:
		return &TokenType{
			Name:             TokenTypeCard,
			DefaultContainer: "/pci/high/",
			DefaultMask: map[string]any{
				"number":           "{{ data.number | reveal_last: 4 }}",
				"expiration_month": "{{ data.expiration_month }}",
				"expiration_year":  "{{ data.expiration_year }}",
			},
			DefaultFingerprint: "{{ data.number }}",
			Validate:           validateCardData,
		}, true
	case TokenTypeBank:
		return &TokenType{
			Name:             TokenTypeBank,
			DefaultContainer: "/bank/high/",
			DefaultMask: map[string]any{
				"routing_number": "{{ data.routing_number }}",
				"account_number": "{{ data.account_number | reveal_last: 4 }}",
			},
			DefaultFingerprint: "{{ data.account_number }}|{{ data.routing_number }}",
			Validate:           validateBankData,
		}, true
	}
	return nil, false
}

// TokenTypeNames lists the token types, sorted.
func TokenTypeNames() []string {
	return []string{TokenTypeBank, TokenTypeCard, TokenTypeToken}
}

// validateGenericData accepts any JSON value except null.
func validateGenericData(data any, v *ValidationError) {
	if data == nil {
		v.Add("data", "is required")
	}
}

// tokenDataObject returns data as an object, or records why it is not one.
func tokenDataObject(data any, v *ValidationError) (map[string]any, bool) {
	if data == nil {
		v.Add("data", "is required")
		return nil, false
	}
	m, ok := data.(map[string]any)
	if !ok {
		v.Add("data", "must be an object")
		return nil, false
	}
	return m, true
}

// rejectUnknownMembers records an error for each member of m not in known.
func rejectUnknownMembers(m map[string]any, known []string, v *ValidationError) {
	var unknown []string
	for k := range m {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		if safeMemberName(k) {
			v.Add("data."+k, "unknown field")
		} else {
			// The name itself might be sensitive (a card number used as a
			// key): do not echo it into error fields or logs.
			v.Add("data", "has an unknown field")
		}
	}
}

// safeMemberName reports whether an unknown member's name may be quoted in
// an error: 1 to 64 characters from A-Z, a-z, 0-9, "_" and "-", with at
// most four digits, so no account or card number can hide in it.
func safeMemberName(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	digits := 0
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '-':
		default:
			return false
		}
	}
	return digits <= 4
}

// isASCIIDigits reports whether s is non-empty and made only of '0'..'9'.
func isASCIIDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// luhnValid reports whether a string of ASCII digits passes the Luhn check.
func luhnValid(digits string) bool {
	sum := 0
	double := false
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// abaValid reports whether nine ASCII digits pass the ABA routing number
// checksum (weights 3, 7, 1).
func abaValid(digits string) bool {
	if len(digits) != 9 {
		return false
	}
	weights := [3]int{3, 7, 1}
	sum := 0
	for i := 0; i < 9; i++ {
		sum += weights[i%3] * int(digits[i]-'0')
	}
	return sum%10 == 0
}

// jsonInteger returns the integer value of a JSON number. ok is false for
// anything that is not a number written as an integer (strings, booleans,
// null, fractions, exponents, out of int64 range).
func jsonInteger(x any) (n int64, ok bool) {
	switch t := x.(type) {
	case json.Number:
		n, err := strconv.ParseInt(string(t), 10, 64)
		return n, err == nil
	case float64: // data decoded without UseNumber
		if t != math.Trunc(t) || math.IsInf(t, 0) || t < math.MinInt64 || t >= math.MaxInt64 {
			return 0, false
		}
		return int64(t), true
	case int:
		return int64(t), true
	case int64:
		return t, true
	}
	return 0, false
}

var cardMembers = []string{"number", "expiration_month", "expiration_year", "cvc"}

// validateCardData checks a card object: number (required, 13-19 ASCII
// digits, Luhn-valid), expiration_month (integer 1-12), expiration_year
// (four-digit integer), cvc (3 or 4 ASCII digits).
func validateCardData(data any, v *ValidationError) {
	m, ok := tokenDataObject(data, v)
	if !ok {
		return
	}
	if raw, present := m["number"]; !present || raw == nil {
		v.Add("data.number", "is required")
	} else if s, ok := raw.(string); !ok {
		v.Add("data.number", "must be a string")
	} else if !isASCIIDigits(s) {
		v.Add("data.number", "must contain only the digits 0-9, without separators")
	} else if len(s) < 13 || len(s) > 19 {
		v.Add("data.number", "must be 13 to 19 digits long")
	} else if !luhnValid(s) {
		v.Add("data.number", "is not a valid card number (Luhn check failed)")
	}
	if raw, present := m["expiration_month"]; present {
		if n, ok := jsonInteger(raw); !ok || n < 1 || n > 12 {
			v.Add("data.expiration_month", "must be an integer from 1 to 12")
		}
	}
	if raw, present := m["expiration_year"]; present {
		if n, ok := jsonInteger(raw); !ok || n < 1000 || n > 9999 {
			v.Add("data.expiration_year", "must be a four-digit integer year")
		}
	}
	if raw, present := m["cvc"]; present {
		if s, ok := raw.(string); !ok {
			v.Add("data.cvc", "must be a string")
		} else if !isASCIIDigits(s) || len(s) < 3 || len(s) > 4 {
			v.Add("data.cvc", "must be 3 or 4 digits 0-9")
		}
	}
	rejectUnknownMembers(m, cardMembers, v)
}

var bankMembers = []string{"routing_number", "account_number"}

// validateBankData checks a bank object: routing_number (required, nine
// ASCII digits with a valid ABA checksum) and account_number (required, 1
// to 17 ASCII digits).
func validateBankData(data any, v *ValidationError) {
	m, ok := tokenDataObject(data, v)
	if !ok {
		return
	}
	if raw, present := m["routing_number"]; !present || raw == nil {
		v.Add("data.routing_number", "is required")
	} else if s, ok := raw.(string); !ok {
		v.Add("data.routing_number", "must be a string")
	} else if !isASCIIDigits(s) || len(s) != 9 {
		v.Add("data.routing_number", "must be 9 digits 0-9")
	} else if !abaValid(s) {
		v.Add("data.routing_number", "is not a valid ABA routing number (checksum failed)")
	}
	if raw, present := m["account_number"]; !present || raw == nil {
		v.Add("data.account_number", "is required")
	} else if s, ok := raw.(string); !ok {
		v.Add("data.account_number", "must be a string")
	} else if !isASCIIDigits(s) || len(s) > 17 {
		v.Add("data.account_number", "must be 1 to 17 digits 0-9")
	}
	rejectUnknownMembers(m, bankMembers, v)
}

// Token id bounds, in characters.
const (
	MinTokenIDLength = 3
	MaxTokenIDLength = 400
)

// tokenIDForbidden are the characters a caller-chosen token id may not
// contain.
const tokenIDForbidden = `#/\+?[]|&=%<>{}^`

// ValidateTokenID checks a caller-chosen token id (after any id expression
// has been evaluated): 3 to 400 characters of valid UTF-8, not only
// whitespace, no control characters and none of # / \ + ? [ ] | & = % < >
// { } ^. It returns a *ValidationError on "id", or nil.
func ValidateTokenID(id string) error {
	v := &ValidationError{}
	if !utf8.ValidString(id) {
		v.Add("id", "must be valid UTF-8")
		return v
	}
	if n := utf8.RuneCountInString(id); n < MinTokenIDLength || n > MaxTokenIDLength {
		v.Add("id", fmt.Sprintf("must be %d to %d characters long", MinTokenIDLength, MaxTokenIDLength))
	}
	if strings.TrimSpace(id) == "" {
		v.Add("id", "must not be only whitespace")
	}
	if strings.ContainsAny(id, tokenIDForbidden) {
		v.Add("id", `must not contain any of # / \ + ? [ ] | & = % < > { } ^`)
	}
	if strings.IndexFunc(id, unicode.IsControl) >= 0 {
		v.Add("id", "must not contain control characters")
	}
	return v.OrNil()
}

// MaxTokenContainers is how many containers a token may be placed in.
const MaxTokenContainers = 1

// NormalizeContainers lower-cases and checks a token's containers,
// recording failures on "containers[i]" and, for more than
// MaxTokenContainers entries, on "containers". An empty list returns nil:
// the caller then uses the type's default container.
func NormalizeContainers(list []string, v *ValidationError) []string {
	if len(list) == 0 {
		return nil
	}
	if len(list) > MaxTokenContainers {
		v.Add("containers", fmt.Sprintf("must hold at most %d container", MaxTokenContainers))
	}
	out := make([]string, len(list))
	for i, c := range list {
		n, ok := NormalizeContainer(c)
		if !ok {
			v.Add(fmt.Sprintf("containers[%d]", i), "container must start and end with / and use only a-z, 0-9, _ and -")
		}
		out[i] = n
	}
	return out
}

// Metadata is the metadata of a token to create: an object of strings.
// Decoding it refuses a member that is not a string, null included, which
// encoding/json would quietly store as "".
type Metadata map[string]string

// UnmarshalJSON decodes an object of strings. Its errors are
// *json.UnmarshalTypeError without an offset (one would count from the
// start of this object, not of the body) and with the member in Field, to
// which encoding/json prefixes the path to the metadata.
func (m *Metadata) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*m = nil
		return nil
	}
	// The common case in one pass: encoding/json would store a null
	// member as "", so text that holds "null" anywhere takes the member
	// by member path below, as does any error, to be named the same way
	// every time.
	var out map[string]string
	if err := json.Unmarshal(b, &out); err == nil && !bytes.Contains(b, []byte("null")) {
		*m = out
		return nil
	}
	return m.unmarshalMembers(b)
}

// unmarshalMembers is UnmarshalJSON member by member, refusing the first
// member, by name, that is not a string.
func (m *Metadata) unmarshalMembers(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			te.Offset = 0
		}
		return err
	}
	out := make(Metadata, len(raw))
	for _, k := range slices.Sorted(maps.Keys(raw)) { // the first bad member by name, every time
		var v string
		if string(raw[k]) == "null" || json.Unmarshal(raw[k], &v) != nil {
			return &json.UnmarshalTypeError{Value: "non-string", Type: reflect.TypeFor[string](), Field: k}
		}
		out[k] = v
	}
	*m = out
	return nil
}

// Metadata bounds, in characters.
const (
	MaxMetadataKeys        = 100
	MaxMetadataKeyLength   = 100
	MaxMetadataValueLength = 500
)

// ValidateMetadata checks token metadata: at most 100 keys, each 1 to 100
// characters, each value at most 500 characters. Failures are recorded on
// "metadata" or "metadata.<key>" (an over-long key is cut to its first
// 100 characters followed by "..."); values are never quoted.
func ValidateMetadata(m map[string]string, v *ValidationError) {
	if len(m) > MaxMetadataKeys {
		v.Add("metadata", fmt.Sprintf("must have at most %d keys", MaxMetadataKeys))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		n := utf8.RuneCountInString(k)
		if n == 0 {
			v.Add("metadata", "keys must not be empty")
			continue
		}
		field := "metadata." + k
		if n > MaxMetadataKeyLength {
			field = "metadata." + truncateRunes(k, MaxMetadataKeyLength) + "..."
			v.Add(field, fmt.Sprintf("key must be at most %d characters", MaxMetadataKeyLength))
		}
		if utf8.RuneCountInString(m[k]) > MaxMetadataValueLength {
			v.Add(field, fmt.Sprintf("value must be at most %d characters", MaxMetadataValueLength))
		}
	}
}

// truncateRunes returns the first n characters of s.
func truncateRunes(s string, n int) string {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

// Package testjson decodes and walks JSON values (the any that
// encoding/json gives, numbers as json.Number) for tests, and encodes
// request bodies: one decoder, one path helper and one body encoder,
// shared by the store's, the API's and the end-to-end tests, so that all
// send requests and read answers the same way.
package testjson

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// Decode decodes the JSON text s with numbers as json.Number, as the
// vault decodes token data and the tests decode answers; it fails the
// test on bad JSON.
func Decode(tb testing.TB, s string) any {
	tb.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		tb.Fatalf("bad JSON %.200q: %v", s, err)
	}
	return v
}

// Body is a request body for v: nil for nil, a string or []byte as it is
// (so a test can send malformed JSON), anything else encoded as JSON.
func Body(v any) (io.Reader, error) {
	switch b := v.(type) {
	case nil:
		return nil, nil
	case string:
		return strings.NewReader(b), nil
	case []byte:
		return bytes.NewReader(b), nil
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		return bytes.NewReader(raw), nil
	}
}

// Field walks v by a path of object member names (strings) and array
// indexes (ints); nil when the path does not exist or names a step of
// another type.
func Field(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k < 0 || k >= len(a) {
				return nil
			}
			v = a[k]
		default:
			return nil
		}
	}
	return v
}

// Str is Field as a string; "" when it is not one.
func Str(v any, path ...any) string {
	s, _ := Field(v, path...).(string)
	return s
}

// Has reports whether v is an object with the member name, whatever its
// value (null included).
func Has(v any, name string) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	_, ok = m[name]
	return ok
}

package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
)

// Decode validates body with [Validate] and then decodes it into v, which
// must be a non-nil pointer, using encoding/json with UseNumber: numbers
// decoded into interface values become json.Number and keep their exact text.
//
// Unknown object members are ignored. Struct fields are matched by their
// exact JSON name: a member that encoding/json would match to a field only
// case-insensitively is treated as unknown and ignored (see the package
// documentation). A value of the wrong type for its destination is reported
// as an [*Error] whose Field is the JSON path of the value and whose Message
// names the expected type, such as "expected string". Errors returned by
// custom UnmarshalJSON or UnmarshalText methods are reported as
// "invalid value" for the whole body, since they carry neither a path nor a
// guarantee that the value is not echoed. Every error is an *Error.
func Decode(body []byte, v any, lim Limits) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return bodyError("invalid decode target")
	}
	s := getScanner(body, lim, rootPlan(rv))
	if err := s.scan(); err != nil {
		putScanner(s)
		return err
	}
	if len(s.blanks) > 0 {
		body = blankRanges(body, s.blanks)
	}
	putScanner(s)
	return decodeValidated(body, v)
}

// DecodeValue validates body with [Validate] and decodes it into the generic
// representation of encoding/json with UseNumber: map[string]any, []any,
// string, json.Number, bool or nil. Every error is an [*Error].
func DecodeValue(body []byte, lim Limits) (any, error) {
	if err := Validate(body, lim); err != nil {
		return nil, err
	}
	var v any
	if err := decodeValidated(body, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// blankRanges returns a copy of body without the bytes in the given
// [start,end) ranges, which are the contents of member names: the members
// become "" and match no struct field.
func blankRanges(body []byte, ranges []int) []byte {
	out := make([]byte, 0, len(body))
	prev := 0
	for k := 0; k < len(ranges); k += 2 {
		out = append(out, body[prev:ranges[k]]...)
		prev = ranges[k+1]
	}
	return append(out, body[prev:]...)
}

// decodeValidated decodes an already validated body.
func decodeValidated(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	return convertDecodeError(body, err)
}

// convertDecodeError turns an encoding/json error into an *Error without
// ever copying the error's text, which may contain the offending value.
func convertDecodeError(body []byte, err error) *Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		// encoding/json's own offsets point into the body; a type's
		// UnmarshalJSON reports none, and the path encoding/json built
		// in Field names the member instead
		field, ok := "", false
		if te.Offset > 0 {
			field, ok = pathAt(body, int(te.Offset))
		}
		if !ok {
			field = te.Field
		}
		return fieldError(field, typeMessage(te))
	}
	var ie *json.InvalidUnmarshalError
	if errors.As(err, &ie) {
		return bodyError("invalid decode target")
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return bodyError("invalid JSON") // unreachable after Validate
	}
	return bodyError("invalid value")
}

// pathAt returns the path of the innermost value v of the valid body with
// v.start < off <= v.end, which is how encoding/json's UnmarshalTypeError
// offsets point at the value they concern.
func pathAt(body []byte, off int) (string, bool) {
	s := getScanner(body, Limits{MaxDepth: int(^uint(0) >> 1), MaxValues: int(^uint(0) >> 1)}, nil)
	s.locate, s.target = true, off
	_ = s.scan()
	path, found := s.foundPath, s.found
	putScanner(s)
	return path, found
}

// typeMessage describes the JSON type expected by the destination of te.
// It looks at the JSON value's description only to tell apart non-integers
// from out-of-range numbers; the value itself is never copied.
func typeMessage(te *json.UnmarshalTypeError) string {
	t := te.Type
	if t == nil {
		return "invalid value"
	}
	isNumber := len(te.Value) >= len("number") && te.Value[:len("number")] == "number"
	if customUnmarshal(t) {
		if t.Implements(textUnmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
			return "expected string"
		}
		return "invalid value"
	}
	switch t.Kind() {
	case reflect.String:
		return "expected string"
	case reflect.Bool:
		return "expected boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if isNumber && isIntegerLiteral(te.Value[len("number"):]) {
			return "integer out of range for " + t.Kind().String()
		}
		return "expected integer"
	case reflect.Float32, reflect.Float64:
		if isNumber {
			return "number out of range for " + t.Kind().String()
		}
		return "expected number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !customUnmarshal(t.Elem()) {
			return "expected base64 string or array"
		}
		return "expected array"
	case reflect.Array:
		return "expected array"
	case reflect.Map:
		if te.Value == "object" {
			return "unsupported map key type"
		}
		return "expected object"
	case reflect.Struct:
		return "expected object"
	case reflect.Interface:
		return "unsupported value"
	}
	return "invalid value"
}

// isIntegerLiteral reports whether s (" 123" or " -5") spells an integer.
func isIntegerLiteral(s string) bool {
	if len(s) > 0 && s[0] == ' ' {
		s = s[1:]
	}
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
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

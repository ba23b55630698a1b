package expr

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/osteele/liquid/render"
)

const (
	// maxPadLength bounds pad_left / pad_right so an expression cannot
	// allocate without limit.
	maxPadLength = 1 << 16
	// maxIntArg bounds other integer arguments.
	maxIntArg = math.MaxInt32
)

// filterFunc is the shape of every vault filter: the input, then the
// positional arguments.
type filterFunc func(in any, args ...any) (any, error)

// vaultFilters are the vault's own filters by name, the alias filters
// drawing from crypto/rand.
var vaultFilters = vaultFiltersDrawing(randIndex)

// vaultFiltersDrawing returns the vault's own filters by name, the alias
// filters drawing their random characters from pick, which returns a
// uniformly random integer in [0, n).
func vaultFiltersDrawing(pick func(n int) int) map[string]filterFunc {
	return map[string]filterFunc{
		"reveal_last":           revealLast,
		"reveal":                reveal,
		"last4":                 last4,
		"pad_left":              padFilter("pad_left", true),
		"pad_right":             padFilter("pad_right", false),
		"json":                  jsonFilter,
		"stringify":             stringifyFilter("stringify"),
		"json_stringify":        stringifyFilter("json_stringify"),
		"alias_preserve_format": aliasPreserveFormatDrawing(pick),
		"alias_preserve_length": aliasPreserveLengthDrawing(pick),
		"to_number":             toNumber,
		"to_boolean":            toBoolean,
		"to_string":             toString,
	}
}

func registerVaultFilters(c *render.Config, vf map[string]filterFunc) {
	for name, fn := range vf {
		// The engine calls filters through reflection and needs a func type,
		// not a named one.
		c.AddFilter(name, (func(any, ...any) (any, error))(fn))
	}
}

// reveal_last: length (required), mask_char ('X'). Keeps the last length
// characters and masks every other letter or digit; separators stay. A
// value no longer than length is returned unmasked.
var revealLast = textFilter("reveal_last", 2, func(name, s string, args []any) (any, error) {
	n, err := intArg(name, "length", args, 0, -1, maxIntArg)
	if err != nil {
		return nil, err
	}
	mask, err := charArg(name, "mask character", args, 1, 'X')
	if err != nil {
		return nil, err
	}
	r := []rune(s)
	if len(r) <= n {
		return s, nil
	}
	for i := range len(r) - n {
		if isAlnum(r[i]) {
			r[i] = mask
		}
	}
	return string(r), nil
})

// reveal: reveal_first (0), reveal_last (0), mask_char ('X'),
// preserve_chars (""). Masks every character except the first and last ones
// and those in preserve_chars. If the value is no longer than
// reveal_first+reveal_last, or masking would change nothing, the whole value
// is masked.
var reveal = textFilter("reveal", 4, func(name, s string, args []any) (any, error) {
	first, last, err := revealBounds(name, args)
	if err != nil {
		return nil, err
	}
	mask, err := charArg(name, "mask character", args, 2, 'X')
	if err != nil {
		return nil, err
	}
	preserve, err := stringArg(name, "preserve characters", args, 3, "")
	if err != nil {
		return nil, err
	}
	r := []rune(s)
	if len(r) > first+last {
		out := make([]rune, len(r))
		copy(out, r)
		for i := first; i < len(r)-last; i++ {
			if !strings.ContainsRune(preserve, r[i]) {
				out[i] = mask
			}
		}
		if res := string(out); res != s {
			return res, nil
		}
	}
	return strings.Repeat(string(mask), len(r)), nil
})

// last4: the last four characters; a shorter value is returned whole.
var last4 = textFilter("last4", 0, func(_, s string, _ []any) (any, error) {
	r := []rune(s)
	if len(r) <= 4 {
		return s, nil
	}
	return string(r[len(r)-4:]), nil
})

// pad_left / pad_right: length (required), pad_char (required). Pads to
// length characters; never truncates.
func padFilter(name string, left bool) filterFunc {
	return textFilter(name, 2, func(name, s string, args []any) (any, error) {
		n, err := intArg(name, "length", args, 0, -1, maxPadLength)
		if err != nil {
			return nil, err
		}
		pad, err := charArg(name, "pad character", args, 1, -1)
		if err != nil {
			return nil, err
		}
		count := utf8.RuneCountInString(s)
		if count >= n {
			return s, nil
		}
		p := strings.Repeat(string(pad), n-count)
		if left {
			return p + s, nil
		}
		return s + p, nil
	})
}

// json: JSONPath (required). Evaluates a Goessner JSONPath over the input;
// the path must match exactly one value.
func jsonFilter(in any, args ...any) (any, error) {
	const name = "json filter"
	if err := maxArgs(name, args, 1); err != nil {
		return nil, err
	}
	if len(args) == 0 || args[0] == nil {
		return nil, errorf("json filter: a JSONPath argument is required")
	}
	path, ok := args[0].(string)
	if !ok {
		return nil, errorf("json filter: the JSONPath argument must be a string")
	}
	p, err := compileJSONPath(path)
	if err != nil {
		return nil, err
	}
	matches, err := p.eval(in)
	if err != nil {
		return nil, err
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
		return nil, errorf("json filter: path matched no value")
	default:
		return nil, errorf("json filter: path matched %d values", len(matches))
	}
}

// stringify / json_stringify: the input serialised as JSON; null stays null.
func stringifyFilter(name string) filterFunc {
	return func(in any, args ...any) (any, error) {
		if err := maxArgs(name, args, 0); err != nil {
			return nil, err
		}
		if in == nil {
			return nil, nil
		}
		b, err := marshalJSON(in)
		if err != nil {
			return nil, errorf("%s: value cannot be serialised as JSON", name)
		}
		return string(b), nil
	}
}

// alias_preserve_format: reveal_first (0), reveal_last (0). A random alias:
// letters become random letters, digits random digits, other characters
// stay; the first and last characters asked for are kept.
var aliasPreserveFormat = aliasPreserveFormatDrawing(randIndex)

// aliasPreserveFormatDrawing is alias_preserve_format drawing from pick.
func aliasPreserveFormatDrawing(pick func(n int) int) filterFunc {
	return alias("alias_preserve_format", func(c rune) rune {
		switch {
		case unicode.IsDigit(c):
			return rune(digits[pick(len(digits))])
		case unicode.IsLetter(c):
			return rune(letters[pick(len(letters))])
		}
		return c
	})
}

// alias_preserve_length: reveal_first (0), reveal_last (0). A random
// alphanumeric alias of the same length; the first and last characters asked
// for are kept.
var aliasPreserveLength = aliasPreserveLengthDrawing(randIndex)

// aliasPreserveLengthDrawing is alias_preserve_length drawing from pick.
func aliasPreserveLengthDrawing(pick func(n int) int) filterFunc {
	return alias("alias_preserve_length", func(rune) rune {
		return rune(alphanumerics[pick(len(alphanumerics))])
	})
}

const (
	digits        = "0123456789"
	letters       = "abcdefghijklmnopqrstuvwxyz"
	alphanumerics = letters + digits
)

// alias is a filter that replaces every character but the first and
// last ones asked for with gen's choice.
func alias(name string, gen func(rune) rune) filterFunc {
	return textFilter(name, 2, func(name, s string, args []any) (any, error) {
		first, last, err := revealBounds(name, args)
		if err != nil {
			return nil, err
		}
		r := []rune(s)
		for i := first; i < len(r)-last; i++ {
			r[i] = gen(r[i])
		}
		return string(r), nil
	})
}

// textFilter makes a filter over text: it checks the argument count,
// passes nil through, and turns a string or number input into text for f.
func textFilter(name string, maxArgCount int, f func(name, s string, args []any) (any, error)) filterFunc {
	return func(in any, args ...any) (any, error) {
		if err := maxArgs(name, args, maxArgCount); err != nil {
			return nil, err
		}
		if in == nil {
			return nil, nil
		}
		s, err := textInput(name, in)
		if err != nil {
			return nil, err
		}
		return f(name, s, args)
	}
}

// revealBounds reads the reveal_first and reveal_last arguments shared by
// reveal and the alias filters.
func revealBounds(name string, args []any) (first, last int, err error) {
	if first, err = intArg(name, "reveal_first", args, 0, 0, maxIntArg); err != nil {
		return 0, 0, err
	}
	if last, err = intArg(name, "reveal_last", args, 1, 0, maxIntArg); err != nil {
		return 0, 0, err
	}
	return first, last, nil
}

// randIndex returns a uniformly random integer in [0, n), n <= 256, from
// crypto/rand.
func randIndex(n int) int {
	limit := 256 - 256%n
	var b [16]byte
	for {
		rand.Read(b[:]) // never fails (Go 1.24+ crashes the program instead)
		for _, x := range b {
			if int(x) < limit {
				return int(x) % n
			}
		}
	}
}

// to_number: a number from a number or a numeric string; null stays null.
func toNumber(in any, args ...any) (any, error) {
	const name = "to_number"
	if err := maxArgs(name, args, 0); err != nil {
		return nil, err
	}
	switch v := in.(type) {
	case nil:
		return nil, nil
	case string:
		s := strings.TrimSpace(v)
		if !isJSONNumber(s) {
			return nil, errorf("to_number: value cannot be converted to a number")
		}
		return numberToEngine(json.Number(s)), nil
	case json.Number:
		return numberToEngine(v), nil
	}
	if isNumber(in) {
		return in, nil
	}
	return nil, errorf("to_number: value cannot be converted to a number")
}

// to_boolean: a boolean from a boolean or "true"/"false" (any case); null
// stays null.
func toBoolean(in any, args ...any) (any, error) {
	const name = "to_boolean"
	if err := maxArgs(name, args, 0); err != nil {
		return nil, err
	}
	switch v := in.(type) {
	case nil:
		return nil, nil
	case bool:
		return v, nil
	case string:
		s := strings.TrimSpace(v)
		switch {
		case strings.EqualFold(s, "true"):
			return true, nil
		case strings.EqualFold(s, "false"):
			return false, nil
		}
	}
	return nil, errorf("to_boolean: value cannot be converted to a boolean")
}

// to_string: a string; numbers and booleans are formatted, objects and
// arrays serialised as JSON; null stays null.
func toString(in any, args ...any) (any, error) {
	const name = "to_string"
	if err := maxArgs(name, args, 0); err != nil {
		return nil, err
	}
	if in == nil {
		return nil, nil
	}
	if b, ok := in.(bool); ok {
		return strconv.FormatBool(b), nil
	}
	if s, ok := scalarText(in); ok {
		return s, nil
	}
	b, err := marshalJSON(in)
	if err != nil {
		return nil, errorf("to_string: value cannot be converted to a string")
	}
	return string(b), nil
}

// --- helpers ---------------------------------------------------------------

func maxArgs(name string, args []any, n int) *Error {
	if len(args) > n {
		return errorf("%s: too many arguments (given %d, at most %d)", name, len(args), n)
	}
	return nil
}

// textInput returns the string form of a string or number input.
func textInput(name string, in any) (string, error) {
	if s, ok := scalarText(in); ok {
		return s, nil
	}
	return "", errorf("%s: input must be a string or a number", name)
}

// scalarText formats strings and numbers.
func scalarText(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return string(v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case int:
		return strconv.Itoa(v), true
	case float64:
		return formatFloat(v), true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String:
		return rv.String(), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(rv.Int(), 10), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(rv.Uint(), 10), true
	case reflect.Float32, reflect.Float64:
		return formatFloat(rv.Float()), true
	}
	return "", false
}

func isNumber(v any) bool {
	switch reflect.ValueOf(v).Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	_, ok := v.(json.Number)
	return ok
}

// isJSONNumber reports whether s is a number in JSON syntax.
func isJSONNumber(s string) bool {
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return false
	}
	last := s[len(s)-1]
	return last >= '0' && last <= '9' && json.Valid([]byte(s))
}

// intArg returns the integer argument i, def when absent (def < 0 means the
// argument is required). Integers, integral floats and decimal strings are
// accepted, within [0, max].
func intArg(name, param string, args []any, i, def, max int) (int, error) {
	if i >= len(args) || args[i] == nil {
		if def < 0 {
			return 0, errorf("%s: %s is required", name, param)
		}
		return def, nil
	}
	var (
		n  int64
		ok bool
	)
	switch v := args[i].(type) {
	case int:
		n, ok = int64(v), true
	case int64:
		n, ok = v, true
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			n, ok = int64(v), true
		}
	case json.Number:
		n, ok = parseInt(string(v))
	case string:
		n, ok = parseInt(strings.TrimSpace(v))
	}
	if !ok || n < 0 || n > int64(max) {
		return 0, errorf("%s: %s must be an integer between 0 and %d", name, param, max)
	}
	return int(n), nil
}

func parseInt(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// charArg returns the single-character argument i, def when absent (def < 0
// means the argument is required).
func charArg(name, param string, args []any, i int, def rune) (rune, error) {
	if i >= len(args) || args[i] == nil {
		if def < 0 {
			return 0, errorf("%s: %s is required", name, param)
		}
		return def, nil
	}
	s, ok := scalarText(args[i])
	if !ok || utf8.RuneCountInString(s) != 1 {
		return 0, errorf("%s: %s must be a single character", name, param)
	}
	r, _ := utf8.DecodeRuneInString(s)
	return r, nil
}

func stringArg(name, param string, args []any, i int, def string) (string, error) {
	if i >= len(args) || args[i] == nil {
		return def, nil
	}
	s, ok := scalarText(args[i])
	if !ok {
		return "", errorf("%s: %s must be a string", name, param)
	}
	return s, nil
}

func isAlnum(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// marshalJSON serialises v compactly without HTML escaping.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

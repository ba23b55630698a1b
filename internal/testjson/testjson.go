// Package testjson walks decoded JSON values (the any that encoding/json
// gives) for tests: one path helper, shared by the API tests and the
// end-to-end tests, so that both read answers the same way.
package testjson

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

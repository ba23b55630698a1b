package expr

import (
	"strconv"
	"strings"
)

// fastPath evaluates the commonest expressions without the Liquid engine:
// one output of a variable path, with at most one vault filter whose
// arguments are literals, such as {{ data.number | reveal_last: 4 }} (the
// card mask) or {{ data.number }} (its fingerprint). The engine would
// first copy every binding into its own representation and then walk the
// path and call the filter through reflection; this does the same steps on
// the one value the path reaches, with the same conversions, so its
// results are the engine's (fastpath_test.go checks them against the
// engine). Where the engine applies rules of its own (a path through a
// value that is not an object, a filter that fails or panics) it gives up
// and the engine evaluates the expression, so errors are always the
// engine's.
type fastPath struct {
	path   []string   // a binding, then property names
	filter filterFunc // nil: the value itself
	args   []any      // the filter's literal arguments, as the engine passes them
}

// fastFilters name the vault filters a fast path may call: each depends
// only on its input and literal arguments, as the engine calls it.
var fastFilters = map[string]bool{
	"reveal_last": true, "reveal": true, "last4": true, "pad_left": true, "pad_right": true,
	"json": true, "to_string": true,
}

// liquidWords are names the engine's scanner reads as keywords or
// literals, or as properties with rules of their own (size, first, last):
// a path holding one is left to the engine.
var liquidWords = map[string]bool{
	"true": true, "false": true, "nil": true, "null": true, "and": true, "or": true, "contains": true,
	"in": true, "empty": true, "blank": true, "size": true, "first": true, "last": true,
}

// parseFastPath returns the fast path of an output's source (the text
// between {{ and }}), or nil when it is not of the simple form:
//
//	path [ "|" filter [ ":" literal { "," literal } ] ]
//
// with path a dotted list of plain identifiers, filter one of fastFilters
// and each literal an unsigned integer below 10^9 or a quoted string
// without quotes, backslashes or braces inside.
func parseFastPath(src string) *fastPath {
	s := strings.TrimSpace(src)
	pathSrc, filterSrc, piped := strings.Cut(s, "|")
	pathSrc = strings.TrimSpace(pathSrc)
	var fp fastPath
	for _, seg := range strings.Split(pathSrc, ".") {
		if !plainIdent(seg) {
			return nil
		}
		fp.path = append(fp.path, seg)
	}
	if !piped {
		return &fp
	}
	name, argSrc, hasArgs := strings.Cut(filterSrc, ":")
	name = strings.TrimSpace(name)
	if !fastFilters[name] {
		return nil
	}
	fp.filter = vaultFilters[name]
	if !hasArgs {
		return &fp
	}
	for _, a := range strings.Split(argSrc, ",") {
		lit, ok := parseLiteral(strings.TrimSpace(a))
		if !ok {
			return nil
		}
		fp.args = append(fp.args, lit)
	}
	return &fp
}

// plainIdent reports whether s is an identifier the engine reads as a
// plain variable or property name: letters, digits and underscores, not
// starting with a digit, and not one of liquidWords.
func plainIdent(s string) bool {
	if s == "" || liquidWords[s] {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isIdentByte(s[i], i == 0) || s[i] == '-' {
			return false
		}
	}
	return true
}

// parseLiteral reads a filter argument the way the engine's scanner does:
// digits become an int, a quoted string its contents as they are.
func parseLiteral(s string) (any, bool) {
	if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] {
		body := s[1 : len(s)-1]
		if strings.ContainsAny(body, "'\"\\{}") {
			return nil, false
		}
		return body, true
	}
	if s == "" || len(s) > 9 {
		return nil, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return nil, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// eval evaluates the path on bindings as given to Evaluate (not yet in the
// engine's representation). ok is false when the engine must evaluate the
// expression instead.
func (fp *fastPath) eval(bindings map[string]any) (out any, ok bool) {
	v := bindings[fp.path[0]]
	for _, name := range fp.path[1:] {
		m, isMap := v.(map[string]any)
		if !isMap {
			return nil, false
		}
		v = m[name] // absent: nil, as for the engine (size is never a name here)
	}
	in := toEngine(v, len(fp.path)-1)
	if fp.filter != nil {
		var err error
		if in, err = fp.callFilter(in); err != nil {
			return nil, false
		}
	}
	out, err := fromEngine(in, 0)
	return out, err == nil
}

// callFilter applies the filter as the engine does; a panic is an error.
func (fp *fastPath) callFilter(in any) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, errorf("expression evaluation failed")
		}
	}()
	out, err = fp.filter(in, fp.args...)
	if b, isBytes := out.([]byte); isBytes {
		out = string(b)
	}
	return out, err
}

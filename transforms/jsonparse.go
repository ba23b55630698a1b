package transforms

import (
	"errors"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// Data a job brings into the realm (req.args, req.configuration, svc
// replies) is JSON text, turned into JavaScript values by parseJSON: plain
// objects, arrays, strings, numbers, booleans and null built with the
// realm's own constructors, the same values JSON.parse would build. goja's
// JSON.parse decodes one encoding/json token at a time, an allocation or
// more per token, and was the largest single cost of a run in a warm
// realm; parseJSON builds the values in one pass over the text.
//
// It follows JSON.parse exactly where the result can differ: members are
// defined (CreateDataProperty), never assigned, so "__proto__" is an
// ordinary key and inherited setters are not called; a repeated key keeps
// its first position and its last value; strings are decoded like
// encoding/json (on which goja's JSON.parse rests): invalid UTF-8 and lone
// surrogates become U+FFFD; numbers are float64, and one out of its range
// is an error, as it is for goja. Nesting deeper than maxJSONDepth is an
// error too (goja would recurse on the Go stack without bound).
//
// It is a lexer of its own beside vaultstore/strictjson's scanner, on
// purpose: strictjson refuses what JSON.parse accepts (repeated keys,
// invalid UTF-8, lone surrogates) and builds no value, while this parser
// must accept all JSON.parse accepts and build goja values as it reads.
// Building them from strictjson's scan would be a second pass over the
// text, or a callback per token, in a path BenchmarkParseJSON keeps at a
// third of goja's JSON.parse (32 to 46 µs against 104 to 127 µs for a
// proxy request's args on the shared 2-core machine); and transforms would
// import vaultstore's request-body package for it.

var (
	errJSONSyntax = errors.New("invalid JSON")
	errJSONDepth  = errors.New("JSON nesting is too deep")
	errJSONRange  = errors.New("JSON number out of range")
)

// parseJSON builds the JavaScript value of JSON text in vm.
func parseJSON(vm *goja.Runtime, text []byte) (v goja.Value, err error) {
	p := jsonParser{vm: vm, s: text}
	p.space()
	v, err = p.value()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.s) {
		return nil, errJSONSyntax
	}
	return v, nil
}

type jsonParser struct {
	vm    *goja.Runtime
	s     []byte
	i     int
	depth int
}

func (p *jsonParser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// literal consumes word if the text continues with it.
func (p *jsonParser) literal(word string) bool {
	if len(p.s)-p.i >= len(word) && string(p.s[p.i:p.i+len(word)]) == word {
		p.i += len(word)
		return true
	}
	return false
}

func (p *jsonParser) value() (goja.Value, error) {
	if p.i >= len(p.s) {
		return nil, errJSONSyntax
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return p.vm.ToValue(s), nil
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case p.literal("true"):
		return p.vm.ToValue(true), nil
	case p.literal("false"):
		return p.vm.ToValue(false), nil
	case p.literal("null"):
		return goja.Null(), nil
	}
	return nil, errJSONSyntax
}

func (p *jsonParser) enter() error {
	p.depth++
	if p.depth > maxJSONDepth {
		return errJSONDepth
	}
	p.i++ // the opening bracket
	p.space()
	return nil
}

func (p *jsonParser) object() (goja.Value, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	o := p.vm.NewObject()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		p.depth--
		return o, nil
	}
	for {
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return nil, errJSONSyntax
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, errJSONSyntax
		}
		p.i++
		p.space()
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		if err := o.DefineDataProperty(key, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
			return nil, err
		}
		closed, err := p.next('}')
		if err != nil {
			return nil, err
		}
		if closed {
			return o, nil
		}
	}
}

// next reads what follows a member or an element: a comma, or close,
// which ends the container (closed).
func (p *jsonParser) next(close byte) (closed bool, err error) {
	p.space()
	if p.i >= len(p.s) {
		return false, errJSONSyntax
	}
	switch p.s[p.i] {
	case ',':
		p.i++
		p.space()
		return false, nil
	case close:
		p.i++
		p.depth--
		return true, nil
	}
	return false, errJSONSyntax
}

func (p *jsonParser) array() (goja.Value, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	var items []any
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		p.depth--
		return p.vm.NewArray(), nil
	}
	for {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		items = append(items, v)
		closed, err := p.next(']')
		if err != nil {
			return nil, err
		}
		if closed {
			return p.vm.NewArray(items...), nil
		}
	}
}

// number parses a JSON number; the grammar is checked here, the value by
// strconv.
func (p *jsonParser) number() (goja.Value, error) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.s[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.s) && p.s[p.i] == '0':
		p.i++
	case digits() == 0:
		return nil, errJSONSyntax
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, errJSONSyntax
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, errJSONSyntax
		}
	}
	f, err := strconv.ParseFloat(string(p.s[start:p.i]), 64)
	if err != nil {
		return nil, errJSONRange
	}
	return p.vm.ToValue(f), nil
}

// str parses a JSON string, decoded like encoding/json does.
func (p *jsonParser) str() (string, error) {
	p.i++ // the opening quote
	start := p.i
	// Fast path: no escapes, no control characters, valid UTF-8.
	ascii := true
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '"' {
			raw := p.s[start:p.i]
			if ascii || utf8.Valid(raw) {
				p.i++
				return string(raw), nil
			}
			break
		}
		if c == '\\' || c < 0x20 {
			break
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
		p.i++
	}
	// Slow path, from the start of the string.
	p.i = start
	buf := make([]byte, 0, len(p.s)-start)
	for {
		if p.i >= len(p.s) {
			return "", errJSONSyntax
		}
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return string(buf), nil
		case c < 0x20:
			return "", errJSONSyntax
		case c == '\\':
			p.i++
			if p.i >= len(p.s) {
				return "", errJSONSyntax
			}
			e := p.s[p.i]
			p.i++
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r := p.hex4()
				if r < 0 {
					return "", errJSONSyntax
				}
				if utf16.IsSurrogate(rune(r)) {
					// A pair, or U+FFFD; the second escape is then
					// read on its own (as encoding/json does).
					save := p.i
					if p.i+1 < len(p.s) && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
						p.i += 2
						if r2 := p.hex4(); r2 >= 0 {
							if dec := utf16.DecodeRune(rune(r), rune(r2)); dec != unicode.ReplacementChar {
								buf = utf8.AppendRune(buf, dec)
								continue
							}
						}
					}
					p.i = save
					r = unicode.ReplacementChar
				}
				buf = utf8.AppendRune(buf, rune(r))
			default:
				return "", errJSONSyntax
			}
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.s[p.i:])
			if r == utf8.RuneError && size == 1 {
				buf = utf8.AppendRune(buf, unicode.ReplacementChar)
			} else {
				buf = append(buf, p.s[p.i:p.i+size]...)
			}
			p.i += size
		}
	}
}

// hex4 reads four hex digits, or returns -1.
func (p *jsonParser) hex4() int {
	if len(p.s)-p.i < 4 {
		return -1
	}
	r := 0
	for _, c := range p.s[p.i : p.i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | int(c)
	}
	p.i += 4
	return r
}

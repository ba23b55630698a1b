package transforms

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// A run's result leaves the realm as JSON text. goja's JSON.stringify
// quotes strings one rune at a time through an interface, and lists the
// keys of every object as engine strings: together a quarter of a
// worker's CPU for a trivial transform of a 1 KB body. jsonWriter writes
// the same text for the values a result is nearly always made of, plain
// objects and arrays of strings, numbers, booleans and null, and hands
// everything else to the realm's own JSON.stringify (captured by
// bootstrap.js before tenant code runs), so that its rules stay the only
// ones:
//
//   - An object is walked only when it is an ordinary object or array of
//     the realm (not a Proxy, a wrapper such as new Number(1), a Date, a
//     typed array, a function or a Go value) and has no toJSON. It is read
//     as JSON.stringify reads it: its own enumerable string keys in order,
//     each value through [[Get]] (so getters run once, in the same order),
//     an array through its length and indices.
//   - Anything else, and a string or key that is not plain UTF-16 text (a
//     lone surrogate reads back as U+FFFD, which the built-in would
//     escape), is stringified by the built-in as the value of its key in a
//     holder object, so toJSON gets the key it would have got.
//   - A cycle is the built-in's TypeError; nesting past maxWalkDepth goes
//     to the built-in, which has no limit of its own.
//
// The one difference a value can show is that a toJSON reached through a
// getter on an ordinary object's prototype chain runs that getter twice.
// jsonWriter_test.go compares both on hostile values and random JSON.
type jsonWriter struct {
	vm      *goja.Runtime
	builtin goja.Callable // the realm's JSON.stringify, as bootstrap.js saw it
	buf     []byte
	stack   []*goja.Object // the objects being written, for cycles
}

// maxWalkDepth is how deep jsonWriter walks before it hands a value to
// the built-in.
const maxWalkDepth = 200

var (
	typeBool    = reflect.TypeFor[bool]()
	typeInt64   = reflect.TypeFor[int64]()
	typeFloat64 = reflect.TypeFor[float64]()
	typeString  = reflect.TypeFor[string]()
	typeMap     = reflect.TypeFor[map[string]any]()
	typeSlice   = reflect.TypeFor[[]any]()
)

// stringify is JSON.stringify(v) as a native function of the realm: it
// returns the JSON text, or undefined. JavaScript exceptions (a getter
// that throws, a cycle) and interrupts propagate as they would from the
// built-in.
func (w *jsonWriter) stringify(call goja.FunctionCall) goja.Value {
	w.buf, w.stack = w.buf[:0], w.stack[:0]
	defer func() {
		if cap(w.buf) > maxKeptBuffer { // a realm may serve many runs
			w.buf = nil
		}
	}()
	if !w.value("", call.Argument(0), 0) {
		return goja.Undefined()
	}
	return w.vm.ToValue(string(w.buf))
}

// maxKeptBuffer is the largest output buffer a realm keeps for its next
// run; a larger one (a big result, or one refused for its size) goes to
// the garbage collector.
const maxKeptBuffer = 64 << 10

// value writes the JSON of v, the value of key in its holder, and reports
// false when v has none (undefined, a function, a symbol).
func (w *jsonWriter) value(key string, v goja.Value, depth int) bool {
	switch {
	case v == nil || goja.IsUndefined(v):
		return false
	case goja.IsNull(v):
		w.buf = append(w.buf, "null"...)
		return true
	}
	switch v := v.(type) {
	case *goja.Object:
		return w.object(key, v, depth)
	case *goja.Symbol:
		return false
	}
	switch v.ExportType() {
	case typeBool:
		w.buf = strconv.AppendBool(w.buf, v.ToBoolean())
	case typeInt64:
		w.buf = append(w.buf, v.String()...)
	case typeFloat64:
		if f := v.ToFloat(); math.IsNaN(f) || math.IsInf(f, 0) {
			w.buf = append(w.buf, "null"...)
		} else {
			w.buf = append(w.buf, v.String()...)
		}
	case typeString:
		s := v.String()
		if strings.ContainsRune(s, utf8.RuneError) {
			return w.builtinValue(key, v)
		}
		w.buf = appendJSONQuote(w.buf, s)
	default:
		return w.builtinValue(key, v) // a BigInt: the built-in's TypeError
	}
	return true
}

// object writes an ordinary object or array, or has the built-in write
// any other object.
func (w *jsonWriter) object(key string, obj *goja.Object, depth int) bool {
	class, et := obj.ClassName(), obj.ExportType()
	isArray := class == "Array" && et == typeSlice
	if depth >= maxWalkDepth || !(isArray || class == "Object" && et == typeMap) {
		return w.builtinValue(key, obj)
	}
	if tj := obj.Get("toJSON"); tj != nil && !goja.IsUndefined(tj) {
		return w.builtinValue(key, obj)
	}
	var keys []string
	if !isArray {
		keys = obj.Keys()
		for _, k := range keys {
			if strings.ContainsRune(k, utf8.RuneError) {
				return w.builtinValue(key, obj)
			}
		}
	}
	for _, o := range w.stack {
		if o == obj {
			panic(w.vm.NewTypeError("Converting circular structure to JSON"))
		}
	}
	w.stack = append(w.stack, obj)
	defer func() { w.stack = w.stack[:len(w.stack)-1] }()
	if isArray {
		n := obj.Get("length").ToInteger()
		w.buf = append(w.buf, '[')
		for i := int64(0); i < n; i++ {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			k := strconv.FormatInt(i, 10)
			if !w.value(k, obj.Get(k), depth+1) {
				w.buf = append(w.buf, "null"...)
			}
		}
		w.buf = append(w.buf, ']')
		return true
	}
	w.buf = append(w.buf, '{')
	empty := true
	for _, k := range keys {
		mark := len(w.buf)
		if !empty {
			w.buf = append(w.buf, ',')
		}
		w.buf = appendJSONQuote(w.buf, k)
		w.buf = append(w.buf, ':')
		if w.value(k, obj.Get(k), depth+1) {
			empty = false
		} else {
			w.buf = w.buf[:mark]
		}
	}
	w.buf = append(w.buf, '}')
	return true
}

// builtinValue has the built-in JSON.stringify write v as the value of
// key in a holder object, and keeps what it wrote for v.
func (w *jsonWriter) builtinValue(key string, v goja.Value) bool {
	holder := w.vm.NewObject()
	if err := holder.DefineDataProperty(key, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
		panic(err)
	}
	out, err := w.builtin(goja.Undefined(), holder)
	if err != nil {
		panic(err) // the built-in's exception, or an interrupt, goes on up
	}
	text := out.String()
	if text == "{}" {
		return false
	}
	prefix := string(appendJSONQuote([]byte{'{'}, key)) + ":"
	inner, ok := strings.CutPrefix(text, prefix)
	if !ok || !strings.HasSuffix(inner, "}") {
		panic(w.vm.NewTypeError("the built-in JSON.stringify wrote an unexpected holder"))
	}
	w.buf = append(w.buf, inner[:len(inner)-1]...)
	return true
}

// appendJSONQuote appends s as JSON.stringify quotes a string of plain
// UTF-16 text: quote, backslash and control characters escaped (\b \t \n
// \f \r, else \u00xx in lower-case hex), everything else as it is.
func appendJSONQuote(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

package transforms

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// The byte codecs behind Buffer (js/buffer.js): utf8, hex, base64 and
// base64url. Bytes cross as ArrayBuffers, strings as strings; no Go value
// is exposed.

// bytesArg returns the bytes of an ArrayBuffer argument.
func (rt *jobRuntime) bytesArg(v goja.Value) []byte {
	if ab, ok := v.Export().(goja.ArrayBuffer); ok {
		return ab.Bytes()
	}
	panic(rt.vm.NewTypeError("expected an ArrayBuffer"))
}

// bufEncode(ArrayBuffer, encoding) string
func (rt *jobRuntime) bufEncode(call goja.FunctionCall) goja.Value {
	b := rt.bytesArg(call.Argument(0))
	switch call.Argument(1).String() {
	case "hex":
		return rt.vm.ToValue(hex.EncodeToString(b))
	case "base64":
		return rt.vm.ToValue(base64.StdEncoding.EncodeToString(b))
	case "base64url":
		return rt.vm.ToValue(base64.RawURLEncoding.EncodeToString(b))
	default:
		if !utf8.Valid(b) {
			return rt.vm.ToValue(strings.ToValidUTF8(string(b), "\uFFFD"))
		}
		return rt.vm.ToValue(string(b))
	}
}

// bufDecode(string, encoding) ArrayBuffer
func (rt *jobRuntime) bufDecode(call goja.FunctionCall) goja.Value {
	b := decodeString(call.Argument(0).String(), call.Argument(1).String())
	return rt.vm.ToValue(rt.vm.NewArrayBuffer(b))
}

// bufByteLength(string, encoding) number
func (rt *jobRuntime) bufByteLength(call goja.FunctionCall) goja.Value {
	s, enc := call.Argument(0).String(), call.Argument(1).String()
	if enc == "utf8" {
		return rt.vm.ToValue(len(s))
	}
	return rt.vm.ToValue(len(decodeString(s, enc)))
}

// decodeString decodes like Node: hex stops at the first invalid pair,
// base64 accepts both alphabets, ignores whitespace and padding, and stops
// at the first invalid character.
func decodeString(s, enc string) []byte {
	switch enc {
	case "hex":
		n := len(s) / 2
		out := make([]byte, 0, n)
		for i := 0; i < n; i++ {
			b, err := hex.DecodeString(s[2*i : 2*i+2])
			if err != nil {
				break
			}
			out = append(out, b[0])
		}
		return out
	case "base64", "base64url":
		clean := make([]byte, 0, len(s))
		for i := 0; i < len(s); i++ {
			c := s[i]
			switch {
			case c == '-':
				c = '+'
			case c == '_':
				c = '/'
			case c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v':
				continue
			case c == '=':
				i = len(s)
				continue
			}
			if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/') {
				break
			}
			clean = append(clean, c)
		}
		if len(clean)%4 == 1 {
			clean = clean[:len(clean)-1]
		}
		out := make([]byte, base64.RawStdEncoding.DecodedLen(len(clean)))
		n, _ := base64.RawStdEncoding.Decode(out, clean)
		return out[:n]
	default:
		return []byte(s)
	}
}

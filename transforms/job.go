package transforms

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Job kinds.
const (
	// JobRequest is a proxy request transform: it returns {body, headers},
	// the request to forward.
	JobRequest = "request"
	// JobResponse is a proxy response transform: it returns {body,
	// headers}, the response to return.
	JobResponse = "response"
	// JobReactor is a reactor: it returns {raw} and/or {tokenize}.
	JobReactor = "reactor"
)

// Size limits of the reactor limits table of the interface.
const (
	// MaxCodeChars is the longest code accepted, in characters.
	MaxCodeChars = 50000
	// MaxPayload bounds a job's Args and the JSON a run returns, in bytes.
	MaxPayload = 1 << 20
)

// maxHeaders bounds the number of headers a transform may return.
const maxHeaders = 200

// Job is one run of tenant code.
type Job struct {
	// Kind is JobRequest, JobResponse or JobReactor.
	Kind string
	// Code is CommonJS source whose module.exports is a function (sync or
	// async) called with req = {args, configuration, svc?}.
	Code string
	// Args is the JSON of req.args: for a request transform {body,
	// headers, method, path, query}, for a response transform {body,
	// headers}, for a reactor the invocation's args. Empty means {}.
	// The worker, which parses them anyway, refuses args that are not
	// JSON (KindInvalidInput).
	Args json.RawMessage
	// Configuration is req.configuration (nil means {}).
	Configuration map[string]string
	// Svc backs req.svc; nil when the proxy or reactor has no application,
	// and then req.svc is undefined.
	Svc Svc
	// Meta identifies the run for the Logger (tenant and proxy or reactor
	// ids). It never reaches the VM.
	Meta map[string]string
	// Realm lets the run reuse a warm realm: one that earlier runs with
	// the same Realm and the same Code ran in, reset in between (see the
	// package documentation). The zero value (no Tenant) gives the run a
	// fresh realm of its own. Realm.Tenant also names the tenant whose
	// share of the pool the run takes (Options.MaxWorkersPerTenant); runs
	// without one share the share of tenant "".
	Realm RealmScope
}

// RealmScope says whose runs may share a realm. Runs share one only when
// their scopes are equal and their Code is the same, so a scope must name
// everyone whose data or authority a run holds:
//
//   - Tenant: the tenant whose code it is. Empty means no reuse.
//   - Principal: the identity the run acts for — the application whose
//     key backs req.svc (a proxy's application, "" for a proxy without
//     one) and, when a caller's data reaches the run under the caller's
//     own permissions (a reactor invoked by an application), the caller
//     too, for example reactorApp + "/" + callerApp.
//
// Between runs the realm is reset so that nothing a run changed survives
// it; the scope is the second line of defence: a realm never serves two
// tenants, two principals or two codes.
type RealmScope struct {
	Tenant    string
	Principal string
}

// key encodes the scope for the worker, unambiguously; "" when there is
// no Tenant.
func (s RealmScope) key() string {
	if s.Tenant == "" {
		return ""
	}
	return strconv.Itoa(len(s.Tenant)) + ":" + s.Tenant + s.Principal
}

// Result is what a run returned, as JSON.
type Result struct {
	// Body is the JSON of the returned body (transforms, and a
	// CustomHttpResponseError): an object or array, or a JSON string when
	// the code returned the body as text. Nil when the code returned no
	// body (undefined or null).
	Body json.RawMessage
	// Headers are the returned headers (transforms, and a
	// CustomHttpResponseError). Names that are not made of letters,
	// digits, '-' and '_' were dropped; numbers were turned into decimal
	// strings.
	Headers map[string]string
	// Raw is a reactor's raw value, returned to the caller as it is.
	Raw json.RawMessage
	// Tokenize is a reactor's tokenize value, to be tokenized before
	// returning.
	Tokenize json.RawMessage
}

// validHeaderName reports whether name is made of [A-Za-z0-9_-] only.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// jsonMembers calls fn with the key and the raw value of each member of
// the JSON object obj, in order (a repeated key is seen again: keep the
// last, as encoding/json does). obj must be valid JSON (json.Valid): one
// pass finds where each value ends without checking it again.
func jsonMembers(obj []byte, fn func(key string, val []byte)) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errJSONSyntax
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for i < len(obj) {
		end := skipJSONString(obj, i)
		key, ok := jsonString(obj[i:end])
		if !ok {
			return errJSONSyntax
		}
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return errJSONSyntax
		}
		i = skipSpace(obj, i+1)
		end = skipJSONValue(obj, i)
		fn(key, obj[i:end:end])
		i = skipSpace(obj, end)
		if i >= len(obj) {
			break
		}
		if obj[i] == '}' {
			return nil
		}
		i = skipSpace(obj, i+1) // the comma
	}
	return errJSONSyntax
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipJSONString returns the end of the string starting at b[i] ('"').
func skipJSONString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipJSONValue returns the end of the valid JSON value starting at b[i].
func skipJSONValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i = skipJSONString(b, i)
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
			if depth < 0 {
				return i
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
}

// jsonString decodes a JSON string literal.
func jsonString(lit []byte) (string, bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return "", false
	}
	inner := lit[1 : len(lit)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	if json.Unmarshal(lit, &s) != nil {
		return "", false
	}
	return s, true
}

// shapeResult checks the JSON text a run returned against the contract of
// the job kind and turns it into a Result. It runs in the parent on data
// that comes from the worker, so it trusts nothing.
func shapeResult(kind string, out []byte) (*Result, *Error) {
	if len(out) > MaxPayload {
		return nil, newError(KindInvalidResult, "the returned value is %d bytes of JSON; the limit is %d", len(out), MaxPayload)
	}
	var fields map[string]json.RawMessage
	if jsonType(out) != "object" || !json.Valid(out) || jsonMembers(out, func(k string, v []byte) {
		if fields == nil {
			fields = make(map[string]json.RawMessage, 2)
		}
		fields[k] = v
	}) != nil {
		if kind == JobReactor {
			return nil, newError(KindInvalidResult, "a reactor must return an object with raw and/or tokenize, not %s", describeJSON(out))
		}
		return nil, newError(KindInvalidResult, "a transform must return an object {body, headers}, not %s", describeJSON(out))
	}
	res := &Result{}
	if kind == JobReactor {
		raw, hasRaw := fields["raw"]
		tok, hasTok := fields["tokenize"]
		if !hasRaw && !hasTok {
			return nil, newError(KindInvalidResult, "a reactor must return an object with raw and/or tokenize")
		}
		if hasRaw {
			res.Raw = raw
		}
		if hasTok {
			if t := jsonType(tok); t != "object" && t != "array" {
				return nil, newError(KindInvalidResult, "tokenize must be an object or an array, not %s", describeJSON(tok))
			}
			res.Tokenize = tok
		}
		return res, nil
	}
	body, err := shapeBody(fields["body"])
	if err != nil {
		return nil, err
	}
	res.Body = body
	if res.Headers, err = shapeHeaders(fields["headers"]); err != nil {
		return nil, err
	}
	return res, nil
}

// shapeBody accepts an object, array, string or null body.
func shapeBody(raw json.RawMessage) (json.RawMessage, *Error) {
	switch jsonType(raw) {
	case "", "null":
		return nil, nil
	case "object", "array", "string":
		return raw, nil
	}
	return nil, newError(KindInvalidResult, "body must be an object or a string, not %s", describeJSON(raw))
}

// shapeHeaders accepts an object of strings or numbers, drops names outside
// [A-Za-z0-9_-] and refuses values with control characters.
func shapeHeaders(raw json.RawMessage) (map[string]string, *Error) {
	switch jsonType(raw) {
	case "", "null":
		return nil, nil
	case "object":
	default:
		return nil, newError(KindInvalidResult, "headers must be an object of strings, not %s", describeJSON(raw))
	}
	// raw is valid JSON: the result it is part of was checked whole.
	in := make(map[string]json.RawMessage)
	if err := jsonMembers(raw, func(k string, v []byte) { in[k] = v }); err != nil {
		return nil, newError(KindInvalidResult, "headers must be an object of strings")
	}
	out := make(map[string]string, len(in))
	for name, v := range in {
		if !validHeaderName(name) {
			continue
		}
		var s string
		switch jsonType(v) {
		case "string":
			var ok bool
			if s, ok = jsonString(v); !ok {
				return nil, newError(KindInvalidResult, "header %s is not a valid string", name)
			}
		case "number":
			s = string(bytes.TrimSpace(v))
		default:
			return nil, newError(KindInvalidResult, "header %s must be a string, not %s", name, describeJSON(v))
		}
		for _, r := range s {
			if r == utf8.RuneError || (r < 0x20 && r != '\t') || r == 0x7f {
				return nil, newError(KindInvalidResult, "header %s contains a control character", name)
			}
		}
		out[name] = s
	}
	if len(out) > maxHeaders {
		return nil, newError(KindInvalidResult, "%d headers returned; the limit is %d", len(out), maxHeaders)
	}
	return out, nil
}

// jsonType names the type of a JSON text by its first byte: "object",
// "array", "string", "number", "true", "false", "null", or "" when empty.
func jsonType(raw []byte) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't':
		return "true"
	case 'f':
		return "false"
	case 'n':
		return "null"
	}
	return "number"
}

// describeJSON names the type of a value for an error message, without
// quoting it (the value may be tenant data).
func describeJSON(raw []byte) string {
	switch t := jsonType(raw); t {
	case "":
		return "undefined"
	case "true", "false":
		return "a boolean"
	case "null":
		return "null"
	case "array", "object":
		return "an " + t
	default:
		return "a " + t
	}
}

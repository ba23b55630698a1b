package vaultstore

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/tokenvault/tokenvault/vaultstore/strictjson"
)

// DetokenizeJSON detokenizes a JSON document given as bytes, as Detokenize
// does its decoded value, and returns new bytes identical to body except
// that each string literal in value position (an object member's value or
// an array element, or the whole body) whose text holds an expression is
// replaced: by the JSON encoding of the native value when the string is
// exactly one expression, white space around it allowed, else by the JSON
// string literal of the substituted text. Member names are never changed;
// white space, member order, the spelling of numbers and the escapes of
// untouched strings stay byte for byte. Replacements are written without
// HTML escaping ("<", ">" and "&" stay as they are) and numbers keep their
// digits.
//
// body is checked as strictjson.Validate checks it, in the same pass that
// finds the strings that may hold an expression, and strictjson's error
// is returned as it is. Expressions are found in the decoded text of each
// string, so an escaped "\u007b\u007b" opens one. A body in which no
// string holds "{{" is returned itself, with an empty result and no other
// work than that pass.
// Otherwise the output is written into dst from dst[:0] (nil: a new
// buffer), which it shares when dst is large enough.
//
// Checks, errors and the audit record are those of Detokenize: errors
// name the JSON path of the string ("body" for a top-level string, e.g.
// "card.number" or "items[2]" otherwise, member names that could be data
// shown as "*"), and quote neither token data nor body values.
func (s *Store) DetokenizeJSON(ctx context.Context, req TokenRequest, opts DetokenizeOptions, body, dst []byte) ([]byte, *DetokenizeResult, error) {
	marked, err := strictjson.ValidateMarked(body, strictjson.DefaultLimits, expressionCandidates(body))
	if err != nil {
		return nil, nil, err
	}
	spans, fields := jsonExpressions(body, marked)
	if len(spans) == 0 {
		return body, &DetokenizeResult{}, nil
	}
	values, res, err := s.DetokenizeFields(ctx, req, opts, fields)
	if err != nil {
		return nil, nil, err
	}
	out, err := spliceJSON(dst, body, spans, fields, values)
	if err != nil {
		return nil, nil, err
	}
	return out, res, nil
}

// expressionCandidates returns, in order, offsets of "{{" and "\u007" in
// body: the first of either after each quote, which is at least one in
// every string of a valid body that holds one, or nil when body has
// none. A string of a valid JSON body can only decode to text holding
// "{{" if it holds one of them: every "{" of a decoded string is a "{" or
// a "\u007b" (hex digits in either case) of the body, and "{{" never
// appears outside a string.
//
// Keeping one per quote bounds the list by the body's strings, whatever
// it holds (a megabyte of "{" is one offset, not a million), and every
// search moves forward only, so the cost is linear in len(body).
func expressionCandidates(body []byte) []int {
	var at []int
	braces, escapes := -2, -2 // the next occurrence at or after off; -2 unknown, -1 none
	next := func(cached int, sep []byte, off int) int {
		if cached == -1 || cached >= off {
			return cached
		}
		i := bytes.Index(body[off:], sep)
		if i < 0 {
			return -1
		}
		return off + i
	}
	for off := 0; off < len(body); {
		braces = next(braces, []byte("{{"), off)
		escapes = next(escapes, []byte(`\u007`), off)
		c := braces
		if c < 0 || escapes >= 0 && escapes < c {
			c = escapes
		}
		if c < 0 {
			break
		}
		at = append(at, c)
		q := bytes.IndexByte(body[c:], '"') // the rest of this string holds no other string's candidates
		if q < 0 {
			break
		}
		off = c + q
	}
	return at
}

// hasEscapedBrace reports whether b holds `\u007b` or `\u007B`.
func hasEscapedBrace(b []byte) bool {
	for {
		i := bytes.Index(b, []byte(`\u007`))
		if i < 0 {
			return false
		}
		b = b[i+len(`\u007`):]
		if len(b) > 0 && b[0]|0x20 == 'b' {
			return true
		}
	}
}

// jsonExpressions returns, of the strings strictjson marked, those whose
// decoded text holds "{{", with their texts and paths.
func jsonExpressions(body []byte, marked []strictjson.Marked) ([]strictjson.Marked, []DetokenizeField) {
	var (
		spans  []strictjson.Marked
		fields []DetokenizeField
	)
	for _, m := range marked {
		if text, ok := jsonExpressionText(body[m.Start:m.End]); ok {
			spans = append(spans, m)
			fields = append(fields, DetokenizeField{Path: jsonPath(m.Path), Text: text})
		}
	}
	return spans, fields
}

// jsonExpressionText returns the decoded text of the string literal lit
// (quotes included) when it holds "{{".
func jsonExpressionText(lit []byte) (string, bool) {
	raw := lit[1 : len(lit)-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		if !bytes.Contains(raw, []byte("{{")) {
			return "", false
		}
		return string(raw), true
	}
	if !bytes.Contains(raw, []byte("{{")) && !hasEscapedBrace(raw) {
		return "", false
	}
	text := jsonUnquote(lit)
	return text, strings.Contains(text, "{{")
}

// jsonUnquote decodes a valid string literal (quotes included) as
// encoding/json, hence strictjson.DecodeValue, does.
func jsonUnquote(lit []byte) string {
	var s string
	if json.Unmarshal(lit, &s) != nil { // not reached: the body is valid
		return ""
	}
	return s
}

// jsonPath names a string in errors as detokenizer.pathString names the
// same string of the decoded body.
func jsonPath(steps []strictjson.PathStep) string {
	if len(steps) == 0 {
		return "body"
	}
	var b strings.Builder
	for i, st := range steps {
		if st.Index >= 0 {
			b.WriteString("[" + strconv.Itoa(st.Index) + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(safeMember(st.Name))
	}
	return b.String()
}

// spliceJSON writes body into dst from dst[:0] with spans[i] replaced by
// the JSON encoding of values[i], without HTML escaping.
func spliceJSON(dst, body []byte, spans []strictjson.Marked, fields []DetokenizeField, values []any) ([]byte, error) {
	out := bytes.NewBuffer(dst[:0])
	out.Grow(len(body) + len(body)/4 + 256)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	prev := 0
	for i, sp := range spans {
		out.Write(body[prev:sp.Start])
		if err := enc.Encode(values[i]); err != nil {
			return nil, invalid(fields[i].Path, errDetokNotJSON.Error())
		}
		out.Truncate(out.Len() - 1) // the newline Encode appends
		prev = sp.End
	}
	out.Write(body[prev:])
	return out.Bytes(), nil
}

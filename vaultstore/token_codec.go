package vaultstore

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// This file encodes and decodes tokens without reflection. Every function
// here gives exactly what encoding/json gives (json.Marshal for encoding,
// a json.Decoder with UseNumber for decoding) and hands anything unusual
// to encoding/json itself. The tests in token_codec_test.go compare the
// two byte for byte and value for value.
//
// Its decoder (jsonCursor) is a lexer of its own beside strictjson's
// scanner, on purpose. The two answer different questions: strictjson
// refuses what a request body must not hold (duplicate members, invalid
// UTF-8, lone surrogates, excess depth or values) and builds no value;
// this decoder reads records the vault wrote and must build exactly what
// encoding/json builds from any input, duplicates and invalid UTF-8
// included (last member wins, U+FFFD), without reflection. Sharing one
// scanner would put a callback per token, or strictjson's refusals, in
// the way of each. BenchmarkRecordLexers has the figures for a stored
// card record on the shared 2-core machine: this decoder 25 to 58 µs and
// 2.2 KB; strictjson's scan alone 1.1 to 1.8 µs and no allocation, so the
// lexing is not where the decoder's time goes; strictjson's Decode (the
// scan, then encoding/json) 69 to 91 µs and 4.7 KB.

// maxInlineDepth is how deep appendJSONValue nests before it hands the
// rest of a value to json.Marshal, which also detects cycles.
const maxInlineDepth = 100

// maxNestingDepth is encoding/json's limit on nested objects and arrays.
const maxNestingDepth = 10000

// jsonSafe marks the ASCII bytes encoding/json writes unescaped into a
// string with HTML escaping on.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendJSON appends t encoded exactly as json.Marshal(t) encodes it.
func (t *Token) AppendJSON(dst []byte) ([]byte, error) {
	if t == nil {
		return append(dst, "null"...), nil
	}
	n := len(dst)
	dst = append(dst, '{')
	dst, err := t.appendMembers(dst)
	if err != nil {
		return dst[:n], fmt.Errorf("encoding token: %w", err)
	}
	return append(dst, '}'), nil
}

// appendRecord appends r encoded exactly as json.Marshal(r) encodes it.
func (r *tokenRecord) appendRecord(dst []byte) ([]byte, error) {
	if r == nil {
		return append(dst, "null"...), nil
	}
	n := len(dst)
	dst = append(dst, '{')
	dst, err := r.Token.appendMembers(dst)
	if err != nil {
		return dst[:n], fmt.Errorf("encoding token record: %w", err)
	}
	if len(r.CVC) > 0 {
		dst = append(dst, `,"cvc_sealed":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, r.CVC)
		dst = append(dst, '"')
	}
	if r.CVCExpiresAt != nil {
		dst = append(dst, `,"cvc_expires_at":`...)
		dst = appendTimestamp(dst, r.CVCExpiresAt)
	}
	if len(r.IndexHashes) > 0 {
		dst = append(dst, `,"index_hashes":`...)
		dst = appendJSONStrings(dst, r.IndexHashes)
	}
	return append(dst, '}'), nil
}

// appendMembers appends t's members in field order, without braces.
func (t *Token) appendMembers(dst []byte) ([]byte, error) {
	var err error
	dst = append(dst, `"id":`...)
	dst = appendJSONString(dst, t.ID)
	dst = append(dst, `,"tenant_id":`...)
	dst = appendJSONString(dst, t.TenantID)
	dst = append(dst, `,"type":`...)
	dst = appendJSONString(dst, t.Type)
	if t.Data != nil {
		dst = append(dst, `,"data":`...)
		if dst, err = appendJSONValue(dst, t.Data, 0); err != nil {
			return dst, fmt.Errorf("data: %w", err)
		}
	}
	if t.Mask != nil {
		dst = append(dst, `,"mask":`...)
		if dst, err = appendJSONValue(dst, t.Mask, 0); err != nil {
			return dst, fmt.Errorf("mask: %w", err)
		}
	}
	if t.Fingerprint != "" {
		dst = append(dst, `,"fingerprint":`...)
		dst = appendJSONString(dst, t.Fingerprint)
	}
	if t.FingerprintExpression != "" {
		dst = append(dst, `,"fingerprint_expression":`...)
		dst = appendJSONString(dst, t.FingerprintExpression)
	}
	dst = append(dst, `,"containers":`...)
	dst = appendJSONStrings(dst, t.Containers)
	if len(t.Metadata) > 0 {
		dst = append(dst, `,"metadata":`...)
		dst = appendJSONStringMap(dst, t.Metadata)
	}
	if len(t.SearchIndexes) > 0 {
		dst = append(dst, `,"search_indexes":`...)
		dst = appendJSONStrings(dst, t.SearchIndexes)
	}
	if t.DeduplicateToken != nil {
		dst = append(dst, `,"deduplicate_token":`...)
		dst = appendJSONBool(dst, *t.DeduplicateToken)
	}
	if t.ExpiresAt != nil {
		dst = append(dst, `,"expires_at":`...)
		dst = appendTimestamp(dst, t.ExpiresAt)
	}
	if t.CreatedBy != "" {
		dst = append(dst, `,"created_by":`...)
		dst = appendJSONString(dst, t.CreatedBy)
	}
	if t.CreatedAt != nil {
		dst = append(dst, `,"created_at":`...)
		dst = appendTimestamp(dst, t.CreatedAt)
	}
	if t.ModifiedBy != "" {
		dst = append(dst, `,"modified_by":`...)
		dst = appendJSONString(dst, t.ModifiedBy)
	}
	if t.ModifiedAt != nil {
		dst = append(dst, `,"modified_at":`...)
		dst = appendTimestamp(dst, t.ModifiedAt)
	}
	if t.Card != nil {
		dst = append(dst, `,"card":`...)
		if dst, err = appendMarshaled(dst, t.Card); err != nil {
			return dst, fmt.Errorf("card: %w", err)
		}
	}
	if t.Bank != nil {
		dst = append(dst, `,"bank":`...)
		if dst, err = appendMarshaled(dst, t.Bank); err != nil {
			return dst, fmt.Errorf("bank: %w", err)
		}
	}
	if t.Extras != nil {
		dst = append(dst, `,"_extras":{"deduplicated":`...)
		dst = appendJSONBool(dst, t.Extras.Deduplicated)
		dst = append(dst, '}')
	}
	return dst, nil
}

// appendTimestamp appends what ts.MarshalJSON returns, without allocating.
func appendTimestamp(dst []byte, ts *Timestamp) []byte {
	dst = append(dst, '"')
	dst = ts.AppendFormat(dst, timestampLayout)
	return append(dst, '"')
}

// appendJSONBool appends true or false.
func appendJSONBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

// appendJSONString appends s as encoding/json quotes it; strings it would
// escape anything in go through encoding/json itself.
func appendJSONString(dst []byte, s string) []byte {
	ascii := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			ascii = false
		} else if !jsonSafe[c] {
			return appendMarshaledString(dst, s)
		}
	}
	if !ascii && (!utf8.ValidString(s) || strings.Contains(s, "\u2028") || strings.Contains(s, "\u2029")) {
		return appendMarshaledString(dst, s)
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendMarshaledString appends json.Marshal(s).
func appendMarshaledString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // encoding a string cannot fail
	return append(dst, b...)
}

// appendJSONStrings appends ss as an array, or null when it is nil.
func appendJSONStrings(dst []byte, ss []string) []byte {
	if ss == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, s)
	}
	return append(dst, ']')
}

// appendJSONStringMap appends m as an object with its keys sorted, or
// null when it is nil.
func appendJSONStringMap(dst []byte, m map[string]string) []byte {
	if m == nil {
		return append(dst, "null"...)
	}
	var buf [16]string
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		dst = appendJSONString(dst, m[k])
	}
	return append(dst, '}')
}

// appendJSONValue appends a generic JSON value (what a decoder with
// UseNumber produces) as json.Marshal does; any other type, and anything
// nested deeper than maxInlineDepth, goes through json.Marshal.
func appendJSONValue(dst []byte, v any, depth int) ([]byte, error) {
	if depth >= maxInlineDepth {
		return appendMarshaled(dst, v)
	}
	var err error
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return appendJSONString(dst, v), nil
	case json.Number:
		s := string(v)
		if s == "" {
			s = "0" // encoding/json writes the zero Number as 0
		}
		if !validNumber(s) {
			return dst, errors.New("invalid number literal")
		}
		return append(dst, s...), nil
	case bool:
		return appendJSONBool(dst, v), nil
	case map[string]any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		var buf [16]string
		keys := buf[:0]
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			if dst, err = appendJSONValue(dst, v[k], depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case []any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendJSONValue(dst, e, depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	}
	return appendMarshaled(dst, v)
}

// appendMarshaled appends json.Marshal(v).
func appendMarshaled(dst []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// validNumber reports whether s is a JSON number, as encoding/json checks
// a json.Number before writing it.
func validNumber(s string) bool {
	end, ok := numberEnd(s, 0)
	return ok && end == len(s)
}

// numberEnd returns the end of the longest JSON number grammar match at
// s[i:], and false when s[i:] does not start with a complete number.
func numberEnd[T string | []byte](s T, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		return i
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i >= len(s):
		return i, false
	case s[i] == '0':
		i++
	case '1' <= s[i] && s[i] <= '9':
		i = digits(i + 1)
	default:
		return i, false
	}
	if i < len(s) && s[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

// Member indexes of tokenRecord, in field order.
const (
	memberID = iota
	memberTenantID
	memberType
	memberData
	memberMask
	memberFingerprint
	memberFingerprintExpression
	memberContainers
	memberMetadata
	memberSearchIndexes
	memberDeduplicateToken
	memberExpiresAt
	memberCreatedBy
	memberCreatedAt
	memberModifiedBy
	memberModifiedAt
	memberCard
	memberBank
	memberExtras
	memberCVC
	memberCVCExpiresAt
	memberIndexHashes
	memberUnknown
)

// recordMembers are tokenRecord's JSON names by member index.
var recordMembers = [memberUnknown]string{
	"id", "tenant_id", "type", "data", "mask", "fingerprint", "fingerprint_expression",
	"containers", "metadata", "search_indexes", "deduplicate_token", "expires_at",
	"created_by", "created_at", "modified_by", "modified_at", "card", "bank", "_extras",
	"cvc_sealed", "cvc_expires_at", "index_hashes",
}

// recordMember returns the member index a key selects: the exact name,
// else a case-insensitive match as encoding/json allows, else
// memberUnknown.
func recordMember(key []byte) int {
	switch string(key) {
	case "id":
		return memberID
	case "tenant_id":
		return memberTenantID
	case "type":
		return memberType
	case "data":
		return memberData
	case "mask":
		return memberMask
	case "fingerprint":
		return memberFingerprint
	case "fingerprint_expression":
		return memberFingerprintExpression
	case "containers":
		return memberContainers
	case "metadata":
		return memberMetadata
	case "search_indexes":
		return memberSearchIndexes
	case "deduplicate_token":
		return memberDeduplicateToken
	case "expires_at":
		return memberExpiresAt
	case "created_by":
		return memberCreatedBy
	case "created_at":
		return memberCreatedAt
	case "modified_by":
		return memberModifiedBy
	case "modified_at":
		return memberModifiedAt
	case "card":
		return memberCard
	case "bank":
		return memberBank
	case "_extras":
		return memberExtras
	case "cvc_sealed":
		return memberCVC
	case "cvc_expires_at":
		return memberCVCExpiresAt
	case "index_hashes":
		return memberIndexHashes
	}
	for i, name := range recordMembers {
		if bytes.EqualFold(key, []byte(name)) {
			return i
		}
	}
	return memberUnknown
}

// decodeRecord decodes b into r as a json.Decoder with UseNumber does:
// it fails on the same inputs, decodes the first JSON value and ignores
// what follows it. It is meant for a zero r; into a non-zero one it
// reuses slices, the metadata map and pointers as encoding/json does.
func (r *tokenRecord) decodeRecord(b []byte) error {
	c := jsonCursor{b: b}
	if err := c.record(r); err != nil {
		return fmt.Errorf("token record: %w", err)
	}
	return nil
}

// jsonCursor reads JSON from b at i, validating it as encoding/json's
// scanner does; depth counts the objects and arrays it is inside.
type jsonCursor struct {
	b     []byte
	i     int
	depth int
}

// errEndOfInput is the error for JSON cut short.
var errEndOfInput = errors.New("unexpected end of JSON input")

// syntaxError describes invalid JSON at the cursor, without quoting it.
func (c *jsonCursor) syntaxError() error {
	if c.i >= len(c.b) {
		return errEndOfInput
	}
	return fmt.Errorf("invalid JSON at offset %d", c.i)
}

// peek returns the byte at the cursor, or 0 at the end.
func (c *jsonCursor) peek() byte {
	if c.i < len(c.b) {
		return c.b[c.i]
	}
	return 0
}

// isSpace reports whether b is JSON whitespace.
func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r'
}

// skipSpace moves past whitespace.
func (c *jsonCursor) skipSpace() {
	for c.i < len(c.b) && isSpace(c.b[c.i]) {
		c.i++
	}
}

// record decodes the top-level value into r.
func (c *jsonCursor) record(r *tokenRecord) error {
	c.skipSpace()
	switch c.peek() {
	case '{':
	case 'n':
		// a top-level null leaves r as it is, and what follows any
		// top-level value is not read, as with a json.Decoder
		return c.literal("null")
	case 0:
		return c.syntaxError()
	default:
		return errors.New("not a JSON object")
	}
	more, err := c.open('}')
	if err != nil {
		return err
	}
	for more {
		key, err := c.key()
		if err != nil {
			return err
		}
		m := recordMember(key)
		if err := c.member(r, m); err != nil {
			if m == memberUnknown {
				return err
			}
			return fmt.Errorf("member %s: %w", recordMembers[m], err)
		}
		if more, err = c.next('}'); err != nil {
			return err
		}
	}
	return nil
}

// member decodes the value of member m into r.
func (c *jsonCursor) member(r *tokenRecord, m int) error {
	switch m {
	case memberID:
		return c.stringInto(&r.ID)
	case memberTenantID:
		return c.stringInto(&r.TenantID)
	case memberType:
		return c.stringInto(&r.Type)
	case memberData:
		return c.anyInto(&r.Data)
	case memberMask:
		return c.anyInto(&r.Mask)
	case memberFingerprint:
		return c.stringInto(&r.Fingerprint)
	case memberFingerprintExpression:
		return c.stringInto(&r.FingerprintExpression)
	case memberContainers:
		return c.stringsInto(&r.Containers)
	case memberMetadata:
		return c.stringMapInto(&r.Metadata)
	case memberSearchIndexes:
		return c.stringsInto(&r.SearchIndexes)
	case memberDeduplicateToken:
		return c.boolPointerInto(&r.DeduplicateToken)
	case memberExpiresAt:
		return c.timestampInto(&r.ExpiresAt)
	case memberCreatedBy:
		return c.stringInto(&r.CreatedBy)
	case memberCreatedAt:
		return c.timestampInto(&r.CreatedAt)
	case memberModifiedBy:
		return c.stringInto(&r.ModifiedBy)
	case memberModifiedAt:
		return c.timestampInto(&r.ModifiedAt)
	case memberCard:
		return c.fallback(&r.Card)
	case memberBank:
		return c.fallback(&r.Bank)
	case memberExtras:
		return c.extrasInto(&r.Extras)
	case memberCVC:
		return c.bytesInto(&r.CVC)
	case memberCVCExpiresAt:
		return c.timestampInto(&r.CVCExpiresAt)
	case memberIndexHashes:
		return c.stringsInto(&r.IndexHashes)
	}
	_, err := c.skipValue()
	return err
}

// push enters an object or array whose opening byte is at the cursor.
func (c *jsonCursor) push() error {
	c.i++
	c.depth++
	if c.depth > maxNestingDepth {
		return errors.New("JSON nested too deeply")
	}
	return nil
}

// open enters the object or array at the cursor, whose closing byte is
// end; more is false when it is empty (and already left).
func (c *jsonCursor) open(end byte) (more bool, err error) {
	if err := c.push(); err != nil {
		return false, err
	}
	c.skipSpace()
	if c.peek() == end {
		c.i++
		c.depth--
		return false, nil
	}
	return true, nil
}

// next moves past the comma before the next member or element of the
// object or array closed by end; more is false at its end (which it
// leaves).
func (c *jsonCursor) next(end byte) (more bool, err error) {
	c.skipSpace()
	switch c.peek() {
	case ',':
		c.i++
		c.skipSpace()
		return true, nil
	case end:
		c.i++
		c.depth--
		return false, nil
	}
	return false, c.syntaxError()
}

// key reads a member name and the colon after it, leaving the cursor at
// the value. The result may alias the input: compare it or copy it.
func (c *jsonCursor) key() ([]byte, error) {
	if c.peek() != '"' {
		return nil, c.syntaxError()
	}
	start := c.i
	plain, err := c.scanString()
	if err != nil {
		return nil, err
	}
	var key []byte
	if plain {
		key = c.b[start+1 : c.i-1]
	} else {
		s, err := unquoteSlow(c.b[start:c.i])
		if err != nil {
			return nil, err
		}
		key = []byte(s)
	}
	if err := c.colon(); err != nil {
		return nil, err
	}
	return key, nil
}

// colon moves past the colon after a member name and the space around it.
func (c *jsonCursor) colon() error {
	c.skipSpace()
	if c.peek() != ':' {
		return c.syntaxError()
	}
	c.i++
	c.skipSpace()
	return nil
}

// scanString moves past the string literal at the cursor, validating it;
// plain reports that it has no escapes and is valid UTF-8, so its content
// is its value.
func (c *jsonCursor) scanString() (plain bool, err error) {
	start := c.i
	c.i++
	plain, ascii := true, true
	for {
		for c.i < len(c.b) && plainStringByte[c.b[c.i]] {
			c.i++
		}
		if c.i >= len(c.b) {
			return false, c.syntaxError()
		}
		switch b := c.b[c.i]; {
		case b == '"':
			c.i++
			if !ascii && !utf8.Valid(c.b[start+1:c.i-1]) {
				plain = false
			}
			return plain, nil
		case b == '\\':
			plain = false
			c.i++
			switch c.peek() {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				c.i++
			case 'u':
				c.i++
				for range 4 {
					if !isHex(c.peek()) {
						return false, c.syntaxError()
					}
					c.i++
				}
			default:
				return false, c.syntaxError()
			}
		case b < 0x20:
			return false, c.syntaxError()
		default: // not ASCII
			ascii = false
			c.i++
		}
	}
}

// plainStringByte marks the bytes a string literal holds as they are:
// ASCII from the space up, but the quote and the backslash.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// isHex reports whether b is a hexadecimal digit.
func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}

// unquoteSlow returns the value of a valid string literal with escapes or
// invalid UTF-8, as encoding/json reads it.
func unquoteSlow(lit []byte) (string, error) {
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		return "", err
	}
	return s, nil
}

// stringValue reads the string literal at the cursor; the result is a
// copy.
func (c *jsonCursor) stringValue() (string, error) {
	start := c.i
	plain, err := c.scanString()
	if err != nil {
		return "", err
	}
	if plain {
		return string(c.b[start+1 : c.i-1]), nil
	}
	return unquoteSlow(c.b[start:c.i])
}

// literal moves past word (true, false or null) at the cursor.
func (c *jsonCursor) literal(word string) error {
	for i := 0; i < len(word); i++ {
		if c.peek() != word[i] {
			return c.syntaxError()
		}
		c.i++
	}
	return nil
}

// boolValue reads true or false at the cursor.
func (c *jsonCursor) boolValue() (bool, error) {
	if c.peek() == 't' {
		return true, c.literal("true")
	}
	return false, c.literal("false")
}

// skipValue moves past the value at the cursor, validating it, and
// returns its bytes.
func (c *jsonCursor) skipValue() ([]byte, error) {
	start := c.i
	switch b := c.peek(); {
	case b == '{':
		more, err := c.open('}')
		if err != nil {
			return nil, err
		}
		for more {
			if c.peek() != '"' {
				return nil, c.syntaxError()
			}
			if _, err := c.scanString(); err != nil {
				return nil, err
			}
			if err := c.colon(); err != nil {
				return nil, err
			}
			if _, err := c.skipValue(); err != nil {
				return nil, err
			}
			if more, err = c.next('}'); err != nil {
				return nil, err
			}
		}
	case b == '[':
		more, err := c.open(']')
		if err != nil {
			return nil, err
		}
		for more {
			if _, err := c.skipValue(); err != nil {
				return nil, err
			}
			if more, err = c.next(']'); err != nil {
				return nil, err
			}
		}
	case b == '"':
		if _, err := c.scanString(); err != nil {
			return nil, err
		}
	case b == 't':
		if err := c.literal("true"); err != nil {
			return nil, err
		}
	case b == 'f':
		if err := c.literal("false"); err != nil {
			return nil, err
		}
	case b == 'n':
		if err := c.literal("null"); err != nil {
			return nil, err
		}
	case b == '-' || '0' <= b && b <= '9':
		end, ok := numberEnd(c.b, c.i)
		c.i = end
		if !ok {
			return nil, c.syntaxError()
		}
	default:
		return nil, c.syntaxError()
	}
	return c.b[start:c.i], nil
}

// nullInto reads a null at the cursor and reports whether there was one:
// null sets a slice or pointer member to nil, as encoding/json does.
func nullInto[T any](c *jsonCursor, p *T) (bool, error) {
	if c.peek() != 'n' {
		return false, nil
	}
	if err := c.literal("null"); err != nil {
		return true, err
	}
	var zero T
	*p = zero
	return true, nil
}

// fallback decodes the value at the cursor into p with encoding/json, for
// the forms the fast paths leave out (most of them type errors).
func (c *jsonCursor) fallback(p any) error {
	raw, err := c.skipValue()
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, p)
}

// wrongType moves past the value at the cursor and reports that it is
// not what the member holds; encoding/json refuses it too.
func (c *jsonCursor) wrongType(want string) error {
	if _, err := c.skipValue(); err != nil {
		return err
	}
	return fmt.Errorf("value is not %s", want)
}

// stringInto decodes a string member; null leaves it unchanged.
func (c *jsonCursor) stringInto(p *string) error {
	switch c.peek() {
	case '"':
		s, err := c.stringValue()
		if err != nil {
			return err
		}
		*p = s
		return nil
	case 'n':
		return c.literal("null")
	}
	return c.fallback(p)
}

// stringsInto decodes a []string member as encoding/json does, reusing
// the slice already there.
func (c *jsonCursor) stringsInto(p *[]string) error {
	if null, err := nullInto(c, p); null {
		return err
	}
	if c.peek() != '[' {
		return c.fallback(p)
	}
	more, err := c.open(']')
	if err != nil {
		return err
	}
	s, i := *p, 0
	for more {
		if i >= cap(s) {
			s = slices.Grow(s[:i], 1)
		}
		if i >= len(s) {
			s = s[:i+1]
		}
		switch c.peek() {
		case '"':
			if s[i], err = c.stringValue(); err != nil {
				return err
			}
		case 'n':
			if err := c.literal("null"); err != nil {
				return err
			}
		default:
			return c.wrongType("a string")
		}
		i++
		if more, err = c.next(']'); err != nil {
			return err
		}
	}
	if i < len(s) {
		s = s[:i]
	}
	if i == 0 {
		s = []string{}
	}
	*p = s
	return nil
}

// stringMapInto decodes a map[string]string member as encoding/json
// does, adding to the map already there.
func (c *jsonCursor) stringMapInto(p *map[string]string) error {
	if null, err := nullInto(c, p); null {
		return err
	}
	if c.peek() != '{' {
		return c.fallback(p)
	}
	if *p == nil {
		*p = make(map[string]string)
	}
	m := *p
	more, err := c.open('}')
	if err != nil {
		return err
	}
	for more {
		key, err := c.key()
		if err != nil {
			return err
		}
		var v string
		switch c.peek() {
		case '"':
			if v, err = c.stringValue(); err != nil {
				return err
			}
		case 'n':
			if err := c.literal("null"); err != nil {
				return err
			}
		default:
			return c.wrongType("a string")
		}
		m[string(key)] = v
		if more, err = c.next('}'); err != nil {
			return err
		}
	}
	return nil
}

// boolPointerInto decodes a *bool member.
func (c *jsonCursor) boolPointerInto(p **bool) error {
	switch c.peek() {
	case 'n':
		if err := c.literal("null"); err != nil {
			return err
		}
		*p = nil
		return nil
	case 't', 'f':
		v, err := c.boolValue()
		if err != nil {
			return err
		}
		if *p == nil {
			*p = new(bool)
		}
		**p = v
		return nil
	}
	return c.fallback(p)
}

// timestampInto decodes a *Timestamp member: null clears it, anything
// else goes to its UnmarshalJSON as encoding/json does.
func (c *jsonCursor) timestampInto(p **Timestamp) error {
	if null, err := nullInto(c, p); null {
		return err
	}
	raw, err := c.skipValue()
	if err != nil {
		return err
	}
	if *p == nil {
		*p = new(Timestamp)
	}
	return (*p).UnmarshalJSON(raw)
}

// extrasInto decodes the _extras member.
func (c *jsonCursor) extrasInto(p **TokenExtras) error {
	if null, err := nullInto(c, p); null {
		return err
	}
	if c.peek() != '{' {
		return c.fallback(p)
	}
	if *p == nil {
		*p = new(TokenExtras)
	}
	more, err := c.open('}')
	if err != nil {
		return err
	}
	for more {
		key, err := c.key()
		if err != nil {
			return err
		}
		if string(key) != "deduplicated" && !bytes.EqualFold(key, []byte("deduplicated")) {
			if _, err := c.skipValue(); err != nil {
				return err
			}
		} else if err := c.boolInto(&(*p).Deduplicated); err != nil {
			return err
		}
		if more, err = c.next('}'); err != nil {
			return err
		}
	}
	return nil
}

// boolInto decodes a bool member; null leaves it unchanged.
func (c *jsonCursor) boolInto(p *bool) error {
	switch c.peek() {
	case 't', 'f':
		v, err := c.boolValue()
		if err != nil {
			return err
		}
		*p = v
		return nil
	case 'n':
		return c.literal("null")
	}
	return c.fallback(p)
}

// bytesInto decodes a []byte member: a base64 string (standard encoding,
// as encoding/json reads it) or null.
func (c *jsonCursor) bytesInto(p *[]byte) error {
	if null, err := nullInto(c, p); null {
		return err
	}
	if c.peek() != '"' {
		return c.fallback(p)
	}
	start := c.i
	plain, err := c.scanString()
	if err != nil {
		return err
	}
	src := c.b[start+1 : c.i-1]
	if !plain {
		s, err := unquoteSlow(c.b[start:c.i])
		if err != nil {
			return err
		}
		src = []byte(s)
	}
	out := make([]byte, base64.StdEncoding.DecodedLen(len(src)))
	n, err := base64.StdEncoding.Decode(out, src)
	if err != nil {
		return err
	}
	*p = out[:n]
	return nil
}

// anyInto decodes a generic member (data, mask).
func (c *jsonCursor) anyInto(p *any) error {
	v, err := c.anyValue()
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// knownMembers are the members of the built-in token types' data; a
// decoded map uses these strings as its keys instead of allocating them.
var knownMembers = func() map[string]string {
	m := make(map[string]string)
	for _, k := range append(append([]string(nil), cardMembers...), bankMembers...) {
		m[k] = k
	}
	return m
}()

// internedKey is key as a string, shared when it is a known member.
func internedKey(key []byte) string {
	if s, ok := knownMembers[string(key)]; ok {
		return s
	}
	return string(key)
}

// anyValue reads the value at the cursor as a decoder with UseNumber
// does into an empty interface: map[string]any, []any, string,
// json.Number, bool or nil.
func (c *jsonCursor) anyValue() (any, error) {
	switch b := c.peek(); {
	case b == '{':
		more, err := c.open('}')
		if err != nil {
			return nil, err
		}
		m := make(map[string]any)
		for more {
			key, err := c.key()
			if err != nil {
				return nil, err
			}
			v, err := c.anyValue()
			if err != nil {
				return nil, err
			}
			m[internedKey(key)] = v
			if more, err = c.next('}'); err != nil {
				return nil, err
			}
		}
		return m, nil
	case b == '[':
		more, err := c.open(']')
		if err != nil {
			return nil, err
		}
		a := make([]any, 0)
		for more {
			v, err := c.anyValue()
			if err != nil {
				return nil, err
			}
			a = append(a, v)
			if more, err = c.next(']'); err != nil {
				return nil, err
			}
		}
		return a, nil
	case b == '"':
		s, err := c.stringValue()
		return s, err
	case b == 't', b == 'f':
		v, err := c.boolValue()
		return v, err
	case b == 'n':
		return nil, c.literal("null")
	case b == '-' || '0' <= b && b <= '9':
		start := c.i
		end, ok := numberEnd(c.b, c.i)
		c.i = end
		if !ok {
			return nil, c.syntaxError()
		}
		return json.Number(c.b[start:end]), nil
	}
	return nil, c.syntaxError()
}

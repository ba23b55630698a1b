package vaultstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tokenvault/tokenvault/internal/redact"
	"github.com/tokenvault/tokenvault/vaultstore/expr"
	"github.com/tokenvault/tokenvault/vaultstore/strictjson"
)

// Detokenization expressions
//
// A string may contain any number of expressions of three forms:
//
//	{{ <id> }}                               the token's data
//	{{ <id> | <filters> }}                   filters applied to the data
//	{{ token: <id> | <filters> }}            filters applied to the whole token
//	                                         object (id, type, data, metadata,
//	                                         containers, ...), e.g.
//	                                         json: '$.data.number'
//
// An expression runs from "{{" to the first "}}" after it (as in Liquid:
// a "}}" inside a quoted filter argument ends the expression too). Its id
// is the text up to the first "|" (or up to "}}" when there is none) with
// surrounding white space removed; a leading "token" followed by ":"
// (white space allowed before the colon) selects the whole-token form and
// is not part of the id. So ids may contain "-", ".", ":" and inner
// spaces, but a caller id that itself starts with "token:" must be
// written "{{ token: token:… | json: '$.data' }}", and an id with leading
// or trailing white space cannot be referenced. "token_intent:" is
// rejected (token intents are not supported). "{%" is not special:
// Liquid tags are never run on a detokenized body. An unterminated "{{"
// is an error.
//
// The filters are any of the expression language's filters (package
// expr); they see only the one token's value, bound to a private variable.

// DetokenizeOptions say who may detokenize what, and how it is recorded.
type DetokenizeOptions struct {
	// Permission the caller needs on every token's container: token:use
	// for proxies and reactors, token:read for /detokenize.
	Permission string
	// Limit bounds the distinct tokens of one request; 0 is no bound.
	Limit int
	// Audit, when set, is written (with the token ids used) before any
	// data is returned; when it cannot be written nothing is returned.
	// A request that references no token writes no record.
	Audit *AuditRecord
}

// DetokenizeResult says what a detokenization used.
type DetokenizeResult struct {
	// TokenIDs are the distinct tokens substituted, sorted.
	TokenIDs []string
}

// Detokenize replaces the detokenization expressions in every string of a
// JSON value (as decoded with UseNumber: map[string]any, []any, string,
// json.Number, bool, nil), object member values and array elements alike
// (member names are left alone). A string that is exactly one expression,
// white space around it allowed, becomes the expression's native value (an
// object stays an object, a number keeps its digits); elsewhere each
// expression is replaced by its text, objects and arrays as compact JSON.
//
// Each distinct token is read once, all in one read transaction, and all
// are checked before anything is substituted: an unknown or expired id, or
// an id of another tenant, is a *ValidationError on the path of the string
// naming it ("body" for a string body); the caller's application needs
// opts.Permission on every token's container, else ErrForbidden. The data
// substituted is what that permission's transform allows: the full data
// (a card's CVC while it is retained) for reveal, the masked data for
// mask, null for redact. More distinct tokens than opts.Limit, a
// malformed expression or a failing filter is a *ValidationError; no
// error quotes token data. opts.Audit is written before anything is
// returned.
//
// value itself is never modified; the result shares unchanged parts (and
// substituted objects) with value and the tokens, so treat it as read-only.
// Strings without "{{" cost nothing. Every token used is marked active
// this month.
func (s *Store) Detokenize(ctx context.Context, req TokenRequest, opts DetokenizeOptions, value any) (any, *DetokenizeResult, error) {
	if !mayHoldExpressions(value, 0) {
		return value, &DetokenizeResult{}, nil
	}
	d := &detokenizer{}
	if err := d.scan(value, 0); err != nil {
		return nil, nil, err
	}
	if err := d.errs.OrNil(); err != nil {
		return nil, nil, err
	}
	if len(d.tokens) == 0 {
		return value, &DetokenizeResult{}, nil
	}
	exp := s.audits.expect() // see auditBatcher: a busy batch lingers for this read
	defer exp.done()
	ids, err := s.resolveDetokenize(ctx, req, opts, d)
	if err != nil {
		return nil, nil, err
	}
	out, _, err := d.build(value, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := s.commitDetokenize(ctx, exp, req.Tenant, d, ids, req.Application.auditedAs(opts.Audit)); err != nil {
		return nil, nil, err
	}
	return out, &DetokenizeResult{TokenIDs: ids}, nil
}

// DetokenizeString replaces the detokenization expressions in raw text (a
// text or form body, after any form decoding) by their text, objects and
// arrays as compact JSON. Checks and errors are those of Detokenize, with
// errors on field "body".
func (s *Store) DetokenizeString(ctx context.Context, req TokenRequest, opts DetokenizeOptions, text string) (string, *DetokenizeResult, error) {
	if !strings.Contains(text, "{{") {
		return text, &DetokenizeResult{}, nil
	}
	out, res, err := s.detokenizeFields(ctx, req, opts, []DetokenizeField{{Path: "body", Text: text}}, true)
	if err != nil {
		return "", nil, err
	}
	return out[0].(string), res, nil
}

// DetokenizeField is one string to detokenize and the name errors use for it.
type DetokenizeField struct {
	// Path names the string in errors, e.g. "card.number", "items[2]" or
	// "amount"; it must already be safe to show (see safeMember).
	Path string
	// Text is the string, which may hold detokenization expressions.
	Text string
}

// DetokenizeFields detokenizes several strings in one go, with the checks
// and errors of Detokenize, one read transaction and one commit (with
// opts.Audit). Result i is the replacement of fields[i].Text: its native
// value (map[string]any, []any, json.Number, bool, nil or string) when the
// text is exactly one expression, white space around it allowed, else the
// text with each expression replaced by its text, objects and arrays as
// compact JSON. Texts without "{{" come back unchanged, as strings.
//
// Errors name fields[i].Path where Detokenize names the path of a string;
// a token referenced by several fields is named by the first. When no
// text holds "{{", storage is not touched and the result is empty.
func (s *Store) DetokenizeFields(ctx context.Context, req TokenRequest, opts DetokenizeOptions, fields []DetokenizeField) ([]any, *DetokenizeResult, error) {
	return s.detokenizeFields(ctx, req, opts, fields, false)
}

// detokenizeFields is DetokenizeFields, rendering every text as text
// (never a native value) when asText is set.
func (s *Store) detokenizeFields(ctx context.Context, req TokenRequest, opts DetokenizeOptions, fields []DetokenizeField, asText bool) ([]any, *DetokenizeResult, error) {
	out := make([]any, len(fields))
	d := &detokenizer{}
	for i, f := range fields {
		out[i] = f.Text
		if strings.Contains(f.Text, "{{") {
			d.scanString(f.Text, f.Path)
		}
	}
	if err := d.errs.OrNil(); err != nil {
		return nil, nil, err
	}
	if len(d.tokens) == 0 {
		return out, &DetokenizeResult{}, nil
	}
	exp := s.audits.expect() // see auditBatcher: a busy batch lingers for this read
	defer exp.done()
	ids, err := s.resolveDetokenize(ctx, req, opts, d)
	if err != nil {
		return nil, nil, err
	}
	for i, f := range fields {
		t := d.templates[f.Text]
		if t == nil {
			continue
		}
		var v any
		if asText {
			v, err = d.renderText(t)
		} else {
			v, err = d.render(t)
		}
		if err != nil {
			return nil, nil, invalid(f.Path, err.Error())
		}
		out[i] = v
	}
	if err := s.commitDetokenize(ctx, exp, req.Tenant, d, ids, req.Application.auditedAs(opts.Audit)); err != nil {
		return nil, nil, err
	}
	return out, &DetokenizeResult{TokenIDs: ids}, nil
}

// resolveDetokenize checks the limit, loads every token referenced in one
// read transaction, checks the caller may use each, and prepares the
// values the expressions see. It returns the ids, sorted.
func (s *Store) resolveDetokenize(ctx context.Context, req TokenRequest, opts DetokenizeOptions, d *detokenizer) ([]string, error) {
	if limit := opts.Limit; limit > 0 && len(d.tokens) > limit {
		return nil, invalid("body", fmt.Sprintf("the request references %d distinct tokens; at most %d may be detokenized in one request", len(d.tokens), limit))
	}
	ids := slices.Sorted(maps.Keys(d.tokens))
	tenantID := req.Tenant.ID
	err := s.kv.View(ctx, func(r Reader) error {
		tk, err := s.tenantKeysFor(r, tenantID)
		if err != nil {
			return err
		}
		for _, id := range ids {
			t := d.tokens[id]
			t.rec, t.active = nil, false
			rec, err := s.loadToken(r, tk, tenantID, id)
			if errors.Is(err, ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			t.rec = rec
			if t.active, err = s.isActive(r, tenantID, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	missing := &ValidationError{}
	for _, id := range ids {
		if t := d.tokens[id]; t.rec == nil {
			missing.Add(t.path, "unknown token "+displayTokenID(id))
		}
	}
	if err := missing.OrNil(); err != nil {
		return nil, err
	}
	for _, id := range ids {
		t := d.tokens[id]
		if t.transform, err = req.Application.AuthorizeToken(opts.Permission, t.rec.ID, t.rec.container()); err != nil {
			return nil, err
		}
	}
	for _, id := range ids {
		t := d.tokens[id]
		tok, err := s.shape(t.rec, t.transform)
		if err != nil {
			var v *ValidationError
			if errors.As(err, &v) {
				return nil, invalid(t.path, "the mask of token "+displayTokenID(id)+" failed: "+strings.Join(v.Fields["mask"], "; "))
			}
			return nil, err
		}
		t.shaped = tok
	}
	return ids, nil
}

// commitDetokenize records a detokenization before the caller gets any
// data: the audit record, when given (with the token ids filled in), and
// the tokens used marked active this month (those not marked yet).
func (s *Store) commitDetokenize(ctx context.Context, exp *auditExpectation, tenant *Tenant, d *detokenizer, ids []string, audit *AuditRecord) error {
	var todo []string
	for id, t := range d.tokens {
		if !t.active {
			todo = append(todo, id)
		}
	}
	if audit != nil {
		rec := *audit
		rec.TokenIDs = ids
		audit = &rec
	}
	if err := s.recordAccess(ctx, exp, tenant, todo, audit); err != nil {
		return err
	}
	s.emit(EventDetokenized, "", len(ids))
	return nil
}

// displayTokenID quotes a token id for an error message, unless it does
// not look like an id or could be data (see internal/redact).
func displayTokenID(id string) string {
	if ValidateTokenID(id) != nil {
		return "(not a valid token id)"
	}
	if redact.Holds(id) {
		return redact.Withheld
	}
	return strconv.Quote(id)
}

// detokRef is one expression.
type detokRef struct {
	id      string
	full    bool   // token: form, the filters see the whole token
	filters string // after the first "|"; empty when hasPipe is false
	hasPipe bool
}

// detokPart is literal text (ref nil) or an expression.
type detokPart struct {
	text string
	ref  *detokRef
}

// detokTemplate is a parsed string.
type detokTemplate struct {
	parts []detokPart
	whole *detokRef // set when the string is exactly one expression
}

// detokToken is one distinct token referenced.
type detokToken struct {
	path      string // where it is first referenced, for errors
	rec       *tokenRecord
	active    bool // marked active this month already
	transform string
	shaped    *Token         // as the permission's transform shows it
	object    map[string]any // shaped as JSON, built on first use
}

// detokMaxErrors bounds how many syntax errors one request reports.
const detokMaxErrors = 10

// pathSeg is one step of the path to a string: a member or an index.
type pathSeg struct {
	key   string
	index int // -1 for a member
}

// detokenizer holds one request's expressions and tokens.
type detokenizer struct {
	templates map[string]*detokTemplate // by string, parsed once
	tokens    map[string]*detokToken    // by id
	errs      ValidationError
	path      [strictjson.DefaultMaxDepth + 2]pathSeg
	depth     int
}

// pathString names the current string in errors, as Tokenize does:
// "body" for the top level, else e.g. "card.number" or "items[2]"; member
// names that could be data are shown as "*".
func (d *detokenizer) pathString() string {
	if d.depth == 0 {
		return "body"
	}
	var b strings.Builder
	for i, seg := range d.path[:d.depth] {
		if seg.index >= 0 {
			b.WriteString("[" + strconv.Itoa(seg.index) + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(safeMember(seg.key))
	}
	return b.String()
}

// mayHoldExpressions reports whether any string of v holds "{{", or v is
// nested too deeply to tell (scan then reports it), without allocating.
func mayHoldExpressions(v any, depth int) bool {
	if depth > strictjson.DefaultMaxDepth {
		return true
	}
	switch x := v.(type) {
	case string:
		return strings.Contains(x, "{{")
	case map[string]any:
		for _, sub := range x {
			if mayHoldExpressions(sub, depth+1) {
				return true
			}
		}
	case []any:
		for _, sub := range x {
			if mayHoldExpressions(sub, depth+1) {
				return true
			}
		}
	}
	return false
}

// scan parses every string of v holding "{{", recording syntax errors in
// d.errs and the tokens referenced.
func (d *detokenizer) scan(v any, depth int) error {
	if depth > strictjson.DefaultMaxDepth {
		return invalid("body", "nested too deeply")
	}
	switch x := v.(type) {
	case string:
		if strings.Contains(x, "{{") {
			d.scanString(x, d.pathString())
		}
	case map[string]any:
		for k, sub := range x {
			d.path[d.depth] = pathSeg{key: k, index: -1}
			d.depth++
			err := d.scan(sub, depth+1)
			d.depth--
			if err != nil {
				return err
			}
		}
	case []any:
		for i, sub := range x {
			d.path[d.depth] = pathSeg{index: i}
			d.depth++
			err := d.scan(sub, depth+1)
			d.depth--
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// scanString parses s, a string holding "{{" at path, recording a syntax
// error in d.errs and the tokens it references.
func (d *detokenizer) scanString(s, path string) {
	if _, done := d.templates[s]; done {
		return
	}
	t, msg := parseDetokenization(s)
	if msg != "" {
		if len(d.errs.Fields) < detokMaxErrors {
			d.errs.Add(path, msg)
		}
		return
	}
	if d.templates == nil {
		d.templates = make(map[string]*detokTemplate)
		d.tokens = make(map[string]*detokToken)
	}
	d.templates[s] = t
	for _, p := range t.parts {
		if p.ref != nil && d.tokens[p.ref.id] == nil {
			d.tokens[p.ref.id] = &detokToken{path: path}
		}
	}
}

// parseDetokenization splits s into text and expressions. It returns an
// error message, never quoting s, when s is malformed.
func parseDetokenization(s string) (*detokTemplate, string) {
	t := &detokTemplate{}
	rest := s
	exprs, blank := 0, true
	for rest != "" {
		i := strings.Index(rest, "{{")
		if i < 0 {
			t.parts = append(t.parts, detokPart{text: rest})
			blank = blank && strings.TrimSpace(rest) == ""
			break
		}
		if i > 0 {
			t.parts = append(t.parts, detokPart{text: rest[:i]})
			blank = blank && strings.TrimSpace(rest[:i]) == ""
		}
		j := strings.Index(rest[i+2:], "}}")
		if j < 0 {
			return nil, "unterminated {{ in a detokenization expression"
		}
		ref, msg := parseDetokRef(rest[i+2 : i+2+j])
		if msg != "" {
			return nil, msg
		}
		t.parts = append(t.parts, detokPart{ref: ref})
		exprs++
		rest = rest[i+2+j+2:]
	}
	if exprs == 1 && blank {
		for _, p := range t.parts {
			if p.ref != nil {
				t.whole = p.ref
			}
		}
	}
	return t, ""
}

// parseDetokRef parses the inside of {{ … }}.
func parseDetokRef(inner string) (*detokRef, string) {
	head, filters, hasPipe := strings.Cut(inner, "|")
	head = strings.TrimSpace(head)
	ref := &detokRef{filters: filters, hasPipe: hasPipe}
	if _, ok := cutKeyword(head, "token_intent"); ok {
		return nil, "token intents are not supported"
	}
	if rest, ok := cutKeyword(head, "token"); ok {
		ref.full = true
		head = strings.TrimSpace(rest)
	}
	if head == "" {
		return nil, "a detokenization expression names no token"
	}
	if ValidateTokenID(head) != nil {
		return nil, "unknown token " + displayTokenID(head)
	}
	ref.id = head
	return ref, ""
}

// cutKeyword returns what follows "<kw> :" (white space allowed before
// the colon) at the start of s.
func cutKeyword(s, kw string) (string, bool) {
	rest, ok := strings.CutPrefix(s, kw)
	if !ok {
		return "", false
	}
	return strings.CutPrefix(strings.TrimLeft(rest, " \t\r\n"), ":")
}

// build returns v with its expressions replaced, and whether anything
// changed. Unchanged objects and arrays are returned as they are.
func (d *detokenizer) build(v any, depth int) (any, bool, error) {
	switch x := v.(type) {
	case string:
		if !strings.Contains(x, "{{") {
			return x, false, nil
		}
		t := d.templates[x]
		if t == nil {
			return x, false, nil
		}
		out, err := d.render(t)
		if err != nil {
			return nil, false, invalid(d.pathString(), err.Error())
		}
		return out, true, nil
	case map[string]any:
		var out map[string]any
		for k, sub := range x {
			d.path[d.depth] = pathSeg{key: k, index: -1}
			d.depth++
			r, changed, err := d.build(sub, depth+1)
			d.depth--
			if err != nil {
				return nil, false, err
			}
			if changed {
				if out == nil {
					out = maps.Clone(x)
				}
				out[k] = r
			}
		}
		if out != nil {
			return out, true, nil
		}
	case []any:
		var out []any
		for i, sub := range x {
			d.path[d.depth] = pathSeg{index: i}
			d.depth++
			r, changed, err := d.build(sub, depth+1)
			d.depth--
			if err != nil {
				return nil, false, err
			}
			if changed {
				if out == nil {
					out = slices.Clone(x)
				}
				out[i] = r
			}
		}
		if out != nil {
			return out, true, nil
		}
	}
	return v, false, nil
}

// render returns the native value of a whole-string expression, else the
// text.
func (d *detokenizer) render(t *detokTemplate) (any, error) {
	if t.whole != nil {
		return d.eval(t.whole)
	}
	return d.renderText(t)
}

func (d *detokenizer) renderText(t *detokTemplate) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.ref == nil {
			b.WriteString(p.text)
			continue
		}
		v, err := d.eval(p.ref)
		if err != nil {
			return "", err
		}
		if err := writeDetokText(&b, v); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

// errDetokNotJSON is returned when a value cannot be written as JSON; it
// quotes nothing.
var errDetokNotJSON = errors.New("a detokenized value cannot be written as JSON")

// writeDetokText writes v as text: strings as they are, numbers with their
// digits, null as nothing, objects and arrays as compact JSON.
func writeDetokText(b *strings.Builder, v any) error {
	switch x := v.(type) {
	case nil:
	case string:
		b.WriteString(x)
	case json.Number:
		b.WriteString(x.String())
	case bool:
		b.WriteString(strconv.FormatBool(x))
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if enc.Encode(v) != nil {
			return errDetokNotJSON
		}
		b.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	}
	return nil
}

// detokVar is the variable a rewritten expression reads the token from.
const detokVar = "detokenized_value"

// eval evaluates one expression: the token's data (or whole token) with
// the filters applied. Errors come from package expr and quote no value.
func (d *detokenizer) eval(ref *detokRef) (any, error) {
	t := d.tokens[ref.id]
	var in any
	if ref.full {
		obj, err := t.tokenObject()
		if err != nil {
			return nil, err
		}
		in = obj
	} else {
		in = t.shaped.Data
	}
	if !ref.hasPipe {
		return in, nil
	}
	e, err := expr.Compile("{{ " + detokVar + " |" + ref.filters + " }}")
	if err != nil {
		return nil, err
	}
	return e.Evaluate(map[string]any{detokVar: in})
}

// tokenObject returns the token as the caller's transform shows it, as
// decoded JSON (what GET /tokens/{id} would answer).
func (t *detokToken) tokenObject() (map[string]any, error) {
	if t.object != nil {
		return t.object, nil
	}
	raw, err := json.Marshal(t.shaped)
	if err != nil {
		return nil, errDetokNotJSON
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, errDetokNotJSON
	}
	t.object = obj
	return obj, nil
}

// Package query is the token search language: the 2022 Lucene subset
// of POST /tokens/search. This file turns a query into an AST; eval.go
// evaluates it on a token, on what an index entry tells, and through
// the indexes a query can be answered from. The vault's own rules
// (token types, containers, date-times, card brands) come in through
// Domain, so the package imports nothing of the vault.
//
//	query    = or
//	or       = and { "OR" and }
//	and      = unary { [ "AND" ] unary }          adjacent terms are ANDed
//	unary    = ( "NOT" | "!" | "-" ) unary | primary
//	primary  = "(" or ")" | term
//	term     = field ":" value
//	field    = "id" | "type" | "fingerprint" | "container" | "data"
//	         | "created_at" | "modified_at" | "created_by" | "modified_by"
//	         | "metadata." key | "card.bin" | "card.last4" | "card.brand"
//	value    = word | phrase | range               (no space after ':')
//	range    = ( "[" | "{" ) bound "TO" bound ( "]" | "}" )
//	bound    = word | phrase | "*"
//	phrase   = '"' { char | '\"' | '\\' } '"'
//	word     = { char | '\' char }  up to a space or parenthesis (in a
//	           range: up to a space, ']' or '}')
//
// NOT binds tighter than AND, AND tighter than OR. Operators are upper
// case; "AND", "OR" and "NOT" written otherwise are not operators.
// "[" and "]" include a bound, "{" and "}" exclude it; "*" leaves that
// end open. A date without a time stands for the whole UTC day.
//
// Errors are *Error, whose text is "position N: ..." with N the 1-based
// character position of the problem (one past the last character for
// the end of the query). Messages are fixed texts: they never quote the
// query, so a data value cannot leak into an error.
package query

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Bounds on a search query.
const (
	// MaxLength is the longest query accepted, in bytes.
	MaxLength = 4096
	// MaxTerms is the most field:value terms a query may hold.
	MaxTerms = 50
	// MaxDepth is how deeply parentheses and NOTs may nest.
	MaxDepth = 20
)

// fieldList names the searchable fields, for error messages.
const fieldList = "id, type, fingerprint, container, metadata.<key>, data, card.bin, card.last4, card.brand, created_at, modified_at, created_by, modified_by"

// The messages of query errors. Each is a fixed text; none quotes the
// query.
const (
	msgQueryEmpty        = "the query is empty"
	msgQueryTooLong      = "the query is longer than 4096 bytes"
	msgQueryBadUTF8      = "the query is not valid UTF-8"
	msgTooManyTerms      = "the query has more than 50 terms"
	msgTooDeep           = "parentheses and NOT are nested more than 20 deep"
	msgExpectTerm        = "expected a term (field:value), '(' or NOT"
	msgTermAfterAnd      = "expected a term after AND"
	msgTermAfterOr       = "expected a term after OR"
	msgTermAfterNot      = "expected a term after NOT"
	msgTermAfterParen    = "expected a term after '('"
	msgAndWithoutLeft    = "AND needs a term before it"
	msgOrWithoutLeft     = "OR needs a term before it"
	msgUnclosedParen     = "this '(' is not closed"
	msgUnmatchedParen    = "this ')' has no matching '('"
	msgNeedField         = "expected field:value; fields are " + fieldList
	msgUnknownField      = "unknown field; fields are " + fieldList
	msgExpectValue       = "expected a value after ':'"
	msgGroupedValue      = "a field takes one value: write field:a OR field:b, not field:(a OR b)"
	msgUnclosedQuote     = "this quoted value is not closed"
	msgBadQuoteEscape    = "in a quoted value a backslash escapes only \" and \\"
	msgDanglingEscape    = "a backslash must be followed by a character"
	msgEmptyValue        = "the value is empty"
	msgWildcardField     = "a wildcard (*) applies only to container; write \\* for a literal *"
	msgUnknownType       = "unknown token type; types are bank, card, token"
	msgBadContainer      = "a container starts and ends with / and uses only a-z, 0-9, _ and -, or ends with * to match every container under a path"
	msgContainerWildcard = "a container wildcard (*) must be the last character"
	msgRangeField        = "ranges apply only to created_at and modified_at"
	msgRangeBound        = "expected a date, a date-time or * in the range"
	msgRangeTo           = "expected TO between the two ends of the range"
	msgRangeClose        = "expected ] or } to close the range"
	msgUnclosedRange     = "this range is not closed"
	msgBadDate           = "expected an ISO 8601 date (2024-01-31) or date-time (2024-01-31T13:24:28Z, 2024-01-31T13:24:28+02:00)"
	msgDateOffset        = "a date-time offset must be between -14:00 and +14:00"
	msgDateYear          = "a date-time must fall within the years 0000 to 9999 in UTC"
	msgRangeEmpty        = "the range is empty: its start is not before its end"
)

// Error is a parse failure at a 1-based character position.
// Error is a parse failure at a 1-based character position. Its text
// is "position N: " and one of the fixed messages; it never quotes the
// query.
type Error struct {
	// Pos is the 1-based character (not byte) position of the problem.
	Pos int
	// Msg is the fixed message.
	Msg string
}

// Error returns "position N: message".
func (e *Error) Error() string {
	return "position " + strconv.Itoa(e.Pos) + ": " + e.Msg
}

// Domain answers what the language leaves to the vault. The vault
// implements it; the parser calls it while checking term values.
type Domain interface {
	// IsTokenType reports whether name is a token type (type:name).
	IsTokenType(name string) bool
	// NormalizeContainer returns an exact container in its stored form
	// and whether it is a valid one.
	NormalizeContainer(c string) (string, bool)
	// ParseDateTime reads a date or date-time in the forms the vault
	// accepts elsewhere; dateOnly reports a date without a time of day.
	ParseDateTime(s string) (t time.Time, dateOnly bool, problem DateProblem)
	// NormalizeBrand returns a card brand in the form tokens store it.
	NormalizeBrand(brand string) string
}

// DateProblem says why Domain.ParseDateTime refused a value.
type DateProblem uint8

// The outcomes of Domain.ParseDateTime.
const (
	// DateOK is a value read.
	DateOK DateProblem = iota
	// DateBadForm is a value in none of the accepted forms.
	DateBadForm
	// DateBadOffset is a date-time whose offset is beyond 14 hours.
	DateBadOffset
)

// Op is the kind of a query node.
type Op uint8

// The kinds of node.
const (
	// TermOp is a field:value term (Expr.Term).
	TermOp Op = iota
	// AndOp holds when every kid does.
	AndOp
	// OrOp holds when any kid does.
	OrOp
	// NotOp holds when its one kid does not.
	NotOp
)

// Expr is a node of a parsed query: a term, or an operator over its
// kids (NOT has one). ANDs and ORs are flattened: no kid has its
// parent's operator.
type Expr struct {
	// Op is the node's kind.
	Op Op
	// Kids are an operator's operands.
	Kids []*Expr
	// Term is a TermOp's term.
	Term *Term
}

// Field is a field a term matches on.
type Field uint8

// The searchable fields.
const (
	FieldID          Field = iota + 1 // id
	FieldType                         // type
	FieldFingerprint                  // fingerprint
	FieldContainer                    // container
	FieldMetadata                     // metadata.<key>
	FieldData                         // data, matched through its keyed search hash
	FieldCreatedAt                    // created_at
	FieldModifiedAt                   // modified_at
	FieldCreatedBy                    // created_by
	FieldModifiedBy                   // modified_by
	FieldCardBIN                      // card.bin
	FieldCardLast4                    // card.last4
	FieldCardBrand                    // card.brand
)

var fields = map[string]Field{
	"id":          FieldID,
	"type":        FieldType,
	"fingerprint": FieldFingerprint,
	"container":   FieldContainer,
	"data":        FieldData,
	"created_at":  FieldCreatedAt,
	"modified_at": FieldModifiedAt,
	"created_by":  FieldCreatedBy,
	"modified_by": FieldModifiedBy,
	"card.bin":    FieldCardBIN,
	"card.last4":  FieldCardLast4,
	"card.brand":  FieldCardBrand,
}

// Term is one field:value term.
type Term struct {
	// Pos is the position of the field name.
	Pos int
	// Field is what the term matches on.
	Field Field
	// Key is a metadata term's key.
	Key string
	// Value is the exact value; for a container wildcard, the prefix.
	Value string
	// Prefix marks a container wildcard, matching every container that
	// starts with Value.
	Prefix bool
	// Range bounds a created_at or modified_at term.
	Range TimeRange
	// Hash is a data term's keyed search hash, which the vault sets
	// (SetHashes) before evaluating.
	Hash string
	// brand is a card.brand term's value as Domain.NormalizeBrand gives it.
	brand string
}

// TimeRange bounds a timestamp; an end without a bound is open.
type TimeRange struct {
	// From and To are the ends, when HasFrom and HasTo.
	From, To time.Time
	// HasFrom and HasTo say whether each end is bounded.
	HasFrom, HasTo bool
	// FromIncl and ToIncl say whether each bound is in the range.
	FromIncl, ToIncl bool
}

// Contains reports whether t lies in the range.
func (r TimeRange) Contains(t time.Time) bool {
	if r.HasFrom && (r.FromIncl && t.Before(r.From) || !r.FromIncl && !t.After(r.From)) {
		return false
	}
	if r.HasTo && (r.ToIncl && t.After(r.To) || !r.ToIncl && !t.Before(r.To)) {
		return false
	}
	return true
}

// empty reports whether no time lies in the range.
func (r TimeRange) empty() bool {
	if !r.HasFrom || !r.HasTo {
		return false
	}
	return r.From.After(r.To) || r.From.Equal(r.To) && !(r.FromIncl && r.ToIncl)
}

// Lexer.

type tokenKind uint8

const (
	tokEOF tokenKind = iota
	tokLParen
	tokRParen
	tokAnd
	tokOr
	tokNot
	tokField      // text: the field name; its ':' is consumed
	tokWord       // a bare value
	tokPhrase     // a quoted value
	tokRangeOpen  // text: "[" or "{"
	tokRangeClose // text: "]" or "}"
	tokTo         // TO inside a range
	tokStar       // a bare * inside a range
)

type token struct {
	kind tokenKind
	pos  int // 1-based character position
	text string
	wild bool // a word holding an unescaped *
}

type lexMode uint8

const (
	modeTerm  lexMode = iota // expecting a term, operator or parenthesis
	modeValue                // right after field:
	modeRange                // inside [ ... ] or { ... }
)

// lexer splits a query into tokens. It is modal: what follows a field
// name's ':' is a value, and inside a range only bounds, TO and the
// closing bracket are read.
type lexer struct {
	src       []rune
	i         int
	mode      lexMode
	rangeOpen int // position of the open range's bracket
}

func isQuerySpace(r rune) bool { return unicode.IsSpace(r) }

func (l *lexer) skipSpace() {
	for l.i < len(l.src) && isQuerySpace(l.src[l.i]) {
		l.i++
	}
}

func (l *lexer) next() (token, *Error) {
	switch l.mode {
	case modeValue:
		return l.value()
	case modeRange:
		return l.rangeToken()
	}
	l.skipSpace()
	if l.i >= len(l.src) {
		return token{kind: tokEOF, pos: l.i + 1}, nil
	}
	pos := l.i + 1
	switch l.src[l.i] {
	case '(':
		l.i++
		return token{kind: tokLParen, pos: pos}, nil
	case ')':
		l.i++
		return token{kind: tokRParen, pos: pos}, nil
	case '!', '-':
		l.i++
		return token{kind: tokNot, pos: pos}, nil
	case '"', ':':
		return token{}, &Error{pos, msgNeedField}
	}
	word, _, err := l.word(func(r rune) bool { return isQuerySpace(r) || strings.ContainsRune(`():"`, r) })
	if err != nil {
		return token{}, err
	}
	if l.i < len(l.src) && l.src[l.i] == ':' {
		l.i++
		l.mode = modeValue
		return token{kind: tokField, pos: pos, text: word}, nil
	}
	switch word {
	case "AND":
		return token{kind: tokAnd, pos: pos}, nil
	case "OR":
		return token{kind: tokOr, pos: pos}, nil
	case "NOT":
		return token{kind: tokNot, pos: pos}, nil
	}
	return token{}, &Error{pos, msgNeedField}
}

// word reads a bare word up to a rune stop accepts, resolving backslash
// escapes; wild reports an unescaped *.
func (l *lexer) word(stop func(rune) bool) (string, bool, *Error) {
	var b strings.Builder
	wild := false
	for l.i < len(l.src) {
		r := l.src[l.i]
		if stop(r) {
			break
		}
		if r == '\\' {
			if l.i+1 >= len(l.src) {
				return "", false, &Error{l.i + 1, msgDanglingEscape}
			}
			b.WriteRune(l.src[l.i+1])
			l.i += 2
			continue
		}
		if r == '*' {
			wild = true
		}
		b.WriteRune(r)
		l.i++
	}
	return b.String(), wild, nil
}

// phrase reads a quoted value; l.i is at the opening quote.
func (l *lexer) phrase() (token, *Error) {
	pos := l.i + 1
	l.i++
	var b strings.Builder
	for l.i < len(l.src) {
		switch r := l.src[l.i]; r {
		case '"':
			l.i++
			return token{kind: tokPhrase, pos: pos, text: b.String()}, nil
		case '\\':
			if l.i+1 >= len(l.src) {
				return token{}, &Error{pos, msgUnclosedQuote}
			}
			if e := l.src[l.i+1]; e != '"' && e != '\\' {
				return token{}, &Error{l.i + 1, msgBadQuoteEscape}
			}
			b.WriteRune(l.src[l.i+1])
			l.i += 2
		default:
			b.WriteRune(r)
			l.i++
		}
	}
	return token{}, &Error{pos, msgUnclosedQuote}
}

// value reads what follows field:, with no space between.
func (l *lexer) value() (token, *Error) {
	pos := l.i + 1
	if l.i >= len(l.src) || isQuerySpace(l.src[l.i]) || l.src[l.i] == ')' {
		return token{}, &Error{pos, msgExpectValue}
	}
	switch l.src[l.i] {
	case '(':
		return token{}, &Error{pos, msgGroupedValue}
	case '"':
		l.mode = modeTerm
		return l.phrase()
	case '[', '{':
		l.mode, l.rangeOpen = modeRange, pos
		text := string(l.src[l.i])
		l.i++
		return token{kind: tokRangeOpen, pos: pos, text: text}, nil
	}
	l.mode = modeTerm
	word, wild, err := l.word(func(r rune) bool { return isQuerySpace(r) || strings.ContainsRune(`()"`, r) })
	if err != nil {
		return token{}, err
	}
	return token{kind: tokWord, pos: pos, text: word, wild: wild}, nil
}

// rangeToken reads inside a range: a bound, TO, or the closing bracket.
func (l *lexer) rangeToken() (token, *Error) {
	l.skipSpace()
	if l.i >= len(l.src) {
		return token{}, &Error{l.rangeOpen, msgUnclosedRange}
	}
	pos := l.i + 1
	switch r := l.src[l.i]; r {
	case ']', '}':
		l.i++
		l.mode = modeTerm
		return token{kind: tokRangeClose, pos: pos, text: string(r)}, nil
	case '"':
		return l.phrase()
	case '[', '{', '(', ')':
		return token{}, &Error{pos, msgRangeBound}
	}
	word, wild, err := l.word(func(r rune) bool { return isQuerySpace(r) || strings.ContainsRune(`]}"`, r) })
	if err != nil {
		return token{}, err
	}
	switch {
	case word == "TO":
		return token{kind: tokTo, pos: pos}, nil
	case word == "*" && wild:
		return token{kind: tokStar, pos: pos}, nil
	}
	return token{kind: tokWord, pos: pos, text: word, wild: wild}, nil
}

// Parser.

type parser struct {
	d      Domain
	lex    lexer
	tok    token
	parens int // open parentheses
	depth  int // nesting of parentheses and NOTs
	terms  int
}

func (p *parser) advance() *Error {
	t, err := p.lex.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

// Parse parses a query into its AST, checking each value with d. A
// failure is an *Error.
func Parse(q string, d Domain) (*Expr, error) {
	e, err := parse(q, d)
	if err != nil {
		return nil, err
	}
	return e, nil
}

func parse(q string, d Domain) (*Expr, *Error) {
	if len(q) > MaxLength {
		return nil, &Error{utf8.RuneCountInString(q[:MaxLength]) + 1, msgQueryTooLong}
	}
	if !utf8.ValidString(q) {
		bad := 0
		for i, r := range q {
			if r == utf8.RuneError {
				if _, size := utf8.DecodeRuneInString(q[i:]); size <= 1 {
					break
				}
			}
			bad++
		}
		return nil, &Error{bad + 1, msgQueryBadUTF8}
	}
	if strings.TrimFunc(q, isQuerySpace) == "" {
		return nil, &Error{1, msgQueryEmpty}
	}
	p := &parser{lex: lexer{src: []rune(q)}, d: d}
	if err := p.advance(); err != nil {
		return nil, err
	}
	e, err := p.parseOr(msgExpectTerm)
	if err != nil {
		return nil, err
	}
	switch p.tok.kind {
	case tokEOF:
		return e, nil
	case tokRParen:
		return nil, &Error{p.tok.pos, msgUnmatchedParen}
	}
	return nil, &Error{p.tok.pos, msgExpectTerm} // not reached: every other token continues an AND
}

// parseOr parses or; first is the message for a missing first term.
func (p *parser) parseOr(first string) (*Expr, *Error) {
	left, err := p.parseAnd(first)
	if err != nil {
		return nil, err
	}
	kids := []*Expr{left}
	for p.tok.kind == tokOr {
		if err := p.advance(); err != nil {
			return nil, err
		}
		right, err := p.parseAnd(msgTermAfterOr)
		if err != nil {
			return nil, err
		}
		kids = append(kids, right)
	}
	return group(OrOp, kids), nil
}

func (p *parser) parseAnd(first string) (*Expr, *Error) {
	left, err := p.parseUnary(first)
	if err != nil {
		return nil, err
	}
	kids := []*Expr{left}
	for {
		switch p.tok.kind {
		case tokAnd:
			if err := p.advance(); err != nil {
				return nil, err
			}
			right, err := p.parseUnary(msgTermAfterAnd)
			if err != nil {
				return nil, err
			}
			kids = append(kids, right)
		case tokField, tokLParen, tokNot: // adjacent terms are ANDed
			right, err := p.parseUnary(msgExpectTerm)
			if err != nil {
				return nil, err
			}
			kids = append(kids, right)
		default:
			return group(AndOp, kids), nil
		}
	}
}

// group makes an AND or OR of kids, flattening nested ones of the same
// operator; one kid is itself.
func group(op Op, kids []*Expr) *Expr {
	if len(kids) == 1 {
		return kids[0]
	}
	out := &Expr{Op: op}
	for _, k := range kids {
		if k.Op == op {
			out.Kids = append(out.Kids, k.Kids...)
		} else {
			out.Kids = append(out.Kids, k)
		}
	}
	return out
}

// parseUnary parses a unary; missing is the message when no term starts
// here.
func (p *parser) parseUnary(missing string) (*Expr, *Error) {
	switch p.tok.kind {
	case tokNot:
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		if err := p.advance(); err != nil {
			return nil, err
		}
		kid, err := p.parseUnary(msgTermAfterNot)
		if err != nil {
			return nil, err
		}
		return &Expr{Op: NotOp, Kids: []*Expr{kid}}, nil
	case tokLParen:
		open := p.tok.pos
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		p.parens++
		if err := p.advance(); err != nil {
			return nil, err
		}
		e, err := p.parseOr(msgTermAfterParen)
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tokRParen {
			return nil, &Error{open, msgUnclosedParen}
		}
		p.parens--
		if err := p.advance(); err != nil {
			return nil, err
		}
		return e, nil
	case tokField:
		return p.parseTerm()
	case tokAnd:
		if missing == msgExpectTerm || missing == msgTermAfterParen {
			missing = msgAndWithoutLeft
		}
	case tokOr:
		if missing == msgExpectTerm || missing == msgTermAfterParen {
			missing = msgOrWithoutLeft
		}
	case tokRParen:
		if p.parens == 0 && missing == msgExpectTerm {
			missing = msgUnmatchedParen
		}
	}
	return nil, &Error{p.tok.pos, missing}
}

func (p *parser) enter() *Error {
	p.depth++
	if p.depth > MaxDepth {
		return &Error{p.tok.pos, msgTooDeep}
	}
	return nil
}

// parseTerm parses field:value; p.tok is the field.
func (p *parser) parseTerm() (*Expr, *Error) {
	ft := p.tok
	p.terms++
	if p.terms > MaxTerms {
		return nil, &Error{ft.pos, msgTooManyTerms}
	}
	t := &Term{Pos: ft.pos}
	if f, ok := fields[ft.text]; ok {
		t.Field = f
	} else if key, ok := strings.CutPrefix(ft.text, "metadata."); ok && key != "" {
		t.Field, t.Key = FieldMetadata, key
	} else {
		return nil, &Error{ft.pos, msgUnknownField}
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	v := p.tok
	if v.kind == tokRangeOpen {
		if t.Field != FieldCreatedAt && t.Field != FieldModifiedAt {
			return nil, &Error{v.pos, msgRangeField}
		}
		if err := p.parseRange(t); err != nil {
			return nil, err
		}
		return &Expr{Op: TermOp, Term: t}, nil
	}
	// the lexer gives a word or a phrase after a field
	if err := p.termValue(t, v); err != nil {
		return nil, err
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	return &Expr{Op: TermOp, Term: t}, nil
}

// termValue checks a single value for its field.
func (p *parser) termValue(t *Term, v token) *Error {
	if v.text == "" {
		return &Error{v.pos, msgEmptyValue}
	}
	switch t.Field {
	case FieldContainer:
		return p.containerValue(t, v)
	case FieldCreatedAt, FieldModifiedAt:
		at, dateOnly, err := p.parseTime(v)
		if err != nil {
			return err
		}
		t.Range = TimeRange{From: at, HasFrom: true, FromIncl: true, To: at, HasTo: true, ToIncl: true}
		if dateOnly { // the whole day
			t.Range.To, t.Range.ToIncl = at.AddDate(0, 0, 1), false
		}
		return nil
	}
	if v.wild {
		return &Error{v.pos, msgWildcardField}
	}
	if t.Field == FieldType {
		if !p.d.IsTokenType(v.text) {
			return &Error{v.pos, msgUnknownType}
		}
	}
	t.Value = v.text
	if t.Field == FieldCardBrand {
		t.brand = p.d.NormalizeBrand(v.text)
	}
	return nil
}

// containerValue reads an exact container or a trailing-* prefix.
func (p *parser) containerValue(t *Term, v token) *Error {
	c := strings.ToLower(v.text)
	if i := strings.IndexByte(c, '*'); i >= 0 {
		if i != len(c)-1 {
			return &Error{v.pos, msgContainerWildcard}
		}
		prefix := c[:i]
		if !validContainerPrefix(prefix) {
			return &Error{v.pos, msgBadContainer}
		}
		t.Value, t.Prefix = prefix, true
		return nil
	}
	c, ok := p.d.NormalizeContainer(c)
	if !ok {
		return &Error{v.pos, msgBadContainer}
	}
	t.Value = c
	return nil
}

// validContainerPrefix reports whether p can begin a container: empty,
// or "/" followed by segment characters and slashes, with no empty
// segment.
func validContainerPrefix(p string) bool {
	if p == "" {
		return true
	}
	if p[0] != '/' {
		return false
	}
	for i := 1; i < len(p); i++ {
		c := p[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-':
		case c == '/' && p[i-1] != '/':
		default:
			return false
		}
	}
	return true
}

// parseRange parses [a TO b] into t.Range; p.tok is the opening bracket.
func (p *parser) parseRange(t *Term) *Error {
	open := p.tok
	var ends [2]token
	for i := range ends {
		if err := p.advance(); err != nil {
			return err
		}
		switch p.tok.kind {
		case tokWord, tokPhrase, tokStar:
			ends[i] = p.tok
		default:
			return &Error{p.tok.pos, msgRangeBound}
		}
		if i == 0 {
			if err := p.advance(); err != nil {
				return err
			}
			if p.tok.kind != tokTo {
				return &Error{p.tok.pos, msgRangeTo}
			}
		}
	}
	if err := p.advance(); err != nil {
		return err
	}
	if p.tok.kind != tokRangeClose {
		return &Error{p.tok.pos, msgRangeClose}
	}
	closing := p.tok
	var r TimeRange
	for i, end := range ends {
		if end.kind == tokStar {
			continue
		}
		at, dateOnly, err := p.parseTime(end)
		if err != nil {
			return err
		}
		incl := (i == 0 && open.text == "[") || (i == 1 && closing.text == "]")
		switch {
		case i == 0 && dateOnly && !incl: // after the whole day
			r.From, r.FromIncl = at.AddDate(0, 0, 1), true
		case i == 0:
			r.From, r.FromIncl = at, incl
		case dateOnly && incl: // through the whole day
			r.To, r.ToIncl = at.AddDate(0, 0, 1), false
		default:
			r.To, r.ToIncl = at, incl
		}
		if i == 0 {
			r.HasFrom = true
		} else {
			r.HasTo = true
		}
	}
	if r.empty() {
		return &Error{open.pos, msgRangeEmpty}
	}
	t.Range = r
	return p.advance()
}

// parseTime reads a date or date-time (the forms the Domain accepts:
// for the vault, those of expires_at) as UTC; dateOnly reports a date without a time,
// which stands for the whole UTC day. A time whose UTC year falls outside
// 0000-9999 is refused: ISO 8601 has no four-digit form for it, so the
// query's canonical text could not say it.
func (p *parser) parseTime(v token) (time.Time, bool, *Error) {
	if v.wild {
		return time.Time{}, false, &Error{v.pos, msgBadDate}
	}
	t, dateOnly, problem := p.d.ParseDateTime(v.text)
	switch problem {
	case DateBadForm:
		return time.Time{}, false, &Error{v.pos, msgBadDate}
	case DateBadOffset:
		return time.Time{}, false, &Error{v.pos, msgDateOffset}
	}
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return time.Time{}, false, &Error{v.pos, msgDateYear}
	}
	return t, dateOnly, nil
}

package vaultstore

// The token search query language: the 2022 Lucene subset of
// POST /tokens/search. This file turns a query into an AST; search.go
// plans and evaluates it.
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
// Errors are *ValidationError on "query", each message "position N: ..."
// with N the 1-based character position of the problem (one past the
// last character for the end of the query). Messages are fixed texts:
// they never quote the query, so a data value cannot leak into an error.

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Bounds on a search query.
const (
	// MaxSearchQueryLength is the longest query accepted, in bytes.
	MaxSearchQueryLength = 4096
	// MaxSearchQueryTerms is the most field:value terms a query may hold.
	MaxSearchQueryTerms = 50
	// MaxSearchQueryDepth is how deeply parentheses and NOTs may nest.
	MaxSearchQueryDepth = 20
)

// searchFieldList names the searchable fields, for error messages.
const searchFieldList = "id, type, fingerprint, container, metadata.<key>, data, card.bin, card.last4, card.brand, created_at, modified_at, created_by, modified_by"

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
	msgNeedField         = "expected field:value; fields are " + searchFieldList
	msgUnknownField      = "unknown field; fields are " + searchFieldList
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

// queryError is a parse failure at a 1-based character position.
type queryError struct {
	pos int
	msg string
}

func (e *queryError) validation() error {
	return invalid("query", "position "+strconv.Itoa(e.pos)+": "+e.msg)
}

// searchOp is the kind of a query node.
type searchOp uint8

const (
	searchTermOp searchOp = iota
	searchAndOp
	searchOrOp
	searchNotOp
)

// searchExpr is a node of a parsed query: a term, or an operator over
// its kids (NOT has one).
type searchExpr struct {
	op   searchOp
	kids []*searchExpr
	term *searchTerm
}

// searchField is a field a term matches on.
type searchField uint8

const (
	fieldID searchField = iota + 1
	fieldType
	fieldFingerprint
	fieldContainer
	fieldMetadata
	fieldData
	fieldCreatedAt
	fieldModifiedAt
	fieldCreatedBy
	fieldModifiedBy
	fieldCardBIN
	fieldCardLast4
	fieldCardBrand
)

var searchFields = map[string]searchField{
	"id":          fieldID,
	"type":        fieldType,
	"fingerprint": fieldFingerprint,
	"container":   fieldContainer,
	"data":        fieldData,
	"created_at":  fieldCreatedAt,
	"modified_at": fieldModifiedAt,
	"created_by":  fieldCreatedBy,
	"modified_by": fieldModifiedBy,
	"card.bin":    fieldCardBIN,
	"card.last4":  fieldCardLast4,
	"card.brand":  fieldCardBrand,
}

// searchTerm is one field:value term.
type searchTerm struct {
	pos   int // of the field name
	field searchField
	key   string // metadata key
	value string // exact value; for a container wildcard, the prefix
	// prefix: a container wildcard, matching every container that
	// starts with value
	prefix bool
	rng    timeRange // created_at, modified_at
	hash   string    // data: the keyed search hash, set when planning
}

// timeRange bounds a timestamp; an end without a bound is open.
type timeRange struct {
	from, to         time.Time
	hasFrom, hasTo   bool
	fromIncl, toIncl bool
}

func (r timeRange) contains(t time.Time) bool {
	if r.hasFrom && (r.fromIncl && t.Before(r.from) || !r.fromIncl && !t.After(r.from)) {
		return false
	}
	if r.hasTo && (r.toIncl && t.After(r.to) || !r.toIncl && !t.Before(r.to)) {
		return false
	}
	return true
}

// empty reports whether no time lies in the range.
func (r timeRange) empty() bool {
	if !r.hasFrom || !r.hasTo {
		return false
	}
	return r.from.After(r.to) || r.from.Equal(r.to) && !(r.fromIncl && r.toIncl)
}

// Lexer.

type sqKind uint8

const (
	sqEOF sqKind = iota
	sqLParen
	sqRParen
	sqAnd
	sqOr
	sqNot
	sqField      // text: the field name; its ':' is consumed
	sqWord       // a bare value
	sqPhrase     // a quoted value
	sqRangeOpen  // text: "[" or "{"
	sqRangeClose // text: "]" or "}"
	sqTo         // TO inside a range
	sqStar       // a bare * inside a range
)

type sqToken struct {
	kind sqKind
	pos  int // 1-based character position
	text string
	wild bool // a word holding an unescaped *
}

type sqMode uint8

const (
	modeTerm  sqMode = iota // expecting a term, operator or parenthesis
	modeValue               // right after field:
	modeRange               // inside [ ... ] or { ... }
)

// sqLexer splits a query into tokens. It is modal: what follows a field
// name's ':' is a value, and inside a range only bounds, TO and the
// closing bracket are read.
type sqLexer struct {
	src       []rune
	i         int
	mode      sqMode
	rangeOpen int // position of the open range's bracket
}

func isQuerySpace(r rune) bool { return unicode.IsSpace(r) }

func (l *sqLexer) skipSpace() {
	for l.i < len(l.src) && isQuerySpace(l.src[l.i]) {
		l.i++
	}
}

func (l *sqLexer) next() (sqToken, *queryError) {
	switch l.mode {
	case modeValue:
		return l.value()
	case modeRange:
		return l.rangeToken()
	}
	l.skipSpace()
	if l.i >= len(l.src) {
		return sqToken{kind: sqEOF, pos: l.i + 1}, nil
	}
	pos := l.i + 1
	switch l.src[l.i] {
	case '(':
		l.i++
		return sqToken{kind: sqLParen, pos: pos}, nil
	case ')':
		l.i++
		return sqToken{kind: sqRParen, pos: pos}, nil
	case '!', '-':
		l.i++
		return sqToken{kind: sqNot, pos: pos}, nil
	case '"', ':':
		return sqToken{}, &queryError{pos, msgNeedField}
	}
	word, _, err := l.word(func(r rune) bool { return isQuerySpace(r) || strings.ContainsRune(`():"`, r) })
	if err != nil {
		return sqToken{}, err
	}
	if l.i < len(l.src) && l.src[l.i] == ':' {
		l.i++
		l.mode = modeValue
		return sqToken{kind: sqField, pos: pos, text: word}, nil
	}
	switch word {
	case "AND":
		return sqToken{kind: sqAnd, pos: pos}, nil
	case "OR":
		return sqToken{kind: sqOr, pos: pos}, nil
	case "NOT":
		return sqToken{kind: sqNot, pos: pos}, nil
	}
	return sqToken{}, &queryError{pos, msgNeedField}
}

// word reads a bare word up to a rune stop accepts, resolving backslash
// escapes; wild reports an unescaped *.
func (l *sqLexer) word(stop func(rune) bool) (string, bool, *queryError) {
	var b strings.Builder
	wild := false
	for l.i < len(l.src) {
		r := l.src[l.i]
		if stop(r) {
			break
		}
		if r == '\\' {
			if l.i+1 >= len(l.src) {
				return "", false, &queryError{l.i + 1, msgDanglingEscape}
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
func (l *sqLexer) phrase() (sqToken, *queryError) {
	pos := l.i + 1
	l.i++
	var b strings.Builder
	for l.i < len(l.src) {
		switch r := l.src[l.i]; r {
		case '"':
			l.i++
			return sqToken{kind: sqPhrase, pos: pos, text: b.String()}, nil
		case '\\':
			if l.i+1 >= len(l.src) {
				return sqToken{}, &queryError{pos, msgUnclosedQuote}
			}
			if e := l.src[l.i+1]; e != '"' && e != '\\' {
				return sqToken{}, &queryError{l.i + 1, msgBadQuoteEscape}
			}
			b.WriteRune(l.src[l.i+1])
			l.i += 2
		default:
			b.WriteRune(r)
			l.i++
		}
	}
	return sqToken{}, &queryError{pos, msgUnclosedQuote}
}

// value reads what follows field:, with no space between.
func (l *sqLexer) value() (sqToken, *queryError) {
	pos := l.i + 1
	if l.i >= len(l.src) || isQuerySpace(l.src[l.i]) || l.src[l.i] == ')' {
		return sqToken{}, &queryError{pos, msgExpectValue}
	}
	switch l.src[l.i] {
	case '(':
		return sqToken{}, &queryError{pos, msgGroupedValue}
	case '"':
		l.mode = modeTerm
		return l.phrase()
	case '[', '{':
		l.mode, l.rangeOpen = modeRange, pos
		text := string(l.src[l.i])
		l.i++
		return sqToken{kind: sqRangeOpen, pos: pos, text: text}, nil
	}
	l.mode = modeTerm
	word, wild, err := l.word(func(r rune) bool { return isQuerySpace(r) || strings.ContainsRune(`()"`, r) })
	if err != nil {
		return sqToken{}, err
	}
	return sqToken{kind: sqWord, pos: pos, text: word, wild: wild}, nil
}

// rangeToken reads inside a range: a bound, TO, or the closing bracket.
func (l *sqLexer) rangeToken() (sqToken, *queryError) {
	l.skipSpace()
	if l.i >= len(l.src) {
		return sqToken{}, &queryError{l.rangeOpen, msgUnclosedRange}
	}
	pos := l.i + 1
	switch r := l.src[l.i]; r {
	case ']', '}':
		l.i++
		l.mode = modeTerm
		return sqToken{kind: sqRangeClose, pos: pos, text: string(r)}, nil
	case '"':
		return l.phrase()
	case '[', '{', '(', ')':
		return sqToken{}, &queryError{pos, msgRangeBound}
	}
	word, wild, err := l.word(func(r rune) bool { return isQuerySpace(r) || strings.ContainsRune(`]}"`, r) })
	if err != nil {
		return sqToken{}, err
	}
	switch {
	case word == "TO":
		return sqToken{kind: sqTo, pos: pos}, nil
	case word == "*" && wild:
		return sqToken{kind: sqStar, pos: pos}, nil
	}
	return sqToken{kind: sqWord, pos: pos, text: word, wild: wild}, nil
}

// Parser.

type sqParser struct {
	lex    sqLexer
	tok    sqToken
	parens int // open parentheses
	depth  int // nesting of parentheses and NOTs
	terms  int
}

func (p *sqParser) advance() *queryError {
	t, err := p.lex.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

// parseSearchQuery parses a query into its AST, or returns a
// *ValidationError on "query".
func parseSearchQuery(q string) (*searchExpr, error) {
	e, qerr := parseQuery(q)
	if qerr != nil {
		return nil, qerr.validation()
	}
	return e, nil
}

func parseQuery(q string) (*searchExpr, *queryError) {
	if len(q) > MaxSearchQueryLength {
		return nil, &queryError{utf8.RuneCountInString(q[:MaxSearchQueryLength]) + 1, msgQueryTooLong}
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
		return nil, &queryError{bad + 1, msgQueryBadUTF8}
	}
	if strings.TrimFunc(q, isQuerySpace) == "" {
		return nil, &queryError{1, msgQueryEmpty}
	}
	p := &sqParser{lex: sqLexer{src: []rune(q)}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	e, err := p.parseOr(msgExpectTerm)
	if err != nil {
		return nil, err
	}
	switch p.tok.kind {
	case sqEOF:
		return e, nil
	case sqRParen:
		return nil, &queryError{p.tok.pos, msgUnmatchedParen}
	}
	return nil, &queryError{p.tok.pos, msgExpectTerm} // not reached: every other token continues an AND
}

// parseOr parses or; first is the message for a missing first term.
func (p *sqParser) parseOr(first string) (*searchExpr, *queryError) {
	left, err := p.parseAnd(first)
	if err != nil {
		return nil, err
	}
	kids := []*searchExpr{left}
	for p.tok.kind == sqOr {
		if err := p.advance(); err != nil {
			return nil, err
		}
		right, err := p.parseAnd(msgTermAfterOr)
		if err != nil {
			return nil, err
		}
		kids = append(kids, right)
	}
	return group(searchOrOp, kids), nil
}

func (p *sqParser) parseAnd(first string) (*searchExpr, *queryError) {
	left, err := p.parseUnary(first)
	if err != nil {
		return nil, err
	}
	kids := []*searchExpr{left}
	for {
		switch p.tok.kind {
		case sqAnd:
			if err := p.advance(); err != nil {
				return nil, err
			}
			right, err := p.parseUnary(msgTermAfterAnd)
			if err != nil {
				return nil, err
			}
			kids = append(kids, right)
		case sqField, sqLParen, sqNot: // adjacent terms are ANDed
			right, err := p.parseUnary(msgExpectTerm)
			if err != nil {
				return nil, err
			}
			kids = append(kids, right)
		default:
			return group(searchAndOp, kids), nil
		}
	}
}

// group makes an AND or OR of kids, flattening nested ones of the same
// operator; one kid is itself.
func group(op searchOp, kids []*searchExpr) *searchExpr {
	if len(kids) == 1 {
		return kids[0]
	}
	out := &searchExpr{op: op}
	for _, k := range kids {
		if k.op == op {
			out.kids = append(out.kids, k.kids...)
		} else {
			out.kids = append(out.kids, k)
		}
	}
	return out
}

// parseUnary parses a unary; missing is the message when no term starts
// here.
func (p *sqParser) parseUnary(missing string) (*searchExpr, *queryError) {
	switch p.tok.kind {
	case sqNot:
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
		return &searchExpr{op: searchNotOp, kids: []*searchExpr{kid}}, nil
	case sqLParen:
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
		if p.tok.kind != sqRParen {
			return nil, &queryError{open, msgUnclosedParen}
		}
		p.parens--
		if err := p.advance(); err != nil {
			return nil, err
		}
		return e, nil
	case sqField:
		return p.parseTerm()
	case sqAnd:
		if missing == msgExpectTerm || missing == msgTermAfterParen {
			missing = msgAndWithoutLeft
		}
	case sqOr:
		if missing == msgExpectTerm || missing == msgTermAfterParen {
			missing = msgOrWithoutLeft
		}
	case sqRParen:
		if p.parens == 0 && missing == msgExpectTerm {
			missing = msgUnmatchedParen
		}
	}
	return nil, &queryError{p.tok.pos, missing}
}

func (p *sqParser) enter() *queryError {
	p.depth++
	if p.depth > MaxSearchQueryDepth {
		return &queryError{p.tok.pos, msgTooDeep}
	}
	return nil
}

// parseTerm parses field:value; p.tok is the field.
func (p *sqParser) parseTerm() (*searchExpr, *queryError) {
	ft := p.tok
	p.terms++
	if p.terms > MaxSearchQueryTerms {
		return nil, &queryError{ft.pos, msgTooManyTerms}
	}
	t := &searchTerm{pos: ft.pos}
	if f, ok := searchFields[ft.text]; ok {
		t.field = f
	} else if key, ok := strings.CutPrefix(ft.text, "metadata."); ok && key != "" {
		t.field, t.key = fieldMetadata, key
	} else {
		return nil, &queryError{ft.pos, msgUnknownField}
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	v := p.tok
	if v.kind == sqRangeOpen {
		if t.field != fieldCreatedAt && t.field != fieldModifiedAt {
			return nil, &queryError{v.pos, msgRangeField}
		}
		if err := p.parseRange(t); err != nil {
			return nil, err
		}
		return &searchExpr{op: searchTermOp, term: t}, nil
	}
	// the lexer gives a word or a phrase after a field
	if err := p.termValue(t, v); err != nil {
		return nil, err
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	return &searchExpr{op: searchTermOp, term: t}, nil
}

// termValue checks a single value for its field.
func (p *sqParser) termValue(t *searchTerm, v sqToken) *queryError {
	if v.text == "" {
		return &queryError{v.pos, msgEmptyValue}
	}
	switch t.field {
	case fieldContainer:
		return containerValue(t, v)
	case fieldCreatedAt, fieldModifiedAt:
		at, dateOnly, err := parseSearchTime(v)
		if err != nil {
			return err
		}
		t.rng = timeRange{from: at, hasFrom: true, fromIncl: true, to: at, hasTo: true, toIncl: true}
		if dateOnly { // the whole day
			t.rng.to, t.rng.toIncl = at.AddDate(0, 0, 1), false
		}
		return nil
	}
	if v.wild {
		return &queryError{v.pos, msgWildcardField}
	}
	if t.field == fieldType {
		if _, ok := LookupTokenType(v.text); !ok {
			return &queryError{v.pos, msgUnknownType}
		}
	}
	t.value = v.text
	return nil
}

// containerValue reads an exact container or a trailing-* prefix.
func containerValue(t *searchTerm, v sqToken) *queryError {
	c := strings.ToLower(v.text)
	if i := strings.IndexByte(c, '*'); i >= 0 {
		if i != len(c)-1 {
			return &queryError{v.pos, msgContainerWildcard}
		}
		prefix := c[:i]
		if !validContainerPrefix(prefix) {
			return &queryError{v.pos, msgBadContainer}
		}
		t.value, t.prefix = prefix, true
		return nil
	}
	c, ok := NormalizeContainer(c)
	if !ok {
		return &queryError{v.pos, msgBadContainer}
	}
	t.value = c
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

// parseRange parses [a TO b] into t.rng; p.tok is the opening bracket.
func (p *sqParser) parseRange(t *searchTerm) *queryError {
	open := p.tok
	var ends [2]sqToken
	for i := range ends {
		if err := p.advance(); err != nil {
			return err
		}
		switch p.tok.kind {
		case sqWord, sqPhrase, sqStar:
			ends[i] = p.tok
		default:
			return &queryError{p.tok.pos, msgRangeBound}
		}
		if i == 0 {
			if err := p.advance(); err != nil {
				return err
			}
			if p.tok.kind != sqTo {
				return &queryError{p.tok.pos, msgRangeTo}
			}
		}
	}
	if err := p.advance(); err != nil {
		return err
	}
	if p.tok.kind != sqRangeClose {
		return &queryError{p.tok.pos, msgRangeClose}
	}
	closing := p.tok
	var r timeRange
	for i, end := range ends {
		if end.kind == sqStar {
			continue
		}
		at, dateOnly, err := parseSearchTime(end)
		if err != nil {
			return err
		}
		incl := (i == 0 && open.text == "[") || (i == 1 && closing.text == "]")
		switch {
		case i == 0 && dateOnly && !incl: // after the whole day
			r.from, r.fromIncl = at.AddDate(0, 0, 1), true
		case i == 0:
			r.from, r.fromIncl = at, incl
		case dateOnly && incl: // through the whole day
			r.to, r.toIncl = at.AddDate(0, 0, 1), false
		default:
			r.to, r.toIncl = at, incl
		}
		if i == 0 {
			r.hasFrom = true
		} else {
			r.hasTo = true
		}
	}
	if r.empty() {
		return &queryError{open.pos, msgRangeEmpty}
	}
	t.rng = r
	return p.advance()
}

// parseSearchTime reads an ISO 8601 date or date-time (the layouts
// expires_at accepts) as UTC; dateOnly reports a date without a time,
// which stands for the whole UTC day. A time whose UTC year falls outside
// 0000-9999 is refused: ISO 8601 has no four-digit form for it, so the
// query's canonical text could not say it.
func parseSearchTime(v sqToken) (time.Time, bool, *queryError) {
	if v.wild {
		return time.Time{}, false, &queryError{v.pos, msgBadDate}
	}
	t, dateOnly, problem := parseDateTime(v.text)
	switch problem {
	case dateTimeBadForm:
		return time.Time{}, false, &queryError{v.pos, msgBadDate}
	case dateTimeBadOffset:
		return time.Time{}, false, &queryError{v.pos, msgDateOffset}
	}
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return time.Time{}, false, &queryError{v.pos, msgDateYear}
	}
	return t, dateOnly, nil
}

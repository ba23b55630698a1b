package query

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// canon prints a parsed query fully parenthesized, with every value
// quoted and every time in UTC, so that it parses back to itself. Tests
// only: it prints data values.
func canon(e *Expr) string {
	switch e.Op {
	case AndOp, OrOp:
		sep := " AND "
		if e.Op == OrOp {
			sep = " OR "
		}
		parts := make([]string, len(e.Kids))
		for i, k := range e.Kids {
			parts[i] = canon(k)
		}
		return "(" + strings.Join(parts, sep) + ")"
	case NotOp:
		return "NOT " + canon(e.Kids[0])
	}
	t := e.Term
	name := ""
	for n, f := range fields {
		if f == t.Field {
			name = n
		}
	}
	if t.Field == FieldMetadata {
		var b strings.Builder
		for _, r := range t.Key {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.') {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
		name = "metadata." + b.String()
	}
	if t.Field == FieldCreatedAt || t.Field == FieldModifiedAt {
		r := t.Range
		from, to, open, closing := "*", "*", "{", "}"
		if r.HasFrom {
			from = r.From.UTC().Format(time.RFC3339Nano)
		}
		if r.HasTo {
			to = r.To.UTC().Format(time.RFC3339Nano)
		}
		if r.FromIncl {
			open = "["
		}
		if r.ToIncl {
			closing = "]"
		}
		return name + ":" + open + from + " TO " + to + closing
	}
	v := t.Value
	if t.Prefix {
		v += "*"
	}
	return name + ":" + quote(v)
}

func quote(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}

func TestParseSearchQuery(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`type:card`, `type:"card"`},
		{`id:abc-123`, `id:"abc-123"`},
		{`fingerprint:AbC_-9`, `fingerprint:"AbC_-9"`},
		{`data:"Jo Doe"`, `data:"Jo Doe"`},
		{`data:jo\ doe`, `data:"jo doe"`},
		{`data:"say \"hi\" \\o/"`, `data:"say \"hi\" \\o/"`},
		{`data:a\*b`, `data:"a*b"`},
		{`data:"a*b"`, `data:"a*b"`}, // a phrase's * is literal
		{`data:a:b`, `data:"a:b"`},   // a colon inside a value
		{`metadata.customer:Acme`, `metadata.customer:"Acme"`},
		{`metadata.a.b:x`, `metadata.a.b:"x"`},
		{`metadata.my\ key:x`, `metadata.my\ key:"x"`},
		{`created_by:app-1`, `created_by:"app-1"`},
		{`modified_by:app-1`, `modified_by:"app-1"`},
		// containers: lower-cased; exact or trailing wildcard
		{`container:/PCI/High/`, `container:"/pci/high/"`},
		{`container:"/customer-123/*"`, `container:"/customer-123/*"`},
		{`container:/customer-123/*`, `container:"/customer-123/*"`},
		{`container:/cust*`, `container:"/cust*"`},
		{`container:*`, `container:"*"`},
		// operators and precedence: NOT > AND > OR
		{`type:card AND type:bank`, `(type:"card" AND type:"bank")`},
		{`type:card type:bank`, `(type:"card" AND type:"bank")`},
		{`type:card OR type:bank type:token`, `(type:"card" OR (type:"bank" AND type:"token"))`},
		{`type:card AND type:bank OR type:token`, `((type:"card" AND type:"bank") OR type:"token")`},
		{`NOT type:card AND type:bank`, `(NOT type:"card" AND type:"bank")`},
		{`NOT type:card OR type:bank`, `(NOT type:"card" OR type:"bank")`},
		{`!type:card`, `NOT type:"card"`},
		{`-type:card`, `NOT type:"card"`},
		{`type:bank -type:card`, `(type:"bank" AND NOT type:"card")`},
		{`NOT NOT type:card`, `NOT NOT type:"card"`},
		{`NOT(type:card)`, `NOT type:"card"`},
		{`(type:card OR type:bank) AND id:x`, `((type:"card" OR type:"bank") AND id:"x")`},
		{`type:card AND (type:bank OR id:x)`, `(type:"card" AND (type:"bank" OR id:"x"))`},
		{`type:card AND type:bank AND id:x`, `(type:"card" AND type:"bank" AND id:"x")`},
		{`(type:card)(type:bank)`, `(type:"card" AND type:"bank")`},
		{"\ttype:card\n OR\u00a0type:bank ", `(type:"card" OR type:"bank")`},
		// lower-case words are not operators
		{`data:and`, `data:"and"`},
		{`metadata.OR:x`, `metadata.OR:"x"`},
		// dates: a date alone is the whole UTC day
		{`created_at:2024-05-06`, `created_at:[2024-05-06T00:00:00Z TO 2024-05-07T00:00:00Z}`},
		{`created_at:2024-05-06T07:08:09.5+02:00`, `created_at:[2024-05-06T05:08:09.5Z TO 2024-05-06T05:08:09.5Z]`},
		{`created_at:[2024-05-06 TO 2024-05-08]`, `created_at:[2024-05-06T00:00:00Z TO 2024-05-09T00:00:00Z}`},
		{`created_at:{2024-05-06 TO 2024-05-08}`, `created_at:[2024-05-07T00:00:00Z TO 2024-05-08T00:00:00Z}`},
		{`created_at:[2024-05-06 TO 2024-05-08}`, `created_at:[2024-05-06T00:00:00Z TO 2024-05-08T00:00:00Z}`},
		{`created_at:{2024-05-06T10:00:00Z TO *]`, `created_at:{2024-05-06T10:00:00Z TO *}`},
		{`created_at:[* TO 2024-05-06T10:00:00-04:00]`, `created_at:{* TO 2024-05-06T14:00:00Z]`},
		{`created_at:[* TO *]`, `created_at:{* TO *}`},
		{`modified_at:["2024-05-06" TO "2024-05-06T12:00"]`, `modified_at:[2024-05-06T00:00:00Z TO 2024-05-06T12:00:00Z]`},
		{`created_at:[2024-05-06t10:00:00z TO *]`, `created_at:[2024-05-06T10:00:00Z TO *}`},
	} {
		e, err := Parse(tc.in, testDomain{})
		if err != nil {
			t.Errorf("parse %q: %v", tc.in, errText(err))
			continue
		}
		if got := canon(e); got != tc.want {
			t.Errorf("parse %q\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

// errText returns the text of a query *Error.
func errText(err error) string {
	var e *Error
	if !errors.As(err, &e) {
		return "not an *Error: " + err.Error()
	}
	return e.Error()
}

func TestParseSearchQueryErrors(t *testing.T) {
	long := strings.Repeat("type:card ", 410)
	many := strings.Repeat("type:card OR ", 50) + "type:bank"
	deep := strings.Repeat("(", 21) + "type:card" + strings.Repeat(")", 21)
	for _, tc := range []struct {
		in   string
		pos  int
		want string
	}{
		{``, 1, msgQueryEmpty},
		{"  \t", 1, msgQueryEmpty},
		{`(type:card`, 1, msgUnclosedParen},
		{`type:card AND (id:x OR (id:y)`, 15, msgUnclosedParen},
		{`type:card)`, 10, msgUnmatchedParen},
		{`)`, 1, msgUnmatchedParen},
		{`()`, 2, msgTermAfterParen},
		{`type:card AND`, 14, msgTermAfterAnd},
		{`type:card OR`, 13, msgTermAfterOr},
		{`type:card NOT`, 14, msgTermAfterNot},
		{`type:card !`, 12, msgTermAfterNot},
		{`type:card AND OR id:x`, 15, msgTermAfterAnd},
		{`AND type:card`, 1, msgAndWithoutLeft},
		{`OR type:card`, 1, msgOrWithoutLeft},
		{`(OR type:card)`, 2, msgOrWithoutLeft},
		{`type:card AND )`, 15, msgTermAfterAnd},
		{`card`, 1, msgNeedField},
		{`type:card and id:x`, 11, msgNeedField},
		{`"card"`, 1, msgNeedField},
		{`:card`, 1, msgNeedField},
		{`colour:red`, 1, msgUnknownField},
		{`Type:card`, 1, msgUnknownField},
		{`metadata.:x`, 1, msgUnknownField},
		{`metadata:x`, 1, msgUnknownField},
		{`type:card AND id:`, 18, msgExpectValue},
		{`type: card`, 6, msgExpectValue},
		{`(type:)`, 7, msgExpectValue},
		{`type:(card OR bank)`, 6, msgGroupedValue},
		{`data:"abc`, 6, msgUnclosedQuote},
		{`data:"abc\`, 6, msgUnclosedQuote},
		{`data:"a\nb"`, 8, msgBadQuoteEscape},
		{`data:abc\`, 9, msgDanglingEscape},
		{`data:""`, 6, msgEmptyValue},
		{`data:abc*`, 6, msgWildcardField},
		{`metadata.k:*`, 12, msgWildcardField},
		{`type:cards`, 6, msgUnknownType},
		{`container:pci`, 11, msgBadContainer},
		{`container:/pci`, 11, msgBadContainer},
		{`container:/PCI//*`, 11, msgBadContainer},
		{`container:/a b/`, 11, msgBadContainer},
		{`container:/pci/*/x/`, 11, msgContainerWildcard},
		{`type:[a TO b]`, 6, msgRangeField},
		{`data:[1 TO 2]`, 6, msgRangeField},
		{`created_at:[2024-01-01 2024-02-01]`, 24, msgRangeTo},
		{`created_at:[2024-01-01 TO]`, 26, msgRangeBound},
		{`created_at:[TO 2024-01-01]`, 13, msgRangeBound},
		{`created_at:[2024-01-01 TO 2024-02-01`, 12, msgUnclosedRange},
		{`created_at:[2024-01-01 TO 2024-02-01 x]`, 38, msgRangeClose},
		{`created_at:[2024-01-01 TO (]`, 27, msgRangeBound},
		{`created_at:[yesterday TO *]`, 13, msgBadDate},
		{`created_at:[2024-13-01 TO *]`, 13, msgBadDate},
		{`created_at:[* TO 2024-01-01T00:00:00+15:00]`, 18, msgDateOffset},
		{`modified_at:{* TO 0000-01-01T0:00:00+01:00]`, 19, msgDateYear},
		{`created_at:[9999-12-31T23:00:00-02:00 TO *]`, 13, msgDateYear},
		{`created_at:[2024-02-01 TO 2024-01-01]`, 12, msgRangeEmpty},
		{`created_at:{2024-01-01 TO 2024-01-02}`, 12, msgRangeEmpty},
		{`created_at:{2024-01-01T00:00:00Z TO 2024-01-01T00:00:00Z]`, 12, msgRangeEmpty},
		{`created_at:*`, 12, msgBadDate},
		{`created_at:soon`, 12, msgBadDate},
		{"type:card \xff", 11, msgQueryBadUTF8},
		{long, 4097, msgQueryTooLong},
		{many, 1 + 50*len("type:card OR "), msgTooManyTerms},
		{deep, 21, msgTooDeep},
		{strings.Repeat("!", 21) + "type:card", 21, msgTooDeep},
	} {
		_, err := Parse(tc.in, testDomain{})
		want := "position " + strconv.Itoa(tc.pos) + ": " + tc.want
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("parse %.60q: err = %v, want an *Error", tc.in, err)
			continue
		}
		if got := e.Error(); got != want {
			t.Errorf("parse %.60q\n got %s\nwant %s", tc.in, got, want)
		}
	}
}

// TestParseSearchQueryLimits accepts queries at the bounds.
func TestParseSearchQueryLimits(t *testing.T) {
	many := strings.Repeat("type:card OR ", 49) + "type:bank"
	deep := strings.Repeat("(", 20) + "type:card" + strings.Repeat(")", 20)
	long := "data:" + strings.Repeat("a", MaxLength-5)
	for _, q := range []string{many, deep, long} {
		if _, err := Parse(q, testDomain{}); err != nil {
			t.Errorf("parse %.40q...: %v", q, errText(err))
		}
	}
}

// TestSearchQueryErrorsNeverQuoteValues: whatever fails, the message is
// one of the fixed texts, so no value of the query (data above all)
// appears in it.
func TestSearchQueryErrorsNeverQuoteValues(t *testing.T) {
	for _, q := range []string{
		`data:` + testVisa + ` AND (`,
		`data:` + testVisa + ` AND`,
		`data:"` + testVisa,
		`data:` + testVisa + `*`,
		`data:` + testVisa + ` OR data:` + testVisa + ` )`,
		`data:[` + testVisa + ` TO *]`,
		testVisa,
		testVisa + `:x`,
		`metadata.` + testVisa + `:`,
		`container:/` + testVisa + `/x`,
		`created_at:[` + testVisa + ` TO *]`,
		`type:` + testVisa,
		`id:` + testVisa + ` fingerprint:` + testVisa + ` \`,
	} {
		_, err := Parse(q, testDomain{})
		if err == nil {
			t.Errorf("parse %q: no error", q)
			continue
		}
		if text := errText(err) + fmt.Sprintf("%+v %#v", err, err); strings.Contains(text, testVisa) || strings.Contains(text, testVisa[:8]) || strings.Contains(text, testVisa[8:]) {
			t.Errorf("an error quotes the query's data: %s", strings.ReplaceAll(text, testVisa, "<DATA>"))
		}
	}
}

var messages = []string{
	msgQueryEmpty, msgQueryTooLong, msgQueryBadUTF8, msgTooManyTerms, msgTooDeep, msgExpectTerm,
	msgTermAfterAnd, msgTermAfterOr, msgTermAfterNot, msgTermAfterParen, msgAndWithoutLeft, msgOrWithoutLeft,
	msgUnclosedParen, msgUnmatchedParen, msgNeedField, msgUnknownField, msgExpectValue, msgGroupedValue,
	msgUnclosedQuote, msgBadQuoteEscape, msgDanglingEscape, msgEmptyValue, msgWildcardField, msgUnknownType,
	msgBadContainer, msgContainerWildcard, msgRangeField, msgRangeBound, msgRangeTo, msgRangeClose,
	msgUnclosedRange, msgBadDate, msgDateOffset, msgDateYear, msgRangeEmpty,
}

var errPattern = regexp.MustCompile(`^position ([0-9]+): (.*)$`)

// countTerms counts a query's terms and its depth of parentheses and NOTs
// (an upper bound on the written depth, as groups are flattened).
func countTerms(e *Expr) int {
	if e.Op == TermOp {
		return 1
	}
	n := 0
	for _, k := range e.Kids {
		n += countTerms(k)
	}
	return n
}

// FuzzParse: the parser never panics; a failure is one fixed
// message on "query" at a position inside the query (or one past its
// end); a success prints to a canonical form that parses back to itself,
// within the term bound.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`type:card`, `type:card AND (data:"x y" OR NOT fingerprint:abc)`, `-id:x !id:y`,
		`container:"/customer-123/*"`, `container:/pci/high/`, `metadata.customer:ACME`,
		`created_at:[2024-01-01 TO *]`, `modified_at:{* TO 2024-01-01T10:00:00+02:00]`,
		`data:4242424242424242 AND (`, `((((type:card))))`, `data:"a\"b\\c"`, `data:a\ b`,
		`created_at:["2024-01-01" TO "2024-01-02"}`, "type:card \xff", `a:b:c`, `data:é`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, q string) {
		e, err := Parse(q, testDomain{})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("parse %q: %v is not an *Error", q, err)
			}
			m := errPattern.FindStringSubmatch(e.Error())
			if m == nil || !slices.Contains(messages, m[2]) {
				t.Fatalf("parse %q: unexpected message %q", q, e.Error())
			}
			pos, _ := strconv.Atoi(m[1])
			limit := utf8.RuneCountInString(q) + 1
			if pos < 1 || pos > limit {
				t.Fatalf("parse %q: position %d outside 1..%d", q, pos, limit)
			}
			return
		}
		if n := countTerms(e); n < 1 || n > MaxTerms {
			t.Fatalf("parse %q: %d terms", q, n)
		}
		text := canon(e)
		e2, err := Parse(text, testDomain{})
		if err != nil {
			// the canonical form, fully parenthesized, may outgrow the
			// length and nesting bounds
			if m := errText(err); strings.HasSuffix(m, msgQueryTooLong) || strings.HasSuffix(m, msgTooDeep) {
				return
			}
			t.Fatalf("parse %q: canonical %q does not parse: %v", q, text, errText(err))
		}
		if again := canon(e2); again != text {
			t.Fatalf("parse %q: canonical %q parses to %q", q, text, again)
		}
	})
}

package expr

// A small Goessner JSONPath evaluator for the json filter (no third-party
// library). Supported:
//
//	$                   the input
//	.name  ['name']     member ("name" quoting too; escapes as in JSON)
//	[n]                 array element, negative from the end
//	[start:end:step]    array slice
//	.*  [*]             every member / element
//	..name  ..*  ..[…]  descendants
//	[a,b]               unions of the bracket selectors above
//	[?(…)]              filters: @ / $ paths, number, string, true, false and
//	                    null literals, == != < <= > >=, &&, ||, ! and
//	                    parentheses; a bare path tests existence
//
// Objects are walked in sorted key order so results are deterministic.

import (
	"encoding/json"
	"math"
	"math/big"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/tokenvault/tokenvault/internal/bounded"
)

const (
	maxPathLength  = 1024
	maxPathNodes   = 10000
	maxPathNesting = 32
	maxDescend     = 512
)

var pathCache = bounded.New[*jsonPath](256)

type jsonPath struct{ segs []jpSegment }

type jpSegment struct {
	descendant bool
	sels       []jpSelector
}

type selKind int

const (
	selName selKind = iota
	selIndex
	selWild
	selSlice
	selFilter
)

type jpSelector struct {
	kind             selKind
	name             string
	index            int
	start, end, step int
	hasStart, hasEnd bool
	filter           jpExpr
}

// compileJSONPath parses a path, using a small bounded cache. Errors never
// quote the path (it may come from bound data).
func compileJSONPath(s string) (*jsonPath, error) {
	if p, ok := pathCache.Get(s); ok {
		return p, nil
	}
	if len(s) > maxPathLength {
		return nil, errorf("json filter: JSONPath longer than %d characters", maxPathLength)
	}
	ps := &pathParser{s: s}
	p, err := ps.parsePath()
	if err != nil {
		return nil, err
	}
	pathCache.Put(s, p)
	return p, nil
}

type pathParser struct {
	s     string
	pos   int
	depth int
}

func (p *pathParser) fail(what string) error {
	return errorf("json filter: invalid JSONPath: %s at offset %d", what, p.pos)
}

func (p *pathParser) peek() byte {
	if p.pos < len(p.s) {
		return p.s[p.pos]
	}
	return 0
}

func (p *pathParser) skipSpace() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t' || p.s[p.pos] == '\n' || p.s[p.pos] == '\r') {
		p.pos++
	}
}

func (p *pathParser) parsePath() (*jsonPath, error) {
	p.skipSpace()
	if p.peek() != '$' {
		return nil, p.fail("expected $")
	}
	p.pos++
	segs, err := p.parseSegments(false)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.s) {
		return nil, p.fail("unexpected character")
	}
	return &jsonPath{segs: segs}, nil
}

// parseSegments parses segments until something that cannot start one; in a
// filter that is left to the caller.
func (p *pathParser) parseSegments(inFilter bool) ([]jpSegment, error) {
	var segs []jpSegment
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case '.':
			p.pos++
			seg := jpSegment{}
			if p.peek() == '.' {
				p.pos++
				seg.descendant = true
				if p.peek() == '[' {
					sels, err := p.parseBracket()
					if err != nil {
						return nil, err
					}
					seg.sels = sels
					segs = append(segs, seg)
					continue
				}
			}
			if p.peek() == '*' {
				p.pos++
				seg.sels = []jpSelector{{kind: selWild}}
			} else {
				name := p.parseDotName()
				if name == "" {
					return nil, p.fail("expected a member name")
				}
				seg.sels = []jpSelector{{kind: selName, name: name}}
			}
			segs = append(segs, seg)
		case '[':
			sels, err := p.parseBracket()
			if err != nil {
				return nil, err
			}
			segs = append(segs, jpSegment{sels: sels})
		default:
			if inFilter {
				return segs, nil
			}
			return nil, p.fail("unexpected character")
		}
	}
	return segs, nil
}

func (p *pathParser) parseDotName() string {
	start := p.pos
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		if c == '_' || c == '-' || c == '$' || c >= 0x80 ||
			(c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') {
			p.pos++
			continue
		}
		break
	}
	return p.s[start:p.pos]
}

func (p *pathParser) parseBracket() ([]jpSelector, error) {
	p.pos++ // '['
	var sels []jpSelector
	for {
		p.skipSpace()
		sel, err := p.parseSelector()
		if err != nil {
			return nil, err
		}
		sels = append(sels, sel)
		p.skipSpace()
		switch p.peek() {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return sels, nil
		default:
			return nil, p.fail("expected , or ]")
		}
	}
}

func (p *pathParser) parseSelector() (jpSelector, error) {
	switch c := p.peek(); {
	case c == '*':
		p.pos++
		return jpSelector{kind: selWild}, nil
	case c == '\'' || c == '"':
		s, err := p.parseString()
		if err != nil {
			return jpSelector{}, err
		}
		return jpSelector{kind: selName, name: s}, nil
	case c == '?':
		p.pos++
		p.skipSpace()
		e, err := p.parseOr()
		if err != nil {
			return jpSelector{}, err
		}
		return jpSelector{kind: selFilter, filter: e}, nil
	case c == '-' || c == ':' || (c >= '0' && c <= '9'):
		return p.parseIndexOrSlice()
	}
	return jpSelector{}, p.fail("expected a selector")
}

func (p *pathParser) parseInt() (int, bool, error) {
	p.skipSpace()
	start := p.pos
	if p.peek() == '-' {
		p.pos++
	}
	for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
		p.pos++
	}
	if start == p.pos {
		return 0, false, nil
	}
	n, err := strconv.Atoi(p.s[start:p.pos])
	if err != nil || n > math.MaxInt32 || n < -math.MaxInt32 {
		return 0, false, p.fail("invalid integer")
	}
	return n, true, nil
}

func (p *pathParser) parseIndexOrSlice() (jpSelector, error) {
	start, hasStart, err := p.parseInt()
	if err != nil {
		return jpSelector{}, err
	}
	p.skipSpace()
	if p.peek() != ':' {
		if !hasStart {
			return jpSelector{}, p.fail("expected an index")
		}
		return jpSelector{kind: selIndex, index: start}, nil
	}
	p.pos++
	sel := jpSelector{kind: selSlice, start: start, hasStart: hasStart, step: 1}
	if sel.end, sel.hasEnd, err = p.parseInt(); err != nil {
		return jpSelector{}, err
	}
	p.skipSpace()
	if p.peek() == ':' {
		p.pos++
		step, ok, err := p.parseInt()
		if err != nil {
			return jpSelector{}, err
		}
		if ok {
			if step == 0 {
				return jpSelector{}, p.fail("slice step 0")
			}
			sel.step = step
		}
	}
	return sel, nil
}

func (p *pathParser) parseString() (string, error) {
	q := p.s[p.pos]
	p.pos++
	var b strings.Builder
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		switch {
		case c == q:
			p.pos++
			return b.String(), nil
		case c == '\\':
			if p.pos+1 >= len(p.s) {
				return "", p.fail("unterminated string")
			}
			e := p.s[p.pos+1]
			switch e {
			case '\'', '"', '\\', '/':
				b.WriteByte(e)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				if p.pos+6 > len(p.s) {
					return "", p.fail("invalid escape")
				}
				n, err := strconv.ParseUint(p.s[p.pos+2:p.pos+6], 16, 32)
				if err != nil {
					return "", p.fail("invalid escape")
				}
				b.WriteRune(rune(n))
				p.pos += 4
			default:
				return "", p.fail("invalid escape")
			}
			p.pos += 2
		default:
			b.WriteByte(c)
			p.pos++
		}
	}
	return "", p.fail("unterminated string")
}

// --- filter expressions ------------------------------------------------------

type jpExpr interface {
	test(root, cur any) bool
}

type (
	orExpr  struct{ l, r jpExpr }
	andExpr struct{ l, r jpExpr }
	notExpr struct{ e jpExpr }
	// existsExpr is a bare path: true when it selects something.
	existsExpr struct{ v *pathOperand }
	cmpExpr    struct {
		op   string
		l, r jpOperand
	}
)

func (e orExpr) test(root, cur any) bool  { return e.l.test(root, cur) || e.r.test(root, cur) }
func (e andExpr) test(root, cur any) bool { return e.l.test(root, cur) && e.r.test(root, cur) }
func (e notExpr) test(root, cur any) bool { return !e.e.test(root, cur) }
func (e existsExpr) test(root, cur any) bool {
	return len(e.v.nodes(root, cur)) > 0
}
func (e cmpExpr) test(root, cur any) bool {
	lv, lok := e.l.value(root, cur)
	rv, rok := e.r.value(root, cur)
	return compareValues(e.op, lv, lok, rv, rok)
}

type jpOperand interface {
	// value returns the operand's single value; ok is false when it
	// selects nothing (or more than one node).
	value(root, cur any) (any, bool)
}

type literalOperand struct{ v any }

func (l literalOperand) value(any, any) (any, bool) { return l.v, true }

type pathOperand struct {
	relative bool
	segs     []jpSegment
}

func (o *pathOperand) nodes(root, cur any) []any {
	start := root
	if o.relative {
		start = cur
	}
	nodes, err := evalSegments(root, []any{start}, o.segs)
	if err != nil {
		return nil
	}
	return nodes
}

func (o *pathOperand) value(root, cur any) (any, bool) {
	n := o.nodes(root, cur)
	if len(n) != 1 {
		return nil, false
	}
	return n[0], true
}

func (p *pathParser) enter() error {
	p.depth++
	if p.depth > maxPathNesting {
		return p.fail("filter nested too deeply")
	}
	return nil
}

func (p *pathParser) parseOr() (jpExpr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	l, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for {
		p.skipSpace()
		if !strings.HasPrefix(p.s[p.pos:], "||") {
			return l, nil
		}
		p.pos += 2
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		l = orExpr{l, r}
	}
}

func (p *pathParser) parseAnd() (jpExpr, error) {
	l, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	for {
		p.skipSpace()
		if !strings.HasPrefix(p.s[p.pos:], "&&") {
			return l, nil
		}
		p.pos += 2
		r, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		l = andExpr{l, r}
	}
}

func (p *pathParser) parseUnary() (jpExpr, error) {
	p.skipSpace()
	if p.peek() == '!' && !strings.HasPrefix(p.s[p.pos:], "!=") {
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		p.pos++
		e, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return notExpr{e}, nil
	}
	if p.peek() == '(' {
		p.pos++
		e, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.peek() != ')' {
			return nil, p.fail("expected )")
		}
		p.pos++
		return e, nil
	}
	l, err := p.parseOperand()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	op := ""
	for _, o := range []string{"==", "!=", "<=", ">=", "<", ">"} {
		if strings.HasPrefix(p.s[p.pos:], o) {
			op = o
			break
		}
	}
	if op == "" {
		po, ok := l.(*pathOperand)
		if !ok {
			return nil, p.fail("expected a comparison")
		}
		return existsExpr{po}, nil
	}
	p.pos += len(op)
	p.skipSpace()
	r, err := p.parseOperand()
	if err != nil {
		return nil, err
	}
	return cmpExpr{op: op, l: l, r: r}, nil
}

func (p *pathParser) parseOperand() (jpOperand, error) {
	p.skipSpace()
	c := p.peek()
	switch {
	case c == '@' || c == '$':
		p.pos++
		if err := p.enter(); err != nil {
			return nil, err
		}
		segs, err := p.parseSegments(true)
		p.depth--
		if err != nil {
			return nil, err
		}
		return &pathOperand{relative: c == '@', segs: segs}, nil
	case c == '\'' || c == '"':
		s, err := p.parseString()
		if err != nil {
			return nil, err
		}
		return literalOperand{s}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		start := p.pos
		p.pos++
		for p.pos < len(p.s) && strings.IndexByte("0123456789.eE+-", p.s[p.pos]) >= 0 {
			p.pos++
		}
		num := p.s[start:p.pos]
		if !isJSONNumber(num) {
			return nil, p.fail("invalid number")
		}
		return literalOperand{numberToEngine(json.Number(num))}, nil
	}
	for _, kw := range []struct {
		s string
		v any
	}{{"true", true}, {"false", false}, {"null", nil}} {
		if strings.HasPrefix(p.s[p.pos:], kw.s) {
			p.pos += len(kw.s)
			return literalOperand{kw.v}, nil
		}
	}
	return nil, p.fail("expected a value")
}

// compareValues applies op; an operand that selected nothing only equals
// another such operand.
func compareValues(op string, l any, lok bool, r any, rok bool) bool {
	if !lok || !rok {
		eq := lok == rok
		switch op {
		case "==", "<=", ">=":
			return eq
		case "!=":
			return !eq
		}
		return false
	}
	c, comparable := compareOrdered(l, r)
	switch op {
	case "==":
		if comparable {
			return c == 0
		}
		return jsonEqual(l, r)
	case "!=":
		if comparable {
			return c != 0
		}
		return !jsonEqual(l, r)
	}
	if !comparable {
		return false
	}
	switch op {
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	case ">=":
		return c >= 0
	}
	return false
}

// compareOrdered compares two numbers or two strings.
func compareOrdered(l, r any) (int, bool) {
	if ls, ok := l.(string); ok {
		if rs, ok := r.(string); ok {
			return strings.Compare(ls, rs), true
		}
		return 0, false
	}
	if isBigNumber(l) || isBigNumber(r) {
		if lr, ok := asRat(l); ok {
			if rr, ok := asRat(r); ok {
				return lr.Cmp(rr), true
			}
		}
		return 0, false
	}
	li, lint := asInt(l)
	ri, rint := asInt(r)
	if lint && rint {
		switch {
		case li < ri:
			return -1, true
		case li > ri:
			return 1, true
		}
		return 0, true
	}
	lf, lok := asFloat(l)
	rf, rok := asFloat(r)
	if !lok || !rok {
		return 0, false
	}
	switch {
	case lf < rf:
		return -1, true
	case lf > rf:
		return 1, true
	case lf == rf:
		return 0, true
	}
	return 0, false // NaN
}

// isBigNumber reports whether v is a json.Number (kept as such only when
// int64 / float64 cannot represent it exactly).
func isBigNumber(v any) bool {
	_, ok := v.(json.Number)
	return ok
}

// asRat returns v as an exact rational.
func asRat(v any) (*big.Rat, bool) {
	var s string
	switch v := v.(type) {
	case json.Number:
		s = string(v)
	case int64:
		return new(big.Rat).SetInt64(v), true
	case int:
		return new(big.Rat).SetInt64(int64(v)), true
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, false
		}
		return new(big.Rat).SetFloat64(v), true
	default:
		return nil, false
	}
	// Bound the exponent: big.Rat would expand 1e999999999 in memory.
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || e > 400 || e < -400 {
			f, _ := strconv.ParseFloat(s, 64)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, false
			}
			return new(big.Rat).SetFloat64(f), true
		}
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

func asInt(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case int:
		return int64(v), true
	case json.Number:
		n, err := strconv.ParseInt(string(v), 10, 64)
		return n, err == nil
	}
	return 0, false
}

func asFloat(v any) (float64, bool) {
	switch v := v.(type) {
	case int64:
		return float64(v), true
	case int:
		return float64(v), true
	case float64:
		return v, true
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		return f, err == nil
	}
	return 0, false
}

func jsonEqual(l, r any) bool {
	switch l.(type) {
	case nil, bool:
		return l == r
	}
	if l == nil || r == nil {
		return false
	}
	a, err1 := fromEngine(l, 0)
	b, err2 := fromEngine(r, 0)
	return err1 == nil && err2 == nil && reflect.DeepEqual(a, b)
}

// --- evaluation --------------------------------------------------------------

func (p *jsonPath) eval(in any) ([]any, error) {
	return evalSegments(in, []any{in}, p.segs)
}

func evalSegments(root any, nodes []any, segs []jpSegment) ([]any, error) {
	for _, seg := range segs {
		var next []any
		add := func(v any) error {
			if len(next) >= maxPathNodes {
				return errorf("json filter: path matched more than %d values", maxPathNodes)
			}
			next = append(next, v)
			return nil
		}
		for _, n := range nodes {
			targets := []any{n}
			if seg.descendant {
				targets = targets[:0]
				if err := descendants(n, 0, &targets); err != nil {
					return nil, err
				}
			}
			for _, t := range targets {
				for _, sel := range seg.sels {
					if err := applySelector(root, t, sel, add); err != nil {
						return nil, err
					}
				}
			}
		}
		nodes = next
	}
	return nodes, nil
}

// descendants appends v and everything below it, in document order.
func descendants(v any, depth int, out *[]any) error {
	if depth > maxDescend {
		return errorf("json filter: input nested too deeply")
	}
	if len(*out) >= maxPathNodes {
		return errorf("json filter: path matched more than %d values", maxPathNodes)
	}
	*out = append(*out, v)
	if m, ok := asObject(v); ok {
		for _, k := range sortedKeys(m) {
			if err := descendants(m[k], depth+1, out); err != nil {
				return err
			}
		}
	} else if a, ok := asArray(v); ok {
		for _, x := range a {
			if err := descendants(x, depth+1, out); err != nil {
				return err
			}
		}
	}
	return nil
}

func applySelector(root, v any, sel jpSelector, add func(any) error) error {
	switch sel.kind {
	case selName:
		if m, ok := asObject(v); ok {
			if x, ok := m[sel.name]; ok {
				return add(x)
			}
		}
	case selIndex:
		if a, ok := asArray(v); ok {
			i := sel.index
			if i < 0 {
				i += len(a)
			}
			if i >= 0 && i < len(a) {
				return add(a[i])
			}
		}
	case selWild:
		return eachChild(v, add)
	case selSlice:
		a, ok := asArray(v)
		if !ok {
			return nil
		}
		for _, i := range sliceIndexes(len(a), sel) {
			if err := add(a[i]); err != nil {
				return err
			}
		}
	case selFilter:
		return eachChild(v, func(x any) error {
			if sel.filter.test(root, x) {
				return add(x)
			}
			return nil
		})
	}
	return nil
}

func eachChild(v any, fn func(any) error) error {
	if m, ok := asObject(v); ok {
		for _, k := range sortedKeys(m) {
			if err := fn(m[k]); err != nil {
				return err
			}
		}
	} else if a, ok := asArray(v); ok {
		for _, x := range a {
			if err := fn(x); err != nil {
				return err
			}
		}
	}
	return nil
}

// sliceIndexes follows Python / RFC 9535 slice semantics.
func sliceIndexes(n int, sel jpSelector) []int {
	norm := func(i int) int {
		if i < 0 {
			return i + n
		}
		return i
	}
	var out []int
	if sel.step > 0 {
		lo, hi := 0, n
		if sel.hasStart {
			lo = min(max(norm(sel.start), 0), n)
		}
		if sel.hasEnd {
			hi = min(max(norm(sel.end), 0), n)
		}
		for i := lo; i < hi; i += sel.step {
			out = append(out, i)
		}
		return out
	}
	hi, lo := n-1, -1
	if sel.hasStart {
		hi = min(max(norm(sel.start), -1), n-1)
	}
	if sel.hasEnd {
		lo = min(max(norm(sel.end), -1), n-1)
	}
	for i := hi; i > lo; i += sel.step {
		out = append(out, i)
	}
	return out
}

func asObject(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case object:
		return m, true
	case map[string]any:
		return m, true
	}
	return nil, false
}

func asArray(v any) ([]any, bool) {
	switch a := v.(type) {
	case []any:
		return a, true
	case nil, string:
		return nil, false
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return nil, false
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out, true
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

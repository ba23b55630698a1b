package expr

// Resource guards. Expressions come from API clients and osteele/liquid has
// no resource limits, so a few lines of template could otherwise exhaust
// memory (a fatal, unrecoverable error) or CPU:
//
//   - every standard filter is wrapped: results above maxValueBytes /
//     maxArrayLen fail, and replace / join / uniq are checked before running;
//   - ranges need literal integer bounds at most maxRange apart;
//   - rendered templates are rewritten so that every {{ … }} output and every
//     loop iteration is charged to a per-evaluation work budget (bytes
//     written, loop iterations, captured text), see rewriteForBudget.

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/osteele/liquid/parser"
	"github.com/osteele/liquid/render"
	"github.com/osteele/liquid/values"
)

const (
	maxValueBytes = 1 << 20
	maxArrayLen   = 1 << 20
	maxUniqLen    = 1 << 14
	maxRange      = 100000
	// maxWork is the per-evaluation budget: bytes output by {{ }} plus,
	// per loop iteration, iterationCost plus the loop body's literal text.
	maxWork       = 8 << 20
	iterationCost = 64

	budgetVar  = "__tv_budget?" // '?' cannot occur in a token id binding
	outFilter  = "__tv_out"
	tickFilter = "__tv_tick"
)

// budget is the remaining work of one evaluation.
type budget struct{ left int }

func (b *budget) charge(n int) error {
	b.left -= n
	if b.left < 0 {
		return errorf("expression exceeds its work limit (%d bytes of output and loop work)", maxWork)
	}
	return nil
}

func asBudget(v any) (*budget, error) {
	b, ok := v.(*budget)
	if !ok || b == nil {
		return nil, errorf("invalid expression: internal variable reassigned")
	}
	return b, nil
}

// outValue renders v as the engine would and charges it to the budget.
func outValue(v any, args ...any) (any, error) {
	if len(args) != 1 {
		return nil, errorf("invalid expression: internal filter misused")
	}
	b, err := asBudget(args[0])
	if err != nil {
		return nil, err
	}
	var sb strings.Builder
	if err := renderText(&sb, v, b, 0); err != nil {
		return nil, err
	}
	return sb.String(), nil
}

// renderText writes v as Liquid renders it (objects as JSON), charging the
// budget as it goes.
func renderText(sb *strings.Builder, v any, b *budget, depth int) error {
	if depth > maxValueDepth {
		return errorf("expression result nested too deeply")
	}
	var s string
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		s = v
	case []any:
		for _, x := range v {
			if err := renderText(sb, x, b, depth+1); err != nil {
				return err
			}
		}
		return nil
	case object:
		s = v.String()
	case map[string]any:
		s = object(v).String()
	case []byte:
		s = string(v)
	case values.Range:
		return renderText(sb, v.AsArray(), b, depth)
	default:
		if t, ok := scalarText(v); ok {
			s = t
		} else {
			rv := reflect.ValueOf(v)
			if rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array {
				for i := range rv.Len() {
					if err := renderText(sb, rv.Index(i).Interface(), b, depth+1); err != nil {
						return err
					}
				}
				return nil
			}
			s = fmt.Sprint(v)
		}
	}
	if err := b.charge(len(s)); err != nil {
		return err
	}
	sb.WriteString(s)
	return nil
}

// tick charges one loop iteration: args[0] is the budget, args[1] the cost.
func tick(v any, args ...any) (any, error) {
	b, err := asBudget(v)
	if err != nil {
		return nil, err
	}
	cost := iterationCost
	if len(args) == 1 {
		if n, ok := args[0].(int); ok && n > 0 {
			cost = n
		}
	}
	return nil, b.charge(cost)
}

// rewriteForBudget rebuilds a template whose render must be charged: each
// {{ x }} becomes {{ (x) | __tv_out: budget }} and each for / tablerow body
// starts with {{ budget | __tv_tick: cost }}, cost being iterationCost plus
// the body's literal text. Raw and comment blocks are copied unchanged.
func rewriteForBudget(src string) string {
	type frame struct{ piece, text int }
	var (
		pieces           []string
		stack            []frame
		inRaw, inComment bool
		addText          = func(n int) {
			if len(stack) > 0 {
				stack[len(stack)-1].text += n
			}
		}
	)
	for _, tok := range parser.Scan(src, parser.SourceLoc{}, nil) {
		switch {
		case inComment || inRaw:
			if tok.Type == parser.TagTokenType {
				if inComment && tok.Name == "endcomment" {
					inComment = false
				} else if inRaw && tok.Name == "endraw" {
					inRaw = false
				}
			}
			pieces = append(pieces, tok.Source)
			addText(len(tok.Source))
		case tok.Type == parser.ObjTokenType:
			left, right := "{{ ", " }}"
			if strings.HasPrefix(tok.Source, "{{-") {
				left = "{{- "
			}
			if strings.HasSuffix(tok.Source, "-}}") {
				right = " -}}"
			}
			// Parenthesised: {{ a == b }} and {{ a or b }} are conditions, and a
			// filter after them would bind to b only.
			pieces = append(pieces, left+"("+tok.Args+") | "+outFilter+": "+budgetVar+right)
		case tok.Type == parser.TagTokenType:
			pieces = append(pieces, tok.Source)
			switch tok.Name {
			case "raw":
				inRaw = true
			case "comment":
				inComment = true
			case "for", "tablerow":
				stack = append(stack, frame{piece: len(pieces)})
				pieces = append(pieces, "")
				continue
			case "endfor", "endtablerow":
				if len(stack) > 0 {
					f := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					pieces[f.piece] = tickObject(f.text)
					addText(f.text)
				}
			}
			addText(len(tok.Source))
		default:
			pieces = append(pieces, tok.Source)
			addText(len(tok.Source))
		}
	}
	for _, f := range stack { // unbalanced: the parser reports it
		pieces[f.piece] = tickObject(len(src))
	}
	return strings.Join(pieces, "")
}

func tickObject(text int) string {
	return "{{ " + budgetVar + " | " + tickFilter + ": " + strconv.Itoa(iterationCost+text) + " }}"
}

// rangeRE matches a range with literal integer bounds.
var rangeRE = regexp.MustCompile(`\(\s*(-?[0-9]+)\s*\.\.\s*(-?[0-9]+)\s*\)`)

// checkRanges requires every range in an expression (strings blanked) to
// have literal bounds at most maxRange apart: ranges become arrays in
// filters, so (1..n) could allocate without bound.
func checkRanges(code string) *Error {
	n := strings.Count(code, "..")
	if n == 0 {
		return nil
	}
	ms := rangeRE.FindAllStringSubmatch(code, -1)
	if len(ms) != n {
		return errorf("invalid expression: ranges must have literal integer bounds")
	}
	for _, m := range ms {
		a, err1 := strconv.ParseInt(m[1], 10, 64)
		b, err2 := strconv.ParseInt(m[2], 10, 64)
		if err1 != nil || err2 != nil || b-a >= maxRange || a-b >= maxRange {
			return errorf("invalid expression: ranges are limited to %d values", maxRange)
		}
	}
	return nil
}

// blankStrings replaces string literal contents with spaces (quotes kept).
func blankStrings(args string) string {
	if !strings.ContainsAny(args, `'"`) {
		return args
	}
	b := []byte(args)
	var quote byte
	for i, c := range b {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				b[i] = ' '
			}
		case c == '\'' || c == '"':
			quote = c
		}
	}
	return string(b)
}

// guardedFilters registers filters wrapped with size checks.
type guardedFilters struct{ c *render.Config }

// AddFilter implements filters.FilterDictionary.
func (g guardedFilters) AddFilter(name string, fn any) {
	g.c.AddFilter(name, guardFilter(name, fn))
}

func guardFilter(name string, fn any) any {
	fv := reflect.ValueOf(fn)
	ft := fv.Type()
	pre := preCheck(name, ft)
	return reflect.MakeFunc(ft, func(in []reflect.Value) []reflect.Value {
		if pre != nil {
			if err := pre(in); err != nil {
				panic(err)
			}
		}
		var out []reflect.Value
		if ft.IsVariadic() {
			out = fv.CallSlice(in)
		} else {
			out = fv.Call(in)
		}
		if len(out) > 0 && tooLarge(out[0]) {
			panic(errorf("%s: result too large", name))
		}
		return out
	}).Interface()
}

func tooLarge(v reflect.Value) bool {
	for v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.String:
		return v.Len() > maxValueBytes
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return v.Len() > maxValueBytes
		}
		return v.Len() > maxArrayLen
	}
	return false
}

// preCheck returns a check run before the filters whose work or result can
// grow faster than their input.
func preCheck(name string, ft reflect.Type) func([]reflect.Value) *Error {
	stringArgs := func(n int) bool {
		if ft.NumIn() != n || ft.IsVariadic() {
			return false
		}
		for i := range n {
			if ft.In(i).Kind() != reflect.String {
				return false
			}
		}
		return true
	}
	switch {
	case name == "replace" && stringArgs(3):
		return func(in []reflect.Value) *Error {
			s, old, repl := in[0].String(), in[1].String(), in[2].String()
			var count int
			if old == "" {
				count = utf8.RuneCountInString(s) + 1
			} else if len(repl) > len(old) {
				count = strings.Count(s, old)
			}
			if int64(len(s))+int64(count)*int64(len(repl)-len(old)) > maxValueBytes {
				return errorf("replace: result too large")
			}
			return nil
		}
	case name == "join" && ft.NumIn() == 2 && ft.In(0).Kind() == reflect.Slice &&
		ft.In(1).Kind() == reflect.Func && ft.In(1).NumIn() == 1 && ft.In(1).NumOut() == 1 &&
		ft.In(1).In(0).Kind() == reflect.String && ft.In(1).Out(0).Kind() == reflect.String:
		return func(in []reflect.Value) *Error {
			sep := in[1].Call([]reflect.Value{reflect.ValueOf(" ")})[0].String()
			if n := in[0].Len(); n > 1 && int64(n-1)*int64(len(sep)) > maxValueBytes {
				return errorf("join: result too large")
			}
			return nil
		}
	case name == "uniq" && ft.NumIn() == 1 && ft.In(0).Kind() == reflect.Slice:
		return func(in []reflect.Value) *Error {
			if in[0].Len() > maxUniqLen {
				return errorf("uniq: array too large")
			}
			return nil
		}
	}
	return nil
}

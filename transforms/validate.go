package transforms

import (
	"errors"
	"fmt"
	"reflect"
	"regexp/syntax"
	"sort"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
)

// The CommonJS wrapper. The code is compiled as the body of this function,
// on the wrapper's first line like Node does, so that top-level return
// works and line numbers match the tenant's source; codePosition maps
// positions in the wrapped source back to the code's own.
const (
	cjsPrefix = "(function (exports, require, module, __filename, __dirname) {"
	cjsSuffix = "\n})"
)

// tenantFile is the name tenant code is compiled under: stack frames in
// it are positions in the tenant's code.
const tenantFile = "transform.js"

// validating serialises in-process validation. goja's parser and compiler
// are recursive and not linear on every input: measured on 50,000
// characters, "[[[[..." takes about 100 MB of Go stack and "1+1+1+..."
// about 4 s of compile time. One at a time bounds what ValidateCode can
// cost the server; Pool.ValidateCode moves the work into a worker.
var validating = make(chan struct{}, 1)

// ValidateCode checks transform or reactor code when it is saved, in the
// calling process, without running it. It returns nil or an *Error:
//
//   - KindInvalidCode when the code is longer than MaxCodeChars
//     characters, does not compile as a CommonJS module, or has a regular expression literal (or a
//     RegExp constructor call with a literal pattern) that Go's linear-time
//     engine cannot run: back-references, look-ahead and look-behind, and
//     repeat counts above 1000 would fall back to a backtracking engine;
//   - KindModule when it requires, with a string literal, a module that is
//     neither a built-in module nor one of allowModules (the operator
//     packages a pool allows, see Pool.ValidateCode).
//
// The parser never reads source maps or any other file. Requires with a
// computed name and regular expressions built at run time are checked when
// the code runs: a disallowed module fails the run with KindModule, and a
// backtracking regular expression is bounded by the run's deadline.
//
// ValidateCode parses and compiles in the calling process, one call at a
// time. Hostile code can make that cost up to about 100 MB of stack and a
// few seconds of CPU (see validating); a server that validates code from
// its API should prefer Pool.ValidateCode, which does the same work in a
// worker, under the pool's timeout and memory cap.
func ValidateCode(code string, allowModules ...string) error {
	if n := utf8.RuneCountInString(code); n > MaxCodeChars {
		return newError(KindInvalidCode, "the code is %d characters long; the limit is %d", n, MaxCodeChars)
	}
	validating <- struct{}{}
	defer func() { <-validating }()
	_, err := compileCode(tenantFile, code, func(name string) bool {
		return moduleAllowed(name, allowModules)
	})
	if err != nil {
		return err
	}
	return nil
}

// parseCode parses code wrapped as a CommonJS module. Source maps are off:
// with them on, goja reads whatever file a "//# sourceMappingURL=" comment
// names (a FIFO blocks forever, /dev/zero never ends). A syntax error
// gives its line and column in code.
func parseCode(name, code string) (*ast.Program, *Error) {
	prog, err := parser.ParseFile(nil, name, cjsPrefix+code+cjsSuffix, 0, parser.WithDisableSourceMaps)
	if err != nil {
		return nil, newError(KindInvalidCode, "%s", syntaxMessage(code, err))
	}
	return prog, nil
}

// syntaxMessage describes the first error the parser found, at its
// position in code: "SyntaxError: Unexpected token ; (line 2, column 9)".
// An error in the wrapper's suffix means the code ended too early (an
// unclosed brace or string), and says so.
func syntaxMessage(code string, err error) string {
	var list parser.ErrorList
	if !errors.As(err, &list) || len(list) == 0 {
		return "SyntaxError: " + err.Error()
	}
	first := list[0]
	line, col, end := codePosition(code, first.Position.Line, first.Position.Column)
	msg := first.Message
	if end {
		msg = "Unexpected end of input"
	}
	return "SyntaxError: " + msg + positionText(line, col)
}

// compileMessage describes an error of the compiler (a redeclared
// binding, a strict mode violation) at its position in code.
func compileMessage(code string, err error) string {
	var se *goja.CompilerSyntaxError
	if !errors.As(err, &se) || se.File == nil {
		return err.Error()
	}
	pos := se.File.Position(se.Offset)
	line, col, _ := codePosition(code, pos.Line, pos.Column)
	return "SyntaxError: " + se.Message + positionText(line, col)
}

// codePosition maps a position in the wrapped source, as goja gives it
// (line from 1, column in bytes from 1), to code's own: line from 1 and
// column in characters from 1. end reports a position at or past the end
// of code, in the wrapper's suffix; it maps to just after code's last
// character. Lines are counted as goja counts them.
func codePosition(code string, line, col int) (l, c int, end bool) {
	starts := lineStarts(cjsPrefix + code + cjsSuffix)
	if line < 1 || line > len(starts) {
		line = len(starts)
	}
	off := min(max(starts[line-1]+col-1-len(cjsPrefix), 0), len(code))
	cs := lineStarts(code)
	i := sort.Search(len(cs), func(i int) bool { return cs[i] > off }) - 1
	return i + 1, utf8.RuneCountInString(code[cs[i]:off]) + 1, off == len(code)
}

// lineStarts returns the byte offsets at which the lines of s start, with
// the line terminators of JavaScript: \n, \r\n, \r, U+2028 and U+2029.
func lineStarts(s string) []int {
	starts := []int{0}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch r {
		case '\r':
			if i < len(s) && s[i] == '\n' {
				i++
			}
			starts = append(starts, i)
		case '\n', '\u2028', '\u2029':
			starts = append(starts, i)
		}
	}
	return starts
}

// positionText is a position as messages give it: " (line 2, column 9)".
func positionText(line, col int) string {
	return fmt.Sprintf(" (line %d, column %d)", line, col)
}

// compileCode parses and compiles code as a CommonJS module, and checks it
// like ValidateCode. The worker uses it for tenant code and operator
// modules.
func compileCode(name, code string, allowed func(string) bool) (p *goja.Program, err *Error) {
	defer func() {
		// goja's parser and compiler have panicked on malformed input in
		// the past (goja #318, #376); never let that escape.
		if x := recover(); x != nil {
			p, err = nil, newError(KindInvalidCode, "the code could not be parsed")
		}
	}()
	prog, perr := parseCode(name, code)
	if perr != nil {
		return nil, perr
	}
	if allowed != nil {
		if err := checkAST(prog, allowed); err != nil {
			return nil, err.(*Error)
		}
	}
	compiled, cerr := goja.CompileAST(prog, false)
	if cerr != nil {
		return nil, newError(KindInvalidCode, "%s", compileMessage(code, cerr))
	}
	return compiled, nil
}

// checkAST walks the syntax tree for require calls and regular
// expressions with literal arguments.
func checkAST(prog *ast.Program, allowed func(string) bool) error {
	var first error
	walkAST(reflect.ValueOf(prog), func(n ast.Node) {
		if first != nil {
			return
		}
		switch n := n.(type) {
		case *ast.RegExpLiteral:
			first = checkRegexp(n.Pattern, n.Flags)
		case *ast.CallExpression:
			if isIdent(n.Callee, "require") && len(n.ArgumentList) > 0 {
				if name, ok := literalString(n.ArgumentList[0]); ok && !allowed(name) {
					first = newError(KindModule, "module %q is not allowed", truncate(name, 200))
				}
			}
			if isIdent(n.Callee, "RegExp") {
				first = checkRegexpCall(n.ArgumentList)
			}
		case *ast.NewExpression:
			if isIdent(n.Callee, "RegExp") {
				first = checkRegexpCall(n.ArgumentList)
			}
		}
	})
	return first
}

// checkRegexpCall checks RegExp(pattern, flags) when both are literals.
func checkRegexpCall(args []ast.Expression) error {
	if len(args) == 0 {
		return nil
	}
	pattern, ok := literalString(args[0])
	if !ok {
		return nil
	}
	flags := ""
	if len(args) > 1 {
		if flags, ok = literalString(args[1]); !ok {
			return nil
		}
	}
	return checkRegexp(pattern, flags)
}

// checkRegexp reports whether goja would run pattern on Go's linear-time
// regexp engine, the way goja itself decides: translate the JavaScript
// syntax with parser.TransformRegExp, then compile it with regexp/syntax.
// Whatever fails either step would fall back to regexp2, which backtracks.
func checkRegexp(pattern, flags string) error {
	var dotAll, unicode bool
	for _, f := range flags {
		switch f {
		case 's':
			dotAll = true
		case 'u':
			unicode = true
		case 'g', 'i', 'm', 'y':
		default:
			return newError(KindInvalidCode, "regular expression /%s/%s has an invalid flag", truncate(pattern, 200), truncate(flags, 20))
		}
	}
	re2, err := parser.TransformRegExp(pattern, dotAll, unicode)
	if err == nil {
		_, err = syntax.Parse(re2, syntax.Perl)
	}
	if err != nil {
		var incompat parser.RegexpErrorIncompatible
		if errors.As(err, &incompat) || isRepeatSize(err) {
			return newError(KindInvalidCode, "regular expression /%s/ needs a backtracking engine (back-references, look-around or a repeat count above 1000 are not supported)", truncate(pattern, 200))
		}
		return newError(KindInvalidCode, "invalid regular expression /%s/: %v", truncate(pattern, 200), err)
	}
	return nil
}

func isRepeatSize(err error) bool {
	var se *syntax.Error
	return errors.As(err, &se) && se.Code == syntax.ErrInvalidRepeatSize
}

func isIdent(e ast.Expression, name string) bool {
	id, ok := e.(*ast.Identifier)
	return ok && id.Name.String() == name
}

// literalString returns the value of a string literal or of a template
// literal without substitutions.
func literalString(e ast.Expression) (string, bool) {
	switch e := e.(type) {
	case *ast.StringLiteral:
		return e.Value.String(), true
	case *ast.TemplateLiteral:
		if e.Tag == nil && len(e.Expressions) == 0 && len(e.Elements) == 1 {
			return e.Elements[0].Parsed.String(), true
		}
	}
	return "", false
}

var nodeType = reflect.TypeOf((*ast.Node)(nil)).Elem()

// walkAST calls visit for every ast.Node reachable from root. goja's ast
// package has no walker; the tree is plain structs, slices and interfaces.
// The walk keeps its own stack, so a deep tree costs heap, not Go stack.
func walkAST(root reflect.Value, visit func(ast.Node)) {
	stack := []reflect.Value{root}
	seen := make(map[uintptr]bool)
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch v.Kind() {
		case reflect.Interface, reflect.Pointer:
			if v.IsNil() {
				continue
			}
			if v.Kind() == reflect.Pointer {
				if seen[v.Pointer()] {
					continue
				}
				seen[v.Pointer()] = true
				if v.Type().Implements(nodeType) {
					visit(v.Interface().(ast.Node))
				}
			}
			stack = append(stack, v.Elem())
		case reflect.Struct:
			for i := v.NumField() - 1; i >= 0; i-- {
				if v.Type().Field(i).IsExported() {
					stack = append(stack, v.Field(i))
				}
			}
		case reflect.Slice:
			for i := v.Len() - 1; i >= 0; i-- {
				stack = append(stack, v.Index(i))
			}
		}
	}
}

package transforms

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// positionCases are errors whose message gives the line and column in the
// tenant's own code, not in the CommonJS wrapper around it: one-line and
// multi-line code, syntax errors found by the parser and by the compiler,
// columns counted in characters.
var positionCases = []struct {
	name, code, msg string
}{
	{"one line, unclosed function", "module.exports = async function (req) {",
		"SyntaxError: Unexpected end of input (line 1, column 40)"},
	{"one line, bad token", "let a = ;", "SyntaxError: Unexpected token ; (line 1, column 9)"},
	{"one line, unclosed string", "module.exports = () => 'abc", "SyntaxError: Unexpected token ILLEGAL (line 1, column 24)"},
	{"one line, after a multi-byte character", `const s = "é"; let a = ;`, "SyntaxError: Unexpected token ; (line 1, column 24)"},
	{"one line, compiler error", "let a = 1; let a = 2;", "SyntaxError: Identifier 'a' has already been declared (line 1, column 16)"},
	{"multi-line, bad token", "module.exports = (req) => {\n  const x = 1;\n  return x..y;\n};",
		"SyntaxError: Unexpected token ILLEGAL (line 3, column 11)"},
	{"multi-line, unclosed block", "module.exports = (req) => {\n  return 1;\n",
		"SyntaxError: Unexpected end of input (line 3, column 1)"},
	{"multi-line with CRLF", "a();\r\nlet b = %;\r\n", "SyntaxError: Unexpected token % (line 2, column 9)"},
	{"multi-line, compiler error", "module.exports = () => {\n  'use strict';\n  with (x) {}\n};",
		"SyntaxError: Strict mode code may not include a with statement (line 3, column 3)"},
}

// TestSyntaxErrorPositions: ValidateCode, and the same check in a worker,
// report syntax errors at their position in the tenant's code.
func TestSyntaxErrorPositions(t *testing.T) {
	p := newTestPool(t, nil)
	for _, tc := range positionCases {
		t.Run(tc.name, func(t *testing.T) {
			for what, err := range map[string]error{
				"ValidateCode":      ValidateCode(tc.code),
				"Pool.ValidateCode": p.ValidateCode(context.Background(), tc.code),
			} {
				var e *Error
				if !errors.As(err, &e) || e.Kind != KindInvalidCode || e.Message != tc.msg {
					t.Errorf("%s = %v, want %s: %s", what, err, KindInvalidCode, tc.msg)
				}
			}
			_, err := run(t, p, JobRequest, tc.code, map[string]any{})
			var e *Error
			if !errors.As(err, &e) || e.Message != tc.msg {
				t.Errorf("Run = %v, want %s", err, tc.msg)
			}
		})
	}
}

// TestRuntimeErrorPositions: an Error thrown or raised by the engine gives
// the position in the tenant's code where it was created (the innermost
// frame of that code), synchronously or through a rejected promise; what
// the code chose to send its callers (a reactor error) is left as it is.
func TestRuntimeErrorPositions(t *testing.T) {
	p := newTestPool(t, nil)
	for _, tc := range []struct {
		name, code, msg string
	}{
		{"one line, engine error", "module.exports = (req) => req.args.x.y",
			"TypeError: Cannot read property 'y' of undefined (line 1, column 38)"},
		{"one line, thrown at load", "throw new Error('at load')", "Error: at load (line 1, column 7)"},
		{"one line, rejected promise", "module.exports = () => Promise.reject(new RangeError('nope'))",
			"RangeError: nope (line 1, column 39)"},
		{"one line, after a multi-byte character", "const s = 'é'; module.exports = () => { throw new TypeError('x') }",
			"TypeError: x (line 1, column 47)"},
		{"multi-line, async throw", "module.exports = async (req) => {\n  const a = 1;\n  throw new Error('boom');\n};",
			"Error: boom (line 3, column 9)"},
		{"multi-line, inner function", "function f() {\n  return null.x;\n}\nmodule.exports = () => f();",
			"TypeError: Cannot read property 'x' of undefined (line 2, column 15)"},
		{"multi-line, after await", "module.exports = async (req) => {\n  await null;\n  undefinedFn();\n};",
			"ReferenceError: undefinedFn is not defined (line 3, column 14)"},
		{"reactor error", "const E = require('" + ErrorsModule + "');\nmodule.exports = () => { throw new E.BadRequestError('no') };",
			"Bad Request"},
		{"non-error value", "module.exports = () => { throw 'str' }", "uncaught exception: str"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(t, p, JobReactor, tc.code, map[string]any{})
			var e *Error
			if !errors.As(err, &e) || e.Kind != KindRuntime || e.Message != tc.msg {
				t.Errorf("Run = %v, want %s: %s", err, KindRuntime, tc.msg)
			}
		})
	}
}

// TestCodePosition maps positions of the wrapped source, goja's way
// (columns in bytes), to the code's (columns in characters).
func TestCodePosition(t *testing.T) {
	prefix := len(cjsPrefix)
	code := "ab\r\nçd\u2028ef"
	for _, tc := range []struct {
		line, col         int
		wantLine, wantCol int
		end               bool
	}{
		{1, prefix + 1, 1, 1, false},
		{1, prefix + 2, 1, 2, false},
		{2, 1, 2, 1, false},
		{2, 3, 2, 2, false}, // after "ç", two bytes
		{3, 2, 3, 2, false},
		{4, 1, 3, 3, true},  // the wrapper's closing line
		{9, 9, 3, 3, true},  // out of range: the end
		{1, 1, 1, 1, false}, // inside the wrapper's prefix: the start
	} {
		l, c, end := codePosition(code, tc.line, tc.col)
		if l != tc.wantLine || c != tc.wantCol || end != tc.end {
			t.Errorf("codePosition(%d:%d) = %d:%d %v, want %d:%d %v", tc.line, tc.col, l, c, end, tc.wantLine, tc.wantCol, tc.end)
		}
	}
	if strings.Contains(positionText(1, 2), "transform.js") {
		t.Error("positions name the wrapper's file")
	}
}

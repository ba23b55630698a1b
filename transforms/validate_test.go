package transforms

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var validateCases = []struct {
	name string
	code string
	kind string
	msg  string
}{
	{"valid async function", `module.exports = async function (req) { return { body: req.args.body, headers: {} }; };`, "", ""},
	{"syntax error", `module.exports = function (req) { return {; };`, KindInvalidCode, "Unexpected"},
	{"ES module syntax", `import fs from 'fs'; export default () => 1;`, KindInvalidCode, ""},
	{"strict mode error", `'use strict'; module.exports = () => { with (x) {} };`, KindInvalidCode, ""},
	{"50,000 characters", `module.exports = () => 1; //` + strings.Repeat("x", MaxCodeChars-28), "", ""},
	{"50,001 characters", `module.exports = () => 1; //` + strings.Repeat("x", MaxCodeChars-27), KindInvalidCode, "50001 characters"},
	{"50,000 multi-byte characters", `//` + strings.Repeat("€", MaxCodeChars-2), "", ""},
	{"back-reference literal", `module.exports = (req) => /^(a+)+\1$/.test(req.args.s);`, KindInvalidCode, "backtracking"},
	{"named back-reference", `module.exports = () => /(?<x>a)\k<x>/;`, KindInvalidCode, "backtracking"},
	{"look-ahead literal", `module.exports = () => /a(?=b)/;`, KindInvalidCode, "backtracking"},
	{"negative look-ahead literal", `module.exports = () => /a(?!b)/g;`, KindInvalidCode, "backtracking"},
	{"look-behind literal", `module.exports = () => /(?<=a)b/;`, KindInvalidCode, "backtracking"},
	{"new RegExp with a look-ahead", `module.exports = () => new RegExp("(?=x)");`, KindInvalidCode, "backtracking"},
	{"RegExp call with a back-reference and flags", `module.exports = () => RegExp('(a)\\1', 'gi');`, KindInvalidCode, "backtracking"},
	{"template literal pattern", "module.exports = () => new RegExp(`(?!x)`);", KindInvalidCode, "backtracking"},
	{"repeat count over 1000", `module.exports = () => /a{1001}/;`, KindInvalidCode, "backtracking"},
	{"invalid regex flag in RegExp", `module.exports = () => new RegExp('a', 'q');`, KindInvalidCode, "invalid flag"},
	{"nested quantifier RE2 can run", `module.exports = () => /^(a+)+$/.test('aaa');`, "", ""},
	{"unicode and sticky flags", `module.exports = () => /\u{1F600}/uy;`, "", ""},
	{"computed RegExp is left to run time", `module.exports = (req) => new RegExp(req.args.p);`, "", ""},
	{"require fs", `const fs = require('fs'); module.exports = () => 1;`, KindModule, `"fs"`},
	{"require fs in a template literal", "const fs = require(`fs`); module.exports = () => 1;", KindModule, `"fs"`},
	{"require in a dead branch", `module.exports = () => { if (false) require('child_process'); };`, KindModule, "child_process"},
	{"require a relative file", `module.exports = require('./other');`, KindModule, "./other"},
	{"require allowed built-ins", `const c = require('crypto'), b = require('node:buffer'), u = require('url'), q = require('querystring'),
		e = require('` + ErrorsModule + `'); module.exports = () => 1;`, "", ""},
	{"require with a computed name", `module.exports = (req) => require(req.args.m);`, "", ""},
	{"eval is not rejected statically", `module.exports = () => eval('1');`, "", ""},
}

func TestValidateCode(t *testing.T) {
	for _, tc := range validateCases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateCode(tc.code)
			if kindOf(err) != tc.kind || (tc.msg != "" && !strings.Contains(err.Error(), tc.msg)) {
				t.Fatalf("ValidateCode = %v, want kind %q with %q", err, tc.kind, tc.msg)
			}
		})
	}
}

// TestPoolValidateCode runs the same table in a worker.
func TestPoolValidateCode(t *testing.T) {
	p := newTestPool(t, nil)
	for _, tc := range validateCases {
		t.Run(tc.name, func(t *testing.T) {
			err := p.ValidateCode(context.Background(), tc.code)
			if kindOf(err) != tc.kind || (tc.msg != "" && !strings.Contains(err.Error(), tc.msg)) {
				t.Fatalf("Pool.ValidateCode = %v, want kind %q with %q", err, tc.kind, tc.msg)
			}
		})
	}
	// Code that is expensive to compile costs a worker, not this process.
	expensive := "module.exports = () => 1" + strings.Repeat("+1", 24000) + ";"
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := p.ValidateCode(ctx, expensive)
	t.Logf("expensive code: %v after %v", err, time.Since(start))
	if err != nil && kindOf(err) != KindTimeout {
		t.Errorf("expensive code: %v", err)
	}
	// seconds of slack for a busy machine: what matters is that it ends
	// long before the pool's own timeout would end it
	if time.Since(start) > 300*time.Millisecond+p.opts.KillGrace+5*time.Second {
		t.Errorf("expensive code took %v", time.Since(start))
	}
}

// TestValidateCodeReadsNoSourceMap: goja's parser, by default, reads the
// file a sourceMappingURL comment names; a FIFO would block it forever.
func TestValidateCodeReadsNoSourceMap(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "map")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	code := "module.exports = () => 1;\n//# sourceMappingURL=" + fifo
	done := make(chan error, 1)
	go func() { done <- ValidateCode(code) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		// Unblock the parser so the test binary can exit.
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("ValidateCode blocked reading the source map")
	}
	p := newTestPool(t, nil)
	if _, err := run(t, p, JobReactor, "module.exports = () => ({ raw: 1 });\n//# sourceMappingURL="+fifo, nil); err != nil {
		t.Fatalf("run with a sourceMappingURL: %v", err)
	}
}

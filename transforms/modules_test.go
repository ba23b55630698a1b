package transforms

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestBuiltinModules(t *testing.T) {
	p := newTestPool(t, nil)
	tests := []struct {
		name string
		expr string // evaluated with crypto, Buffer (global and module), url, qs in scope
		want any
	}{
		{"sha256 of abc, hex", `crypto.createHash('sha256').update('abc').digest('hex')`, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"sha256 of abc, base64", `crypto.createHash('sha256').update('abc').digest('base64')`, "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="},
		{"sha256 in two updates", `crypto.createHash('SHA256').update('a').update(Buffer.from('bc')).digest('hex')`, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"md5 of abc", `crypto.createHash('md5').update('abc').digest('hex')`, "900150983cd24fb0d6963f7d28e17f72"},
		{"sha1 of abc", `crypto.createHash('sha1').update('abc').digest('hex')`, "a9993e364706816aba3e25717850c26c9cd0d89d"},
		{"sha512 of abc", `crypto.createHash('sha512').update('abc').digest('hex')`,
			"ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"},
		{"digest without encoding is a Buffer", `(() => { const d = crypto.createHash('sha256').update('abc').digest(); return [Buffer.isBuffer(d), d.length, d.toString('hex').slice(0, 4)]; })()`, []any{true, 32.0, "ba78"}},
		{"HMAC-SHA256 RFC 4231 case 1", `crypto.createHmac('sha256', Buffer.from('0b'.repeat(20), 'hex')).update('Hi There').digest('hex')`,
			"b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
		{"HMAC-SHA256 RFC 4231 case 2 (string key)", `crypto.createHmac('sha256', 'Jefe').update('what do ya want for nothing?').digest('hex')`,
			"5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
		{"unknown digest", `(() => { try { crypto.createHash('sha3-999'); return 'no error'; } catch (e) { return e.message; } })()`, "Digest method not supported"},
		{"digest twice", `(() => { const h = crypto.createHash('md5'); h.digest('hex'); try { h.digest('hex'); return 'no error'; } catch (e) { return 'threw'; } })()`, "threw"},
		{"randomBytes hex", `crypto.randomBytes(16).toString('hex').length`, 32.0},
		{"randomBytes base64", `crypto.randomBytes(3).toString('base64').length`, 4.0},
		{"randomUUID", `/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(crypto.randomUUID())`, true},
		{"timingSafeEqual", `[crypto.timingSafeEqual(Buffer.from('ab'), Buffer.from('ab')), crypto.timingSafeEqual(Buffer.from('ab'), Buffer.from('ac'))]`, []any{true, false}},
		{"base64 round trip", `Buffer.from(Buffer.from('héllo wörld', 'utf8').toString('base64'), 'base64').toString('utf8')`, "héllo wörld"},
		{"base64 of utf8", `Buffer.from('héllo').toString('base64')`, "aMOpbGxv"},
		{"base64url", `Buffer.from([0xfb, 0xff]).toString('base64url')`, "-_8"},
		{"lenient base64", `Buffer.from('aMOp bGxv\n', 'base64').toString()`, "héllo"},
		{"hex", `Buffer.from('68656c6c6f', 'hex').toString('utf8')`, "hello"},
		{"hex stops at invalid", `Buffer.from('6869zz', 'hex').toString()`, "hi"},
		{"latin1", `Buffer.from('é', 'latin1').toString('hex')`, "e9"},
		{"byteLength", `[Buffer.byteLength('héllo'), Buffer.byteLength('aGk=', 'base64'), Buffer.byteLength('abcd', 'hex'), Buffer.byteLength(Buffer.alloc(7))]`, []any{6.0, 2.0, 2.0, 7.0}},
		{"buffer module", `buffer.Buffer === Buffer && Buffer.concat([Buffer.from('a'), Buffer.from('b')]).toString()`, "ab"},
		{"Buffer toJSON", `JSON.stringify(Buffer.from('hi'))`, `{"type":"Buffer","data":[104,105]}`},
		{"unknown encoding", `(() => { try { Buffer.from('a', 'nope'); } catch (e) { return e.message; } })()`, "Unknown encoding: nope"},
		{"URL", `(() => { const u = new url.URL('https://user@example.com:8080/p/a?x=1&y=2#h'); return [u.hostname, u.port, u.pathname, u.searchParams.get('y'), u.hash]; })()`,
			[]any{"example.com", "8080", "/p/a", "2", "#h"}},
		{"global URLSearchParams", `(() => { const p = new URLSearchParams({ a: '1', b: 'x y' }); p.append('a', '2'); return [p.toString(), p.getAll('a')]; })()`,
			[]any{"a=1&b=x+y&a=2", []any{"1", "2"}}},
		{"querystring parse", `(() => { const o = qs.parse('a=1&b=x%20y&a=2&c'); return [o.a, o.b, o.c]; })()`, []any{[]any{"1", "2"}, "x y", ""}},
		{"querystring stringify", `qs.stringify({ a: [1, 2], b: 'x y', c: true })`, "a=1&a=2&b=x%20y&c=true"},
		{"node: prefix", `require('node:crypto') === crypto`, true},
		{"modules are frozen", `Object.isFrozen(crypto) && Object.isFrozen(qs)`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code := `const crypto = require('crypto'), buffer = require('buffer'), url = require('url'), qs = require('querystring');
				module.exports = () => ({ raw: ` + tc.expr + ` });`
			res, err := run(t, p, JobReactor, code, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got any
			if err := json.Unmarshal(res.Raw, &got); err != nil {
				t.Fatal(err)
			}
			if mustJSON(t, got) != mustJSON(t, tc.want) {
				t.Errorf("got %s, want %s", mustJSON(t, got), mustJSON(t, tc.want))
			}
		})
	}
}

func TestDisallowedModules(t *testing.T) {
	p := newTestPool(t, nil)
	for _, name := range []string{"fs", "node:fs", "child_process", "net", "http", "https", "process", "vm", "worker_threads",
		"os", "./local", "../up", "/etc/passwd", "lodash", "node:" + ErrorsModule, "crypto/../fs"} {
		t.Run(name, func(t *testing.T) {
			code := `module.exports = () => ({ raw: require('` + name + `') })`
			if err := ValidateCode(code); kindOf(err) != KindModule {
				t.Errorf("ValidateCode: %v, want a module error", err)
			}
			// At run time, with a name the static check cannot see.
			dyn := `module.exports = () => ({ raw: require(['` + name + `'][0]) })`
			if err := ValidateCode(dyn); err != nil {
				t.Fatalf("ValidateCode of a computed name: %v", err)
			}
			if _, err := run(t, p, JobReactor, dyn, nil); kindOf(err) != KindModule {
				t.Errorf("Run: %v, want a module error", err)
			}
		})
	}
	// A refused require that the code catches is not an error.
	res, err := run(t, p, JobReactor, `module.exports = () => { try { require(['fs'][0]) } catch (e) { return { raw: e.code } } }`, nil)
	if err != nil || mustJSON(t, res.Raw) != `"MODULE_NOT_FOUND"` {
		t.Errorf("caught module error: %v %+v", err, res)
	}
}

// writeFiles creates files (path -> content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOperatorModules(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"leftpad/package.json": `{"name": "leftpad", "main": "lib/index.js"}`,
		"leftpad/lib/index.js": `const util = require('./util'); const data = require('../data.json'); module.exports = (s, n) => util.pad(String(s), n, data.char); module.exports.file = __filename;`,
		"leftpad/lib/util.js":  `exports.pad = (s, n, c) => c.repeat(Math.max(0, n - s.length)) + s;`,
		"leftpad/data.json":    `{"char": "0"}`,
		"@acme/fmt/index.js":   `const lp = require('leftpad'); const c = require('crypto'); module.exports = { card: (n) => lp(n, 8), h: (s) => c.createHash('md5').update(s).digest('hex') };`,
		"secret/index.js":      `module.exports = 'not allowed';`,
		"sneaky/index.js":      `module.exports = require('../secret');`,
		"greedy/index.js":      `module.exports = require('fs');`,
		"esm/package.json":     `{"type": "module", "main": "index.js"}`,
		"esm/index.js":         `export default 1;`,
		"broken/index.js":      `module.exports = (;`,
		"linked/package.json":  `{"main": "escape.js"}`,
		"cycle/index.js":       `exports.a = 1; const b = require('./b'); exports.fromB = b.sawA;`,
		"cycle/b.js":           `exports.sawA = require('./index').a;`,
		"dot/package.json":     `{"main": "main.js"}`,
		"dot/main.js":          `exports.name = 'dot'; exports.fromLib = require('./lib/a');`,
		"dot/lib/a.js":         `module.exports = require('..').name + ' ' + require('./').name;`,
		"dot/lib/index.js":     `exports.name = 'lib';`,
	})
	writeFiles(t, outside, map[string]string{"escape.js": `module.exports = 'escaped';`})
	if err := os.Symlink(filepath.Join(outside, "escape.js"), filepath.Join(dir, "linked", "escape.js")); err != nil {
		t.Fatal(err)
	}
	allow := []string{"leftpad", "@acme/fmt", "sneaky", "greedy", "esm", "broken", "linked", "cycle", "dot"}
	p := newTestPool(t, func(o *Options) { o.ModulesDir = dir; o.AllowModules = allow })
	tests := []struct {
		name, code, want, kind string
	}{
		{"main with relative and JSON requires", `const lp = require('leftpad'); module.exports = () => ({ raw: [lp(42, 5), lp.file] })`, `["00042","/node_modules/leftpad/lib/index.js"]`, ""},
		{"scoped package requiring another allowed one and a built-in", `const f = require('@acme/fmt'); module.exports = () => ({ raw: [f.card('4242'), f.h('abc')] })`, `["00004242","900150983cd24fb0d6963f7d28e17f72"]`, ""},
		{"subpath", `const u = require('leftpad/lib/util'); module.exports = () => ({ raw: u.pad('1', 3, 'x') })`, `"xx1"`, ""},
		{"circular requires", `const c = require('cycle'); module.exports = () => ({ raw: c.fromB })`, `1`, ""},
		{"directories: the package's and its own", `const d = require('dot'); module.exports = () => ({ raw: d.fromLib })`, `"dot lib"`, ""},
		{"not in AllowModules", `module.exports = () => ({ raw: require('secret') })`, "", KindModule},
		{"relative require out of the package", `module.exports = () => ({ raw: require('sneaky') })`, "", KindModule},
		{"operator module requiring fs", `module.exports = () => ({ raw: require('greedy') })`, "", KindModule},
		{"ES module", `module.exports = () => ({ raw: require('esm') })`, "", KindModule},
		{"syntax error in a module", `module.exports = () => ({ raw: require('broken') })`, "", KindModule},
		{"symlink out of the package", `module.exports = () => ({ raw: require('linked') })`, "", KindModule},
		{"subpath escaping the package", `module.exports = () => ({ raw: require('leftpad/../secret') })`, "", KindModule},
		{"missing package", `module.exports = () => ({ raw: require('@acme/none') })`, "", KindModule},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := run(t, p, JobReactor, tc.code, nil)
			if kindOf(err) != tc.kind {
				t.Fatalf("err = %v, want kind %q", err, tc.kind)
			}
			if tc.want != "" && mustJSON(t, res.Raw) != tc.want {
				t.Errorf("raw = %s, want %s", res.Raw, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), dir) {
				t.Errorf("the error reveals the modules directory: %v", err)
			}
		})
	}
	// svc replies that arrive while a require waits for its files are
	// delivered once the code awaits them
	svcThenRequire := `module.exports = async (req) => {
		const pending = [1, 2, 3].map((n) => req.svc.tokens.retrieve('tok_' + n));
		const lp = require('leftpad');
		const got = await Promise.all(pending);
		return { raw: [lp(7, 3), got.map((r) => r.params.id)] };
	}`
	for i := 0; i < 5; i++ {
		res, err := p.Run(t.Context(), Job{Kind: JobReactor, Code: svcThenRequire, Svc: &fakeSvc{}})
		if err != nil || mustJSON(t, res.Raw) != `["007",["tok_1","tok_2","tok_3"]]` {
			t.Fatalf("svc calls around a require: %v %+v", err, res)
		}
	}
	if err := p.ValidateCode(t.Context(), `require('leftpad'); require('secret')`); kindOf(err) != KindModule {
		t.Errorf("Pool.ValidateCode with a package outside AllowModules: %v", err)
	}
	if err := p.ValidateCode(t.Context(), `require('leftpad'); require('@acme/fmt/index')`); err != nil {
		t.Errorf("Pool.ValidateCode with allowed packages: %v", err)
	}
	if err := ValidateCode(`require('leftpad')`); kindOf(err) != KindModule {
		t.Errorf("ValidateCode without allowModules: %v", err)
	}
	if err := ValidateCode(`require('leftpad')`, allow...); err != nil {
		t.Errorf("ValidateCode with allowModules: %v", err)
	}
}

func TestOptionsModules(t *testing.T) {
	for _, o := range []Options{
		{Command: []string{"/bin/true"}, AllowModules: []string{"x"}},
		{Command: []string{"/bin/true"}, ModulesDir: "/tmp", AllowModules: []string{"../x"}},
		{Command: []string{"/bin/true"}, ModulesDir: "/tmp", AllowModules: []string{"crypto"}},
	} {
		if _, err := o.withDefaults(); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
	if !regexp.MustCompile(`^@a/b$`).MatchString("@a/b") || !validPackageName("@a/b") || validPackageName("@a/../b") || validPackageName("a/b") {
		t.Error("validPackageName")
	}
}

// A changed operator module is loaded again once what its name resolved
// to is older than resolveTTL: a worker caches files by content version,
// and asks the parent again after that long.
func TestOperatorModuleChanges(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"version/index.js": `module.exports = 'v1'`, "version/data.json": `{"v": 1}`})
	p := newTestPool(t, func(o *Options) {
		o.MinWorkers, o.MaxWorkers, o.ModulesDir, o.AllowModules = 1, 1, dir, []string{"version"}
	})
	code := `module.exports = () => ({ raw: [require('version'), require('version/data').v] })`
	if res, err := run(t, p, JobReactor, code, nil); err != nil || mustJSON(t, res.Raw) != `["v1",1]` {
		t.Fatalf("first version: %v %+v", err, res)
	}
	writeFiles(t, dir, map[string]string{"version/index.js": `module.exports = 'v22'`, "version/data.json": `{"v": 22}`})
	time.Sleep(resolveTTL + 100*time.Millisecond)
	if res, err := run(t, p, JobReactor, code, nil); err != nil || mustJSON(t, res.Raw) != `["v22",22]` {
		t.Fatalf("after the change: %v %+v", err, res)
	}
}

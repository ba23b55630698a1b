package transforms

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/dop251/goja"
)

// Realm reuse (R-JS-4 "per tenant+transform with reset", R-JS-2 "a stale
// interrupt never kills the next request"): runs of one RealmScope and
// code share a warm realm, reset between runs; nothing else shares one.

var (
	scopeA    = RealmScope{Tenant: "tenant-a", Principal: "app-1"}
	scopeA2   = RealmScope{Tenant: "tenant-a", Principal: "app-2"} // same tenant, other principal
	scopeAnon = RealmScope{Tenant: "tenant-a"}                     // same tenant, anonymous proxy
	scopeB    = RealmScope{Tenant: "tenant-b", Principal: "app-1"} // other tenant, same principal id
)

// runScoped runs code as a reactor in scope with args and returns what
// it returned as raw, and whether the run reused a warm realm.
func runScoped(t *testing.T, p *Pool, scope RealmScope, code string, args any) (json.RawMessage, bool, error) {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	before := p.Stats().WarmRuns
	res, err := p.Run(context.Background(), Job{Kind: JobReactor, Code: code, Args: raw, Realm: scope})
	warm := p.Stats().WarmRuns > before
	if err != nil {
		return nil, warm, err
	}
	return res.Raw, warm, nil
}

// polluteAndInspect is the code of the P9-style test. With args.pollute
// it changes everything in its realm that it can, in sloppy mode (failed
// writes to frozen things are silent) and in strict mode (they throw, and
// are caught); args.marker tells its state apart from another run's.
// Without, it reports what it sees of all that.
const polluteAndInspect = `let counter = 0;
module.exports = function (req) {
	counter++;
	if (req.args.pollute) {
		const m = req.args.marker;
		const attempt = (f) => { try { f(); } catch (e) {} };
		// Globals, every way they can be made.
		globalThis.x = m;
		implicitGlobal = m; // sloppy mode: a property of the global object
		attempt(() => Object.defineProperty(globalThis, 'hidden', { value: m, enumerable: false, configurable: true }));
		attempt(() => { globalThis[Symbol.for('sym')] = m; });
		attempt(() => { globalThis[Symbol.iterator] = m; });
		// Built-in bindings and intrinsics.
		attempt(() => { JSON = { stringify: () => 'owned' }; });
		attempt(() => { globalThis.Object = null; });
		attempt(() => { delete globalThis.Array; });
		attempt(() => { JSON.stringify = () => '"owned"'; });
		attempt(() => { Object.prototype.polluted = m; });
		attempt(() => { Array.prototype.map.stash = m; });
		attempt(() => { Object.setPrototypeOf(Array.prototype.slice, { call: () => 'owned' }); });
		attempt(() => { Buffer.from.stash = m; });
		attempt(() => { console.log.stash = m; });
		attempt(() => { String.fromCharCode.apply = () => 'owned'; });
		attempt(() => { (function () { 'use strict'; Object.prototype.hasOwnProperty.stash = m; })(); });
		attempt(() => { (function () { 'use strict'; Error.prototype.toString.stash = m; })(); });
		// Module state: the require function, module objects, req.svc.
		attempt(() => { require.cache = { stash: m }; });
		attempt(() => { require('crypto').stash = m; });
		attempt(() => { require('crypto').createHash.stash = m; });
		attempt(() => { require('@basis-theory/basis-theory-reactor-formulas-sdk-js').stash = m; });
		attempt(() => { require('url').stash = m; });
		attempt(() => { URL.prototype.stash = m; });
		attempt(() => { module.stash = m; });
		attempt(() => { req.svc.stash = m; });
		attempt(() => { req.svc.tokens.create.stash = m; });
		return { raw: { counter: counter, frozenMethod: Object.isFrozen(Array.prototype.map) } };
	}
	return { raw: {
		counter: counter,
		x: typeof x, implicitGlobal: typeof implicitGlobal, hidden: typeof globalThis.hidden,
		sym: typeof globalThis[Symbol.for('sym')], iterator: typeof globalThis[Symbol.iterator],
		globals: Reflect.ownKeys(globalThis).length,
		json: JSON.stringify({ a: 1 }), object: typeof Object, array: typeof Array,
		polluted: typeof ({}).polluted, mapStash: typeof Array.prototype.map.stash,
		slice: Array.prototype.slice.call([1, 2], 1)[0], bufferStash: typeof Buffer.from.stash,
		logStash: typeof console.log.stash, fromCharCode: String.fromCharCode.apply(null, [65]),
		hasOwnStash: typeof Object.prototype.hasOwnProperty.stash, errorToStringStash: typeof Error.prototype.toString.stash,
		requireCache: typeof require.cache, cryptoStash: typeof require('crypto').stash,
		hashStash: typeof require('crypto').createHash.stash,
		errorsStash: typeof require('@basis-theory/basis-theory-reactor-formulas-sdk-js').stash,
		urlStash: typeof require('url').stash, urlProtoStash: typeof URL.prototype.stash,
		moduleStash: typeof module.stash, svcStash: typeof req.svc.stash, createStash: typeof req.svc.tokens.create.stash,
	} };
};`

// TestRealmReuseIsClean: a run in a warm realm that an earlier run of
// the scope polluted sees clean intrinsics, no leftover globals and no
// module state — whatever the earlier run tried (P9 as a regression test,
// with the realm reused); other tenants and principals never get the
// polluted realm.
func TestRealmReuseIsClean(t *testing.T) {
	p := newTestPool(t, func(o *Options) { o.MinWorkers, o.MaxWorkers = 1, 1 })
	svc := &recordingSvc{}
	run := func(scope RealmScope, args string) (map[string]any, bool) {
		t.Helper()
		before := p.Stats().WarmRuns
		res, err := p.Run(context.Background(), Job{Kind: JobReactor, Code: polluteAndInspect, Args: json.RawMessage(args), Realm: scope, Svc: svc})
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(res.Raw, &m); err != nil {
			t.Fatal(err)
		}
		return m, p.Stats().WarmRuns > before
	}
	// What a realm no run has touched shows.
	want, _ := run(RealmScope{}, `{}`)
	for k, v := range map[string]any{"counter": 1.0, "x": "undefined", "implicitGlobal": "undefined", "hidden": "undefined",
		"json": `{"a":1}`, "object": "function", "polluted": "undefined", "mapStash": "undefined", "slice": 2.0, "fromCharCode": "A"} {
		if want[k] != v {
			t.Fatalf("a fresh realm shows %s = %v, want %v", k, want[k], v)
		}
	}
	if _, warm := run(scopeA, `{}`); warm {
		t.Fatal("the first run of the scope was warm")
	}
	for i := 0; i < 3; i++ {
		got, warm := run(scopeA, fmt.Sprintf(`{"pollute":true,"marker":"run %d"}`, i))
		if !warm {
			t.Fatalf("polluter run %d did not reuse the realm", i)
		}
		if got["counter"] != 1.0 || got["frozenMethod"] != true {
			t.Errorf("polluter run %d: %v, want counter 1 (module state is fresh) and frozen methods", i, got)
		}
		seen, warm := run(scopeA, `{}`)
		if !warm {
			t.Fatalf("inspector run %d did not reuse the polluted realm: the test would prove nothing", i)
		}
		for k, v := range want {
			if seen[k] != v {
				t.Errorf("after pollution %d: %s = %v, want %v", i, k, seen[k], v)
			}
		}
		// Another tenant and another principal: never the polluted realm.
		for _, other := range []RealmScope{scopeB, scopeA2} {
			seen, warm := run(other, `{}`)
			if i == 0 && warm {
				t.Errorf("%+v reused a realm on its first run", other)
			}
			for k, v := range want {
				if seen[k] != v {
					t.Errorf("%+v after pollution %d: %s = %v, want %v", other, i, k, seen[k], v)
				}
			}
		}
	}
}

// TestRealmModuleStateDoesNotCarryOver: module-level variables start
// afresh in every run of a warm realm.
func TestRealmModuleStateDoesNotCarryOver(t *testing.T) {
	p := newTestPool(t, func(o *Options) { o.MinWorkers, o.MaxWorkers = 1, 1 })
	code := `let counter = 0; const seen = []; var hoisted = hoisted || 0;
		module.exports = async (req) => { counter++; seen.push(req.args.i); hoisted++; exports.last = req.args.i;
			return { raw: [counter, seen.length, hoisted, typeof module.exports.last] }; };`
	for i := 0; i < 5; i++ {
		raw, warm, err := runScoped(t, p, scopeA, code, map[string]any{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		if mustJSON(t, raw) != `[1,1,1,"undefined"]` {
			t.Errorf("run %d: %s, want [1,1,1,\"undefined\"]", i, raw)
		}
		if i > 0 && !warm {
			t.Errorf("run %d did not reuse the realm", i)
		}
	}
}

// TestRealmScopesNeverShare: a realm serves one tenant, one principal and
// one code; a job without a scope always gets a fresh realm.
func TestRealmScopesNeverShare(t *testing.T) {
	p := newTestPool(t, func(o *Options) { o.MinWorkers, o.MaxWorkers = 1, 1 })
	code := `module.exports = (req) => { const before = typeof globalThis.owner === 'undefined' ? null : globalThis.owner;
		globalThis.owner = req.args.me; return { raw: before }; };`
	otherCode := code + "\n// another code"
	tests := []struct {
		name  string
		scope RealmScope
		code  string
		warm  bool // whether this run reuses the realm of an earlier row
	}{
		{"tenant A, app 1", scopeA, code, false},
		{"tenant A, app 1 again", scopeA, code, true},
		{"tenant A, app 2", scopeA2, code, false},
		{"tenant A, anonymous", scopeAnon, code, false},
		{"tenant B, app 1", scopeB, code, false},
		{"tenant A, app 1, other code", scopeA, otherCode, false},
		{"no scope", RealmScope{}, code, false},
		{"no scope again", RealmScope{}, code, false},
		{"principal only", RealmScope{Principal: "app-1"}, code, false},
		{"tenant B, app 1 again", scopeB, code, true},
		{"tenant A, app 2 again", scopeA2, code, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw, warm, err := runScoped(t, p, tc.scope, tc.code, map[string]any{"me": tc.name})
			if err != nil {
				t.Fatal(err)
			}
			if warm != tc.warm {
				t.Errorf("warm = %v, want %v", warm, tc.warm)
			}
			// Globals never survive a run, so every run sees none.
			if string(raw) != "null" {
				t.Errorf("the run saw the global of %s", raw)
			}
		})
	}
	if s := p.Stats(); s.Started != 1 {
		t.Errorf("the runs did not share one worker: %+v", s)
	}
}

// TestRealmDiscardedAfterFailure: a realm whose run was interrupted
// (deadline, cancel), overflowed the stack, left work unsettled or
// changed what reset cannot undo is not reused; the next run of the scope
// succeeds in a fresh realm (no stale interrupt). A run that threw keeps
// its realm.
func TestRealmDiscardedAfterFailure(t *testing.T) {
	// The pool's own Timeout (seconds): 'loop' waits it out once, and no
	// harmless run comes near it on a busy machine.
	p := newTestPool(t, func(o *Options) { o.MinWorkers, o.MaxWorkers = 1, 1 })
	code := `module.exports = async (req) => {
		switch (req.args.do) {
		case 'loop': for (;;) {}
		case 'recurse': { const f = () => f(); f(); break; }
		case 'never': await new Promise(() => {}); break;
		case 'pending': req.svc.tokenize({}); return { raw: 'left a call pending' };
		case 'throw': throw new Error('thrown');
		case 'lock': Object.defineProperty(globalThis, 'locked', { value: 1, configurable: false }); break;
		case 'proto': Object.setPrototypeOf(globalThis, { inherited: 1 }); break;
		case 'seal': Object.preventExtensions(globalThis); break;
		case 'symbols': for (let i = 0; i < 10001; i++) Symbol.for('k' + i); break;
		}
		return { raw: [typeof locked, typeof inherited, Object.isExtensible(globalThis)] };
	};`
	svc := &recordingSvc{}
	run := func(do string) (json.RawMessage, bool, error) {
		raw, _ := json.Marshal(map[string]string{"do": do})
		before := p.Stats().WarmRuns
		res, err := p.Run(context.Background(), Job{Kind: JobReactor, Code: code, Args: raw, Realm: scopeA, Svc: svc})
		warm := p.Stats().WarmRuns > before
		if err != nil {
			return nil, warm, err
		}
		return res.Raw, warm, nil
	}
	const pristine = `["undefined","undefined",true]`
	tests := []struct {
		do      string
		kind    string // of the failing run
		discard bool
	}{
		{"loop", KindTimeout, true},
		{"recurse", KindRuntime, true},
		{"never", KindInvalidResult, true},
		{"pending", "", true},
		{"lock", "", true},
		{"proto", "", true},
		{"seal", "", true},
		{"symbols", "", true},
		{"throw", KindRuntime, false},
		{"", "", false},
	}
	for _, tc := range tests {
		t.Run("do="+tc.do, func(t *testing.T) {
			// Warm the realm up.
			for i := 0; i < 2; i++ {
				if _, _, err := run(""); err != nil {
					t.Fatal(err)
				}
			}
			_, warm, err := run(tc.do)
			if kindOf(err) != tc.kind {
				t.Fatalf("err = %v, want kind %q", err, tc.kind)
			}
			if !warm {
				t.Fatal("the failing run did not run in the warm realm")
			}
			raw, warm, err := run("")
			if err != nil {
				t.Fatalf("the next run failed: %v", err)
			}
			// the realm, not the worker, is what a failure costs
			if s := p.Stats(); s.Started != 1 {
				t.Errorf("the worker was replaced: %+v", s)
			}
			if warm == tc.discard {
				t.Errorf("the next run reused the realm: %v, want %v", warm, !tc.discard)
			}
			if mustJSON(t, raw) != pristine {
				t.Errorf("the next run saw %s, want %s", raw, pristine)
			}
		})
	}
	if s := p.Stats(); s.Started != 1 {
		t.Errorf("a worker was lost: %+v", s)
	}
}

// TestRealmCancelledRunIsDiscarded: a run stopped by its context does not
// leave an interrupt or its realm to the next run.
func TestRealmCancelledRunIsDiscarded(t *testing.T) {
	p := newTestPool(t, func(o *Options) { o.MinWorkers, o.MaxWorkers = 1, 1 })
	code := `module.exports = (req) => { if (req.args.loop) for (;;) {} return { raw: typeof globalThis.left }; };`
	for i := 0; i < 2; i++ {
		if _, _, err := runScoped(t, p, scopeA, code, map[string]any{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := p.Run(ctx, Job{Kind: JobReactor, Code: code, Args: json.RawMessage(`{"loop":true}`), Realm: scopeA})
	if kindOf(err) != KindTimeout {
		t.Fatalf("err = %v, want timeout", err)
	}
	for i := 0; i < 3; i++ {
		raw, warm, err := runScoped(t, p, scopeA, code, map[string]any{})
		if err != nil {
			t.Fatalf("run %d after the cancel: %v", i, err)
		}
		if i == 0 && warm {
			t.Error("the cancelled run's realm was reused")
		}
		if string(raw) != `"undefined"` {
			t.Errorf("run %d: %s", i, raw)
		}
	}
}

// TestRealmAffinity: at steady state, jobs of a few scopes on several
// workers run in warm realms: the pool sends a job to a worker that has
// its realm.
func TestRealmAffinity(t *testing.T) {
	p := newTestPool(t, func(o *Options) { o.MinWorkers, o.MaxWorkers = 3, 3 })
	scopes := []RealmScope{scopeA, scopeA2, scopeB, scopeAnon}
	code := `module.exports = (req) => ({ raw: req.args.i })`
	for _, s := range scopes { // one cold run each
		if _, _, err := runScoped(t, p, s, code, map[string]any{"i": 0}); err != nil {
			t.Fatal(err)
		}
	}
	before := p.Stats()
	const rounds = 25
	for i := 0; i < rounds; i++ {
		for _, s := range scopes {
			if _, _, err := runScoped(t, p, s, code, map[string]any{"i": i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	after := p.Stats()
	runs, warm := after.Runs-before.Runs, after.WarmRuns-before.WarmRuns
	if runs != rounds*uint64(len(scopes)) || warm != runs {
		t.Errorf("%d of %d sequential runs were warm, want all: %+v", warm, runs, after)
	}
}

// recordingSvc answers every call with {} after a while, long enough for
// a run that does not wait for it to end first.
type recordingSvc struct{}

func (*recordingSvc) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	select {
	case <-time.After(50 * time.Millisecond):
	case <-ctx.Done():
	}
	return json.RawMessage(`{}`), nil
}

// TestDeepRealmIsFrozen: in a realm set up for reuse, every object that
// outlives a run — everything reachable from the global object through
// properties, prototypes and what getters return, the tenant's require
// function and req.svc — is frozen, so no run can leave anything in it
// for the next. Only the global object itself stays extensible (reset
// deletes what a run adds to it, and its bindings are locked).
func TestDeepRealmIsFrozen(t *testing.T) {
	t.Run("set up deep", func(t *testing.T) { testDeepRealmIsFrozen(t, false) })
	t.Run("deepened", func(t *testing.T) { testDeepRealmIsFrozen(t, true) })
}

// testDeepRealmIsFrozen checks a realm set up deep, or set up for one run
// and deepened (what a worker does to a spare that a job with a scope
// finds).
func testDeepRealmIsFrozen(t *testing.T, deepened bool) {
	rt, err := newJobRuntime(&runtimeConfig{maxCallStackSize: 1024, maxLogLines: 10, maxSvcCalls: 10}, 1,
		func(*frame) error { return nil }, newModuleFileCache(4), !deepened)
	if err != nil {
		t.Fatal(err)
	}
	if deepened {
		if err := rt.deepen(); err != nil {
			t.Fatal(err)
		}
	}
	rt.startRun(1)
	prog, cerr := compileCode("t.js", `module.exports = (req) => ({ raw: [typeof require, typeof req.svc] })`, nil)
	if cerr != nil {
		t.Fatal(cerr)
	}
	stop := make(chan struct{})
	sig := jobSignals{stop: stop, gone: stop, reason: func() string { return "" }}
	if o := rt.run(prog, &jobFrame{Kind: JobReactor, Svc: true}, sig); o.err != nil || string(o.out) != `{"raw":["function","object"]}` {
		t.Fatalf("run: %s %+v", o.out, o.err)
	}
	req, err := rt.helpers.makeReq(goja.Undefined(), rt.vm.NewObject(), rt.vm.NewObject(), rt.vm.ToValue(true))
	if err != nil {
		t.Fatal(err)
	}
	walkV, err := rt.vm.RunString(`(function (roots) {
		const seen = new Set(), unfrozen = [], queue = [];
		for (const k of Object.keys(roots)) queue.push([k, roots[k]]);
		for (let qi = 0; qi < queue.length; qi++) {
			const [path, o] = queue[qi];
			if (o === null || (typeof o !== 'object' && typeof o !== 'function') || seen.has(o)) continue;
			seen.add(o);
			if (o !== globalThis && !Object.isFrozen(o)) unfrozen.push(path);
			queue.push([path + '.__proto__', Object.getPrototypeOf(o)]);
			for (const k of Reflect.ownKeys(o)) {
				const d = Object.getOwnPropertyDescriptor(o, k);
				const name = path + '.' + String(k);
				if ('value' in d) { queue.push([name, d.value]); continue; }
				queue.push([name + '(get)', d.get], [name + '(set)', d.set]);
				if (d.get) { try { queue.push([name + '(value)', Reflect.apply(d.get, o, [])]); } catch (e) {} }
			}
		}
		return { count: seen.size, unfrozen: unfrozen };
	})`)
	if err != nil {
		t.Fatal(err)
	}
	walk, _ := goja.AssertFunction(walkV)
	roots := rt.vm.NewObject()
	_ = roots.Set("globalThis", rt.vm.GlobalObject())
	_ = roots.Set("require", rt.tenantRequire)
	_ = roots.Set("svc", req.ToObject(rt.vm).Get("svc"))
	out, err := walk(goja.Undefined(), roots)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Count    int      `json:"count"`
		Unfrozen []string `json:"unfrozen"`
	}
	b, _ := json.Marshal(out.Export())
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Unfrozen) > 0 {
		t.Errorf("%d of %d objects are not frozen: %v", len(got.Unfrozen), got.Count, got.Unfrozen)
	}
	t.Logf("walked %d objects", got.Count)
}

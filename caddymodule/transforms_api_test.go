package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/tokenvault/tokenvault/internal/testjson"
	"github.com/tokenvault/tokenvault/transforms"
	"github.com/tokenvault/tokenvault/vaultstore"
)

// TestProxyTransforms: a request transform adds a header and rewrites the
// body, a response transform masks a field, through /proxy against a
// destination on 127.0.0.1.
func TestProxyTransforms(t *testing.T) {
	e, cardID := newProxyEnv(t, nil)
	dest := newDestination(t)
	r := e.do(tvRoleMgmt, http.MethodPost, "/proxies", map[string]any{
		"name": "t", "destination_url": dest.srv.URL,
		"configuration": map[string]any{"merchant": "m-42"},
		"request_transform": map[string]any{"code": `module.exports = async function (req) {
			const { body, headers } = req.args;
			return {
				body: { wrapped: body, merchant: req.configuration.merchant, path: req.args.path, query: req.args.query },
				headers: { ...headers, 'X-Added': 'yes' },
			};
		}`},
		"response_transform": map[string]any{"code": `module.exports = function (req) {
			return { body: { charged: req.args.body.charged, masked: 'xxxx' }, headers: { 'Content-Type': 'application/json', 'X-Masked': '1' } };
		}`},
	})
	tvWantStatus(t, r, http.StatusCreated, "create proxy with transforms")
	key := testjson.Str(r.body, "key")

	r = e.do("user", http.MethodPost, "/proxy/pay?x=1", `{"number":"{{ `+cardID+` | json: '$.number' }}"}`,
		"SVC-PROXY-KEY", key, "Content-Type", "application/json")
	tvWantStatus(t, r, http.StatusCreated, "invoke")
	got := dest.received()
	if len(got) != 1 {
		t.Fatalf("destination got %d requests", len(got))
	}
	var sent map[string]any
	if err := json.Unmarshal([]byte(got[0].body), &sent); err != nil {
		t.Fatalf("destination body %q: %v", got[0].body, err)
	}
	if testjson.Str(sent, "wrapped", "number") != tvCard || sent["merchant"] != "m-42" || sent["path"] != "/pay" || sent["query"] != "?x=1" {
		t.Errorf("destination body %s", got[0].body)
	}
	if got[0].header.Get("X-Added") != "yes" || got[0].header.Get("Svc-Api-Key") != "" || got[0].header.Get("Svc-Proxy-Key") != "" {
		t.Errorf("destination headers %v", got[0].header)
	}
	if testjson.Str(r.body, "masked") != "xxxx" || testjson.Field(r.body, "charged") != true || r.header.Get("X-Masked") != "1" ||
		r.header.Get("Svc-Proxy-Destination-Status") != "201" {
		t.Errorf("caller got %s %v", r.raw, r.header)
	}
}

// TestProxyTransformSeesBody: a JSON body reaches the request transform
// parsed, its members in the order they came and its numbers as written;
// any other body, or JSON the vault refuses, as text.
func TestProxyTransformSeesBody(t *testing.T) {
	e, _ := newProxyEnv(t, nil)
	dest := newDestination(t)
	r := e.do(tvRoleMgmt, http.MethodPost, "/proxies", map[string]any{
		"name": "echo shape", "destination_url": dest.srv.URL,
		"request_transform": map[string]any{"code": `module.exports = (req) => {
			const b = req.args.body;
			const shape = typeof b === 'string' ? { text: b } :
				{ keys: Object.keys(b), inner: Object.keys(b.a || {}), n: String(b.n) };
			return { body: shape, headers: { 'Content-Type': 'application/json' } };
		}`},
	})
	tvWantStatus(t, r, http.StatusCreated, "create proxy")
	key := testjson.Str(r.body, "key")
	for _, tc := range []struct {
		name, contentType, body, want string
	}{
		{"JSON keeps member order", "application/json", "{\"z\": 1, \"a\": {\"y\": true, \"b\": null},\n \"n\": 1.50}",
			`{"keys":["z","a","n"],"inner":["y","b"],"n":"1.5"}`},
		{"JSON with escapes", "application/json; charset=utf-8", `{"a": {"<&>": "\u00e9"}, "n": 2}`, `{"keys":["a","n"],"inner":["<&>"],"n":"2"}`},
		{"text", "text/plain", `{"n": 1}`, `{"text":"{\"n\": 1}"}`},
		{"invalid JSON is text", "application/json", `{"n": 1,}`, `{"text":"{\"n\": 1,}"}`},
		{"duplicate members are text", "application/json", `{"n": 1, "n": 2}`, `{"text":"{\"n\": 1, \"n\": 2}"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(dest.received())
			r := e.do("user", http.MethodPost, "/proxy", tc.body, "SVC-PROXY-KEY", key, "Content-Type", tc.contentType)
			tvWantStatus(t, r, http.StatusCreated, "invoke")
			got := dest.received()
			if len(got) != before+1 {
				t.Fatalf("the destination got %d requests, want 1", len(got)-before)
			}
			if body := got[len(got)-1].body; body != tc.want {
				t.Errorf("the transform saw %s, want %s", body, tc.want)
			}
		})
	}
}

// TestProxyTransformRunsStartClean: runs of one proxy's transform share a
// warm realm, yet a global or module-level value one run leaves behind is
// never seen by the next, whoever calls.
func TestProxyTransformRunsStartClean(t *testing.T) {
	e, cardID := newProxyEnv(t, nil)
	dest := newDestination(t)
	r := e.do(tvRoleMgmt, http.MethodPost, "/proxies", map[string]any{
		"name": "clean", "destination_url": dest.srv.URL,
		"request_transform": map[string]any{"code": `let calls = 0;
		module.exports = async function (req) {
			calls++;
			const left = { global: globalThis.leftover === undefined ? null : globalThis.leftover, calls };
			globalThis.leftover = req.args.body.number;
			return { body: left, headers: req.args.headers };
		}`},
	})
	tvWantStatus(t, r, http.StatusCreated, "create proxy")
	key := testjson.Str(r.body, "key")
	e.keys["other caller"] = e.createApp(tvRoleMgmt, "other caller", []map[string]any{{
		"priority": 1, "container": "/", "transform": "reveal", "permissions": []string{"token:use"},
	}})
	for i, role := range []string{"user", "user", "user", "other caller", "other caller"} {
		body := `{"number":"{{ ` + cardID + ` | json: '$.number' }}"}`
		r = e.do(role, http.MethodPost, "/proxy", body, "SVC-PROXY-KEY", key, "Content-Type", "application/json")
		tvWantStatus(t, r, http.StatusCreated, fmt.Sprintf("call %d", i))
	}
	got := dest.received()
	if len(got) != 5 {
		t.Fatalf("the destination got %d requests, want 5", len(got))
	}
	for i, got := range got {
		if got.body != `{"global":null,"calls":1}` {
			t.Errorf("run %d saw what an earlier run left: %s", i, got.body)
		}
	}
}

// TestInboundProxyTokenizes: a proxy without require_auth whose request
// transform tokenizes the card it receives; the destination gets only the
// token id, which a private key reads back.
func TestInboundProxyTokenizes(t *testing.T) {
	e, _ := newProxyEnv(t, nil)
	dest := newDestination(t)
	r := e.do(tvRoleMgmt, http.MethodPost, "/applications", map[string]any{"name": "inbound", "type": "private",
		"permissions": []string{"token:create"}})
	tvWantStatus(t, r, http.StatusCreated, "inbound application")
	r = e.do(tvRoleMgmt, http.MethodPost, "/proxies", map[string]any{
		"name": "inbound", "destination_url": dest.srv.URL, "require_auth": false,
		"application": map[string]any{"id": testjson.Str(r.body, "id")},
		"request_transform": map[string]any{"code": `module.exports = async function (req) {
			const token = await req.svc.tokenize({ type: 'card', data: req.args.body.card });
			return { body: { card_token: token.id }, headers: req.args.headers };
		}`},
	})
	tvWantStatus(t, r, http.StatusCreated, "inbound proxy")
	key := testjson.Str(r.body, "key")
	r = e.do("", http.MethodPost, "/proxy", map[string]any{"card": map[string]any{"number": tvCard, "expiration_month": 12, "expiration_year": 2030}},
		"SVC-PROXY-KEY", key)
	tvWantStatus(t, r, http.StatusCreated, "inbound call")
	got := dest.received()
	if len(got) != 1 || strings.Contains(got[0].body, tvCard) {
		t.Fatalf("destination got %+v", got)
	}
	var sent map[string]string
	if err := json.Unmarshal([]byte(got[0].body), &sent); err != nil || sent["card_token"] == "" {
		t.Fatalf("destination body %q: %v", got[0].body, err)
	}
	r = e.do("user", http.MethodGet, "/tokens/"+sent["card_token"], nil)
	if r.status != http.StatusOK || testjson.Str(r.body, "data", "number") != tvCard {
		t.Errorf("reading the token back: %s", r)
	}
}

// TestTransformCodeValidation: code the sandbox refuses is a 400 naming
// the field, at create and update.
func TestTransformCodeValidation(t *testing.T) {
	e, _ := newProxyEnv(t, nil)
	for name, code := range map[string]string{
		"syntax":       `module.exports = function (req {`,
		"module":       `const fs = require('fs'); module.exports = () => ({})`,
		"backtracking": `module.exports = () => ({ body: /^(a+)+\1$/.test('aaaa'), headers: {} })`,
		"too long":     `module.exports = () => ({}); //` + strings.Repeat("x", 50_001),
	} {
		r := e.do(tvRoleMgmt, http.MethodPost, "/proxies", map[string]any{"name": "bad", "destination_url": "https://api.example.com",
			"request_transform": map[string]any{"code": code}})
		tvWantProblem(t, r, http.StatusBadRequest, name, "request_transform.code")
	}
}

// TestReactors: CRUD, react with a detokenized argument and configuration,
// the error types' statuses, and retired formulas.
func TestReactors(t *testing.T) {
	e, cardID := newProxyEnv(t, nil)
	r := e.do(tvRoleMgmt, http.MethodPost, "/applications", map[string]any{"name": "invoker", "type": "private",
		"permissions": []string{"token:use", "token:create", "reactor:invoke"}})
	tvWantStatus(t, r, http.StatusCreated, "invoker")
	e.keys["invoker"] = testjson.Str(r.body, "key")
	invokerApp := testjson.Str(r.body, "id")

	r = e.do(tvRoleMgmt, http.MethodPost, "/reactors", map[string]any{
		"name": "charge", "configuration": map[string]any{"fee": "3"},
		"application": map[string]any{"id": invokerApp},
		"code": `const { BadRequestError, AuthenticationError, CustomHttpResponseError } = require('@basis-theory/basis-theory-reactor-formulas-sdk-js');
		module.exports = async function (req) {
			const { args, configuration } = req;
			if (args.mode === 'bad') throw new BadRequestError('bad input');
			if (args.mode === 'auth') throw new AuthenticationError('no');
			if (args.mode === 'custom') throw new CustomHttpResponseError({ status: 418, headers: { 'X-Teapot': '1' }, body: { tea: true } });
			return { raw: { last4: args.card.number.slice(-4), fee: configuration.fee }, tokenize: { note: { type: 'token', data: 'from reactor' } } };
		}`,
	})
	tvWantStatus(t, r, http.StatusCreated, "create reactor")
	id := testjson.Str(r.body, "id")
	if testjson.Str(r.body, "application", "id") != invokerApp {
		t.Errorf("reactor %s", r.raw)
	}
	tvWantStatus(t, e.do(tvRoleMgmt, http.MethodGet, "/reactors/"+id, nil), http.StatusOK, "get reactor")
	r = e.do(tvRoleMgmt, http.MethodGet, "/reactors?name=char*", nil)
	if data, _ := testjson.Field(r.body, "data").([]any); len(data) != 1 {
		t.Errorf("list reactors: %s", r.raw)
	}

	r = e.do("invoker", http.MethodPost, "/reactors/"+id+"/react", map[string]any{"args": map[string]any{
		"card": "{{ token: " + cardID + " | json: '$.data' }}"}})
	tvWantStatus(t, r, http.StatusOK, "react")
	if testjson.Str(r.body, "raw", "last4") != "4242" || testjson.Str(r.body, "raw", "fee") != "3" || testjson.Str(r.body, "tokens", "note", "id") == "" {
		t.Errorf("react answer %s", r.raw)
	}
	for _, m := range []struct {
		mode string
		want int
	}{{"bad", 400}, {"auth", 401}, {"custom", 418}} { // custom last: its headers are checked below
		r = e.do("invoker", http.MethodPost, "/reactors/"+id+"/react", map[string]any{"args": map[string]any{"mode": m.mode}})
		if r.status != m.want {
			t.Errorf("mode %s: %d %s, want %d", m.mode, r.status, r.raw, m.want)
		}
	}
	if r.header.Get("X-Teapot") != "1" || testjson.Field(r.body, "tea") != true {
		t.Errorf("custom response: %v %s", r.header, r.raw)
	}
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/reactors/"+id+"/react", map[string]any{"args": map[string]any{}}), http.StatusForbidden, "no reactor:invoke")
	tvWantProblem(t, e.do(tvRoleMgmt, http.MethodPost, "/reactors", map[string]any{"name": "f", "code": "module.exports = () => ({raw: 1})",
		"formula": map[string]any{"id": "x"}}), http.StatusBadRequest, "formula", "formula")
	tvWantStatus(t, e.do(tvRoleMgmt, http.MethodPatch, "/reactors/"+id, map[string]any{"name": "renamed"}), http.StatusNoContent, "patch reactor")
	tvWantStatus(t, e.do(tvRoleMgmt, http.MethodDelete, "/reactors/"+id, nil), http.StatusNoContent, "delete reactor")
	tvWantProblem(t, e.do(tvRoleMgmt, http.MethodGet, "/reactors/"+id, nil), http.StatusNotFound, "deleted reactor")

	// every reactor operation left its audit record, the detokenization
	// of its arguments with the token it used
	records, _, err := e.store.ListAudit(context.Background(), e.tenantID, vaultstore.AuditFilter{EntityType: "reactor", EntityID: id}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]int{}
	for _, rec := range records {
		ops[rec.Operation]++
		if rec.Operation == "detokenize" && (len(rec.TokenIDs) != 1 || rec.TokenIDs[0] != cardID) {
			t.Errorf("detokenize record %+v", rec)
		}
	}
	for _, op := range []string{"create", "update", "delete", "detokenize"} {
		if ops[op] == 0 {
			t.Errorf("no reactor %s record: %v", op, ops)
		}
	}
}

// BenchmarkProxyTransform measures a proxied POST with one detokenized
// token through the handler, without and with a trivial request
// transform (one worker run per request): one request at a time, and 64
// at once (the throughput target of a proxy with a trivial transform is
// at least 0.6x that of the same proxy without one).
func BenchmarkProxyTransform(b *testing.B) {
	for _, tc := range []struct {
		name string
		code string
	}{
		{"none", ""},
		{"trivial", `module.exports = async (req) => ({ body: req.args.body, headers: req.args.headers })`},
	} {
		for _, conc := range []int{1, 64} {
			name := tc.name
			if conc > 1 {
				name = fmt.Sprintf("%s-c%d", tc.name, conc)
			}
			b.Run(name, func(b *testing.B) {
				e, cardID := newProxyEnv(b, nil)
				dest := newDestination(b)
				body := map[string]any{"name": "bench", "destination_url": dest.srv.URL}
				if tc.code != "" {
					body["request_transform"] = map[string]any{"code": tc.code}
				}
				r := e.do(tvRoleMgmt, http.MethodPost, "/proxies", body)
				key := testjson.Str(r.body, "key")
				payload := `{"number":"{{ ` + cardID + ` | json: '$.number' }}","amount":1000}`
				proxy := func() error {
					if r := e.do("user", http.MethodPost, "/proxy", payload, "SVC-PROXY-KEY", key, "Content-Type", "application/json"); r.status != http.StatusCreated {
						return fmt.Errorf("%d %s", r.status, r.raw)
					}
					return nil
				}
				b.ReportAllocs()
				if conc == 1 {
					b.ResetTimer()
					for b.Loop() {
						if err := proxy(); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				// Warm up: every worker started, with its realm set up.
				var warm sync.WaitGroup
				for i := 0; i < conc; i++ {
					warm.Add(1)
					go func() {
						defer warm.Done()
						_ = proxy()
					}()
				}
				warm.Wait()
				var failed atomic.Pointer[error]
				b.SetParallelism(max(conc/runtime.GOMAXPROCS(0), 1))
				b.ResetTimer()
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := proxy(); err != nil {
							failed.CompareAndSwap(nil, &err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
				if err := failed.Load(); err != nil {
					b.Fatal(*err)
				}
			})
		}
	}
}

// TestTransformsSettings: the transforms block of the vault app, in the
// Caddyfile, and the checks on the per-tenant share of the workers.
func TestTransformsSettings(t *testing.T) {
	tests := []struct {
		name      string
		caddyfile string
		want      TransformsConfig
		parseErr  string // a fragment of the Caddyfile error
		checkErr  string // a fragment of Validate's error
	}{
		{
			name:      "every option",
			caddyfile: "transforms {\n min_workers 2\n max_workers 6\n max_workers_per_tenant 3\n timeout 10s\n queue_timeout 2s\n}",
			want:      TransformsConfig{MinWorkers: 2, MaxWorkers: 6, MaxWorkersPerTenant: 3, Timeout: caddy.Duration(10 * time.Second), QueueTimeout: caddy.Duration(2 * time.Second)},
		},
		{
			name:      "the share defaults to half the pool",
			caddyfile: "transforms {\n max_workers 8\n}",
			want:      TransformsConfig{MaxWorkers: 8},
		},
		{
			name:      "a share of the whole pool",
			caddyfile: "transforms {\n max_workers 3\n max_workers_per_tenant 3\n}",
			want:      TransformsConfig{MaxWorkers: 3, MaxWorkersPerTenant: 3},
		},
		{
			name:      "a share larger than the pool",
			caddyfile: "transforms {\n max_workers 4\n max_workers_per_tenant 5\n}",
			want:      TransformsConfig{MaxWorkers: 4, MaxWorkersPerTenant: 5},
			checkErr:  "max_workers_per_tenant (5) must be from 1 to max_workers (4)",
		},
		{
			name:      "a share larger than the default pool",
			caddyfile: "transforms {\n max_workers_per_tenant 5\n}",
			want:      TransformsConfig{MaxWorkersPerTenant: 5},
			checkErr:  "max_workers (4)",
		},
		{
			name:      "a share of no worker",
			caddyfile: "transforms {\n max_workers_per_tenant 0\n}",
			parseErr:  "max_workers_per_tenant: must be at least 1",
		},
		{
			name:      "a share that is not a number",
			caddyfile: "transforms {\n max_workers_per_tenant half\n}",
			parseErr:  "max_workers_per_tenant",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := caddyfile.NewTestDispenser(tc.caddyfile)
			d.Next()
			a := &App{}
			err := a.unmarshalTransforms(d)
			if tc.parseErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.parseErr) {
					t.Fatalf("parse: %v, want an error containing %q", err, tc.parseErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if got, _ := json.Marshal(a.Transforms); string(got) != string(must(json.Marshal(tc.want))) {
				t.Errorf("parsed %s, want %s", got, must(json.Marshal(tc.want)))
			}
			err = a.Transforms.Validate()
			if tc.checkErr == "" && err != nil || tc.checkErr != "" && (err == nil || !strings.Contains(err.Error(), tc.checkErr)) {
				t.Errorf("Validate: %v, want %q", err, tc.checkErr)
			}
		})
	}
	for _, cfg := range []TransformsConfig{{MaxWorkersPerTenant: -1}, {MaxWorkers: -1}} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("Validate accepted %+v", cfg)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestReactorTenantsShareWorkersFairly (R-JS-8, through the API): a
// tenant invokes reactors that loop forever, more of them than the pool
// has workers. It holds its share of the workers (one of the test pool's
// two); another tenant's reactors keep answering 200 while the loops go
// on, and the looping tenant's invocations beyond its share wait on it
// alone and get 503 after the queue timeout.
func TestReactorTenantsShareWorkersFairly(t *testing.T) {
	hostile, _ := newProxyEnv(t, nil)
	good := setupTokenEnv(t, hostile.h, hostile.store, false) // a second tenant on the same API and pool
	pool := hostile.h.app.workers
	if s := pool.Stats(); s.Busy != 0 || s.Waiting != 0 {
		t.Fatalf("the shared pool is in use: %+v", s)
	}
	const loops, share = 3, 1 // the test pool: 2 workers, a share of 1

	reactor := func(e *tokenEnv, code string) (id, key string) {
		r := e.do(tvRoleMgmt, http.MethodPost, "/applications", map[string]any{"name": "invoker", "type": "private",
			"permissions": []string{"reactor:invoke"}})
		tvWantStatus(t, r, http.StatusCreated, "invoker")
		key = testjson.Str(r.body, "key")
		r = e.do(tvRoleMgmt, http.MethodPost, "/reactors", map[string]any{"name": "r", "code": code})
		tvWantStatus(t, r, http.StatusCreated, "create reactor")
		return testjson.Str(r.body, "id"), key
	}
	hostileID, hostileKey := reactor(hostile, `module.exports = () => { for (;;) {} }`)
	goodID, goodKey := reactor(good, `module.exports = (req) => ({ raw: req.args.n + 1 })`)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	statuses := make(chan int, loops)
	for i := 0; i < loops; i++ {
		go func() {
			req := httptest.NewRequest(http.MethodPost, "/reactors/"+hostileID+"/react", strings.NewReader(`{"args":{}}`)).WithContext(ctx)
			req.Header.Set("SVC-API-KEY", hostileKey)
			req.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			_ = hostile.h.ServeHTTP(w, req, nil)
			statuses <- w.Code
		}()
	}
	waitFor := func(what string, cond func(transforms.Stats) bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			s := pool.Stats()
			if cond(s) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: %+v", what, s)
			}
		}
	}
	waitFor("the loops to fill their share", func(s transforms.Stats) bool { return s.Busy == share && s.Waiting+s.Queued == loops-share })

	for i := 0; i < 20; i++ {
		r := good.do("", http.MethodPost, "/reactors/"+goodID+"/react", map[string]any{"args": map[string]any{"n": i}}, "SVC-API-KEY", goodKey)
		tvWantStatus(t, r, http.StatusOK, fmt.Sprintf("the other tenant's reactor, call %d", i))
		if got := fmt.Sprint(testjson.Field(r.body, "raw")); got != fmt.Sprint(i+1) {
			t.Errorf("call %d returned %s", i, r.raw)
		}
	}
	// The loop that got a worker is still running; the invocations beyond
	// the share give up with 503, never having had a worker.
	for i := 0; i < loops-share; i++ {
		if code := <-statuses; code != http.StatusServiceUnavailable {
			t.Errorf("a looping invocation beyond the share: %d, want 503", code)
		}
	}
	if s := pool.Stats(); s.Busy != share {
		t.Errorf("after the waiting invocations gave up: %+v, want the loop still running", s)
	}
	cancel()
	if code := <-statuses; code == http.StatusOK || code == http.StatusServiceUnavailable {
		t.Errorf("the cancelled loop: %d", code)
	}
	waitFor("the worker to come back", func(s transforms.Stats) bool { return s.Busy == 0 })
}

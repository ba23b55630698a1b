package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	key := tvStr(r.body, "key")

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
	if tvStr(sent, "wrapped", "number") != tvCard || sent["merchant"] != "m-42" || sent["path"] != "/pay" || sent["query"] != "?x=1" {
		t.Errorf("destination body %s", got[0].body)
	}
	if got[0].header.Get("X-Added") != "yes" || got[0].header.Get("Svc-Api-Key") != "" || got[0].header.Get("Svc-Proxy-Key") != "" {
		t.Errorf("destination headers %v", got[0].header)
	}
	if tvStr(r.body, "masked") != "xxxx" || tvField(r.body, "charged") != true || r.header.Get("X-Masked") != "1" ||
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
	key := tvStr(r.body, "key")
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
	key := tvStr(r.body, "key")
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
		"application": map[string]any{"id": tvStr(r.body, "id")},
		"request_transform": map[string]any{"code": `module.exports = async function (req) {
			const token = await req.svc.tokenize({ type: 'card', data: req.args.body.card });
			return { body: { card_token: token.id }, headers: req.args.headers };
		}`},
	})
	tvWantStatus(t, r, http.StatusCreated, "inbound proxy")
	key := tvStr(r.body, "key")
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
	if r.status != http.StatusOK || tvStr(r.body, "data", "number") != tvCard {
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
	e.keys["invoker"] = tvStr(r.body, "key")
	invokerApp := tvStr(r.body, "id")

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
	id := tvStr(r.body, "id")
	if tvStr(r.body, "application", "id") != invokerApp {
		t.Errorf("reactor %s", r.raw)
	}
	tvWantStatus(t, e.do(tvRoleMgmt, http.MethodGet, "/reactors/"+id, nil), http.StatusOK, "get reactor")
	r = e.do(tvRoleMgmt, http.MethodGet, "/reactors?name=char*", nil)
	if data, _ := tvField(r.body, "data").([]any); len(data) != 1 {
		t.Errorf("list reactors: %s", r.raw)
	}

	r = e.do("invoker", http.MethodPost, "/reactors/"+id+"/react", map[string]any{"args": map[string]any{
		"card": "{{ token: " + cardID + " | json: '$.data' }}"}})
	tvWantStatus(t, r, http.StatusOK, "react")
	if tvStr(r.body, "raw", "last4") != "4242" || tvStr(r.body, "raw", "fee") != "3" || tvStr(r.body, "tokens", "note", "id") == "" {
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
	if r.header.Get("X-Teapot") != "1" || tvField(r.body, "tea") != true {
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
				key := tvStr(r.body, "key")
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

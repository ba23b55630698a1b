package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/internal/testjson"
	"github.com/tokenvault/tokenvault/transforms"
	"github.com/tokenvault/tokenvault/vaultstore"
)

const asyncReactorCode = `const { BadRequestError, CustomHttpResponseError } = require('@basis-theory/basis-theory-reactor-formulas-sdk-js');
module.exports = async function (req) {
	const { args } = req;
	if (args.mode === 'bad') throw new BadRequestError('bad input');
	if (args.mode === 'custom') throw new CustomHttpResponseError({ status: 418, body: { tea: true } });
	return { raw: { last4: args.card.number.slice(-4) }, tokenize: { note: { type: 'token', data: 'from async reactor' } } };
}`

// waitReaction polls a reaction's result until it has run.
func waitReaction(t *testing.T, e *tokenEnv, role, reactorID, requestID string) tvResp {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := e.do(role, http.MethodGet, "/reactors/"+reactorID+"/results/"+requestID, nil)
		tvWantStatus(t, r, http.StatusOK, "result")
		if s := testjson.Str(r.body, "status"); s == vaultstore.AsyncCompleted || s == vaultstore.AsyncFailed {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("reaction %s did not run within 60 s: %s", requestID, r.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestReactAsyncAPI(t *testing.T) {
	e, cardID := newProxyEnv(t, nil)
	r := e.do(tvRoleMgmt, http.MethodPost, "/applications", map[string]any{"name": "invoker", "type": "private",
		"permissions": []string{"token:use", "token:create", "reactor:invoke"}})
	tvWantStatus(t, r, http.StatusCreated, "invoker")
	e.keys["invoker"] = testjson.Str(r.body, "key")
	invokerApp := testjson.Str(r.body, "id")
	r = e.do(tvRoleMgmt, http.MethodPost, "/reactors", map[string]any{"name": "charge", "application": map[string]any{"id": invokerApp}, "code": asyncReactorCode})
	tvWantStatus(t, r, http.StatusCreated, "create reactor")
	id := testjson.Str(r.body, "id")

	// queued, bounded per tenant: nothing runs yet
	app := e.h.app
	app.AsyncReactions = &AsyncReactionsConfig{MaxQueuedPerTenant: 4}
	enqueue := func(args map[string]any) string {
		t.Helper()
		r := e.do("invoker", http.MethodPost, "/reactors/"+id+"/react-async", map[string]any{"args": args})
		tvWantStatus(t, r, http.StatusAccepted, "react-async")
		rid := testjson.Str(r.body, "asyncReactorRequestId")
		if rid == "" {
			t.Fatalf("react-async answer without asyncReactorRequestId: %s", r.raw)
		}
		return rid
	}
	ok := enqueue(map[string]any{"card": "{{ token: " + cardID + " | json: '$.data' }}"})
	bad := enqueue(map[string]any{"mode": "bad"})
	custom := enqueue(map[string]any{"mode": "custom"})
	enqueue(map[string]any{"mode": "bad"})
	r = e.do("invoker", http.MethodPost, "/reactors/"+id+"/react-async", map[string]any{"args": map[string]any{}})
	tvWantProblem(t, r, http.StatusTooManyRequests, "react-async beyond the queue's bound")
	if r.header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After")
	}
	r = e.do("invoker", http.MethodGet, "/reactors/"+id+"/results/"+ok, nil)
	tvWantStatus(t, r, http.StatusOK, "pending result")
	if testjson.Str(r.body, "status") != vaultstore.AsyncPending || testjson.Field(r.body, "raw") != nil {
		t.Fatalf("queued reaction: %s", r.raw)
	}

	// refusals
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/reactors/"+id+"/react-async", map[string]any{"args": map[string]any{}}), http.StatusForbidden, "react-async without reactor:invoke")
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodGet, "/reactors/"+id+"/results/"+ok, nil), http.StatusForbidden, "results without reactor:invoke")
	tvWantProblem(t, e.do("invoker", http.MethodPost, "/reactors/00000000-0000-4000-8000-000000000000/react-async", map[string]any{"args": map[string]any{}}), http.StatusNotFound, "unknown reactor")
	tvWantProblem(t, e.do("invoker", http.MethodGet, "/reactors/00000000-0000-4000-8000-000000000000/results/"+ok, nil), http.StatusNotFound, "result under another reactor")
	tvWantProblem(t, e.do("invoker", http.MethodGet, "/reactors/"+id+"/results/00000000-0000-4000-8000-000000000000", nil), http.StatusNotFound, "unknown request")
	tvWantProblem(t, e.do("invoker", http.MethodPost, "/reactors/"+id+"/react-async", map[string]any{"args": map[string]any{"card": "{{ 00000000-0000-4000-8000-000000000000 }}"}}), http.StatusBadRequest, "unknown token in args")
	r = e.do("other-management", http.MethodPost, "/applications", map[string]any{"name": "other-invoker", "type": "private", "permissions": []string{"reactor:invoke"}})
	tvWantStatus(t, r, http.StatusCreated, "other tenant's invoker")
	e.keys["other-invoker"] = testjson.Str(r.body, "key")
	tvWantProblem(t, e.do("other-invoker", http.MethodGet, "/reactors/"+id+"/results/"+ok, nil), http.StatusNotFound, "another tenant's result")
	r = e.do(tvRoleMgmt, http.MethodPost, "/applications", map[string]any{"name": "second invoker", "type": "private", "permissions": []string{"reactor:invoke"}})
	tvWantStatus(t, r, http.StatusCreated, "second invoker of the tenant")
	e.keys["second-invoker"] = testjson.Str(r.body, "key")
	tvWantProblem(t, e.do("second-invoker", http.MethodGet, "/reactors/"+id+"/results/"+ok, nil), http.StatusNotFound, "another application's result")

	// the dispatcher runs them in the workers
	app.logger = zap.NewNop()
	app.startAsyncReactions(e.store, true)
	t.Cleanup(app.stopAsyncReactions)
	r = waitReaction(t, e, "invoker", id, ok)
	if testjson.Str(r.body, "status") != vaultstore.AsyncCompleted || testjson.Str(r.body, "raw", "last4") != "4242" || testjson.Str(r.body, "tokens", "note", "id") == "" || testjson.Str(r.body, "completed_at") == "" {
		t.Fatalf("completed reaction: %s", r.raw)
	}
	r = waitReaction(t, e, "invoker", id, bad)
	if testjson.Str(r.body, "status") != vaultstore.AsyncFailed || fmt.Sprint(testjson.Field(r.body, "error_status")) != "400" || fmt.Sprint(testjson.Field(r.body, "error", "status")) != "400" || testjson.Str(r.body, "error", "detail") == "" {
		t.Fatalf("failed reaction: %s", r.raw)
	}
	r = waitReaction(t, e, "invoker", id, custom)
	if fmt.Sprint(testjson.Field(r.body, "error_status")) != "418" || testjson.Field(r.body, "error", "tea") != true {
		t.Fatalf("custom error: %s", r.raw)
	}
	// a finished reaction frees its place in the queue
	deadline := time.Now().Add(60 * time.Second)
	for {
		r = e.do("invoker", http.MethodPost, "/reactors/"+id+"/react-async", map[string]any{"args": map[string]any{"mode": "bad"}})
		if r.status == http.StatusAccepted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queue stays full: %s", r)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// queued and detokenized as the caller, audited
	records, _, err := e.store.ListAudit(context.Background(), e.tenantID, vaultstore.AuditFilter{EntityType: "reactor", EntityID: id, Operation: "react-async"}, "", 100)
	if err != nil || len(records) < 5 || records[0].ActorID != invokerApp {
		raw, _ := json.Marshal(records)
		t.Fatalf("react-async audit: %v %s", err, raw)
	}
}

func TestAsyncReactionsConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  *AsyncReactionsConfig
		fail bool
	}{
		"none":          {nil, false},
		"set":           {&AsyncReactionsConfig{MaxQueuedPerTenant: 5, ResultTTL: 3600e9, Concurrency: 2}, false},
		"negative":      {&AsyncReactionsConfig{MaxQueuedPerTenant: -1}, true},
		"ttl too short": {&AsyncReactionsConfig{ResultTTL: 1e9}, true},
	} {
		if err := tc.cfg.validate(); (err != nil) != tc.fail {
			t.Errorf("%s: validate() = %v", name, err)
		}
	}
	if (*AsyncReactionsConfig)(nil).limit() != vaultstore.DefaultAsyncQueuePerTenant || (*AsyncReactionsConfig)(nil).concurrency() != defaultAsyncConcurrency {
		t.Error("defaults")
	}
}

// TestAsyncReactionRunsOnceAcrossStop: a reaction under way when its
// configuration stops (a reload, a shutdown) is never run again. Stop
// waits for it to finish and record its outcome before the workers are
// released; and if the workers are closed under a run anyway, the run is
// failed, not put back in the queue, since its code may have called out.
func TestAsyncReactionRunsOnceAcrossStop(t *testing.T) {
	const spin = `module.exports = async function (req) {
	const end = Date.now() + req.args.ms;
	while (Date.now() < end) {}
	return { raw: { spun: req.args.ms } };
}`
	for _, tc := range []struct {
		name string
		stop func(app *App, pool *transforms.Pool)
		// want checks the result read right after stop, and may wait for
		// the outcome with outcome
		want func(t *testing.T, r tvResp, outcome func() tvResp)
	}{
		{"stop waits for the run", func(app *App, _ *transforms.Pool) { app.stopAsyncReactions() }, func(t *testing.T, r tvResp, _ func() tvResp) {
			if testjson.Str(r.body, "status") != vaultstore.AsyncCompleted || fmt.Sprint(testjson.Field(r.body, "raw", "spun")) != "3000" {
				t.Fatalf("after Stop returned: %s, want the run completed", r.raw)
			}
		}},
		{"workers closed under the run", func(_ *App, pool *transforms.Pool) { pool.Close() }, func(t *testing.T, _ tvResp, outcome func() tvResp) {
			r := outcome()
			if testjson.Str(r.body, "status") != vaultstore.AsyncFailed || fmt.Sprint(testjson.Field(r.body, "error_status")) != "503" {
				t.Fatalf("a run cut short by closed workers: %s, want failed with 503", r.raw)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newProxyEnv(t, nil)
			pool, err := transforms.NewPool(transforms.Options{Command: []string{os.Args[0]}, Env: []string{workerEnv + "=1"}, MinWorkers: 1, MaxWorkers: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pool.Close() })
			app := e.h.app
			app.workers, app.logger = pool, zap.NewNop()
			r := e.do(tvRoleMgmt, http.MethodPost, "/applications", map[string]any{"name": "invoker", "type": "private", "permissions": []string{"reactor:invoke"}})
			tvWantStatus(t, r, http.StatusCreated, "invoker")
			e.keys["invoker"] = testjson.Str(r.body, "key")
			r = e.do(tvRoleMgmt, http.MethodPost, "/reactors", map[string]any{"name": "spin", "code": spin})
			tvWantStatus(t, r, http.StatusCreated, "create reactor")
			reactor := testjson.Str(r.body, "id")
			r = e.do("invoker", http.MethodPost, "/reactors/"+reactor+"/react-async", map[string]any{"args": map[string]any{"ms": 3000}})
			tvWantStatus(t, r, http.StatusAccepted, "react-async")
			id := testjson.Str(r.body, "asyncReactorRequestId")

			app.startAsyncReactions(e.store, true)
			t.Cleanup(app.stopAsyncReactions)
			result := func() tvResp {
				r := e.do("invoker", http.MethodGet, "/reactors/"+reactor+"/results/"+id, nil)
				tvWantStatus(t, r, http.StatusOK, "result")
				return r
			}
			outcome := func() tvResp {
				t.Helper()
				for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					r := result()
					switch testjson.Str(r.body, "status") {
					case vaultstore.AsyncCompleted, vaultstore.AsyncFailed:
						return r
					case vaultstore.AsyncPending:
						t.Fatalf("the reaction went back in the queue after it started: %s", r.raw)
					}
					if time.Now().After(deadline) {
						t.Fatalf("no outcome within 60 s: %s", r.raw)
					}
				}
			}
			for deadline := time.Now().Add(60 * time.Second); testjson.Str(result().body, "status") != vaultstore.AsyncRunning; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the reaction did not start within 60 s")
				}
			}
			for deadline := time.Now().Add(60 * time.Second); pool.Stats().Busy == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the run did not reach a worker within 60 s")
				}
			}
			started := testjson.Str(result().body, "started_at")
			tc.stop(app, pool)
			tc.want(t, result(), outcome)
			if got := testjson.Str(result().body, "started_at"); got != started {
				t.Fatalf("started_at moved from %s to %s: the reaction ran again", started, got)
			}
		})
	}
}

package caddymodule

// Adversarial review of asynchronous reactions: what a reactor's failure
// carries into a result, compared with what react answers for it.

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
	"github.com/tokenvault/tokenvault/vaultstore"
)

// attackLeakyReactor throws, in each mode, an error whose message holds
// the card number it was given.
const attackLeakyReactor = `const { BadRequestError } = require('@basis-theory/basis-theory-reactor-formulas-sdk-js');
module.exports = async function (req) {
	const n = req.args.card.number;
	if (req.args.mode === 'error') throw new Error('declined card ' + n);
	if (req.args.mode === 'bad') throw new BadRequestError('bad card ' + n);
	if (req.args.mode === 'string') throw 'thrown ' + n;
	return { raw: { ok: true } };
}`

// TestAttackAsyncResultScrubsLikeReact: a reactor that throws the card
// number it detokenized: react answers the error with its digit runs
// scrubbed, and the asynchronous result of the same call says no more.
func TestAttackAsyncResultScrubsLikeReact(t *testing.T) {
	e, cardID := newProxyEnv(t, nil)
	e.record = true // every answer and log line from here on is scanned for the card
	t.Cleanup(e.checkSecrets)
	r := e.do(tvRoleMgmt, http.MethodPost, "/applications", map[string]any{"name": "invoker", "type": "private",
		"permissions": []string{"token:use", "reactor:invoke"}})
	tvWantStatus(t, r, http.StatusCreated, "invoker")
	e.keys["invoker"] = testjson.Str(r.body, "key")
	r = e.do(tvRoleMgmt, http.MethodPost, "/reactors", map[string]any{"name": "leaky", "code": attackLeakyReactor})
	tvWantStatus(t, r, http.StatusCreated, "create reactor")
	id := testjson.Str(r.body, "id")
	app := e.h.app
	app.logger = e.h.logger // the dispatcher's lines are scanned too
	app.startAsyncReactions(e.store, true)
	t.Cleanup(app.stopAsyncReactions)

	for _, mode := range []string{"error", "bad", "string"} {
		args := map[string]any{"args": map[string]any{"mode": mode, "card": "{{ token: " + cardID + " | json: '$.data' }}"}}
		sync := e.do("invoker", http.MethodPost, "/reactors/"+id+"/react", args)
		if sync.status < 400 || strings.Contains(string(sync.raw), tvCard) {
			t.Errorf("react, %s: %s", mode, sync)
		}
		r := e.do("invoker", http.MethodPost, "/reactors/"+id+"/react-async", args)
		tvWantStatus(t, r, http.StatusAccepted, "react-async "+mode)
		res := waitReaction(t, e, "invoker", id, testjson.Str(r.body, "asyncReactorRequestId"))
		if testjson.Str(res.body, "status") != vaultstore.AsyncFailed {
			t.Errorf("react-async, %s: %s", mode, res.raw)
		}
		if strings.Contains(string(res.raw), tvCard) || strings.Contains(string(res.raw), tvCard[len(tvCard)-8:]) {
			t.Errorf("react-async, %s: the result shows the card number: %s", mode, res.raw)
		}
	}
}

// TestAttackReactAsyncBodies: odd react-async bodies and ids are 4xx
// problems and queue nothing.
func TestAttackReactAsyncBodies(t *testing.T) {
	e, cardID := newProxyEnv(t, nil)
	r := e.do(tvRoleMgmt, http.MethodPost, "/applications", map[string]any{"name": "invoker", "type": "private",
		"permissions": []string{"token:use", "reactor:invoke"}})
	tvWantStatus(t, r, http.StatusCreated, "invoker")
	e.keys["invoker"] = testjson.Str(r.body, "key")
	r = e.do(tvRoleMgmt, http.MethodPost, "/reactors", map[string]any{"name": "echo", "code": `module.exports = async function (req) { return { raw: req.args }; }`})
	tvWantStatus(t, r, http.StatusCreated, "create reactor")
	id := testjson.Str(r.body, "id")
	r = e.do("other-management", http.MethodPost, "/applications", map[string]any{"name": "other-invoker", "type": "private", "permissions": []string{"reactor:invoke", "token:use"}})
	tvWantStatus(t, r, http.StatusCreated, "other tenant's invoker")
	e.keys["other-invoker"] = testjson.Str(r.body, "key")
	for _, tc := range []struct {
		name, role, path string
		body             any
		status           int
	}{
		// (args may be any JSON value, as the vendor's ReactRequest says)
		{"body an array", "invoker", id, `[]`, http.StatusBadRequest},
		{"duplicate args", "invoker", id, `{"args": {}, "args": {}}`, http.StatusBadRequest},
		{"too deep", "invoker", id, `{"args": ` + strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 40) + `}`, http.StatusBadRequest},
		{"broken", "invoker", id, `{"args":`, http.StatusBadRequest},
		{"unknown token", "invoker", id, map[string]any{"args": map[string]any{"c": "{{ 6f1e2d3c-4b5a-4987-8a6b-5c4d3e2f1a0b }}"}}, http.StatusBadRequest},
		{"bad expression", "invoker", id, map[string]any{"args": map[string]any{"c": "{{ " + cardID + " | nope }}"}}, http.StatusBadRequest},
		{"another tenant's reactor", "other-invoker", id, map[string]any{"args": map[string]any{}}, http.StatusNotFound},
		{"another tenant's token", "other-invoker", id, map[string]any{"args": map[string]any{"c": "{{ " + cardID + " }}"}}, http.StatusNotFound},
		{"traversal id", "invoker", "..", map[string]any{"args": map[string]any{}}, http.StatusNotFound},
		{"huge id", "invoker", strings.Repeat("r", 5000), map[string]any{"args": map[string]any{}}, http.StatusNotFound},
	} {
		r := e.do(tc.role, http.MethodPost, "/reactors/"+tc.path+"/react-async", tc.body)
		if tc.name == "another tenant's token" && r.status == http.StatusBadRequest {
			r.status = http.StatusNotFound // an unknown token either way
		}
		tvWantProblem(t, r, tc.status, tc.name)
	}
	records, _, err := e.store.ListAudit(context.Background(), e.tenantID, vaultstore.AuditFilter{EntityType: "reactor", EntityID: id, Operation: "react-async"}, "", 100)
	if err != nil || len(records) != 0 {
		t.Errorf("refused react-async calls were queued: %v, %d records", err, len(records))
	}
}

package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// TestSessionsThroughTheBinary: a public key creates a session, a private
// key authorizes it for one token, the session key reads that token and
// nothing else until it expires (401), every read is audited as the
// session and its authorizer, and neither the session key nor its nonce
// is ever stored.
func TestSessionsThroughTheBinary(t *testing.T) {
	needBinary(t)
	s := startServer(t, serverOpts{})
	ct := s.createTenant("sessions")
	_, pubKey, _ := s.createApp(ct.Key, map[string]any{"name": "browser", "type": "public", "permissions": []string{"token:create"}})
	privID, privKey, _ := s.createApp(ct.Key, map[string]any{"name": "backend", "type": "private", "rules": []map[string]any{
		{"priority": 1, "container": "/", "transform": "reveal", "permissions": []string{"token:create", "token:read"}},
	}})
	granted := testjson.Str(s.expect(http.StatusCreated, http.MethodPost, "/tokens", privKey, map[string]any{"type": "token", "data": "e2e-session-visible"}).Body, "id")
	other := testjson.Str(s.expect(http.StatusCreated, http.MethodPost, "/tokens", privKey, map[string]any{"type": "token", "data": "e2e-session-hidden"}).Body, "id")

	r := s.expect(http.StatusCreated, http.MethodPost, "/sessions", pubKey, nil)
	sessionKey, nonce := testjson.Str(r.Body, "session_key"), testjson.Str(r.Body, "nonce")
	wantProblem(t, s.do(http.MethodGet, "/tokens/"+granted, sessionKey, nil), http.StatusForbidden, "read before authorization")
	wantProblem(t, s.do(http.MethodPost, "/sessions", privKey, nil), http.StatusForbidden, "a private key creates a session")
	wantProblem(t, s.do(http.MethodPost, "/sessions/authorize", privKey, map[string]any{"nonce": "nope", "permissions": []string{"token:read"}}), http.StatusNotFound, "unknown nonce")
	wantProblem(t, s.do(http.MethodPost, "/sessions/authorize", privKey, map[string]any{"nonce": nonce, "permissions": []string{"token:delete"}}), http.StatusForbidden, "grant beyond the authorizer")

	expires := time.Now().Add(15 * time.Second)
	s.expect(http.StatusNoContent, http.MethodPost, "/sessions/authorize", privKey, map[string]any{
		"nonce": nonce, "expires_at": expires.UTC().Format(time.RFC3339Nano),
		"rules": []map[string]any{{"priority": 1, "transform": "reveal", "permissions": []string{"token:read"},
			"conditions": []map[string]any{{"attribute": "id", "operator": "equals", "value": granted}}}},
	})
	if got := testjson.Str(s.expect(http.StatusOK, http.MethodGet, "/tokens/"+granted, sessionKey, nil).Body, "data"); got != "e2e-session-visible" {
		t.Fatalf("the session read %q", got)
	}
	wantProblem(t, s.do(http.MethodGet, "/tokens/"+other, sessionKey, nil), http.StatusForbidden, "read another token")

	logs := s.expect(http.StatusOK, http.MethodGet, "/logs?entity_type=token&entity_id="+granted, ct.Key, nil)
	found := false
	for _, rec := range testjson.Field(logs.Body, "data").([]any) {
		if testjson.Str(rec, "operation") == "read" && testjson.Str(rec, "actor_type") == "session" && testjson.Str(rec, "authorized_by") == privID {
			found = true
		}
	}
	if !found {
		t.Fatalf("no read audited as the session authorized by %s: %s", privID, logs.Raw)
	}
	s.expect(http.StatusOK, http.MethodGet, "/logs?entity_type=session", ct.Key, nil)

	deadline := time.Now().Add(time.Until(expires) + 60*time.Second)
	for {
		r := s.do(http.MethodGet, "/tokens/"+granted, sessionKey, nil)
		if r.Status == http.StatusUnauthorized {
			break
		}
		if r.Status != http.StatusOK || time.Now().After(deadline) {
			t.Fatalf("session past its expiry: %d %s", r.Status, r.Raw)
		}
		time.Sleep(250 * time.Millisecond)
	}

	s.stop()
	if hits := scanTree(t, s.opts.Storage, map[string][]byte{"session key": []byte(sessionKey), "nonce": []byte(nonce)}); len(hits) > 0 {
		t.Fatalf("session secrets stored in the clear: %v", hits)
	}
}

// TestAsyncReactionsAcrossKill: with one reaction running and two queued
// (the queue full: 429), the vault is killed; after the restart the queued
// reactions run, the running one is failed rather than run twice, and a
// result from before the kill is still there.
func TestAsyncReactionsAcrossKill(t *testing.T) {
	needBinary(t)
	extra := `async_reactions {
			concurrency 1
			max_queued_per_tenant 3
		}
		transforms {
			timeout 30s
		}`
	s := startServer(t, serverOpts{VaultExtra: extra})
	ct := s.createTenant("async")
	_, invoker, _ := s.createApp(ct.Key, map[string]any{"name": "invoker", "type": "private", "permissions": []string{"reactor:invoke"}})
	reactor := testjson.Str(s.expect(http.StatusCreated, http.MethodPost, "/reactors", ct.Key, map[string]any{"name": "spin", "code": `module.exports = async function (req) {
	const end = Date.now() + (req.args.spin || 0);
	while (Date.now() < end) {}
	return { raw: { n: req.args.n } };
}`}).Body, "id")
	results := func(srv *server, id string) apiResponse {
		return srv.expect(http.StatusOK, http.MethodGet, "/reactors/"+reactor+"/results/"+id, invoker, nil)
	}
	waitStatus := func(srv *server, id string, want ...string) apiResponse {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			r := results(srv, id)
			for _, w := range want {
				if testjson.Str(r.Body, "status") == w {
					return r
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("reaction %s: %s, want %v", id, r.Raw, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	enqueue := func(args map[string]any) string {
		t.Helper()
		return testjson.Str(s.expect(http.StatusAccepted, http.MethodPost, "/reactors/"+reactor+"/react-async", invoker, map[string]any{"args": args}).Body, "asyncReactorRequestId")
	}

	before := enqueue(map[string]any{"n": 0})
	waitStatus(s, before, "completed")
	running := enqueue(map[string]any{"n": 1, "spin": 25000})
	waitStatus(s, running, "running")
	queued := []string{enqueue(map[string]any{"n": 2}), enqueue(map[string]any{"n": 3})}
	r := s.do(http.MethodPost, "/reactors/"+reactor+"/react-async", invoker, map[string]any{"args": map[string]any{"n": 4}})
	wantProblem(t, r, http.StatusTooManyRequests, "react-async with the queue full")
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After")
	}
	for _, id := range queued {
		if st := testjson.Str(results(s, id).Body, "status"); st != "pending" {
			t.Fatalf("reaction %s is %s before the kill, want pending", id, st)
		}
	}

	s.kill()
	s2 := startServer(t, serverOpts{Storage: s.opts.Storage, VaultExtra: extra})
	for i, id := range queued {
		r := waitStatus(s2, id, "completed", "failed")
		if testjson.Str(r.Body, "status") != "completed" || fmt.Sprint(testjson.Field(r.Body, "raw", "n")) != fmt.Sprint(i+2) {
			t.Fatalf("queued reaction after the restart: %s", r.Raw)
		}
	}
	r = waitStatus(s2, running, "completed", "failed")
	if testjson.Str(r.Body, "status") != "failed" || fmt.Sprint(testjson.Field(r.Body, "error_status")) != "500" || !strings.Contains(testjson.Str(r.Body, "error", "detail"), "not run again") {
		t.Fatalf("reaction running at the kill: %s", r.Raw)
	}
	if r := results(s2, before); testjson.Str(r.Body, "status") != "completed" || fmt.Sprint(testjson.Field(r.Body, "raw", "n")) != "0" {
		t.Fatalf("result from before the kill: %s", r.Raw)
	}

	// another tenant sees none of it
	other := s2.createTenant("async-other")
	_, otherKey, _ := s2.createApp(other.Key, map[string]any{"name": "invoker", "type": "private", "permissions": []string{"reactor:invoke"}})
	wantProblem(t, s2.do(http.MethodGet, "/reactors/"+reactor+"/results/"+before, otherKey, nil), http.StatusNotFound, "another tenant's result")
}

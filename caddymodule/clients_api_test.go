package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// TestDetokenizeEndpoint: POST /detokenize replaces expressions with data
// as the caller's token:read rules show it, within the tenant's limit.
func TestDetokenizeEndpoint(t *testing.T) {
	e := newTokenEnv(t, false, false)
	card := testjson.Str(e.create(tvRoleReveal, tvCardBody()).body, "id")
	r := e.do(tvRoleReveal, http.MethodPost, "/detokenize", map[string]any{
		"pan": "{{ " + card + " | json: '$.number' }}", "card": "{{ token: " + card + " | json: '$.data' }}", "n": 5})
	tvWantStatus(t, r, http.StatusOK, "detokenize")
	if testjson.Str(r.body, "pan") != tvCard || testjson.Str(r.body, "card", "number") != tvCard || fmt.Sprint(testjson.Field(r.body, "n")) != "5" {
		t.Errorf("detokenized: %s", r.raw)
	}
	r = e.do(tvRoleMask, http.MethodPost, "/detokenize", map[string]any{"pan": "{{ " + card + " | json: '$.number' }}"})
	if r.status != http.StatusOK || strings.Contains(string(r.raw), tvCard) {
		t.Errorf("a masking key detokenized the number: %s", r)
	}
	tvWantProblem(t, e.do(tvRoleGeneral, http.MethodPost, "/detokenize", map[string]any{"pan": "{{ " + card + " }}"}), http.StatusForbidden, "no rule on /pci/")
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/detokenize", map[string]any{"pan": "{{ 5b7c0ab8-0c54-4e4b-a1e4-0e9d6a1d3a4c }}"}), http.StatusBadRequest, "unknown token", "pan")
	var many []any
	for i := 0; i < 6; i++ {
		many = append(many, "{{ "+testjson.Str(e.create(tvRoleReveal, map[string]any{"type": "token", "data": i}).body, "id")+" }}")
	}
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/detokenize", many), http.StatusBadRequest, "six tokens over the limit of 5", "body")
}

// TestCursorListsAndMetadataJSON: /v2/tokens and /v2/tokens/search page
// with opaque cursors; metadata filters take a JSON object too.
func TestCursorListsAndMetadataJSON(t *testing.T) {
	e := newTokenEnv(t, false, false)
	e.keys["searcher"] = e.createApp(tvRoleMgmt, "searcher", []map[string]any{{"priority": 1, "container": "/", "transform": "mask",
		"permissions": []string{"token:create", "token:read", "token:search"}}})
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, testjson.Str(e.create("searcher", map[string]any{"type": "token", "data": i, "metadata": map[string]any{"batch": "b1"}}).body, "id"))
	}
	collect := func(first func(start string) tvResp) []string {
		var got []string
		start := ""
		for pages := 0; pages < 10; pages++ {
			r := first(start)
			tvWantStatus(t, r, http.StatusOK, "page")
			data, _ := testjson.Field(r.body, "data").([]any)
			for _, d := range data {
				got = append(got, testjson.Str(d, "id"))
			}
			if start = testjson.Str(r.body, "pagination", "next"); start == "" {
				return got
			}
		}
		t.Fatal("pagination does not end")
		return nil
	}
	got := collect(func(start string) tvResp {
		return e.do("searcher", http.MethodGet, "/v2/tokens?size=2&start="+url.QueryEscape(start), nil)
	})
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Errorf("/v2/tokens pages: %v, want %v", got, ids)
	}
	got = collect(func(start string) tvResp {
		return e.do("searcher", http.MethodPost, "/v2/tokens/search", map[string]any{"query": "metadata.batch:b1", "size": 2, "start": start})
	})
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Errorf("/v2/tokens/search pages: %v, want %v", got, ids)
	}
	tvWantProblem(t, e.do("searcher", http.MethodGet, "/v2/tokens?start=garbage", nil), http.StatusBadRequest, "bad cursor", "start")

	for _, q := range []string{"metadata.batch=b1", "metadata%5Bbatch%5D=b1", "metadata=" + url.QueryEscape(`{"batch":"b1"}`)} {
		r := e.do("searcher", http.MethodGet, "/tokens?"+q, nil)
		if data, _ := testjson.Field(r.body, "data").([]any); r.status != http.StatusOK || len(data) != 5 {
			t.Errorf("GET /tokens?%s: %d tokens, %s", q, len(data), r.raw)
		}
	}
	tvWantProblem(t, e.do("searcher", http.MethodGet, "/tokens?metadata=%7Bnot-json", nil), http.StatusBadRequest, "bad metadata JSON", "metadata")
}

// TestIdempotency: a repeated POST with the same key replays the first
// success; the same key with another body is 400; in flight is 409;
// failures are not kept; GET ignores the header.
func TestIdempotency(t *testing.T) {
	e := newTokenEnv(t, false, false)
	before := e.count()
	key := "Svc-Idempotency-Key"
	first := e.do(tvRoleReveal, http.MethodPost, "/tokens", tvCardBody(), key, "k-1")
	tvWantStatus(t, first, http.StatusCreated, "first")
	again := e.do(tvRoleReveal, http.MethodPost, "/tokens", tvCardBody(), key, "k-1")
	if again.status != http.StatusCreated || string(again.raw) != string(first.raw) {
		t.Errorf("replay: %d %s, want the first answer %s", again.status, again.raw, first.raw)
	}
	if n := e.count(); n != before+1 {
		t.Errorf("%d tokens after a replay, want %d", n, before+1)
	}
	other := tvCardBody()
	other["metadata"] = map[string]any{"x": "y"}
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/tokens", other, key, "k-1"), http.StatusBadRequest, "different body", key)

	// a failure is not kept: the same key works once the request is right
	bad := map[string]any{"type": "card", "data": map[string]any{"number": "1"}}
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/tokens", bad, key, "k-2"), http.StatusBadRequest, "invalid card")
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/tokens", bad, key, "k-2"), http.StatusBadRequest, "invalid card again")

	// in flight
	revealApp := testjson.Str(e.do(tvRoleReveal, http.MethodGet, "/applications/key", nil).body, "id")
	if _, err := e.store.BeginIdempotent(context.Background(), e.tenantID, revealApp+"\x00k-3", "whatever"); err != nil {
		t.Fatal(err)
	}
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/tokens", tvCardBody(), key, "k-3"), http.StatusConflict, "in flight")

	// keys belong to the application: another one reusing a key neither
	// gets the first answer (data it may not read) nor is refused
	card := testjson.Str(first.body, "id")
	detok := map[string]any{"pan": "{{ " + card + " | json: '$.number' }}"}
	r := e.do(tvRoleReveal, http.MethodPost, "/detokenize", detok, key, "shared")
	if r.status != http.StatusOK || testjson.Str(r.body, "pan") != tvCard || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("detokenize with a key: %s", r)
	}
	r = e.do(tvRoleGeneral, http.MethodPost, "/detokenize", detok, key, "shared")
	if r.status != http.StatusForbidden || strings.Contains(string(r.raw), tvCard) {
		t.Errorf("another application reusing the key: %s", r)
	}
	if again := e.do(tvRoleReveal, http.MethodPost, "/detokenize", detok, key, "shared"); again.header.Get("Cache-Control") != "no-store" {
		t.Errorf("a replay is cacheable: %v", again.header)
	}

	// keys are per tenant
	r = e.do(tvRoleOther, http.MethodPost, "/tokens", tvCardBody(), key, "k-1")
	if r.status != http.StatusCreated || testjson.Str(r.body, "id") == testjson.Str(first.body, "id") {
		t.Errorf("another tenant's request with the same key: %s", r)
	}
	// GET ignores the header
	tvWantStatus(t, e.do(tvRoleReveal, http.MethodGet, "/tokens/"+testjson.Str(first.body, "id"), nil, key, "k-1"), http.StatusOK, "GET with a key")
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/tokens", tvCardBody(), key, strings.Repeat("k", 256)), http.StatusBadRequest, "long key", key)
}

// TestOpenAPIDocumentServed: GET and HEAD /openapi.json answer without a
// key.
func TestOpenAPIDocumentServed(t *testing.T) {
	e := newTokenEnv(t, false, false)
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		r := e.do("", method, "/openapi.json", nil)
		if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("%s /openapi.json: %d %v", method, r.status, r.header)
		}
	}
	if r := e.do("", http.MethodPost, "/openapi.json", nil); r.status != http.StatusUnauthorized {
		t.Errorf("POST /openapi.json without a key: %d", r.status)
	}
}

// TestRuleDescriptionCountsCharacters: an access rule's description of
// 200 characters is accepted whatever their UTF-8 length; 201 is not.
func TestRuleDescriptionCountsCharacters(t *testing.T) {
	e := newTokenEnv(t, false, false)
	rule := func(desc string) map[string]any {
		return map[string]any{"name": "d", "type": "private", "rules": []map[string]any{{
			"description": desc, "priority": 1, "container": "/", "transform": "mask", "permissions": []string{"token:read"}}}}
	}
	tvWantStatus(t, e.do(tvRoleMgmt, http.MethodPost, "/applications", rule(strings.Repeat("é", 200))), http.StatusCreated, "200 é")
	if r := e.do(tvRoleMgmt, http.MethodPost, "/applications", rule(strings.Repeat("é", 201))); r.status != http.StatusBadRequest {
		t.Errorf("201 characters: %s", r)
	}
}

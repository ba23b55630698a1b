package caddymodule

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// TestSearchTokensAPI: POST /tokens/search through the handler.
func TestSearchTokensAPI(t *testing.T) {
	e := newTokenEnv(t, false, true)
	rule := func(container, transform string) map[string]any {
		return map[string]any{"priority": 1, "container": container, "transform": transform,
			"permissions": []string{"token:create", "token:search"}}
	}
	e.keys["searcher"] = e.createApp(tvRoleMgmt, "searcher", []map[string]any{rule("/", "mask")})
	e.keys["general-searcher"] = e.createApp(tvRoleMgmt, "general-searcher", []map[string]any{rule("/general/", "reveal")})

	card := tvCardBody()
	card["search_indexes"] = []string{"{{ data.number | last4 }}"}
	card["metadata"] = map[string]any{"customer": "c-1"}
	cardID := testjson.Str(e.create("searcher", card).body, "id")
	general := e.create("searcher", map[string]any{"type": "token", "data": "tv-note", "metadata": map[string]any{"customer": "c-1"}})
	generalID := testjson.Str(general.body, "id")

	ids := func(r tvResp) []string {
		var out []string
		data, _ := testjson.Field(r.body, "data").([]any)
		for _, d := range data {
			out = append(out, testjson.Str(d, "id"))
		}
		return out
	}
	tests := []struct {
		role, query string
		want        []string
	}{
		{"searcher", "data:4242", []string{cardID}},
		{"searcher", "data:" + tvCard, nil}, // the number itself was never indexed
		{"searcher", "type:card", []string{cardID}},
		{"searcher", "metadata.customer:C-1", []string{cardID, generalID}},
		{"searcher", "metadata.customer:c-1 AND NOT type:card", []string{generalID}},
		{"general-searcher", "metadata.customer:c-1", []string{generalID}},
		{"general-searcher", "data:4242", nil},
	}
	for _, tt := range tests {
		r := e.do(tt.role, http.MethodPost, "/tokens/search", map[string]any{"query": tt.query})
		tvWantStatus(t, r, http.StatusOK, tt.query)
		got := ids(r)
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%s %q = %v, want %v", tt.role, tt.query, got, tt.want)
		}
		if total := fmt.Sprint(testjson.Field(r.body, "pagination", "total_items")); total != fmt.Sprint(len(tt.want)) {
			t.Errorf("%s %q: total_items %s, want %d", tt.role, tt.query, total, len(tt.want))
		}
	}
	r := e.do("searcher", http.MethodPost, "/tokens/search", map[string]any{"query": "type:card"})
	if strings.Contains(string(r.raw), tvCard) {
		t.Error("a masked search revealed the card number")
	}
	r = e.do("searcher", http.MethodPost, "/tokens/search", map[string]any{"query": "metadata.customer:c-1", "page": 2, "size": 1})
	if got := ids(r); len(got) != 1 || got[0] != generalID {
		t.Errorf("page 2 of size 1: %v", got)
	}

	tvWantProblem(t, e.do(tvRoleReveal, http.MethodPost, "/tokens/search", map[string]any{"query": "type:card"}), http.StatusForbidden, "no token:search")
	r = e.do("searcher", http.MethodPost, "/tokens/search", map[string]any{"query": "data:" + tvCard + " AND ("})
	tvWantProblem(t, r, http.StatusBadRequest, "malformed query", "query")
	if !strings.Contains(string(r.raw), "position") {
		t.Errorf("the error does not say where: %s", r.raw)
	}
	tvWantProblem(t, e.do("searcher", http.MethodPost, "/tokens/search", map[string]any{}), http.StatusBadRequest, "no query", "query")
	tvWantProblem(t, e.do("searcher", http.MethodPost, "/tokens/search", map[string]any{"query": "type:card", "size": 101}), http.StatusBadRequest, "size 101", "size")
	tvWantProblem(t, e.do("searcher", http.MethodPost, "/tokens/search", map[string]any{"query": "type:card", "page": 0}), http.StatusBadRequest, "page 0", "page")
}

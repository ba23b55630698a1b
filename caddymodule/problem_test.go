package caddymodule

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// writeJSON writes a token and a page of tokens byte for byte as a
// json.Encoder writes them, whatever the tokens hold.
func TestWriteJSONMatchesEncoder(t *testing.T) {
	ts := &vaultstore.Timestamp{Time: time.Date(2026, 11, 23, 1, 2, 3, 4000, time.UTC)}
	yes := true
	card := &vaultstore.Token{ID: "t1", TenantID: "ten", Type: "card", Containers: []string{"/pci/high/"},
		Data:      map[string]any{"number": "XXXXXXXXXXXX4242", "expiration_month": json.Number("12"), "html": "<&>", "nested": []any{nil, true, json.Number("1.50")}},
		Metadata:  map[string]string{"b": "2", "a": "ü\u2028"},
		CreatedAt: ts, ModifiedAt: ts, ExpiresAt: ts, CreatedBy: "app", DeduplicateToken: &yes,
		SearchIndexes: []string{"{{ data.number }}"}, Fingerprint: "fp", Extras: &vaultstore.TokenExtras{Deduplicated: true}}
	bare := &vaultstore.Token{ID: "t2", TenantID: "ten", Type: "token", Data: "bad \xff utf-8"}
	for name, v := range map[string]any{
		"token":             card,
		"bare token":        bare,
		"page":              tokenPage([]*vaultstore.Token{card, bare, card}, 41, 2, 3),
		"page of one":       tokenPage([]*vaultstore.Token{bare}, 1, 1, 20),
		"empty page":        tokenPage([]*vaultstore.Token{}, 0, 1, 20),
		"page without data": tokenPage(nil, 0, 3, 20),
		"page with a gap":   tokenPage([]*vaultstore.Token{card, nil}, 2, 1, 20),
	} {
		t.Run(name, func(t *testing.T) {
			var want bytes.Buffer
			if err := json.NewEncoder(&want).Encode(v); err != nil {
				t.Fatal(err)
			}
			w := httptest.NewRecorder()
			if err := writeJSON(w, http.StatusOK, v); err != nil {
				t.Fatal(err)
			}
			if got := w.Body.String(); got != want.String() {
				t.Fatalf("writeJSON:\n%s\njson.Encoder:\n%s", got, want.String())
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json" || w.Code != http.StatusOK {
				t.Errorf("status %d, Content-Type %q", w.Code, ct)
			}
		})
	}
}

package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// writeBINTable writes a BIN table file listing 42424242 with funding.
func writeBINTable(t *testing.T, path, funding string) {
	t.Helper()
	csv := "bin,funding,issuer_name,issuer_country\n42424242," + funding + ",E2E Bank,US\n"
	if err := os.WriteFile(path, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBINTableAndIntentsE2E: through the built binary, a card token shows
// the BIN table's fields, a reload with a changed table applies it at
// once, a reload with a malformed table is refused naming the line while
// the running configuration keeps serving, and a public application's
// token intent becomes a token without its CVC.
func TestBINTableAndIntentsE2E(t *testing.T) {
	needBinary(t)
	bins := filepath.Join(t.TempDir(), "bins.csv")
	writeBINTable(t, bins, "credit")
	s := startServer(t, serverOpts{VaultExtra: "\t\tbin_table " + bins})
	tenant := s.createTenant("bins")
	_, key, _ := s.createApp(tenant.Key, map[string]any{"name": "backend", "type": "private",
		"permissions": []string{"token:create", "token:read", "token-intent:read"}})
	_, web, _ := s.createApp(tenant.Key, map[string]any{"name": "web", "type": "public", "permissions": []string{"token-intent:create"}})
	_, reader, _ := s.createApp(tenant.Key, map[string]any{"name": "reader", "type": "private",
		"rules": []map[string]any{{"priority": 1, "container": "/", "transform": "reveal", "permissions": []string{"token:read"}}}})

	card := map[string]any{"type": "card", "data": map[string]any{"number": "4242424242424242", "expiration_month": 1, "expiration_year": 2032, "cvc": "321"}}
	tok := s.expect(http.StatusCreated, http.MethodPost, "/tokens", key, card)
	id := testjson.Str(tok.Body, "id")
	if got := testjson.Str(tok.Body, "card", "funding"); got != "credit" || testjson.Str(tok.Body, "card", "issuer", "name") != "E2E Bank" {
		t.Fatalf("card details at start: %s", tok.Raw)
	}
	if got := testjson.Str(s.expect(http.StatusOK, http.MethodGet, "/enrichments/card-details?bin=42424242", web, nil).Body, "funding"); got != "credit" {
		t.Errorf("enrichment funding %q", got)
	}

	writeBINTable(t, bins, "debit")
	if err := s.reload(""); err != nil {
		t.Fatal(err)
	}
	if got := testjson.Str(s.expect(http.StatusOK, http.MethodGet, "/tokens/"+id, key, nil).Body, "card", "funding"); got != "debit" {
		t.Errorf("after a reload with a new table: funding %q", got)
	}

	if err := os.WriteFile(bins, []byte("bin,funding\n4242,credit\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := s.reload("")
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "bin must be 6 to 8 digits") {
		t.Errorf("reload with a malformed table: %v", err)
	}
	if got := testjson.Str(s.expect(http.StatusOK, http.MethodGet, "/tokens/"+id, key, nil).Body, "card", "funding"); got != "debit" {
		t.Errorf("after a refused reload: funding %q", got)
	}

	ti := s.expect(http.StatusCreated, http.MethodPost, "/token-intents", web, card)
	if testjson.Str(ti.Body, "card", "last4") != "4242" || testjson.Field(ti.Body, "data") != nil || strings.Contains(string(ti.Raw), "4242424242424242") {
		t.Fatalf("intent: %s", ti.Raw)
	}
	s.expect(http.StatusOK, http.MethodGet, "/token-intents/"+testjson.Str(ti.Body, "id"), key, nil)
	made := s.expect(http.StatusCreated, http.MethodPost, "/tokens", key, map[string]any{"token_intent_id": testjson.Str(ti.Body, "id")})
	got := s.expect(http.StatusOK, http.MethodGet, "/tokens/"+testjson.Str(made.Body, "id"), reader, nil)
	if testjson.Str(got.Body, "data", "number") != "4242424242424242" || testjson.Field(got.Body, "data", "cvc") != nil {
		t.Errorf("token from intent: number shown %v, cvc %v", testjson.Str(got.Body, "data", "number") != "", testjson.Field(got.Body, "data", "cvc") != nil)
	}
	r := s.do(http.MethodPost, "/tokens", key, map[string]any{"token_intent_id": testjson.Str(ti.Body, "id")})
	wantProblem(t, r, http.StatusBadRequest, "second use of an intent")
	if !strings.Contains(string(r.Raw), "token_intent_id") {
		t.Errorf("the refusal does not name token_intent_id: %s", r.Raw)
	}
}

// TestBINTableRefusedAtStart: the vault does not start with a malformed
// BIN table, and says which line is wrong.
func TestBINTableRefusedAtStart(t *testing.T) {
	needBinary(t)
	bins := filepath.Join(t.TempDir(), "bins.csv")
	if err := os.WriteFile(bins, []byte("bin,funding\n424242,credit\n424242,debit\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := runRefused(t, serverOpts{VaultExtra: "\t\tbin_table " + bins})
	if code == 0 || !strings.Contains(out, "line 3") || !strings.Contains(out, "given twice") {
		t.Errorf("exit %d; output:\n%s", code, tail(out, 3000))
	}
}

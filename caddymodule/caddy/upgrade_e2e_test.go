package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testfs"
	"github.com/tokenvault/tokenvault/internal/testjson"
)

// copyFixtureStore copies testdata/stores/<name> and returns its storage
// directory and facts.
func copyFixtureStore(t *testing.T, name string) (string, map[string]any) {
	t.Helper()
	src := filepath.Join("..", "..", "testdata", "stores", name)
	raw, err := os.ReadFile(filepath.Join(src, "fixture.json"))
	if err != nil {
		t.Fatal(err)
	}
	var facts map[string]any
	if err := json.Unmarshal(raw, &facts); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "data")
	testfs.CopyDir(t, filepath.Join(src, "data"), dst)
	return dst, facts
}

// TestUpgradeEndToEnd: the binary migrates a format 1 store forward (with
// a copy first) and refuses a store of a newer format.
func TestUpgradeEndToEnd(t *testing.T) {
	dir, facts := copyFixtureStore(t, "format1")
	key := facts["master_key"].(string)
	s := startServer(t, serverOpts{Storage: dir, MasterKey: key})
	reader := facts["reader_key"].(string)
	for _, id := range facts["token_ids"].([]any) {
		if r := s.do(http.MethodGet, "/tokens/"+id.(string), reader, nil); r.Status != http.StatusOK {
			t.Errorf("token %s after the upgrade: %d %s", id, r.Status, r.Raw)
		}
	}
	r := s.do(http.MethodPost, "/tokens/search", reader, map[string]any{"query": "type:card"})
	if data, _ := testjson.Field(r.Body, "data").([]any); r.Status != http.StatusOK || len(data) != 1 {
		t.Errorf("search after the upgrade: %d %s", r.Status, r.Raw)
	}
	if copies, _ := filepath.Glob(dir + ".format1-backup-*"); len(copies) != 1 {
		t.Errorf("copies before migrating: %v", copies)
	}
	if !strings.Contains(s.stderr(), "upgrading an older store") {
		t.Error("the upgrade was not logged")
	}
	s.stopClean()

	// a newer store
	dir2, _ := copyFixtureStore(t, "format1")
	metaPath := filepath.Join(dir2, "tokenvault.json")
	raw, err := os.ReadFile(metaPath)
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	meta["format"] = 99
	raw, _ = json.Marshal(meta)
	if err := os.WriteFile(metaPath, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	code, stderr := runRefused(t, serverOpts{Storage: dir2, MasterKey: key})
	if code == 0 || !strings.Contains(stderr, "store format 99 is newer than this build supports") {
		t.Errorf("a newer store: exit %d\n%s", code, tail(stderr, 5))
	}
}

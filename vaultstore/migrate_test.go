package vaultstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixtureStore copies testdata/stores/<name> into a temporary directory
// and returns the storage directory and the fixture's facts.
func fixtureStore(t *testing.T, name string) (string, map[string]any) {
	t.Helper()
	src := filepath.Join("..", "testdata", "stores", name)
	raw, err := os.ReadFile(filepath.Join(src, "fixture.json"))
	if err != nil {
		t.Fatal(err)
	}
	var facts map[string]any
	if err := json.Unmarshal(raw, &facts); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(src, "data"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := copyFile(filepath.Join(src, "data", e.Name()), filepath.Join(dst, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dst, facts
}

// TestMigrateFormat1: a format 1 store (testdata/stores/format1) opens,
// is copied aside, migrated through every later format, and reads as
// before.
func TestMigrateFormat1(t *testing.T) {
	badgerOnly(t)
	dir, facts := fixtureStore(t, "format1")
	key, _ := base64.StdEncoding.DecodeString(facts["master_key"].(string))
	s := openTestStore(t, Options{Dir: dir, MasterKey: key})
	meta, err := readMeta(dir)
	if err != nil || meta.Format != FormatVersion {
		t.Fatalf("meta after opening: %+v, %v", meta, err)
	}
	copies, _ := filepath.Glob(dir + ".format1-backup-*")
	if len(copies) != 1 {
		t.Fatalf("copies taken before migrating: %v", copies)
	}
	if m, err := readMeta(copies[0]); err != nil || m.Format != 1 {
		t.Errorf("the copy is not the old store: %+v, %v", m, err)
	}
	ctx := context.Background()
	p, err := s.Authenticate(ctx, facts["reader_key"].(string))
	if err != nil {
		t.Fatal(err)
	}
	req := TokenRequest{Tenant: p.Tenant, Application: p.Application}
	for _, id := range facts["token_ids"].([]any) {
		if _, err := s.GetToken(ctx, req, id.(string)); err != nil {
			t.Errorf("token %s after the migration: %v", id, err)
		}
	}
	// every order entry now carries its type
	err = s.kv.View(ctx, func(r Reader) error {
		return r.Scan(tokenOrderPrefix(p.Tenant.ID), nil, func(key, value []byte) error {
			if parseOrderValue(value).tokenType == "" {
				t.Errorf("%s has no type", key)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	// the counts by type became counts by type and container
	ids := facts["token_ids"].([]any)
	if _, total, err := s.ListTokens(ctx, req, TokenFilter{}, 0, 1); err != nil || total != len(ids) {
		t.Errorf("list total after the migration: %d, %v; want %d", total, err, len(ids))
	}
	if rep, err := s.Usage(ctx, p.Tenant); err != nil || rep.TotalTokens != int64(len(ids)) || rep.TokenReport.MetricsByType["bank"].Count != 1 {
		t.Errorf("usage after the migration: %+v, %v", rep, err)
	}
	toks, total, err := s.SearchTokens(ctx, req, "type:bank", 0, 10)
	if err != nil || total != 1 || len(toks) != 1 || toks[0].Type != "bank" {
		t.Errorf("search by type after the migration: %d %v", total, err)
	}
	closeTestStore(t, s)
	// a second open migrates nothing and copies nothing
	openTestStore(t, Options{Dir: dir, MasterKey: key})
	if copies, _ := filepath.Glob(dir + ".format1-backup-*"); len(copies) != 1 {
		t.Errorf("copies after a second open: %v", copies)
	}
}

// TestRefuseNewerFormat: a store written by a newer build is refused
// without a change to any file.
func TestRefuseNewerFormat(t *testing.T) {
	dir, facts := fixtureStore(t, "format1")
	key, _ := base64.StdEncoding.DecodeString(facts["master_key"].(string))
	meta, err := readMeta(dir)
	if err != nil {
		t.Fatal(err)
	}
	meta.Format = FormatVersion + 1
	if err := writeMeta(dir, meta); err != nil {
		t.Fatal(err)
	}
	before := dirDigest(t, dir)
	_, err = Open(Options{Dir: dir, MasterKey: key})
	if err == nil || !strings.Contains(err.Error(), "newer than this build supports") {
		t.Fatalf("Open: %v", err)
	}
	if dirDigest(t, dir) != before {
		t.Error("refusing the store changed its files")
	}
	if copies, _ := filepath.Glob(dir + ".format*"); len(copies) != 0 {
		t.Errorf("a copy was taken of a store that was refused: %v", copies)
	}
	if errors.Is(err, ErrWrongMasterKey) {
		t.Error("the refusal blames the key")
	}
}

func dirDigest(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		raw, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		b.WriteString(e.Name() + ":" + string(raw) + "\n")
	}
	return b.String()
}

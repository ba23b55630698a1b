package vaultstore

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
)

// sstableContents returns every key and value of a Badger table file, read
// through Badger's table reader with the options Open writes tables with
// (uncompressed), so a table written otherwise fails to open here.
func sstableContents(tb testing.TB, path string) []byte {
	tb.Helper()
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		tb.Fatalf("mapping %s: %v", path, err)
	}
	tbl, err := table.OpenTable(mf, table.Options{
		ReadOnly:    true,
		Compression: options.None, // what Open's Badger options use
		BlockSize:   4 << 10,
		ChkMode:     options.OnTableAndBlockRead,
	})
	if err != nil {
		tb.Fatalf("opening table %s: %v", path, err)
	}
	defer tbl.MmapFile.Close(-1) // not DecrRef, which deletes the file
	it := tbl.NewIterator(0)
	defer it.Close()
	var out bytes.Buffer
	for it.Rewind(); it.Valid(); it.Next() {
		out.Write(it.Key())
		out.WriteByte(0)
		out.Write(it.ValueCopy().Value)
		out.WriteByte(0)
	}
	return out.Bytes()
}

// Secrets and names are sealed before they reach Badger: after a store is
// closed, no file in its directory holds an issued key, a tenant name or
// an application name in clear.
func TestNothingSecretInClearOnDisk(t *testing.T) {
	badgerOnly(t)
	ctx := context.Background()
	dir := t.TempDir()
	s := openTestStore(t, Options{Dir: dir, SyncWrites: true})
	const tenantName = "QuaggaTenantName-unique"
	const appName = "ZebraAppName-unique"
	ct := mustCreateTenant(t, s, tenantName, TenantProduction)
	app, appKey := mustCreateApp(t, s, ct.Tenant.ID, ApplicationInput{
		Name: appName, Type: AppPrivate, Permissions: []string{"token:use"},
		Rules: []AccessRule{{Description: "OkapiRuleDescription-unique", Priority: 1, Container: "/pci/", Transform: TransformReveal, Permissions: []string{"token:use"}}},
	})
	extra, err := s.CreateKey(ctx, ct.Tenant.ID, app.ID, "actor")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateTenant(ctx, ct.Tenant.ID, "actor", TenantUpdate{Name: tenantName + "-renamed"}); err != nil {
		t.Fatal(err)
	}
	closeTestStore(t, s)

	var files, tables [][]byte // raw bytes of every file, plus decoded tables
	var total int
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files = append(files, b)
		total += len(b)
		if strings.HasSuffix(path, ".sst") {
			tables = append(tables, sstableContents(t, path))
			files = append(files, tables[len(tables)-1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	found := func(s string) bool {
		for _, b := range files {
			if bytes.Contains(b, []byte(s)) {
				return true
			}
		}
		return false
	}
	// The scan reads the data: ids are stored in clear in keys.
	if !found(ct.Tenant.ID) || !found(app.ID) {
		t.Fatalf("tenant and application ids not found in %d files (%d bytes): the scan reads nothing", len(files), total)
	}
	for i, tb := range tables {
		if !bytes.Contains(tb, tenantKey(ct.Tenant.ID)) && !bytes.Contains(tb, []byte("v1/")) {
			t.Errorf("table %d decodes to nothing recognizable", i)
		}
	}
	for _, tc := range []struct{ name, secret string }{
		{"management key", ct.Key},
		{"management key payload", ct.Key[len("key_prod_"):]},
		{"application key", appKey.Key},
		{"application key payload", appKey.Key[len("key_prod_"):]},
		{"second application key", extra.Key},
		{"tenant name", tenantName},
		{"application name", appName},
		{"rule description", "OkapiRuleDescription-unique"},
		{"master key", string(testMasterKey)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if found(tc.secret) {
				t.Errorf("%s appears in clear on disk", tc.name)
			}
		})
	}
}

package certstorage

import (
	"bytes"
	"errors"
	"io/fs"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestStorageFiles: Store, Load, Stat, Exists, Delete on files, and what
// a second node sees.
func TestStorageFiles(t *testing.T) {
	dsn := newDatabase(t)
	ctx := testCtx(t)
	a := newNode(t, dsn, Options{})
	b := newNode(t, dsn, Options{})

	if _, err := a.Load(ctx, "certificates/ca/x.example/x.example.crt"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of a missing key: %v, want fs.ErrNotExist", err)
	}
	before := time.Now()
	if err := a.Store(ctx, "certificates/ca/x.example/x.example.crt", []byte("CERT")); err != nil {
		t.Fatal(err)
	}
	got, err := b.Load(ctx, "certificates/ca/x.example/x.example.crt")
	if err != nil || string(got) != "CERT" {
		t.Fatalf("the other node loads %q, %v; want CERT", got, err)
	}
	if err := b.Store(ctx, "certificates/ca/x.example/x.example.crt", []byte("RENEWED")); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.Load(ctx, "certificates/ca/x.example/x.example.crt"); string(got) != "RENEWED" {
		t.Fatalf("after an overwrite Load = %q, want RENEWED", got)
	}
	// Binary values and the empty value survive as they are.
	bin := []byte{0, 1, 2, 0xff, '\n', 0}
	if err := a.Store(ctx, "bin", bin); err != nil {
		t.Fatal(err)
	}
	if err := a.Store(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Load(ctx, "bin"); !bytes.Equal(got, bin) {
		t.Errorf("binary value %x, want %x", got, bin)
	}
	if got, err := b.Load(ctx, "empty"); err != nil || len(got) != 0 {
		t.Errorf("empty value %q, %v", got, err)
	}

	info, err := b.Stat(ctx, "certificates/ca/x.example/x.example.crt")
	if err != nil {
		t.Fatal(err)
	}
	// Modified is the database's clock; allow for skew with the test's.
	if !info.IsTerminal || info.Size != int64(len("RENEWED")) || info.Key != "certificates/ca/x.example/x.example.crt" ||
		info.Modified.Before(before.Add(-time.Hour)) || info.Modified.After(time.Now().Add(time.Hour)) {
		t.Errorf("Stat of a file = %+v", info)
	}
	dir, err := b.Stat(ctx, "certificates/ca")
	if err != nil || dir.IsTerminal || dir.Key != "certificates/ca" || dir.Modified.IsZero() {
		t.Errorf("Stat of a directory = %+v, %v", dir, err)
	}
	if _, err := b.Stat(ctx, "certificates/c"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat of a key's text prefix that is no directory: %v, want fs.ErrNotExist", err)
	}
	for key, want := range map[string]bool{
		"certificates/ca/x.example/x.example.crt": true,
		"certificates/ca/x.example":               true,
		"certificates":                            true,
		"certificates/":                           true,
		"certificates/ca/x.exampl":                false,
		"certificates/ca/x.example/x.example.key": false,
		"nothing": false,
	} {
		if got := b.Exists(ctx, key); got != want {
			t.Errorf("Exists(%q) = %v, want %v", key, got, want)
		}
	}

	// Deleting a file, then a directory with everything below it; a
	// missing key is no error.
	if err := a.Delete(ctx, "bin"); err != nil {
		t.Fatal(err)
	}
	if b.Exists(ctx, "bin") {
		t.Error("a deleted file still exists")
	}
	if err := a.Store(ctx, "certificates/ca/x.example/x.example.key", []byte("KEY")); err != nil {
		t.Fatal(err)
	}
	if err := a.Store(ctx, "certificates/cab/y.example/y.example.crt", []byte("OTHER")); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "certificates/ca"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"certificates/ca/x.example/x.example.crt", "certificates/ca/x.example/x.example.key", "certificates/ca"} {
		if a.Exists(ctx, k) {
			t.Errorf("%s exists after its directory was deleted", k)
		}
	}
	if got, _ := a.Load(ctx, "certificates/cab/y.example/y.example.crt"); string(got) != "OTHER" {
		t.Errorf("deleting certificates/ca touched certificates/cab: %q", got)
	}
	if err := a.Delete(ctx, "certificates/ca"); err != nil {
		t.Errorf("deleting a missing key: %v", err)
	}
	if err := a.Delete(ctx, ""); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("Delete of the root: %v, want ErrInvalidKey", err)
	}
	if err := a.Store(ctx, "/", []byte("x")); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("Store at the root: %v, want ErrInvalidKey", err)
	}
}

// TestStorageList: recursive and not, at the root and below, as
// certmagic's FileStorage lists the same tree.
func TestStorageList(t *testing.T) {
	dsn := newDatabase(t)
	ctx := testCtx(t)
	s := newNode(t, dsn, Options{Table: "certs_list"})
	for _, k := range []string{
		"acme/ca/users/u@example.com/u.json",
		"acme/ca/users/u@example.com/u.key",
		"certificates/ca/a.example/a.example.crt",
		"certificates/ca/a.example/a.example.key",
		"certificates/ca/b.example/b.example.crt",
		"certificates/ca-staging/c.example/c.example.crt",
		"certificates/ca.x/d.example/d.example.crt", // '.' sorts before '/'
		"certificates/é/e.example/e.crt",            // multi-byte
		"last_clean.json",
	} {
		if err := s.Store(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		dir       string
		recursive bool
		want      []string
	}{
		{"", false, []string{"acme", "certificates", "last_clean.json"}},
		{"certificates", false, []string{"certificates/ca", "certificates/ca-staging", "certificates/ca.x", "certificates/é"}},
		{"certificates/", false, []string{"certificates/ca", "certificates/ca-staging", "certificates/ca.x", "certificates/é"}},
		{"certificates/ca", false, []string{"certificates/ca/a.example", "certificates/ca/b.example"}},
		{"certificates/é", false, []string{"certificates/é/e.example"}},
		{"certificates/ca/a.example", false, []string{"certificates/ca/a.example/a.example.crt", "certificates/ca/a.example/a.example.key"}},
		{"certificates/ca", true, []string{
			"certificates/ca/a.example",
			"certificates/ca/a.example/a.example.crt",
			"certificates/ca/a.example/a.example.key",
			"certificates/ca/b.example",
			"certificates/ca/b.example/b.example.crt",
		}},
		{"acme", true, []string{
			"acme/ca",
			"acme/ca/users",
			"acme/ca/users/u@example.com",
			"acme/ca/users/u@example.com/u.json",
			"acme/ca/users/u@example.com/u.key",
		}},
		{"", true, []string{
			"acme", "acme/ca", "acme/ca/users", "acme/ca/users/u@example.com",
			"acme/ca/users/u@example.com/u.json", "acme/ca/users/u@example.com/u.key",
			"certificates",
			"certificates/ca", "certificates/ca-staging", "certificates/ca-staging/c.example",
			"certificates/ca-staging/c.example/c.example.crt",
			"certificates/ca.x", "certificates/ca.x/d.example", "certificates/ca.x/d.example/d.example.crt",
			"certificates/ca/a.example", "certificates/ca/a.example/a.example.crt", "certificates/ca/a.example/a.example.key",
			"certificates/ca/b.example", "certificates/ca/b.example/b.example.crt",
			"certificates/é", "certificates/é/e.example", "certificates/é/e.example/e.crt",
			"last_clean.json",
		}},
		{"last_clean.json", false, []string{}},
		{"last_clean.json", true, []string{}},
	} {
		got, err := s.List(ctx, tc.dir, tc.recursive)
		if err != nil {
			t.Errorf("List(%q, %v): %v", tc.dir, tc.recursive, err)
			continue
		}
		want := slices.Clone(tc.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("List(%q, %v)\n got %q\nwant %q", tc.dir, tc.recursive, got, want)
		}
	}
	for _, dir := range []string{"nothing", "certificates/c", "certificates/ca/a"} {
		for _, recursive := range []bool{false, true} {
			if got, err := s.List(ctx, dir, recursive); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("List(%q, %v) = %q, %v; want fs.ErrNotExist", dir, recursive, got, err)
			}
		}
	}
}

// TestStorageTableCreatedOnce: several nodes starting together on a new
// database all create the tables without tripping on each other, and
// two tables in one database stay apart.
func TestStorageTableCreatedOnce(t *testing.T) {
	dsn := newDatabase(t)
	ctx := testCtx(t)
	const nodes = 6
	var wg sync.WaitGroup
	errs := make(chan error, nodes)
	start := make(chan struct{})
	for i := range nodes {
		s := newNode(t, dsn, Options{})
		wg.Go(func() {
			<-start
			errs <- s.Store(ctx, "node", []byte{byte(i)})
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a node starting with the others: %v", err)
		}
	}
	other := newNode(t, dsn, Options{Table: "other_certs"})
	if other.Exists(ctx, "node") {
		t.Error("a key of the default table shows in another table")
	}
}

// TestNewRefusesBadTables: only plain identifiers name a table.
func TestNewRefusesBadTables(t *testing.T) {
	pool := newPool(t, adminURL()) // never used: New does no I/O
	for _, table := range []string{"Certs", "certs;drop table x", "1certs", "certs-x", `"certs"`, "a.b",
		"a_name_that_is_much_too_long_for_a_table_with_its_locks_suffix"} {
		if _, err := New(pool, Options{Table: table}); err == nil {
			t.Errorf("New accepted table %q", table)
		}
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New accepted a nil pool")
	}
}

package vaultstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testclock"
	"github.com/tokenvault/tokenvault/vaultstore/kv/postgres"
	"github.com/tokenvault/tokenvault/vaultstore/kv/postgres/pgtest"
)

// testMasterKey is the master key of every test store unless a test says
// otherwise.
var testMasterKey = bytes.Repeat([]byte{0x42}, MasterKeySize)

// newFakeClock is the store tests' clock: it moves forward by a
// millisecond on every reading, so records created one after another have
// distinct times, and it starts on a whole microsecond, the precision the
// store keeps, so that Peek names a time exactly as it is stored.
func newFakeClock() *testclock.Clock {
	return testclock.NewStepping(time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC), time.Millisecond)
}

// closedStores remembers stores a test closed itself, so the cleanup does
// not close them again.
var closedStores sync.Map

// testEngine names the engine the store's tests run on: Badger, or
// PostgreSQL when TV_ENGINE=postgres. The README's test command runs the
// package once with each.
var testEngine = os.Getenv("TV_ENGINE")

// testDatabases maps a test's storage directory to its database, so a test
// that opens "the same directory" again opens the same database.
var testDatabases sync.Map

// withTestEngine points o at the test engine: with PostgreSQL, at a new
// database for each directory, dropped when the test ends.
func withTestEngine(tb testing.TB, o Options) Options {
	tb.Helper()
	if testEngine != "postgres" || o.Postgres != nil {
		return o
	}
	dsn, ok := testDatabases.Load(o.Dir)
	if !ok {
		dsn = pgtest.NewDatabase(tb)
		testDatabases.Store(o.Dir, dsn)
		tb.Cleanup(func() { testDatabases.Delete(o.Dir) })
	}
	o.Postgres = &postgres.Options{DSN: dsn.(string)}
	return o
}

// badgerOnly skips a test of what only the Badger engine has: its files,
// its directory lock, its on-disk formats.
func badgerOnly(tb testing.TB) {
	tb.Helper()
	if testEngine == "postgres" {
		tb.Skip("a test of the Badger engine's own files; skipped with TV_ENGINE=postgres")
	}
}

// readTestMeta reads the meta of the store the tests map dir to: its meta
// file, or with TV_ENGINE=postgres the meta entry of its database.
func readTestMeta(tb testing.TB, dir string) (*storeMeta, error) {
	tb.Helper()
	o := withTestEngine(tb, Options{Dir: dir})
	if o.Postgres == nil {
		return readMeta(dir)
	}
	engine, err := postgres.Open(context.Background(), *o.Postgres)
	if err != nil {
		return nil, err
	}
	defer engine.Close()
	return metaEntry{engine}.load(context.Background())
}

// openTestStore opens a store in dir and closes it when the test ends
// unless the test closed it with closeTestStore.
func openTestStore(tb testing.TB, o Options) *Store {
	tb.Helper()
	if o.MasterKey == nil {
		o.MasterKey = testMasterKey
	}
	s, err := Open(withTestEngine(tb, o))
	if err != nil {
		tb.Fatalf("Open(%s): %v", o.Dir, err)
	}
	tb.Cleanup(func() {
		if _, done := closedStores.LoadAndDelete(s); done {
			return
		}
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

// closeTestStore closes a store opened by openTestStore before the test ends.
func closeTestStore(tb testing.TB, s *Store) {
	tb.Helper()
	closedStores.Store(s, true)
	if err := s.Close(); err != nil {
		tb.Fatalf("Close: %v", err)
	}
}

// newTestStore opens a fresh on-disk store with a fake clock and
// asynchronous writes.
func newTestStore(tb testing.TB) (*Store, *testclock.Clock) {
	tb.Helper()
	clock := newFakeClock()
	return openTestStore(tb, Options{Dir: tb.TempDir(), Now: clock.Now}), clock
}

func mustCreateTenant(tb testing.TB, s *Store, name, typ string) *CreatedTenant {
	tb.Helper()
	ct, err := s.CreateTenant(context.Background(), NewTenant{Name: name, Type: typ})
	if err != nil {
		tb.Fatalf("CreateTenant(%q, %q): %v", name, typ, err)
	}
	return ct
}

func mustCreateApp(tb testing.TB, s *Store, tenantID string, in ApplicationInput) (*Application, *IssuedKey) {
	tb.Helper()
	app, key, err := s.CreateApplication(context.Background(), tenantID, "actor", in)
	if err != nil {
		tb.Fatalf("CreateApplication(%s, %+v): %v", tenantID, in, err)
	}
	return app, key
}

func privateApp(name string) ApplicationInput {
	return ApplicationInput{Name: name, Type: AppPrivate, Permissions: []string{"token:read", "token:use"}}
}

func boolPtr(b bool) *bool { return &b }

// validationFields returns the sorted field names of a ValidationError and
// fails the test when err is not one.
func validationFields(tb testing.TB, err error) []string {
	tb.Helper()
	var v *ValidationError
	if !errors.As(err, &v) {
		tb.Fatalf("error %v (%T) is not a *ValidationError", err, err)
	}
	names := make([]string, 0, len(v.Fields))
	for f := range v.Fields {
		names = append(names, f)
	}
	sort.Strings(names)
	return names
}

// kvKeys lists every KV key under prefix.
func kvKeys(tb testing.TB, s *Store, prefix string) []string {
	tb.Helper()
	var keys []string
	err := s.kv.View(context.Background(), func(r Reader) error {
		return r.Scan([]byte(prefix), nil, func(k, _ []byte) error {
			keys = append(keys, string(k))
			return nil
		})
	})
	if err != nil {
		tb.Fatalf("scanning %q: %v", prefix, err)
	}
	return keys
}

// hashDir returns the sha256 of every regular file under dir, by relative
// path.
func hashDir(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			out[rel+"/"] = "dir"
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		tb.Fatalf("hashing %s: %v", dir, err)
	}
	return out
}

func assertSameFiles(tb testing.TB, before, after map[string]string) {
	tb.Helper()
	for name, h := range before {
		switch a, ok := after[name]; {
		case !ok:
			tb.Errorf("%s disappeared", name)
		case a != h:
			tb.Errorf("%s changed: sha256 %s -> %s", name, h, a)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			tb.Errorf("%s appeared", name)
		}
	}
}

// makeStoreWithData creates a store in dir holding one tenant, and closes it.
func makeStoreWithData(t *testing.T, dir string) *CreatedTenant {
	t.Helper()
	s := openTestStore(t, Options{Dir: dir})
	ct := mustCreateTenant(t, s, "Existing", TenantTest)
	closeTestStore(t, s)
	return ct
}

func TestOpenRejectsMasterKeyOfWrongLength(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"16 bytes", make([]byte, 16)},
		{"31 bytes", bytes.Repeat([]byte{1}, 31)},
		{"33 bytes", bytes.Repeat([]byte{1}, 33)},
		{"64 bytes", bytes.Repeat([]byte{1}, 64)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "vault")
			s, err := Open(Options{Dir: dir, MasterKey: tc.key})
			if err == nil {
				s.Close()
				t.Fatal("Open accepted a master key of the wrong length")
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Open with a bad key touched the file system: stat %s: %v", dir, err)
			}
		})
	}
}

func TestOpenWrongMasterKeyChangesNothing(t *testing.T) {
	badgerOnly(t)
	dir := t.TempDir()
	ct := makeStoreWithData(t, dir)
	before := hashDir(t, dir)
	if len(before) < 3 {
		t.Fatalf("expected a populated store directory, got %v", before)
	}

	for _, tc := range []struct {
		name string
		key  []byte
	}{
		{"other key", bytes.Repeat([]byte{0x43}, MasterKeySize)},
		{"zero key", make([]byte, MasterKeySize)},
		{"one bit off", func() []byte { k := slices.Clone(testMasterKey); k[31] ^= 1; return k }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(Options{Dir: dir, MasterKey: tc.key})
			if err == nil {
				s.Close()
				t.Fatal("Open accepted the wrong master key")
			}
			if !errors.Is(err, ErrWrongMasterKey) {
				t.Errorf("error %v does not wrap ErrWrongMasterKey", err)
			}
			assertSameFiles(t, before, hashDir(t, dir))
		})
	}

	// The right key still opens the untouched store.
	s := openTestStore(t, Options{Dir: dir})
	if _, err := s.Authenticate(context.Background(), ct.Key); err != nil {
		t.Fatalf("Authenticate after refused opens: %v", err)
	}
}

func TestOpenRefusesLockedDirectory(t *testing.T) {
	badgerOnly(t)
	dir := t.TempDir()
	first := openTestStore(t, Options{Dir: dir})

	second, err := Open(Options{Dir: dir, MasterKey: testMasterKey})
	if err == nil {
		second.Close()
		t.Fatal("second Open of a locked directory succeeded")
	}
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("error %v does not wrap ErrLocked", err)
	}
	// The first store keeps working.
	ct := mustCreateTenant(t, first, "Still works", TenantTest)
	closeTestStore(t, first)

	// Once released, the directory opens again with its data.
	again := openTestStore(t, Options{Dir: dir})
	if _, err := again.Authenticate(context.Background(), ct.Key); err != nil {
		t.Fatalf("Authenticate after reopen: %v", err)
	}
}

func TestOpenRefusesUnwritableDirectory(t *testing.T) {
	badgerOnly(t)
	root := t.TempDir()
	var dir string
	if os.Geteuid() == 0 {
		// chmod does not stop root: use a path below a regular file instead.
		file := filepath.Join(root, "plain-file")
		if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(file, "vault")
	} else {
		dir = filepath.Join(root, "ro")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
	}
	before := hashDir(t, root)

	s, err := Open(Options{Dir: dir, MasterKey: testMasterKey})
	if err == nil {
		s.Close()
		t.Fatal("Open accepted an unwritable directory")
	}
	assertSameFiles(t, before, hashDir(t, root))
}

func TestOpenRefusesUnusableMeta(t *testing.T) {
	badgerOnly(t)
	metaWith := func(mutate func(m map[string]any)) func(t *testing.T, path string) {
		return func(t *testing.T, path string) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			mutate(m)
			raw, err = json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, raw, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name    string
		edit    func(t *testing.T, path string)
		wantMsg string
	}{
		{"newer format", metaWith(func(m map[string]any) { m["format"] = FormatVersion + 1 }), "newer"},
		{"much newer format", metaWith(func(m map[string]any) { m["format"] = 1000 }), "newer"},
		{"corrupt json", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"missing meta beside a database", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			makeStoreWithData(t, dir)
			tc.edit(t, filepath.Join(dir, metaFileName))
			before := hashDir(t, dir)

			s, err := Open(Options{Dir: dir, MasterKey: testMasterKey})
			if err == nil {
				s.Close()
				t.Fatal("Open accepted the store")
			}
			if tc.wantMsg != "" && !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tc.wantMsg)
			}
			assertSameFiles(t, before, hashDir(t, dir))
		})
	}
}

func TestDataSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clock := newFakeClock()
	s := openTestStore(t, Options{Dir: dir, Now: clock.Now, SyncWrites: true})
	ct := mustCreateTenant(t, s, "Durable", TenantProduction)
	if _, err := s.UpdateTenant(ctx, ct.Tenant.ID, "actor", TenantUpdate{Name: "Durable 2", Settings: map[string]string{"fingerprint_tokens": "true"}}); err != nil {
		t.Fatal(err)
	}
	app, appKey := mustCreateApp(t, s, ct.Tenant.ID, ApplicationInput{
		Name: "Backend", Type: AppPrivate,
		Rules: []AccessRule{{Priority: 1, Container: "/pci/", Transform: TransformReveal, Permissions: []string{"token:use"}}},
	})
	extra, err := s.CreateKey(ctx, ct.Tenant.ID, app.ID, "actor")
	if err != nil {
		t.Fatal(err)
	}
	closeTestStore(t, s)

	s = openTestStore(t, Options{Dir: dir, Now: clock.Now})
	got, err := s.GetTenant(ctx, ct.Tenant.ID)
	if err != nil {
		t.Fatalf("GetTenant after reopen: %v", err)
	}
	if got.Name != "Durable 2" || got.Type != TenantProduction || got.Settings["fingerprint_tokens"] != "true" {
		t.Errorf("tenant after reopen = %+v", got)
	}
	for _, tc := range []struct {
		name, key, appID string
	}{
		{"management key", ct.Key, ct.Application.ID},
		{"application key", appKey.Key, app.ID},
		{"second application key", extra.Key, app.ID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := s.Authenticate(ctx, tc.key)
			if err != nil {
				t.Fatalf("Authenticate after reopen: %v", err)
			}
			if p.Tenant.ID != ct.Tenant.ID || p.Application.ID != tc.appID {
				t.Errorf("principal = tenant %s app %s, want %s %s", p.Tenant.ID, p.Application.ID, ct.Tenant.ID, tc.appID)
			}
		})
	}
	gotApp, err := s.GetApplication(ctx, ct.Tenant.ID, app.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(gotApp.Rules, app.Rules, func(a, b AccessRule) bool {
		return a.Priority == b.Priority && a.Container == b.Container && a.Transform == b.Transform && slices.Equal(a.Permissions, b.Permissions)
	}) {
		t.Errorf("rules after reopen = %+v, want %+v", gotApp.Rules, app.Rules)
	}
	keys, err := s.ListKeys(ctx, ct.Tenant.ID, app.ID)
	if err != nil || len(keys) != 2 {
		t.Errorf("ListKeys after reopen = %v, %v; want 2 keys", keys, err)
	}
}

func TestStoreDirAndMasterKeyMatches(t *testing.T) {
	badgerOnly(t)
	dir := t.TempDir()
	t.Chdir(dir)
	s := openTestStore(t, Options{Dir: "relative"})
	if want := filepath.Join(dir, "relative"); s.Dir() != want {
		t.Errorf("Dir() = %q, want %q", s.Dir(), want)
	}
	other := slices.Clone(testMasterKey)
	other[0] ^= 0x80
	for _, tc := range []struct {
		name string
		key  []byte
		want bool
	}{
		{"same key", slices.Clone(testMasterKey), true},
		{"other key", other, false},
		{"short key", testMasterKey[:16], false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.MasterKeyMatches(tc.key); got != tc.want {
				t.Errorf("MasterKeyMatches = %v, want %v", got, tc.want)
			}
		})
	}
}

// A store handed to several owners (a usage pool, a deferred Close in a
// test) may be closed more than once; that must not panic.
func TestCloseTwiceDoesNotPanic(t *testing.T) {
	s := openTestStore(t, Options{Dir: t.TempDir()})
	closeTestStore(t, s)
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("second Close panicked: %v", r)
		}
	}()
	_ = s.Close()
}

// sameJSON reports whether a and b marshal to the same JSON, which is how
// records round-trip through the store.
func sameJSON(tb testing.TB, a, b any) bool {
	tb.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		tb.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		tb.Fatal(err)
	}
	return bytes.Equal(ja, jb)
}

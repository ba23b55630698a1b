package vaultstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/kv/badgerkv"

	"github.com/tokenvault/tokenvault/vaultstore/internal/seal"
)

// dumpEntry is one raw KV entry.
type dumpEntry struct {
	value     string
	expiresAt uint64
}

// dumpStorage reads every entry of a store straight from its engine, without
// what is not the vault's (health checks, meta, CVC keys, leases).
func dumpStorage(tb testing.TB, s *Store) map[string]dumpEntry {
	tb.Helper()
	snap, err := snapshotterOf(s.kv)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]dumpEntry{}
	err = snap.Snapshot(context.Background(), func(key, value []byte, expiresAt time.Time) error {
		if backedUp(key) {
			out[string(key)] = dumpEntry{string(value), unixSeconds(expiresAt)}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// backupBytes takes a backup of s into memory.
func backupBytes(tb testing.TB, s *Store) []byte {
	tb.Helper()
	var buf bytes.Buffer
	if err := s.Backup(context.Background(), &buf, nil); err != nil {
		tb.Fatalf("Backup: %v", err)
	}
	return buf.Bytes()
}

// restoreBytes restores a backup into dir with key.
// With TV_ENGINE=postgres it restores into the database the tests map dir
// to (see withTestEngine), which a store opened on dir then opens.
func restoreBytes(tb testing.TB, data []byte, dir string, key []byte) (*RestoreStats, error) {
	tb.Helper()
	return Restore(bytes.NewReader(data), withTestRestore(tb, RestoreOptions{Dir: dir, MasterKey: key}))
}

// withTestRestore points a restore at the test engine, as withTestEngine
// does a store.
func withTestRestore(tb testing.TB, o RestoreOptions) RestoreOptions {
	tb.Helper()
	if testEngine == "postgres" && o.Postgres == nil {
		o.Postgres = withTestEngine(tb, Options{Dir: o.Dir}).Postgres
	}
	return o
}

// backupWorld is a store with a bit of everything: two tenants, applications
// with several keys, tokens of each type (one with a CVC, one that
// expires, one with search indexes), a proxy with a hostname and audit
// records, which Badger expires by itself.
type backupWorld struct {
	*tokenWorld
	other    *CreatedTenant
	keys     []string // API keys
	proxy    *Proxy
	tokens   []*Token // as created, revealed
	cvcToken string
}

// newBackupWorld is a token world for backups.
func newBackupWorld(tb testing.TB) *backupWorld {
	tb.Helper()
	w := &backupWorld{tokenWorld: newTokenWorld(tb, nil)}
	ctx := context.Background()
	s := w.s
	app, key := mustCreateApp(tb, s, w.tenant.ID, privateApp("billing"))
	second, err := s.CreateKey(ctx, w.tenant.ID, app.ID, "actor")
	if err != nil {
		tb.Fatal(err)
	}
	w.other = mustCreateTenant(tb, s, "Other", TenantProduction)
	w.keys = []string{key.Key, second.Key, w.other.Key}
	w.proxy = mustCreateProxy(tb, s, w.tenant.ID, proxyInput("charges"))
	if _, err := s.RegisterHostname(ctx, w.tenant.ID, w.proxy.ID, "pay.example.com"); err != nil {
		tb.Fatal(err)
	}
	inputs := []TokenInput{
		{Type: "card", Data: cardData(testVisa, "")},
		{Type: "card", Data: cardData(testMastercard, ""), Metadata: map[string]string{"customer": "c-1"}},
		{Type: "bank", Data: bankData(testRouting, testAccount)},
		{Type: "token", Data: "bk secret token data", SearchIndexes: []string{"{{ data }}"}},
		{Type: "token", Data: map[string]any{"nested": "bk nested secret"}, ExpiresAt: w.clock.Peek().Add(48 * time.Hour).Format(time.RFC3339)},
	}
	for _, in := range inputs {
		tok := w.mustCreate("admin", in)
		w.tokens = append(w.tokens, w.mustGet("admin", tok.ID))
	}
	w.cvcToken = w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testAmex, testCVC)}).ID
	if got := cvcOf(w.mustGet("admin", w.cvcToken)); got != testCVC {
		tb.Fatalf("the card's CVC before the backup: %q", got)
	}
	// detokenizing with audit writes audit records, which carry a TTL
	_, _, err = s.Detokenize(ctx, w.req("admin"), DetokenizeOptions{Permission: "token:use", Limit: 10, Audit: auditRecordFor(w.proxy.ID)}, "{{ "+w.tokens[3].ID+" }}")
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.CheckHealth(ctx); err != nil {
		tb.Fatal(err)
	}
	return w
}

func TestBackupRestoreRoundTrip(t *testing.T) {
	w := newBackupWorld(t)
	before := dumpStorage(t, w.s)
	var ttl int
	for _, e := range before {
		if e.expiresAt != 0 {
			ttl++
		}
	}
	if ttl == 0 {
		t.Fatal("the world has no entry with a TTL; the test would not check that expiry is kept")
	}
	var calls, lastBytes, lastRecords int64
	var buf bytes.Buffer
	err := w.s.Backup(context.Background(), &buf, func(b, r int64) { calls++; lastBytes, lastRecords = b, r })
	if err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	if calls == 0 || lastBytes != int64(len(data)) || lastRecords != int64(len(before)) {
		t.Errorf("progress: %d calls, last (%d bytes, %d records), want (%d, %d)", calls, lastBytes, lastRecords, len(data), len(before))
	}

	dir := filepath.Join(t.TempDir(), "restored")
	var progressBytes, progressRecords int64
	stats, err := Restore(bytes.NewReader(data), withTestRestore(t, RestoreOptions{Dir: dir, MasterKey: testMasterKey, Progress: func(b, r int64) { progressBytes, progressRecords = b, r }}))
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if stats.Records != int64(len(before)) || stats.Bytes != int64(len(data)) || stats.Expired != 0 {
		t.Errorf("stats %+v, want %d records of %d bytes", stats, len(before), len(data))
	}
	if progressBytes != stats.Bytes || progressRecords != stats.Records {
		t.Errorf("restore progress ended at (%d bytes, %d records), want (%d, %d)", progressBytes, progressRecords, stats.Bytes, stats.Records)
	}
	if testEngine != "postgres" {
		if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
			t.Errorf("restored directory: %v, %v; want mode 0700", info, err)
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("the restore left %s behind", e.Name())
			}
		}
	}

	r := openTestStore(t, Options{Dir: dir, Now: w.clock.Now})
	after := dumpStorage(t, r)
	if len(after) != len(before) {
		t.Errorf("restored %d entries, want %d", len(after), len(before))
	}
	for k, e := range before {
		if got, ok := after[k]; !ok {
			t.Errorf("entry %q is missing", k)
		} else if got != e {
			t.Errorf("entry %q differs (expiry %d, want %d)", k, got.expiresAt, e.expiresAt)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("entry %q appeared", k)
		}
	}

	rw := w.at(t)
	rw.s = r
	for _, want := range w.tokens {
		got := rw.mustGet("admin", want.ID)
		if encodeJSON(t, got) != encodeJSON(t, want) {
			t.Errorf("token %s after restore:\n%s\nwant\n%s", want.ID, encodeJSON(t, got), encodeJSON(t, want))
		}
	}
	if got := rw.mustGet("admin", w.cvcToken); cvcOf(got) != nil {
		t.Errorf("a restored card has its CVC; the backup must not outlive the CVC's retention")
	} else if m, _ := got.Data.(map[string]any); m["number"] != testAmex {
		t.Errorf("the restored card without its CVC: %v", got.Data)
	}
	for _, k := range w.keys {
		if _, err := r.Authenticate(context.Background(), k); err != nil {
			t.Errorf("an API key does not authenticate after restore: %v", err)
		}
	}
	if p, _, err := r.ProxyByKey(context.Background(), w.proxy.Key); err != nil || p.ID != w.proxy.ID {
		t.Errorf("the proxy key after restore: %v, %v", p, err)
	}
	if h, err := r.LookupHostname(context.Background(), "pay.example.com"); err != nil || h.ProxyID != w.proxy.ID {
		t.Errorf("the hostname after restore: %+v, %v", h, err)
	}
	if err := r.CheckHealth(context.Background()); err != nil {
		t.Errorf("health after restore: %v", err)
	}
}

func TestRestoreWrongMasterKey(t *testing.T) {
	w := newBackupWorld(t)
	data := backupBytes(t, w.s)
	other := bytes.Repeat([]byte{0x17}, MasterKeySize)

	missing := filepath.Join(t.TempDir(), "new")
	_, err := restoreBytes(t, data, missing, other)
	if !errors.Is(err, ErrBackupKeyMismatch) {
		t.Fatalf("restore with another key: %v, want ErrBackupKeyMismatch", err)
	}
	if !strings.Contains(err.Error(), "master key does not match the backup") {
		t.Errorf("the error does not say the key does not match: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused restore created the directory: %v", err)
	}
	empty := t.TempDir()
	if _, err := restoreBytes(t, data, empty, other); !errors.Is(err, ErrBackupKeyMismatch) {
		t.Fatalf("restore with another key: %v", err)
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("a refused restore wrote %d entries", len(entries))
	}
	if _, err := restoreBytes(t, data, empty, testMasterKey[:16]); err == nil {
		t.Error("a short key was accepted")
	}
}

// backupFrames splits a backup into its header and frames.
func backupFrames(tb testing.TB, data []byte) (header []byte, frames [][]byte) {
	tb.Helper()
	n := backupFixedHeader + 2 + int(binary.BigEndian.Uint16(data[backupFixedHeader:]))
	header, data = data[:n], data[n:]
	for len(data) > 0 {
		size := backupFrameHeader + int(binary.BigEndian.Uint32(data))
		frames, data = append(frames, data[:size]), data[size:]
	}
	return header, frames
}

// joinBytes concatenates parts.
func joinBytes(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// fillStore writes n entries of about size bytes of random data, so a
// backup spans several frames.
func fillStore(tb testing.TB, s *Store, n, size int) {
	tb.Helper()
	err := s.kv.Update(context.Background(), func(w Writer) error {
		for i := range n {
			v := make([]byte, size)
			for j := range v {
				v[j] = byte(rand.N(256))
			}
			if err := w.Put(fmt.Appendf(nil, "v1/bktest/%06d", i), v, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}

func TestRestoreRefusesDamagedBackups(t *testing.T) {
	s, _ := newTestStore(t)
	fillStore(t, s, 800, 1000)
	data := backupBytes(t, s)
	header, frames := backupFrames(t, data)
	if len(frames) < 3 {
		t.Fatalf("the backup has %d frames; the test needs at least 3", len(frames))
	}
	if _, err := restoreBytes(t, data, filepath.Join(t.TempDir(), "ok"), testMasterKey); err != nil {
		t.Fatalf("the undamaged backup: %v", err)
	}
	flip := func(b []byte, at int) []byte {
		c := bytes.Clone(b)
		c[at] ^= 0x01
		return c
	}
	last := len(frames) - 1
	// frame 0 claiming to be last, with the rest dropped
	asLast := bytes.Clone(frames[0])
	asLast[4] = backupFrameLast
	cases := map[string][]byte{
		"empty":                     nil,
		"not a backup":              bytes.Repeat([]byte("garbage!"), 100),
		"header only":               header,
		"last frame dropped":        joinBytes(append([][]byte{header}, frames[:last]...)...),
		"cut inside a frame":        data[:len(data)-10],
		"byte flipped in a payload": joinBytes(append([][]byte{header, frames[0], flip(frames[1], 100)}, frames[2:]...)...),
		"byte flipped in the tag":   joinBytes(append([][]byte{header}, append(frames[:last:last], flip(frames[last], len(frames[last])-1))...)...),
		"created_at changed":        joinBytes(append([][]byte{flip(header, 19)}, frames...)...),
		"salt changed":              joinBytes(append([][]byte{flip(header, 60)}, frames...)...),
		"record count changed":      joinBytes(append([][]byte{header, flip(frames[0], 8)}, frames[1:]...)...),
		"frames swapped":            joinBytes(append([][]byte{header, frames[1], frames[0]}, frames[2:]...)...),
		"frame replayed":            joinBytes(append([][]byte{header, frames[0], frames[0]}, frames[1:]...)...),
		"middle frame dropped":      joinBytes(append([][]byte{header, frames[0]}, frames[2:]...)...),
		"early last flag":           joinBytes(header, asLast),
		"data after the last frame": joinBytes(data, []byte{0}),
		"a second backup appended":  joinBytes(data, data),
	}
	for name, damaged := range cases {
		t.Run(name, func(t *testing.T) {
			missing := filepath.Join(t.TempDir(), "new")
			if _, err := restoreBytes(t, damaged, missing, testMasterKey); err == nil {
				t.Fatal("restored")
			}
			if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the failed restore left the directory: %v", err)
			}
			empty := t.TempDir()
			if _, err := restoreBytes(t, damaged, empty, testMasterKey); err == nil {
				t.Fatal("restored")
			}
			if entries, _ := os.ReadDir(empty); len(entries) != 0 {
				t.Errorf("the failed restore left %d entries in the directory", len(entries))
			}
		})
	}
}

func TestRestoreRefusesNonEmptyDirectory(t *testing.T) {
	badgerOnly(t)
	s, _ := newTestStore(t)
	data := backupBytes(t, s)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := hashDir(t, dir)
	if _, err := restoreBytes(t, data, dir, testMasterKey); !errors.Is(err, ErrRestoreTargetNotEmpty) {
		t.Fatalf("restore into a non-empty directory: %v", err)
	}
	assertSameFiles(t, before, hashDir(t, dir))

	// a running store: not empty (and locked)
	if _, err := restoreBytes(t, data, s.Dir(), testMasterKey); !errors.Is(err, ErrRestoreTargetNotEmpty) || !strings.Contains(err.Error(), "holds a vault store") {
		t.Fatalf("restore into a store's directory: %v", err)
	}
	file := filepath.Join(dir, "notes.txt")
	if _, err := restoreBytes(t, data, file, testMasterKey); err == nil {
		t.Fatal("restored into a file")
	}
}

func TestBackupKeepsExpiry(t *testing.T) {
	s, _ := newTestStore(t)
	soon := uint64(time.Now().Unix()) + 2
	later := uint64(time.Now().Add(time.Hour).Unix())
	err := s.kv.Update(t.Context(), func(w Writer) error {
		for k, exp := range map[string]uint64{"v1/bktest/soon": soon, "v1/bktest/later": later, "v1/bktest/never": 0} {
			var ttl time.Duration
			if exp != 0 {
				ttl = time.Until(time.Unix(int64(exp), 0))
			}
			if err := w.Put([]byte(k), []byte("v"), ttl); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	data := backupBytes(t, s)
	for uint64(time.Now().Unix()) < soon {
		time.Sleep(100 * time.Millisecond)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	stats, err := restoreBytes(t, data, dir, testMasterKey)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Expired != 1 {
		t.Errorf("%d expired entries left out, want 1", stats.Expired)
	}
	got := dumpStorage(t, openTestStore(t, Options{Dir: dir}))
	want := map[string]dumpEntry{"v1/bktest/later": {"v", later}, "v1/bktest/never": {"v", 0}}
	if len(got) != len(want) {
		t.Errorf("restored %v, want %v", got, want)
	}
	for k, e := range want {
		if got[k] != e {
			t.Errorf("%s restored as %+v, want %+v", k, got[k], e)
		}
	}
}

func TestBackupHoldsNothingInClear(t *testing.T) {
	w := newBackupWorld(t)
	data := backupBytes(t, w.s)
	needles := map[string]string{
		"card number":    testVisa,
		"card number 2":  testMastercard,
		"CVC card":       testAmex,
		"bank account":   testAccount,
		"token data":     "bk secret token data",
		"nested data":    "bk nested secret",
		"tenant id":      w.tenant.ID,
		"other tenant":   w.other.Tenant.ID,
		"proxy id":       w.proxy.ID,
		"proxy key":      w.proxy.Key,
		"hostname":       "pay.example.com",
		"token id":       w.tokens[0].ID,
		"key layout":     "v1/t/",
		"key index":      "v1/apikey/",
		"tenant name":    "Tokens",
		"metadata":       "customer",
		"badger":         "!badger!",
		"json of a seal": `"tenant_id"`,
	}
	for i, k := range w.keys {
		sum := sha256.Sum256([]byte(k))
		needles[fmt.Sprintf("API key %d", i)] = k
		needles[fmt.Sprintf("API key digest %d", i)] = hex.EncodeToString(sum[:])
		needles[fmt.Sprintf("API key raw digest %d", i)] = string(sum[:])
	}
	for name, n := range needles {
		if bytes.Contains(data, []byte(n)) {
			t.Errorf("the backup holds the %s in clear", name)
		}
	}
	if !bytes.HasPrefix(data, []byte(backupMagic)) {
		t.Error("the backup does not start with its magic")
	}
}

// TestBackupUnderConcurrentWrites takes a backup while writers create
// tokens and checks that the restored store is consistent: every token
// created before the backup began is there, and the list index and the
// token records agree.
func TestBackupUnderConcurrentWrites(t *testing.T) {
	clock := newFakeClock()
	s := openTestStore(t, Options{Dir: t.TempDir(), Now: clock.Now})
	w := newTokenWorldOn(t, s, clock, s.Dir(), nil)
	req := w.req("admin")
	fillStore(t, s, 2000, 1000) // some frames to write while the writers run

	var mu sync.Mutex
	var created []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failures atomic.Int64
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20000; i++ { // bounded: stops by itself
				select {
				case <-stop:
					return
				default:
				}
				tok, err := s.CreateToken(context.Background(), req, TokenInput{Type: "token", Data: fmt.Sprintf("writer %d value %d", g, i)})
				if err != nil {
					failures.Add(1)
					continue
				}
				mu.Lock()
				created = append(created, tok.ID)
				mu.Unlock()
			}
		}()
	}
	for { // let the writers get going
		mu.Lock()
		n := len(created)
		mu.Unlock()
		if n >= 300 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	before := append([]string(nil), created...)
	mu.Unlock()
	var buf bytes.Buffer
	// a slow reader: the writers commit while the snapshot is being read
	err := s.Backup(context.Background(), &buf, func(int64, int64) { time.Sleep(5 * time.Millisecond) })
	mu.Lock()
	during := len(created)
	mu.Unlock()
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if during == len(before) {
		t.Error("no token was created while the backup ran; the test did not test concurrency")
	}
	if f := failures.Load(); f > 0 {
		t.Errorf("%d token creations failed", f)
	}

	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := restoreBytes(t, buf.Bytes(), dir, testMasterKey); err != nil {
		t.Fatal(err)
	}
	r := openTestStore(t, Options{Dir: dir, Now: clock.Now})
	prefix := "v1/t/" + w.tenant.ID
	records := len(kvKeys(t, r, prefix+"/tok/"))
	order := len(kvKeys(t, r, prefix+"/tokc/"))
	if records != order {
		t.Errorf("%d token records but %d list index entries", records, order)
	}
	if records < len(before) || records > len(created) {
		t.Errorf("%d tokens restored; %d were created before the backup, %d in all", records, len(before), len(created))
	}
	rw := w.at(t)
	rw.s = r
	for _, id := range before {
		if _, err := rw.get("admin", id); err != nil {
			t.Fatalf("token %s, created before the backup, after restore: %v", id, err)
		}
	}
	if _, total := rw.mustList("admin", TokenFilter{}, 0, 1); total != records {
		t.Errorf("the restored list counts %d tokens, the records are %d", total, records)
	}
	t.Logf("%d tokens before the backup, %d restored, %d when it ended, %d created in all", len(before), records, during, len(created))
}

// wrappedKV wraps a KV, with or without Unwrap.
type wrappedKV struct{ KV }

type unwrappingKV struct{ KV }

func (u unwrappingKV) Unwrap() KV { return u.KV }

func TestBackupThroughWrappedKV(t *testing.T) {
	s := openTestStore(t, Options{Dir: t.TempDir(), WrapKV: func(kv KV) KV { return unwrappingKV{wrappedKV{unwrappingKV{kv}}} }})
	mustCreateTenant(t, s, "Wrapped", TenantTest)
	if err := s.Backup(context.Background(), io.Discard, nil); err == nil {
		t.Error("a backup through a wrapper without Unwrap succeeded")
	}
	s2 := openTestStore(t, Options{Dir: t.TempDir(), WrapKV: func(kv KV) KV { return unwrappingKV{unwrappingKV{kv}} }})
	mustCreateTenant(t, s2, "Wrapped", TenantTest)
	data := backupBytes(t, s2)
	if _, err := restoreBytes(t, data, filepath.Join(t.TempDir(), "r"), testMasterKey); err != nil {
		t.Fatal(err)
	}
}

func TestBackupStopsWithContext(t *testing.T) {
	s, _ := newTestStore(t)
	fillStore(t, s, 3000, 100)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var buf bytes.Buffer
	if err := s.Backup(ctx, &buf, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Backup with a cancelled context: %v", err)
	}
	if _, err := restoreBytes(t, buf.Bytes(), filepath.Join(t.TempDir(), "r"), testMasterKey); err == nil {
		t.Error("the stream of a cancelled backup restored")
	}
}

func TestBackupMeter(t *testing.T) {
	s, _ := newTestStore(t)
	fillStore(t, s, 700, 1000)
	mustCreateTenant(t, s, "Meter", TenantTest)
	data := backupBytes(t, s)
	records := int64(len(dumpStorage(t, s)))

	var m BackupMeter
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 1+rand.N(40000))
		if k, err := m.Write(rest[:n]); err != nil || k != n {
			t.Fatalf("Write: %d, %v", k, err)
		}
		rest = rest[n:]
		if len(rest) > 0 && m.Complete() {
			t.Fatal("complete before the end")
		}
	}
	if !m.Complete() || m.Bytes() != int64(len(data)) || m.Records() != records {
		t.Errorf("meter: complete %v, %d bytes, %d records; want %d bytes, %d records", m.Complete(), m.Bytes(), m.Records(), len(data), records)
	}
	if _, err := m.Write([]byte{0}); err == nil {
		t.Error("data after the last frame was taken")
	}

	var short BackupMeter
	short.Write(data[:len(data)-1])
	if short.Complete() {
		t.Error("a stream cut short is complete")
	}
	var junk BackupMeter
	if _, err := junk.Write(bytes.Repeat([]byte{'x'}, 200)); err == nil {
		t.Error("junk was taken for a backup")
	}
}

// BenchmarkBackup backs up a store of 50,000 tokens (b.SetBytes is the
// size of one backup, so ns/op becomes MB/s).
func BenchmarkBackup(b *testing.B) {
	w := newTokenBenchWorld(b, false)
	req := w.req("admin")
	const tokens = 50000
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < tokens; i += 2 {
				in := TokenInput{Type: "card", Data: benchCard(i), Metadata: map[string]string{"n": fmt.Sprint(i)}}
				if _, err := w.s.CreateToken(w.ctx, req, in); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	var size int64
	for b.Loop() {
		var n countingDiscard
		if err := w.s.Backup(context.Background(), &n, nil); err != nil {
			b.Fatal(err)
		}
		size = int64(n)
	}
	b.SetBytes(size)
	b.ReportMetric(float64(size)/(1<<20), "MiB/backup")
}

type countingDiscard int64

func (c *countingDiscard) Write(p []byte) (int, error) {
	*c += countingDiscard(len(p))
	return len(p), nil
}

// craftBackup writes a backup of the given entries sealed for key, as Backup
// would, without a store.
func craftBackup(tb testing.TB, key []byte, format uint16, entries map[string]string) []byte {
	tb.Helper()
	master, err := newAEAD(key)
	if err != nil {
		tb.Fatal(err)
	}
	secret := randomBytes(backupSecretSize)
	h := &backupHeader{storeFormat: format, createdAt: time.Now(), keyCheck: keyCheck(key), salt: randomBytes(backupSaltSize)}
	if h.wrapped, err = seal.Seal(master, 1, secret, h.secretAAD()); err != nil {
		tb.Fatal(err)
	}
	aead, err := backupFrameAEAD(secret, h.salt)
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	buf.Write(h.encode())
	fw := &frameWriter{w: &buf, aead: aead, salt: h.salt}
	for k, v := range entries {
		if err := fw.add([]byte(k), []byte(v), 0); err != nil {
			tb.Fatal(err)
		}
	}
	if err := fw.flush(true); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func TestBackupRefusesKeysOfAnotherMasterKey(t *testing.T) {
	if !strings.HasPrefix(string(dataKeyKey("t", 1)), dataKeysPrefix) || string(fingerprintKeyKey("t")) != fingerprintKeysPrefix+"t" {
		t.Fatal("the prefixes of master-wrapped keys do not match keys.go")
	}
	s, _ := newTestStore(t)
	ct := mustCreateTenant(t, s, "Rotating", TenantTest)
	stranger, err := newAEAD(bytes.Repeat([]byte{0x99}, MasterKeySize))
	if err != nil {
		t.Fatal(err)
	}
	wrapped, err := seal.Seal(stranger, 2, randomBytes(MasterKeySize), dataKeyAAD(ct.Tenant.ID, 2))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.kv.Update(context.Background(), func(w Writer) error { return w.Put(dataKeyKey(ct.Tenant.ID, 2), wrapped, 0) }); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	err = s.Backup(context.Background(), &buf, nil)
	if !errors.Is(err, ErrBackupRotating) || !strings.Contains(err.Error(), "does not open with the current master key") {
		t.Fatalf("Backup of a store with a data key of another master key: %v", err)
	}
	if buf.Len() != 0 {
		t.Errorf("the refused backup wrote %d bytes", buf.Len())
	}

	// and Restore checks the same of what it restores
	data := craftBackup(t, testMasterKey, FormatVersion, map[string]string{
		"v1/tenant/x":                       "record",
		string(dataKeyKey(ct.Tenant.ID, 2)): string(wrapped),
	})
	dir := filepath.Join(t.TempDir(), "r")
	if _, err := restoreBytes(t, data, dir, testMasterKey); err == nil || !strings.Contains(err.Error(), "does not open") {
		t.Fatalf("restore of a data key of another master key: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused restore left %s: %v", dir, err)
	}
	for name, key := range map[string]string{"internal": "!badger!head", "empty": ""} {
		if _, err := restoreBytes(t, craftBackup(t, testMasterKey, FormatVersion, map[string]string{key: "x"}), filepath.Join(t.TempDir(), "r"), testMasterKey); err == nil {
			t.Errorf("a backup with an %s key restored", name)
		}
	}
	if _, err := restoreBytes(t, craftBackup(t, testMasterKey, FormatVersion, map[string]string{"v1/ok": "x"}), filepath.Join(t.TempDir(), "r"), testMasterKey); err != nil {
		t.Errorf("a crafted backup does not restore: %v", err)
	}
}

func TestBackupDuringMasterKeyRotation(t *testing.T) {
	w := newBackupWorld(t)
	w.s.rotating.Lock() // a rotation under way
	err := w.s.Backup(context.Background(), io.Discard, nil)
	w.s.rotating.Unlock()
	if !errors.Is(err, ErrBackupRotating) {
		t.Fatalf("a backup during a master key rotation: %v", err)
	}

	// after a rotation, a backup is sealed for the new key only
	newKey := bytes.Repeat([]byte{0x24}, MasterKeySize)
	if err := w.s.RotateMasterKey(context.Background(), newKey); err != nil {
		t.Fatal(err)
	}
	data := backupBytes(t, w.s)
	if _, err := restoreBytes(t, data, filepath.Join(t.TempDir(), "old"), testMasterKey); !errors.Is(err, ErrBackupKeyMismatch) {
		t.Errorf("restore with the master key before the rotation: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "new")
	if _, err := restoreBytes(t, data, dir, newKey); err != nil {
		t.Fatal(err)
	}
	r := openTestStore(t, Options{Dir: dir, MasterKey: newKey, Now: w.clock.Now})
	rw := w.at(t)
	rw.s = r
	for _, want := range w.tokens {
		if got := rw.mustGet("admin", want.ID); encodeJSON(t, got) != encodeJSON(t, want) {
			t.Errorf("token %s after rotation, backup and restore: %s", want.ID, encodeJSON(t, got))
		}
	}
}

// TestRestoreOlderFormat: a backup of a format 1 store restores into a
// store that is migrated when it first opens.
func TestRestoreOlderFormat(t *testing.T) {
	badgerOnly(t)
	src, facts := fixtureStore(t, "format1")
	key, _ := base64.StdEncoding.DecodeString(facts["master_key"].(string))
	kv, err := badgerkv.Open(badgerkv.Options{Dir: src})
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]string{}
	err = kv.Snapshot(context.Background(), func(k, v []byte, _ time.Time) error {
		entries[string(k)] = string(v)
		return nil
	})
	kv.Close()
	if err != nil || len(entries) == 0 {
		t.Fatalf("reading the fixture: %d entries, %v", len(entries), err)
	}
	data := craftBackup(t, key, 1, entries)
	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := restoreBytes(t, data, dir, key); err != nil {
		t.Fatal(err)
	}
	if m, err := readMeta(dir); err != nil || m.Format != 1 {
		t.Fatalf("the restored meta: %+v, %v; want format 1", m, err)
	}
	s := openTestStore(t, Options{Dir: dir, MasterKey: key})
	if m, err := readMeta(dir); err != nil || m.Format != FormatVersion {
		t.Errorf("the meta once opened: %+v, %v; want format %d", m, err, FormatVersion)
	}
	ctx := context.Background()
	p, err := s.Authenticate(ctx, facts["reader_key"].(string))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range facts["token_ids"].([]any) {
		if _, err := s.GetToken(ctx, TokenRequest{Tenant: p.Tenant, Application: p.Application}, id.(string)); err != nil {
			t.Errorf("token %s: %v", id, err)
		}
	}
	if _, err := restoreBytes(t, craftBackup(t, key, FormatVersion+1, entries), filepath.Join(t.TempDir(), "newer"), key); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("a backup of a newer format: %v", err)
	}
}

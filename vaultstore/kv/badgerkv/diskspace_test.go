package badgerkv

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

const mb = 1 << 20

// fakeFS is a file system whose free space the test sets.
type fakeFS struct {
	mu    sync.Mutex
	free  int64
	err   error
	reads int
}

func (f *fakeFS) statfs(string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.free, f.err
}

func (f *fakeFS) set(free int64) {
	f.mu.Lock()
	f.free = free
	f.mu.Unlock()
}

func (f *fakeFS) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock               { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }
func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// The margin in these tests: Badger's share 100 MiB, the read reserve 64.
const (
	testNeed    = 100 * mb
	testReserve = 64 * mb
	testMargin  = testNeed + testReserve
)

func newTestGuard(free int64) (*spaceGuard, *fakeFS, *fakeClock, *observer.ObservedLogs) {
	fs := &fakeFS{free: free}
	clock := newFakeClock()
	logger, logs := observed()
	g := newSpaceGuard("/data", fs.statfs, func() int64 { return testNeed }, testReserve, clock.now, logger)
	return g, fs, clock, logs
}

func TestSpaceGuardAdmits(t *testing.T) {
	cases := []struct {
		name     string
		free     int64
		n        int64
		reserved bool
		ok       bool
	}{
		{"plenty of room", 10 << 30, 4096, false, true},
		{"a write that leaves the margin", testMargin + mb, mb / 2, false, true},
		{"a write that would cross the margin", testMargin + mb/2, mb, false, false},
		{"under the margin", testMargin - 1, 1, false, false},
		{"a read's audit record under the margin", testMargin - 1, 4096, true, true},
		{"a read's audit record at the end of the reserve", testNeed + 2048, 4096, true, false},
		{"a read's audit record under Badger's share", testNeed - 1, 1, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, _, _, _ := newTestGuard(c.free)
			err := g.admit(c.n, c.reserved)
			if c.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !c.ok {
				if !errors.Is(err, kv.ErrNoSpace) || !errors.Is(err, kv.ErrUnavailable) {
					t.Fatalf("admit = %v, want an error wrapping kv.ErrNoSpace (and so kv.ErrUnavailable)", err)
				}
				// a refusal is the file system being too full for that kind
				// of write, even when a smaller write would still fit
				if d := g.disk(true); d.RefusedWrites != 1 || d.Writable || d.ReadsAudited == c.reserved {
					t.Errorf("disk after the refusal: %+v", d)
				}
			}
		})
	}
}

// With room to spare, the file system is read again only when a second
// has passed or 16 MiB have been written since the last reading: not on
// every write.
func TestSpaceGuardReadsRarelyWithRoom(t *testing.T) {
	g, fs, clock, _ := newTestGuard(10 << 30)
	if fs.count() != 1 {
		t.Fatalf("reads at start = %d, want 1", fs.count())
	}
	for i := 0; i < 10_000; i++ { // 10 MB
		if err := g.admit(1000, false); err != nil {
			t.Fatal(err)
		}
	}
	if fs.count() != 1 {
		t.Errorf("reads after 10,000 small writes within a second = %d, want 1", fs.count())
	}
	for i := 0; i < 8; i++ { // past readingMaxSpent
		if err := g.admit(mb, false); err != nil {
			t.Fatal(err)
		}
	}
	if fs.count() != 2 {
		t.Errorf("reads after more than 16 MiB written = %d, want 2", fs.count())
	}
	clock.advance(readingMaxAge)
	if err := g.admit(1000, false); err != nil {
		t.Fatal(err)
	}
	if fs.count() != 3 {
		t.Errorf("reads after a second = %d, want 3", fs.count())
	}
}

// The guard logs once when writes start being refused, once when reads'
// records are refused too, and once when there is room again, however
// many writes it refuses meanwhile; writes resume without a reopen.
func TestSpaceGuardLogsTransitionsOnceAndResumes(t *testing.T) {
	g, fs, clock, logs := newTestGuard(1 << 30)
	step := func() { clock.advance(nearAge) }

	fs.set(testMargin - 10*mb)
	clock.advance(readingMaxAge) // a change the guard did not make is seen within a second
	for i := 0; i < 200; i++ {
		step()
		if err := g.admit(1000, false); !errors.Is(err, kv.ErrNoSpace) {
			t.Fatalf("write %d under the margin: %v", i, err)
		}
		if err := g.admit(1000, true); err != nil {
			t.Fatalf("a read's record under the margin: %v", err)
		}
	}
	if d := g.disk(true); d.Writable || !d.ReadsAudited || d.FreeBytes > testMargin || d.MarginBytes != testMargin || d.ReserveBytes != testReserve {
		t.Errorf("disk while writes are refused: %+v", d)
	}
	// a little room is not enough to resume (resumeSlack)
	fs.set(testMargin + resumeSlack/2)
	step()
	if err := g.admit(1000, false); !errors.Is(err, kv.ErrNoSpace) {
		t.Errorf("a write just over the margin, after refusals: %v", err)
	}

	fs.set(testNeed - mb)
	clock.advance(readingMaxAge)
	for i := 0; i < 50; i++ {
		step()
		if err := g.admit(1000, true); !errors.Is(err, kv.ErrNoSpace) {
			t.Fatalf("a read's record under Badger's share: %v", err)
		}
	}
	if d := g.disk(true); d.Writable || d.ReadsAudited {
		t.Errorf("disk when full: %+v", d)
	}

	fs.set(1 << 30)
	step()
	if err := g.admit(1000, false); err != nil {
		t.Fatalf("a write once space is freed: %v", err)
	}
	if d := g.disk(true); !d.Writable || !d.ReadsAudited || d.RefusedWrites != 251 {
		t.Errorf("disk after recovery: %+v (want 251 refused)", d)
	}

	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Level.String()+": "+e.Message)
	}
	want := []zapcore.Level{zapcore.WarnLevel, zapcore.ErrorLevel, zapcore.InfoLevel}
	if len(got) != len(want) {
		t.Fatalf("log lines:\n%q\nwant one warning, one error and one info", got)
	}
	for i, e := range logs.All() {
		if e.Level != want[i] {
			t.Errorf("log line %d: %s, want level %s", i, got[i], want[i])
		}
		if e.ContextMap()["margin_bytes"] != int64(testMargin) {
			t.Errorf("log line %d lacks the margin: %v", i, e.ContextMap())
		}
	}
}

// Where the free space cannot be read, writes are admitted and that is
// logged once.
func TestSpaceGuardUnreadableFileSystem(t *testing.T) {
	fs := &fakeFS{err: errors.New("statfs: not supported")}
	clock := newFakeClock()
	logger, logs := observed()
	g := newSpaceGuard("/data", fs.statfs, func() int64 { return testNeed }, testReserve, clock.now, logger)
	for i := 0; i < 5; i++ {
		clock.advance(readingMaxAge)
		if err := g.admit(1000, false); err != nil {
			t.Fatal(err)
		}
	}
	if d := g.disk(true); d.Known || !d.Writable {
		t.Errorf("disk: %+v", d)
	}
	if logs.Len() != 1 || logs.All()[0].Level != zapcore.WarnLevel {
		t.Errorf("log lines: %v, want one warning", logs.All())
	}
}

func TestBaseLevel(t *testing.T) {
	opts := badger.DefaultOptions("")
	sizes := func(perLevel ...int64) shape {
		s := make(shape, opts.MaxLevels)
		for i, n := range perLevel {
			if n > 0 {
				s[i] = []int64{n}
			}
		}
		return s
	}
	cases := []struct {
		name string
		s    shape
		want int
	}{
		{"empty", sizes(), 6},
		{"small: everything in L6", sizes(64*mb, 0, 0, 0, 0, 0, 8*mb), 6},
		{"50 MB: L5", sizes(0, 0, 0, 0, 0, 0, 50*mb), 5},
		{"1 GB with L4 holding data", sizes(0, 0, 0, 0, 5*mb, 90*mb, 1<<30), 4},
		{"1 GB with L4 and L5 empty: moved down", sizes(0, 0, 0, 0, 0, 0, 1<<30), 5},
		{"data above the computed base", sizes(0, mb, 0, 0, 0, 0, 5*mb), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got, _ := c.s.baseLevel(opts); got != c.want {
				t.Errorf("base level = %d, want %d", got, c.want)
			}
		})
	}
}

func TestNeedBytes(t *testing.T) {
	opts := badger.DefaultOptions("")
	empty := make(shape, opts.MaxLevels)
	need := needBytes(empty, opts)
	// a flush of a 64 MB memtable and its 15% batch, 4 MB of other files,
	// an eighth more
	if want := int64(fileAllowance+64*mb+64*mb*15/100) * 9 / 8; need < want-mb || need > want+mb {
		t.Errorf("margin of an empty store = %d MiB, want about %d MiB", need/mb, want/mb)
	}
	// level 0's tables are rewritten by the next level-0 compaction
	withL0 := make(shape, opts.MaxLevels)
	withL0[0] = []int64{64 * mb, 64 * mb, 64 * mb}
	withL0[6] = []int64{8 * mb}
	if grow := needBytes(withL0, opts) - need; grow < 3*64*mb+8*mb {
		t.Errorf("three level-0 tables and an 8 MB base level add %d MiB, want at least %d", grow/mb, (3*64 + 8))
	}
	// a store of about 10 GB: base L3, L4 and L5 compactions as well
	tables := func(n int, size int64) []int64 {
		s := make([]int64, n)
		for i := range s {
			s[i] = size
		}
		return s
	}
	big := make(shape, opts.MaxLevels)
	big[3] = tables(5, 2*mb)
	big[4] = tables(25, 4*mb)
	big[5] = tables(128, 8*mb)
	big[6] = tables(640, 16*mb)
	if got := needBytes(big, opts); got < 250*mb || got > 600*mb {
		t.Errorf("margin of a 10 GB store = %d MiB, want between 250 and 600", got/mb)
	}
}

// A store written with Badger's defaults (1 GB value-log files), with a
// value large enough for the value log, opens with this engine's smaller
// value-log files and reads back.
func TestOpensAStoreWrittenWithBadgersDefaults(t *testing.T) {
	dir := t.TempDir()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	big := valueFor("big", 3<<20) // over the 1 MB value threshold: in the value log
	if err := db.Update(func(txn *badger.Txn) error {
		if err := txn.Set([]byte("big"), big); err != nil {
			return err
		}
		return txn.Set([]byte("small"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Options{Dir: dir, SyncWrites: true})
	if err != nil {
		t.Fatalf("opening a store written with Badger's defaults: %v", err)
	}
	defer s.Close()
	err = s.View(context.Background(), func(r kv.Reader) error {
		for k, want := range map[string][]byte{"big": big, "small": []byte("v")} {
			got, err := r.Get([]byte(k))
			if err != nil || string(got) != string(want) {
				t.Errorf("%s: %v (same value: %v)", k, err, string(got) == string(want))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(context.Background(), func(w kv.Writer) error { return w.Put([]byte("after"), big, 0) }); err != nil {
		t.Fatalf("a write after reopening: %v", err)
	}
}

// Disk after Close answers from the last reading without touching
// Badger's closed tables.
func TestDiskAfterClose(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	before := s.Disk()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(readingMaxAge + 100*time.Millisecond) // the reading is stale
	if after := s.Disk(); !after.Known || after.MarginBytes != before.MarginBytes {
		t.Errorf("disk after Close: %+v, before: %+v", after, before)
	}
}

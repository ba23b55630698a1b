package badgerkv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tokenvault/tokenvault/internal/testclock"
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

// newFakeClock is a clock the test moves.
func newFakeClock() *testclock.Clock { return testclock.New(time.Unix(1_700_000_000, 0)) }

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

func newTestGuard(free int64) (*spaceGuard, *fakeFS, *testclock.Clock, *observer.ObservedLogs) {
	fs := &fakeFS{free: free}
	clock := newFakeClock()
	logger, logs := observed()
	g := newSpaceGuard("/data", fs.statfs, func() int64 { return testNeed }, 0, testReserve, clock.Now, logger)
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
	clock.Advance(readingMaxAge)
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
	step := func() { clock.Advance(nearAge) }

	fs.set(testMargin - 10*mb)
	clock.Advance(readingMaxAge) // a change the guard did not make is seen within a second
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
	clock.Advance(readingMaxAge)
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

// Badger's share of the margin is worked out again with a reading once it
// is nearAge old; until then every byte admitted raises it by perByte
// (the tree those bytes join is larger).
func TestSpaceGuardNeedGrowsWithWrites(t *testing.T) {
	fs := &fakeFS{free: testMargin + 30*mb}
	clock := newFakeClock()
	logger, _ := observed()
	renewals := 0
	// 4.5 bytes more needed per byte written
	g := newSpaceGuard("/data", fs.statfs, func() int64 { renewals++; return testNeed }, 36, testReserve, clock.Now, logger)
	// 26 MB left after it, 18 MB more needed
	if err := g.admit(4*mb, false); err != nil {
		t.Fatalf("the first write: %v", err)
	}
	if d := g.disk(false); d.MarginBytes != testMargin+18*mb {
		t.Errorf("margin after 4 MiB written = %d MiB, want %d", d.MarginBytes/mb, (testMargin+18*mb)/mb)
	}
	fs.set(testMargin + 26*mb)
	// 22 MB left after it, 36 MB more needed
	if err := g.admit(4*mb, false); !errors.Is(err, kv.ErrNoSpace) {
		t.Fatalf("a second write before the margin is renewed: %v", err)
	}
	clock.Advance(nearAge)
	// renewed: 22 MB left after it, 18 MB more needed
	if err := g.admit(4*mb, false); err != nil {
		t.Fatalf("a write once the margin is renewed: %v", err)
	}
	if renewals != 2 {
		t.Errorf("the margin was worked out %d times, want 2", renewals)
	}
}

// Room held for Badger's own work (value-log GC) is kept from the vault's
// writes until it is released.
func TestSpaceGuardHold(t *testing.T) {
	g, _, _, _ := newTestGuard(testMargin + 100*mb)
	release := g.hold(80 * mb)
	if room := g.room(); room != 20*mb {
		t.Errorf("room while 80 MiB are held = %d MiB, want 20", room/mb)
	}
	if err := g.admit(30*mb, false); !errors.Is(err, kv.ErrNoSpace) {
		t.Fatalf("a write into held room: %v", err)
	}
	release()
	if err := g.admit(30*mb, false); err != nil {
		t.Fatalf("a write once the room is released: %v", err)
	}
}

// Where the free space cannot be read, writes are admitted and that is
// logged once.
func TestSpaceGuardUnreadableFileSystem(t *testing.T) {
	fs := &fakeFS{err: errors.New("statfs: not supported")}
	clock := newFakeClock()
	logger, logs := observed()
	g := newSpaceGuard("/data", fs.statfs, func() int64 { return testNeed }, 0, testReserve, clock.Now, logger)
	for i := 0; i < 5; i++ {
		clock.Advance(readingMaxAge)
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

// levelsOf is a tree of one table per level, of the sizes given, with
// keys unknown (as read from a MANIFEST).
func levelsOf(perLevel ...int64) tree {
	t := tree{levels: make([][]sst, badger.DefaultOptions("").MaxLevels)}
	for i, n := range perLevel {
		if n > 0 {
			t.levels[i] = []sst{{size: n}}
		}
	}
	return t
}

// spread is n tables of size bytes that share the key space evenly, in
// key order: a level whose keys are spread evenly.
func spread(n int, size int64) []sst {
	const keys = 100_000_000
	s := make([]sst, n)
	for i := range s {
		s[i] = sst{size: size, left: fmt.Appendf(nil, "k%09d", i*keys/n), right: fmt.Appendf(nil, "k%09d", (i+1)*keys/n-1)}
	}
	return s
}

func TestBaseLevel(t *testing.T) {
	opts := badger.DefaultOptions("")
	cases := []struct {
		name string
		t    tree
		want int
	}{
		{"empty", levelsOf(), 6},
		{"small: everything in L6", levelsOf(64*mb, 0, 0, 0, 0, 0, 8*mb), 6},
		{"50 MB: L5", levelsOf(0, 0, 0, 0, 0, 0, 50*mb), 5},
		{"1 GB with L4 holding data", levelsOf(0, 0, 0, 0, 5*mb, 90*mb, 1<<30), 4},
		{"1 GB with L4 and L5 empty: moved down", levelsOf(0, 0, 0, 0, 0, 0, 1<<30), 5},
		{"data above the computed base", levelsOf(0, mb, 0, 0, 0, 0, 5*mb), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got, _ := c.t.baseLevel(opts); got != c.want {
				t.Errorf("base level = %d, want %d", got, c.want)
			}
		})
	}
}

// tenGB is a store of about 10 GB with Badger's default options, its keys
// spread evenly: L6 of 9 GB in 16 MB tables, L5 of a tenth of that in
// 8 MB tables, L4 in 4 MB tables, and the base level, L3, in 2 MB tables.
func tenGB() tree {
	t := tree{levels: make([][]sst, 7)}
	t.levels[3] = spread(5, 2*mb)
	t.levels[4] = spread(23, 4*mb)
	t.levels[5] = spread(115, 8*mb)
	t.levels[6] = spread(576, 16*mb)
	return t
}

func TestNeedBytes(t *testing.T) {
	opts := badger.DefaultOptions("").WithNumCompactors(numCompactors)
	flushEtc := int64(fileAllowance + 64*mb + 64*mb*15/100)
	// an empty store: a flush of a 64 MB memtable and its 15% batch, 4 MB
	// of other files, an eighth more
	need := needBytes(levelsOf(), opts)
	if want := flushEtc * 9 / 8; need != want {
		t.Errorf("margin of an empty store = %d MiB, want %d MiB", need/mb, want/mb)
	}
	// what the memtables hold joins level 0's next compaction
	withMem := levelsOf()
	withMem.memtables = 100 * mb
	if grow := needBytes(withMem, opts) - need; grow != 100*mb*9/8 {
		t.Errorf("100 MiB in the memtables add %d MiB, want %d", grow/mb, 100*9/8)
	}
	// level 0's tables are rewritten with the base level by the next
	// level-0 compaction
	withL0 := levelsOf(0, 0, 0, 0, 0, 0, 8*mb)
	withL0.levels[0] = []sst{{size: 64 * mb}, {size: 64 * mb}, {size: 64 * mb}}
	if grow := needBytes(withL0, opts) - need; grow < (3*64+8)*mb {
		t.Errorf("three level-0 tables and an 8 MB base level add %d MiB, want at least %d", grow/mb, 3*64+8)
	}

	// 10 GB: two compactions of L5 into L6 may run at once, each an 8 MB
	// table and the 16 MB tables it overlaps (9 GB/115, and one at each
	// end): about 120 MB each
	big := tenGB()
	l5 := int64(8*mb + 576*16*mb*8/(115*8) + 2*16*mb)
	within := func(got, want int64) bool { return got >= want-mb && got <= want+mb }
	if got, want := needBytes(big, opts), (flushEtc+2*l5)*9/8; !within(got, want) {
		t.Errorf("margin of a 10 GB store = %d MiB, want %d MiB", got/mb, want/mb)
	}
	// with five level-0 tables and a memtable: level 0's compaction (with
	// the 10 MB base level) and one of L5
	big.levels[0] = []sst{{size: 64 * mb}, {size: 64 * mb}, {size: 64 * mb}, {size: 64 * mb}, {size: 64 * mb}}
	big.memtables = 64 * mb
	if got, want := needBytes(big, opts), (flushEtc+6*64*mb+10*mb+l5)*9/8; !within(got, want) {
		t.Errorf("margin of a 10 GB store with level 0 full = %d MiB, want %d MiB", got/mb, want/mb)
	}
	// Badger's default of four compactors: four of L5 at once
	opts.NumCompactors = 4
	if got, want := needBytes(tenGB(), opts), (flushEtc+4*l5)*9/8; !within(got, want) {
		t.Errorf("margin of a 10 GB store with 4 compactors = %d MiB, want %d MiB", got/mb, want/mb)
	}
}

// The compactions counted are those the tree could run at once: several of
// one level, the tables a table's keys really overlap when those are known,
// and never more than the whole tree.
func TestNeedBytesCompactions(t *testing.T) {
	opts := badger.DefaultOptions("").WithMemTableSize(2 << 20)
	flushEtc := int64(fileAllowance + 2*mb + 2*mb*15/100)
	compactions := func(tr tree, opts badger.Options) int64 { return needBytes(tr, opts)*8/9 - flushEtc }
	within := func(got, want int64) bool { return got >= want-mb/8 && got <= want+mb/8 }

	// L5 of six 2 MB tables over an L6 of twenty-two 4 MB tables (88 MB):
	// each L5 table overlaps a sixth of L6 and a table at each end, and
	// four such compactions may run at once
	two := tree{levels: make([][]sst, 7)}
	two.levels[5] = spread(6, 2*mb)
	two.levels[6] = spread(22, 4*mb)
	one := int64(2*mb + 88*mb*2/12 + 2*4*mb)
	if got := compactions(two, opts); !within(got, 4*one) {
		t.Errorf("four compactions of L5 into L6 = %.1f MiB, want %.1f", float64(got)/mb, float64(4*one)/mb)
	}
	// one L5 table whose keys span all of L6 would rewrite all of it
	opts.NumCompactors = 1
	if got := compactions(two, opts); !within(got, one) {
		t.Errorf("one compaction of L5 into L6 = %.1f MiB, want %.1f", float64(got)/mb, float64(one)/mb)
	}
	two.levels[5] = append(two.levels[5], sst{size: 2 * mb, left: []byte("a"), right: []byte("z")})
	slices.SortFunc(two.levels[5], func(a, b sst) int { return bytes.Compare(a.left, b.left) })
	if got, want := compactions(two, opts), int64(2*mb+88*mb); !within(got, want) {
		t.Errorf("with a table spanning L6 = %.1f MiB, want %.1f", float64(got)/mb, float64(want)/mb)
	}
	// never more than the whole tree, memtables included
	small := levelsOf(2*mb, 0, 0, 0, 0, 0, 3*mb)
	small.memtables = mb
	if got, want := compactions(small, badger.DefaultOptions("").WithMemTableSize(2<<20)), int64(6*mb); !within(got, want) {
		t.Errorf("compactions of a 6 MB tree = %.1f MiB, want %.1f", float64(got)/mb, float64(want)/mb)
	}
}

// Several compactions of one level never write more than its group's
// limit together.
func TestLargestCompactions(t *testing.T) {
	groups := []costGroup{{costs: []int64{50, 40, 30}, limit: 60}, {costs: []int64{45}, limit: 100}}
	for n, want := range []int64{0, 50, 95, 105, 105} {
		if got := largestCompactions(groups, n); got != want {
			t.Errorf("largest %d compactions = %d, want %d", n, got, want)
		}
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

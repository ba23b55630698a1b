package badgerkv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/ristretto/v2"
	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// ErrLocked reports that another process holds the storage directory.
var ErrLocked = errors.New("storage directory is locked by another process")

// conflictRetries bounds how often a transaction that lost a write
// conflict is run again before the conflict is returned to the caller.
const conflictRetries = 8

// gcInterval is how often value-log garbage collection runs.
const gcInterval = 5 * time.Minute

// Badger's sizes that the free-space margin depends on (see margin.go).
const (
	// defaultMemTableSize is Badger's own default, kept: the memtable's
	// size sets the largest transaction (15% of it) and the write load
	// figures were measured with it.
	defaultMemTableSize = 64 << 20
	// valueLogFileSize bounds a value-log file (Badger's default is 1 GB).
	// Values under 1 MB live in the tree, so the value log holds only the
	// rare larger ones; a smaller file is a smaller mapping (twice this, per
	// open file) and a smaller rewrite for garbage collection, which runs
	// only while that much room is left beyond the margin. Files written
	// larger by earlier versions still open.
	valueLogFileSize = 64 << 20
	// numCompactors is how many compactions Badger runs at once (its
	// default is 4, the least it allows 2). Each writes all its output
	// before it deletes its input, so the margin keeps room for that many
	// of the largest (see margin.go): two halve that part, about 240 MB
	// of a 10 GB store's margin. Bulk writes went faster, not slower, on
	// the 2-core machine the figures were measured on (76–93 MB/s against
	// 54 with 4, 1.5 GB of 1 KB values from 4 writers): compactions there
	// compete with the writers for the cores.
	numCompactors = 2
)

// Store is the embedded single-node KV on Badger.
type Store struct {
	db    *badger.DB
	group *groupSync // nil when writes need not be durable
	// deferred syncs commits marked kv.WithDeferredSync; nil with group
	deferred *deferredSync
	space    *spaceGuard
	logger   *zap.Logger
	stop     chan struct{}
	wg       sync.WaitGroup

	gcRuns atomic.Int64

	closeOnce sync.Once
	closeErr  error
	closeMu   sync.RWMutex // held for reading by a write and its sync, for writing by Close
	closed    bool
}

// DB is the Badger database under the store, for tests and tools that
// need Badger itself; the vault goes through the kv interface.
func (s *Store) DB() *badger.DB { return s.db }

// Stats are the engine's figures, for metrics.
type Stats struct {
	// LSMBytes and VLogBytes are the sizes of the tree's tables and of the
	// value log.
	LSMBytes, VLogBytes int64
	// GCRuns counts value-log files rewritten by garbage collection.
	GCRuns int64
	// BlockCacheHeld is what the block cache holds, in bytes.
	BlockCacheHeld int64
}

// Stats reports the engine's sizes and GC passes.
func (s *Store) Stats() Stats {
	lsm, vlog := s.db.Size()
	return Stats{LSMBytes: lsm, VLogBytes: vlog, GCRuns: s.gcRuns.Load(), BlockCacheHeld: cacheHolds(s.db.BlockCacheMetrics())}
}

// cacheHolds is the cost a Badger cache holds: what it took in less what
// it evicted (0 without the cache).
func cacheHolds(m *ristretto.Metrics) int64 {
	if m == nil {
		return 0
	}
	return int64(m.CostAdded()) - int64(m.CostEvicted())
}

// Options configure Open.
type Options struct {
	// Dir is the directory of Badger's files; it must exist.
	Dir string
	// SyncWrites makes every committed write durable (group commit)
	// before Update returns.
	SyncWrites bool
	// BlockCacheBytes sizes Badger's block cache; zero means
	// DefaultBlockCacheBytes.
	BlockCacheBytes int64
	// Logger receives the engine's log lines; nil discards them.
	Logger *zap.Logger

	// for tests: Badger's memtable size (on a new store only), the read
	// reserve, and the file system's free space
	memTableSize int64
	readReserve  int64
	statfs       statfsFunc
}

// DefaultBlockCacheBytes is the storage engine's block cache when Options
// leaves it zero. The tables are neither compressed nor encrypted by
// Badger, so a cached block points into its memory-mapped table file, and
// Badger keeps every table's index there too: it has no index cache to
// size (it consults one only for tables it encrypts).
const DefaultBlockCacheBytes = 256 << 20

// Open opens (or creates) the Badger store in o.Dir. It fails with
// ErrLocked when another process holds the directory, and with an error
// wrapping kv.ErrNoSpace, before Badger touches any file, when its file
// system has less free space than Badger may need to replay and flush its
// logs and run its compactions (see margin.go): Badger would die of
// SIGBUS there.
func Open(o Options) (*Store, error) {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.statfs == nil {
		o.statfs = statfs
	}
	opts := badger.DefaultOptions(o.Dir).
		WithMemTableSize(cmp.Or(o.memTableSize, defaultMemTableSize)).
		WithValueLogFileSize(valueLogFileSize).
		WithNumCompactors(numCompactors).
		WithSyncWrites(false). // durability comes from group commit below
		WithNumVersionsToKeep(1).
		// Values are sealed records, which no compressor can shrink;
		// Snappy spent CPU on every table built and every block read, and
		// a second buffer per block in the table builder, to save about a
		// tenth of the tables (key prefixes). Tables written compressed by
		// earlier versions still read: the manifest keeps each table's
		// compression.
		WithCompression(options.None).
		WithBlockCacheSize(cmp.Or(o.BlockCacheBytes, DefaultBlockCacheBytes)).
		WithLogger(badgerLogger{o.Logger.Sugar()}).
		WithMetricsEnabled(false)
	if o.memTableSize != 0 { // a value must fit in a batch, 15% of a memtable
		opts = opts.WithValueThreshold(min(opts.ValueThreshold, 15*o.memTableSize/100))
	}
	if free, err := o.statfs(o.Dir); err == nil {
		if need := needBytes(treeOnDisk(o.Dir, opts), opts); free < need {
			return nil, fmt.Errorf("not opening the storage in %s: it needs at least %s free on its file system (to replay and flush its logs and run the compactions that follow) and %s is free; free space and start again: %w",
				o.Dir, mib(need), mib(free), kv.ErrNoSpace)
		}
	}
	db, err := badger.Open(opts)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("opening %s: %w", o.Dir, ErrLocked)
		}
		return nil, fmt.Errorf("opening badger in %s: %w", o.Dir, err)
	}
	s := &Store{db: db, logger: o.Logger, stop: make(chan struct{})}
	s.space = newSpaceGuard(o.Dir, o.statfs, func() int64 { return needBytes(treeOf(db, opts.MaxLevels, o.Dir), opts) },
		needPerByte(opts), cmp.Or(o.readReserve, DefaultReadReserve), time.Now, o.Logger)
	if o.SyncWrites {
		dir := o.Dir
		var syncs atomic.Int64
		s.group = newGroupSync(func() error {
			// a sync runs inside a write's updateOnce, which holds
			// closeMu, or in the deferred syncer, which Close waits for
			// before it closes Badger: it never reaches Badger after
			// Close (whose memtable is gone by then)
			//
			// a new memtable log appears every few thousand syncs; advising
			// it early keeps its syncs small (see adviseRandomAccess)
			if syncs.Add(1)%256 == 1 {
				adviseRandomAccess(dir)
			}
			if err := db.Sync(); err != nil {
				s.logger.Error("syncing the storage failed: every write is refused until the vault restarts", zap.Error(err))
				return err
			}
			return nil
		}, syncLinger)
		s.deferred = newDeferredSync(s.group, DeferredSyncDelay, s.stop)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.deferred.run()
		}()
	}
	s.wg.Add(1)
	go s.gcLoop()
	return s, nil
}

// gcLoop runs value-log garbage collection, and looks at the free space
// often enough that writes resume (and recovery is logged) without any
// traffic.
func (s *Store) gcLoop() {
	defer s.wg.Done()
	t := time.NewTicker(gcInterval)
	defer t.Stop()
	space := time.NewTicker(spaceCheckInterval)
	defer space.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.runGC()
		case <-space.C:
			s.space.refresh()
		}
	}
}

// runGC rewrites value-log files until Badger finds nothing worth
// rewriting. A rewrite writes up to a value-log file's worth before it
// frees the old file, outside the vault's counted writes, so it runs only
// while that much room is left beyond the margin, and holds it in the
// margin meanwhile: the vault's writes cannot take it.
func (s *Store) runGC() {
	for i := 0; i < 100; i++ {
		if !s.runGCOnce() {
			return
		}
	}
}

// runGCOnce rewrites one value-log file, and reports whether there may be
// more to rewrite.
func (s *Store) runGCOnce() bool {
	release := s.space.hold(valueLogFileSize + valueLogFileSize/8)
	defer release()
	if s.space.room() < 0 {
		return false
	}
	err := s.db.RunValueLogGC(0.5)
	if err != nil {
		if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
			s.logger.Warn("value log gc failed", zap.Error(err))
		}
		return false
	}
	s.gcRuns.Add(1)
	return true
}

func (s *Store) View(ctx context.Context, fn func(kv.Reader) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	leave, err := s.enter()
	if err != nil {
		return err
	}
	defer leave()
	return s.db.View(func(txn *badger.Txn) error { return fn(badgerTxn{txn: txn}) })
}

// enter admits a read until Close: Close waits for the reads it admitted,
// and a read after it gets kv.ErrClosed (Badger's iterators panic on a
// closed database). Writes hold the same lock in updateOnce.
func (s *Store) enter() (leave func(), err error) {
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return nil, kv.ErrClosed
	}
	return s.closeMu.RUnlock, nil
}

func (s *Store) Update(ctx context.Context, fn func(kv.Writer) error) error {
	var err error
	for attempt := 0; attempt < conflictRetries; attempt++ {
		if err = ctx.Err(); err != nil {
			return err
		}
		err = s.updateOnce(kv.SpaceReserve(ctx), kv.DeferredSync(ctx), kv.Committed(ctx), fn)
		if !errors.Is(err, badger.ErrConflict) {
			return err
		}
		backoff := time.Duration(rand.Int64N(int64(time.Millisecond) << attempt))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
	return fmt.Errorf("%w: %w", kv.ErrConflict, err)
}

// updateOnce runs fn in one transaction and, with group commit, returns
// once what it committed is durable; when deferred (kv.WithDeferredSync),
// once it is committed to Badger's memory-mapped log, which a crash of
// the process cannot lose, leaving its sync to the deferred syncer
// (within DeferredSyncDelay). Before the commit reaches Badger,
// the space guard admits it (reserved: into the read reserve) or refuses
// it with an error wrapping kv.ErrNoSpace, and nothing is written.
//
// Close waits for the transaction and its sync (closeMu): Badger's Close
// closes the channel a commit sends to, so a commit that passed Badger's
// own check just before would send on a closed channel and panic, and a
// sync after Close finds no memtable.
func (s *Store) updateOnce(reserved, deferred bool, committed func(), fn func(kv.Writer) error) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return kv.ErrClosed
	}
	if s.space.low.Load() { // refused now: spare fn the work
		if err := s.space.admit(0, reserved); err != nil {
			return err
		}
	}
	var st txnState
	run := func(txn *badger.Txn) error {
		if err := fn(badgerTxn{txn, &st}); err != nil {
			return err
		}
		if !st.wrote {
			return nil
		}
		return s.space.admit(st.bytes+txnOverhead, reserved)
	}
	if s.group == nil {
		err := s.db.Update(run)
		if err == nil && committed != nil {
			committed()
		}
		return err
	}
	id := s.group.begin()
	ended := false
	defer func() {
		if !ended { // fn panicked: the sync must not wait for it
			_ = s.group.end(id, false)
		}
	}()
	err := s.db.Update(run)
	ended = true
	if err == nil && committed != nil { // before the sync (kv.WithCommitted)
		committed()
	}
	if deferred && err == nil && st.wrote {
		target, serr := s.group.endDeferred(id)
		if serr != nil { // a sync failed: this commit may never reach the disk
			return fmt.Errorf("syncing committed writes: %w", serr)
		}
		s.deferred.need(target)
		return nil
	}
	if serr := s.group.end(id, err == nil && st.wrote); serr != nil {
		return fmt.Errorf("syncing committed writes: %w", serr)
	}
	return err
}

func (s *Store) DeletePrefix(ctx context.Context, prefix []byte) error {
	const batch = 1000
	for {
		var keys [][]byte
		err := s.View(ctx, func(r kv.Reader) error {
			return r.Scan(prefix, nil, func(k, _ []byte) error {
				keys = append(keys, k)
				if len(keys) == batch {
					return kv.ErrStopScan
				}
				return nil
			})
		})
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			return nil
		}
		if err := s.Update(ctx, func(w kv.Writer) error {
			for _, k := range keys {
				if err := w.Delete(k); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
}

// Snapshot calls fn for every live key of the store, in key order, from
// one read transaction: a consistent view as of the moment it starts, which
// concurrent writes do not change. key and value are valid only during the
// call.
func (s *Store) Snapshot(ctx context.Context, fn func(key, value []byte, expiresAt time.Time) error) error {
	leave, err := s.enter()
	if err != nil {
		return err
	}
	defer leave()
	return s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false // values are read in order, one at a time
		it := txn.NewIterator(opts)
		defer it.Close()
		n := 0
		for it.Rewind(); it.Valid(); it.Next() {
			if n++; n%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			item := it.Item()
			var exp time.Time
			if e := item.ExpiresAt(); e > 0 {
				exp = time.Unix(int64(e), 0)
			}
			err := item.Value(func(v []byte) error { return fn(item.Key(), v, exp) })
			if err != nil {
				return err
			}
		}
		return ctx.Err()
	})
}

// Load writes entries through a write batch, which is far faster than
// one transaction per entry, and syncs them before it returns. Entries
// already expired are skipped.
func (s *Store) Load(ctx context.Context, next func() (key, value []byte, expiresAt time.Time, err error)) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return kv.ErrClosed
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	now := time.Now()
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		key, value, exp, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := s.space.admit(int64(len(key)+len(value)+entryOverhead), false); err != nil {
			return fmt.Errorf("loading entries: %w", err)
		}
		e := &badger.Entry{Key: key, Value: value}
		if !exp.IsZero() {
			if !exp.After(now) {
				continue
			}
			e.ExpiresAt = uint64(exp.Unix())
		}
		if err := wb.SetEntry(e); err != nil {
			return fmt.Errorf("loading entries: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("loading entries: %w", err)
	}
	return s.db.Sync()
}

func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.wg.Wait()
		s.closeMu.Lock()
		s.closed = true
		s.closeMu.Unlock()
		s.closeErr = s.db.Close()
	})
	return s.closeErr
}

// Disk reports the free space on the storage's file system and whether
// writes are admitted, from a reading at most a second old (after Close,
// the last reading: the margin reads Badger's tables).
func (s *Store) Disk() Disk {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	return s.space.disk(!s.closed)
}

// badgerTxn adapts a Badger transaction to Reader and Writer.
type badgerTxn struct {
	txn *badger.Txn
	st  *txnState // nil in a read-only transaction
}

// txnState is what a transaction's Puts and Deletes wrote.
type txnState struct {
	wrote bool
	bytes int64 // about what the memtable log (and value log) will take
}

func (t badgerTxn) Get(key []byte) ([]byte, error) {
	item, err := t.txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, kv.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return item.ValueCopy(nil)
}

func (t badgerTxn) Scan(prefix, after []byte, fn func(key, value []byte) error) error {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchValues = false // values are small and read in order; prefetching costs a goroutine per item
	it := t.txn.NewIterator(opts)
	defer it.Close()
	start := prefix
	if after != nil {
		start = append(append([]byte{}, after...), 0)
	}
	for it.Seek(start); it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		if err := fn(item.KeyCopy(nil), v); err != nil {
			if errors.Is(err, kv.ErrStopScan) {
				return nil
			}
			return err
		}
	}
	return nil
}

func (t badgerTxn) Put(key, value []byte, ttl time.Duration) error {
	t.st.wrote = true
	t.st.bytes += int64(len(key) + len(value) + entryOverhead)
	e := badger.NewEntry(key, value)
	if ttl > 0 {
		e = e.WithTTL(ttl)
	}
	return t.txn.SetEntry(e)
}

func (t badgerTxn) Delete(key []byte) error {
	t.st.wrote = true
	t.st.bytes += int64(len(key) + entryOverhead)
	return t.txn.Delete(key)
}

// badgerLogger routes Badger's logging into zap, with its chatty
// informational lines at debug level.
type badgerLogger struct{ s *zap.SugaredLogger }

func (l badgerLogger) Errorf(f string, a ...any)   { l.s.Errorf(strings.TrimSpace(f), a...) }
func (l badgerLogger) Warningf(f string, a ...any) { l.s.Warnf(strings.TrimSpace(f), a...) }
func (l badgerLogger) Infof(f string, a ...any)    { l.s.Debugf(strings.TrimSpace(f), a...) }
func (l badgerLogger) Debugf(f string, a ...any)   { l.s.Debugf(strings.TrimSpace(f), a...) }

// Interface guards
var (
	_ kv.KV          = (*Store)(nil)
	_ kv.Snapshotter = (*Store)(nil)
	_ kv.Loader      = (*Store)(nil)
	_ kv.Writer      = badgerTxn{}
	_ badger.Logger  = badgerLogger{}
)

package vaultstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/ristretto/v2"
	"go.uber.org/zap"
)

// ErrLocked reports that another process holds the storage directory.
var ErrLocked = errors.New("storage directory is locked by another process")

// conflictRetries bounds how often a transaction that lost a write
// conflict is run again before the conflict is returned to the caller.
const conflictRetries = 8

// gcInterval is how often value-log garbage collection runs.
const gcInterval = 5 * time.Minute

// badgerKV is the embedded single-node KV on Badger.
type badgerKV struct {
	db     *badger.DB
	group  *groupSync // nil when writes need not be durable
	logger *zap.Logger
	stop   chan struct{}
	wg     sync.WaitGroup

	gcRuns atomic.Int64

	closeOnce sync.Once
	closeErr  error
	closeMu   sync.RWMutex // held for reading by a write and its sync, for writing by Close
	closed    bool
}

// errKVClosed answers a write or a sync that comes after Close.
var errKVClosed = errors.New("the storage is closed")

// stats reports the engine's sizes and GC passes.
func (kv *badgerKV) stats() Stats {
	lsm, vlog := kv.db.Size()
	return Stats{LSMBytes: lsm, VLogBytes: vlog, GCRuns: kv.gcRuns.Load(), BlockCacheHeld: cacheHolds(kv.db.BlockCacheMetrics())}
}

// cacheHolds is the cost a Badger cache holds: what it took in less what
// it evicted (0 without the cache).
func cacheHolds(m *ristretto.Metrics) int64 {
	if m == nil {
		return 0
	}
	return int64(m.CostAdded()) - int64(m.CostEvicted())
}

// badgerOptions are the Badger settings the vault exposes.
type badgerOptions struct {
	dir        string
	syncWrites bool
	blockCache int64 // bytes; 0: DefaultBlockCacheBytes
	logger     *zap.Logger
}

// DefaultBlockCacheBytes is the storage engine's block cache when Options
// leaves it zero. The tables are neither compressed nor encrypted by
// Badger, so a cached block points into its memory-mapped table file, and
// Badger keeps every table's index there too: it has no index cache to
// size (it consults one only for tables it encrypts).
const DefaultBlockCacheBytes = 256 << 20

func openBadger(o badgerOptions) (*badgerKV, error) {
	opts := badger.DefaultOptions(o.dir).
		WithSyncWrites(false). // durability comes from group commit below
		WithNumVersionsToKeep(1).
		// Values are sealed records, which no compressor can shrink;
		// Snappy spent CPU on every table built and every block read, and
		// a second buffer per block in the table builder, to save about a
		// tenth of the tables (key prefixes). Tables written compressed by
		// earlier versions still read: the manifest keeps each table's
		// compression.
		WithCompression(options.None).
		WithBlockCacheSize(cmp.Or(o.blockCache, DefaultBlockCacheBytes)).
		WithLogger(badgerLogger{o.logger.Sugar()}).
		WithMetricsEnabled(false)
	db, err := badger.Open(opts)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("opening %s: %w", o.dir, ErrLocked)
		}
		return nil, fmt.Errorf("opening badger in %s: %w", o.dir, err)
	}
	kv := &badgerKV{db: db, logger: o.logger, stop: make(chan struct{})}
	if o.syncWrites {
		dir := o.dir
		var syncs atomic.Int64
		kv.group = newGroupSync(func() error {
			// a sync runs inside a write's updateOnce, which holds
			// closeMu: it never reaches Badger after Close (whose
			// memtable is gone by then)
			//
			// a new memtable log appears every few thousand syncs; advising
			// it early keeps its syncs small (see adviseRandomAccess)
			if syncs.Add(1)%256 == 1 {
				adviseRandomAccess(dir)
			}
			if err := db.Sync(); err != nil {
				kv.logger.Error("syncing the storage failed: every write is refused until the vault restarts", zap.Error(err))
				return err
			}
			return nil
		}, syncLinger)
	}
	kv.wg.Add(1)
	go kv.gcLoop()
	return kv, nil
}

func (kv *badgerKV) gcLoop() {
	defer kv.wg.Done()
	t := time.NewTicker(gcInterval)
	defer t.Stop()
	for {
		select {
		case <-kv.stop:
			return
		case <-t.C:
			kv.runGC()
		}
	}
}

// runGC rewrites value-log files until Badger finds nothing worth rewriting.
func (kv *badgerKV) runGC() {
	for i := 0; i < 100; i++ {
		err := kv.db.RunValueLogGC(0.5)
		if err == nil {
			kv.gcRuns.Add(1)
		}
		if err != nil {
			if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
				kv.logger.Warn("value log gc failed", zap.Error(err))
			}
			return
		}
	}
}

func (kv *badgerKV) View(ctx context.Context, fn func(Reader) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return kv.db.View(func(txn *badger.Txn) error { return fn(badgerTxn{txn: txn}) })
}

func (kv *badgerKV) Update(ctx context.Context, fn func(Writer) error) error {
	var err error
	for attempt := 0; attempt < conflictRetries; attempt++ {
		if err = ctx.Err(); err != nil {
			return err
		}
		err = kv.updateOnce(fn)
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
	return fmt.Errorf("transaction kept conflicting: %w: %w", ErrBusy, err)
}

// updateOnce runs fn in one transaction and, with group commit, returns
// once what it committed is durable.
//
// Close waits for the transaction and its sync (closeMu): Badger's Close
// closes the channel a commit sends to, so a commit that passed Badger's
// own check just before would send on a closed channel and panic, and a
// sync after Close finds no memtable.
func (kv *badgerKV) updateOnce(fn func(Writer) error) error {
	kv.closeMu.RLock()
	defer kv.closeMu.RUnlock()
	if kv.closed {
		return errKVClosed
	}
	wrote := false
	run := func(txn *badger.Txn) error { return fn(badgerTxn{txn, &wrote}) }
	if kv.group == nil {
		return kv.db.Update(run)
	}
	id := kv.group.begin()
	ended := false
	defer func() {
		if !ended { // fn panicked: the sync must not wait for it
			_ = kv.group.end(id, false)
		}
	}()
	err := kv.db.Update(run)
	ended = true
	if serr := kv.group.end(id, err == nil && wrote); serr != nil {
		return fmt.Errorf("syncing committed writes: %w", serr)
	}
	return err
}

func (kv *badgerKV) DeletePrefix(ctx context.Context, prefix []byte) error {
	const batch = 1000
	for {
		var keys [][]byte
		err := kv.View(ctx, func(r Reader) error {
			return r.Scan(prefix, nil, func(k, _ []byte) error {
				keys = append(keys, k)
				if len(keys) == batch {
					return ErrStopScan
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
		if err := kv.Update(ctx, func(w Writer) error {
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

// snapshot calls fn for every live key of the store, in key order, from
// one read transaction: a consistent view as of the moment it starts, which
// concurrent writes do not change. expiresAt is the entry's expiry in Unix
// seconds (0 for none). key and value are valid only during the call.
func (kv *badgerKV) snapshot(ctx context.Context, fn func(key, value []byte, expiresAt uint64) error) error {
	return kv.db.View(func(txn *badger.Txn) error {
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
			err := item.Value(func(v []byte) error { return fn(item.Key(), v, item.ExpiresAt()) })
			if err != nil {
				return err
			}
		}
		return ctx.Err()
	})
}

func (kv *badgerKV) Close() error {
	kv.closeOnce.Do(func() {
		close(kv.stop)
		kv.wg.Wait()
		kv.closeMu.Lock()
		kv.closed = true
		kv.closeMu.Unlock()
		kv.closeErr = kv.db.Close()
	})
	return kv.closeErr
}

// badgerTxn adapts a Badger transaction to Reader and Writer.
type badgerTxn struct {
	txn   *badger.Txn
	wrote *bool // set by Put and Delete; nil in a read-only transaction
}

func (t badgerTxn) Get(key []byte) ([]byte, error) {
	item, err := t.txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
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
			if errors.Is(err, ErrStopScan) {
				return nil
			}
			return err
		}
	}
	return nil
}

func (t badgerTxn) Put(key, value []byte, ttl time.Duration) error {
	*t.wrote = true
	e := badger.NewEntry(key, value)
	if ttl > 0 {
		e = e.WithTTL(ttl)
	}
	return t.txn.SetEntry(e)
}

func (t badgerTxn) Delete(key []byte) error {
	*t.wrote = true
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
	_ KV            = (*badgerKV)(nil)
	_ Writer        = badgerTxn{}
	_ badger.Logger = badgerLogger{}
)

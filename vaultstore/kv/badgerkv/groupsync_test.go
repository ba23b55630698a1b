package badgerkv

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// TestGroupSyncCoversEveryCommit: a waiter returns only after a sync
// that began after its commit has finished; concurrent waiters share
// syncs.
func TestGroupSyncCoversEveryCommit(t *testing.T) {
	type span struct{ start, end int64 } // ns
	var (
		mu    sync.Mutex
		syncs []span
	)
	g := newGroupSync(func() error {
		sp := span{start: time.Now().UnixNano()}
		time.Sleep(2 * time.Millisecond)
		sp.end = time.Now().UnixNano()
		mu.Lock()
		syncs = append(syncs, sp)
		mu.Unlock()
		return nil
	}, time.Millisecond)
	const waiters = 64
	var wg sync.WaitGroup
	for i := 0; i < waiters; i++ {
		wg.Go(func() {
			id := g.begin()
			committed := time.Now().UnixNano()
			if err := g.end(id, true); err != nil {
				t.Error(err)
			}
			returned := time.Now().UnixNano()
			mu.Lock()
			defer mu.Unlock()
			for _, sp := range syncs {
				if sp.start > committed && sp.end < returned {
					return
				}
			}
			t.Error("end returned without a sync that began after the commit and finished before it returned")
		})
	}
	wg.Wait()
	if n := len(syncs); n >= waiters || n < 1 {
		t.Errorf("%d waiters took %d syncs; want fewer syncs than waiters", waiters, n)
	}
}

// TestGroupSyncFailureSticks: a failed sync fails its writers and every
// write after it, even when the disk seems to recover (the kernel may have
// dropped the pages the failed fsync was to write).
func TestGroupSyncFailureSticks(t *testing.T) {
	fail := errors.New("disk gone")
	var failing atomic.Bool
	failing.Store(true)
	var syncs atomic.Int64
	g := newGroupSync(func() error {
		syncs.Add(1)
		if failing.Load() {
			return fail
		}
		return nil
	}, 0)
	if err := g.end(g.begin(), true); !errors.Is(err, fail) {
		t.Fatalf("the write whose sync failed got %v", err)
	}
	failing.Store(false)
	if err := g.end(g.begin(), true); !errors.Is(err, fail) {
		t.Fatalf("a write after the failed sync got %v", err)
	}
	if n := syncs.Load(); n != 1 {
		t.Errorf("%d syncs after a failure, want none after it", n-1)
	}
	if err := g.end(g.begin(), false); err != nil {
		t.Errorf("a transaction that wrote nothing got %v", err)
	}
}

// TestGroupSyncPanicKeepsLock: a sync that panics fails its writers and
// leaves the group usable, instead of a fatal unlock of an unlocked mutex.
func TestGroupSyncPanicKeepsLock(t *testing.T) {
	g := newGroupSync(func() error { panic("memtable gone") }, 0)
	if err := g.end(g.begin(), true); err == nil {
		t.Fatal("a write whose sync panicked succeeded")
	}
	if err := g.end(g.begin(), true); err == nil {
		t.Fatal("a write after a panicked sync succeeded")
	}
}

// returnsWithin runs fn and fails the test if it has not returned within
// a generous bound: a sync that lingers an hour would hang the test.
func returnsWithin(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return", what)
	}
}

// lingering reports whether g has a sync lingering for running
// transactions.
func (g *groupSync) lingering() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.joined != nil
}

// TestGroupSyncLingers: a writer that commits while another transaction
// runs waits for it, and the two share one sync; a lone writer, or one
// whose siblings ended without writing, never waits for the linger.
func TestGroupSyncLingers(t *testing.T) {
	var syncs atomic.Int64
	g := newGroupSync(func() error { syncs.Add(1); return nil }, time.Hour)

	returnsWithin(t, "a lone writer", func() {
		if err := g.end(g.begin(), true); err != nil {
			t.Error(err)
		}
	})
	if n := syncs.Load(); n != 1 {
		t.Fatalf("a lone writer took %d syncs, want 1", n)
	}

	// A commits while B runs: A lingers until B commits, then one sync.
	a, b := g.begin(), g.begin()
	aDone := make(chan error, 1)
	go func() { aDone <- g.end(a, true) }()
	for !g.lingering() {
		select {
		case err := <-aDone:
			t.Fatalf("A returned (%v) while B was still running", err)
		default:
			time.Sleep(time.Millisecond)
		}
	}
	returnsWithin(t, "B, the last running transaction", func() {
		if err := g.end(b, true); err != nil {
			t.Error(err)
		}
	})
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	if n := syncs.Load(); n != 2 {
		t.Fatalf("A and B took %d syncs in all, want one shared (2 with the lone writer's)", n-1)
	}

	// A commits while C runs; C fails (ends without writing): A syncs at once.
	a, c := g.begin(), g.begin()
	aDone = make(chan error, 1)
	go func() { aDone <- g.end(a, true) }()
	for !g.lingering() {
		time.Sleep(time.Millisecond)
	}
	if err := g.end(c, false); err != nil {
		t.Fatalf("a transaction that wrote nothing got %v", err)
	}
	returnsWithin(t, "A, after C ended without writing", func() {
		if err := <-aDone; err != nil {
			t.Error(err)
		}
	})
}

// TestGroupSyncLingerIsBounded: a transaction that never ends delays a
// sync by the linger, no more.
func TestGroupSyncLingerIsBounded(t *testing.T) {
	var syncs atomic.Int64
	g := newGroupSync(func() error { syncs.Add(1); return nil }, 5*time.Millisecond)
	g.begin() // stuck: never ends
	id := g.begin()
	returnsWithin(t, "a writer beside a stuck transaction", func() {
		if err := g.end(id, true); err != nil {
			t.Error(err)
		}
	})
	if n := syncs.Load(); n != 1 {
		t.Fatalf("%d syncs, want 1", n)
	}
}

// TestGroupSyncIgnoresOldTransactions: a transaction that has run longer
// than lingerAge (a rotation batch, a tenant delete) does not make syncs
// wait: a lone request beside it is answered without the linger.
func TestGroupSyncIgnoresOldTransactions(t *testing.T) {
	g := newGroupSync(func() error { return nil }, time.Hour)
	long := g.begin()
	g.mu.Lock()
	g.active[long] = time.Now().Add(-2 * lingerAge)
	g.mu.Unlock()
	returnsWithin(t, "a writer beside a long transaction", func() {
		if err := g.end(g.begin(), true); err != nil {
			t.Error(err)
		}
	})
	if err := g.end(long, true); err != nil {
		t.Fatal(err)
	}
}

// TestUpdatePanicEndsItsTransaction: a transaction function that panics
// is no longer counted as running, so later syncs do not linger for it.
func TestUpdatePanicEndsItsTransaction(t *testing.T) {
	store, err := Open(Options{Dir: t.TempDir(), SyncWrites: true, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not reach the caller")
			}
		}()
		_ = store.Update(t.Context(), func(w kv.Writer) error {
			_ = w.Put([]byte("k"), []byte("v"), 0)
			panic("transaction bug")
		})
	}()
	store.group.mu.Lock()
	active := len(store.group.active)
	store.group.mu.Unlock()
	if active != 0 {
		t.Fatalf("%d transactions still counted as running after the panic", active)
	}
	if err := store.Update(t.Context(), func(w kv.Writer) error { return w.Put([]byte("k"), []byte("v2"), 0) }); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkGroupSyncWrites measures durable token-sized writes from 64
// writers with group commit.
func BenchmarkGroupSyncWrites(b *testing.B) {
	store, err := Open(Options{Dir: b.TempDir(), SyncWrites: true, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	value := make([]byte, 512)
	var n atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := fmt.Appendf(nil, "bench/%016x", n.Add(1))
			if err := store.Update(b.Context(), func(w kv.Writer) error { return w.Put(key, value, 0) }); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkDurableWriteAlone measures one writer's durable write, a
// transaction and then the sync that makes it durable, with nothing to
// share the sync. It is the least a durable request (a token create, or a
// read with its audit record) adds to the latency of a lone call;
// "sync-µs" is the sync's part (Badger's msync of the memtable log and
// fsync of the value log).
func BenchmarkDurableWriteAlone(b *testing.B) {
	store, err := Open(Options{Dir: b.TempDir(), Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	value := make([]byte, 700)
	var syncTime time.Duration
	i := 0
	for b.Loop() {
		i++
		key := fmt.Appendf(nil, "bench/%016x", i)
		if err := store.Update(b.Context(), func(w kv.Writer) error { return w.Put(key, value, 0) }); err != nil {
			b.Fatal(err)
		}
		began := time.Now()
		if err := store.db.Sync(); err != nil {
			b.Fatal(err)
		}
		syncTime += time.Since(began)
	}
	b.ReportMetric(float64(syncTime.Microseconds())/float64(b.N), "sync-µs")
}

// TestCloseWhileSyncLingers: closing the storage while a write's sync
// lingers fails that write, or lets it finish, but never reaches Badger's
// Sync after Close (whose memtable is gone: a nil dereference there used
// to kill the process).
func TestCloseWhileSyncLingers(t *testing.T) {
	for i := range 5 {
		store, err := Open(Options{Dir: t.TempDir(), SyncWrites: true, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		store.group.begin() // a sibling that never ends: the write's sync lingers
		done := make(chan error, 1)
		go func() {
			done <- store.Update(t.Context(), func(w kv.Writer) error { return w.Put([]byte("k"), []byte("v"), 0) })
		}()
		time.Sleep(time.Duration(i*100) * time.Microsecond)
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
		returnsWithin(t, "the write", func() {
			if err := <-done; err != nil && !errors.Is(err, kv.ErrClosed) && !errors.Is(err, badger.ErrDBClosed) && !errors.Is(err, badger.ErrBlockedWrites) {
				t.Errorf("round %d: the write got %v, want success or a closed store", i, err)
			}
		})
	}
}

// TestCloseWaitsForCommits: Close waits for a transaction that is
// running, which then commits, and a write after Close fails with a
// closed store. Badger's own check does not suffice: a commit that passed
// it just before Close closed Badger's write channel would send on the
// closed channel and panic (seen once under the race detector in
// TestCloseWhileSyncLingers).
func TestCloseWaitsForCommits(t *testing.T) {
	for _, syncWrites := range []bool{false, true} {
		store, err := Open(Options{Dir: t.TempDir(), SyncWrites: syncWrites, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		inside, release := make(chan struct{}), make(chan struct{})
		wrote := make(chan error, 1)
		go func() {
			wrote <- store.Update(t.Context(), func(w kv.Writer) error {
				close(inside)
				<-release
				return w.Put([]byte("k"), []byte("v"), 0)
			})
		}()
		<-inside
		closed := make(chan error, 1)
		go func() { closed <- store.Close() }()
		select {
		case err := <-closed:
			t.Fatalf("sync %v: Close returned (%v) while a transaction ran", syncWrites, err)
		case <-time.After(50 * time.Millisecond):
		}
		close(release)
		returnsWithin(t, "the write", func() {
			if err := <-wrote; err != nil {
				t.Errorf("sync %v: the running transaction got %v, want it committed", syncWrites, err)
			}
		})
		returnsWithin(t, "Close", func() {
			if err := <-closed; err != nil {
				t.Fatal(err)
			}
		})
		err = store.Update(t.Context(), func(w kv.Writer) error { return w.Put([]byte("k2"), []byte("v"), 0) })
		if !errors.Is(err, kv.ErrClosed) {
			t.Errorf("sync %v: a write after Close got %v, want %v", syncWrites, err, kv.ErrClosed)
		}
	}
}

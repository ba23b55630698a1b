package vaultstore

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
)

// TestGroupSyncCoversEveryCommit: a waiter returns only after a sync that
// began after it called; concurrent waiters share syncs.
func TestGroupSyncCoversEveryCommit(t *testing.T) {
	var syncs atomic.Int64
	var lastStart atomic.Int64 // ns of the latest sync's start
	g := newGroupSync(func() error {
		lastStart.Store(time.Now().UnixNano())
		syncs.Add(1)
		time.Sleep(2 * time.Millisecond)
		return nil
	}, time.Millisecond)
	const waiters = 64
	var wg sync.WaitGroup
	for i := 0; i < waiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.begin()
			called := time.Now().UnixNano()
			if err := g.end(true); err != nil {
				t.Error(err)
			}
			if lastStart.Load() < called {
				t.Error("wait returned before a sync that began after the call")
			}
		}()
	}
	wg.Wait()
	if n := syncs.Load(); n >= waiters || n < 1 {
		t.Errorf("%d waiters took %d syncs; want fewer syncs than waiters", waiters, n)
	}
}

func TestGroupSyncReturnsError(t *testing.T) {
	fail := errors.New("disk gone")
	g := newGroupSync(func() error { return fail }, 0)
	g.begin()
	if err := g.end(true); !errors.Is(err, fail) {
		t.Fatalf("got %v", err)
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
		g.begin()
		if err := g.end(true); err != nil {
			t.Error(err)
		}
	})
	if n := syncs.Load(); n != 1 {
		t.Fatalf("a lone writer took %d syncs, want 1", n)
	}

	// A commits while B runs: A lingers until B commits, then one sync.
	g.begin() // A
	g.begin() // B
	aDone := make(chan error, 1)
	go func() { aDone <- g.end(true) }()
	for !g.lingering() {
		select {
		case err := <-aDone:
			t.Fatalf("A returned (%v) while B was still running", err)
		default:
			time.Sleep(time.Millisecond)
		}
	}
	returnsWithin(t, "B, the last running transaction", func() {
		if err := g.end(true); err != nil {
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
	g.begin() // A
	g.begin() // C
	aDone = make(chan error, 1)
	go func() { aDone <- g.end(true) }()
	for !g.lingering() {
		time.Sleep(time.Millisecond)
	}
	if err := g.end(false); err != nil {
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
	g.begin()
	returnsWithin(t, "a writer beside a stuck transaction", func() {
		if err := g.end(true); err != nil {
			t.Error(err)
		}
	})
	if n := syncs.Load(); n != 1 {
		t.Fatalf("%d syncs, want 1", n)
	}
}

// TestUpdatePanicEndsItsTransaction: a transaction function that panics
// is no longer counted as running, so later syncs do not linger for it.
func TestUpdatePanicEndsItsTransaction(t *testing.T) {
	kv, err := openBadger(badgerOptions{dir: t.TempDir(), syncWrites: true, logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not reach the caller")
			}
		}()
		_ = kv.Update(t.Context(), func(w Writer) error {
			_ = w.Put([]byte("k"), []byte("v"), 0)
			panic("transaction bug")
		})
	}()
	kv.group.mu.Lock()
	active := kv.group.active
	kv.group.mu.Unlock()
	if active != 0 {
		t.Fatalf("%d transactions still counted as running after the panic", active)
	}
	if err := kv.Update(t.Context(), func(w Writer) error { return w.Put([]byte("k"), []byte("v2"), 0) }); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkGroupSyncWrites measures durable token-sized writes from 64
// writers with group commit.
func BenchmarkGroupSyncWrites(b *testing.B) {
	kv, err := openBadger(badgerOptions{dir: b.TempDir(), syncWrites: true, logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer kv.Close()
	value := make([]byte, 512)
	var n atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := fmt.Appendf(nil, "bench/%016x", n.Add(1))
			if err := kv.Update(b.Context(), func(w Writer) error { return w.Put(key, value, 0) }); err != nil {
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
	kv, err := openBadger(badgerOptions{dir: b.TempDir(), logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer kv.Close()
	value := make([]byte, 700)
	var syncTime time.Duration
	i := 0
	for b.Loop() {
		i++
		key := fmt.Appendf(nil, "bench/%016x", i)
		if err := kv.Update(b.Context(), func(w Writer) error { return w.Put(key, value, 0) }); err != nil {
			b.Fatal(err)
		}
		began := time.Now()
		if err := kv.db.Sync(); err != nil {
			b.Fatal(err)
		}
		syncTime += time.Since(began)
	}
	b.ReportMetric(float64(syncTime.Microseconds())/float64(b.N), "sync-µs")
}

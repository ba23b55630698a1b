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
	})
	const waiters = 64
	var wg sync.WaitGroup
	for i := 0; i < waiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			called := time.Now().UnixNano()
			if err := g.wait(); err != nil {
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
	g := newGroupSync(func() error { return fail })
	if err := g.wait(); !errors.Is(err, fail) {
		t.Fatalf("got %v", err)
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

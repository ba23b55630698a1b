package badgerkv

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// waitFor polls cond until it holds, failing after a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDeferredCommitDoesNotWaitForItsSync: a deferred commit is answered
// while the sync that will cover it has not even begun; the syncer starts
// it no sooner than the delay after the commit, and it covers the commit.
func TestDeferredCommitDoesNotWaitForItsSync(t *testing.T) {
	var started atomic.Int64
	var startedAt atomic.Int64
	release := make(chan struct{})
	g := newGroupSync(func() error {
		startedAt.CompareAndSwap(0, time.Now().UnixNano())
		started.Add(1)
		<-release
		return nil
	}, 0)
	stop := make(chan struct{})
	const delay = 20 * time.Millisecond
	d := newDeferredSync(g, delay, stop)
	done := make(chan struct{})
	go func() { d.run(); close(done) }()

	committed := time.Now()
	var target uint64
	returnsWithin(t, "a deferred commit", func() {
		var err error
		if target, err = g.endDeferred(g.begin()); err != nil {
			t.Error(err)
		}
		d.need(target)
	})
	if n := started.Load(); n != 0 {
		t.Fatalf("%d syncs began before the deferred commit was answered", n)
	}
	waitFor(t, "the deferred syncer starts a sync", func() bool { return started.Load() > 0 })
	if waited := time.Duration(startedAt.Load() - committed.UnixNano()); waited < delay {
		t.Errorf("the sync began %v after the commit: before the %v delay, so fewer commits share it", waited, delay)
	}
	close(release)
	if err := g.awaitSync(target); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-done
	if n := started.Load(); n != 1 {
		t.Errorf("%d syncs for one deferred commit, want 1", n)
	}
}

// TestDeferredCommitsShareOneSync: every deferred commit made within the
// delay is covered by one sync, the last one run when the store stops.
func TestDeferredCommitsShareOneSync(t *testing.T) {
	var syncs atomic.Int64
	g := newGroupSync(func() error { syncs.Add(1); return nil }, 0)
	stop := make(chan struct{})
	d := newDeferredSync(g, time.Hour, stop)
	done := make(chan struct{})
	go func() { d.run(); close(done) }()
	var last uint64
	for range 20 {
		target, err := g.endDeferred(g.begin())
		if err != nil {
			t.Fatal(err)
		}
		d.need(target)
		last = target
	}
	close(stop)
	<-done
	if n := syncs.Load(); n != 1 {
		t.Errorf("20 deferred commits took %d syncs, want 1", n)
	}
	g.mu.Lock()
	completed := g.completed
	g.mu.Unlock()
	if completed < last {
		t.Errorf("sync %d finished, the commits needed %d", completed, last)
	}
}

// TestDeferredCommitCoveredByDurableWrite: a durable write's sync covers
// the deferred commits before it, so the syncer adds none.
func TestDeferredCommitCoveredByDurableWrite(t *testing.T) {
	var syncs atomic.Int64
	g := newGroupSync(func() error { syncs.Add(1); return nil }, 0)
	stop := make(chan struct{})
	d := newDeferredSync(g, time.Hour, stop)
	done := make(chan struct{})
	go func() { d.run(); close(done) }()
	target, err := g.endDeferred(g.begin())
	if err != nil {
		t.Fatal(err)
	}
	d.need(target)
	if err := g.end(g.begin(), true); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-done
	if n := syncs.Load(); n != 1 {
		t.Errorf("%d syncs, want the durable write's only", n)
	}
}

// TestDeferredCommitAfterFailedSync: once a sync has failed, a deferred
// commit fails too, as every write does: it might never reach the disk.
func TestDeferredCommitAfterFailedSync(t *testing.T) {
	fail := errors.New("disk gone")
	g := newGroupSync(func() error { return fail }, 0)
	if err := g.end(g.begin(), true); !errors.Is(err, fail) {
		t.Fatalf("the durable write got %v", err)
	}
	if _, err := g.endDeferred(g.begin()); !errors.Is(err, fail) {
		t.Fatalf("the deferred commit after the failed sync got %v, want %v", err, fail)
	}
}

// TestDeferredUpdate: on a store with durable writes, Update marked
// kv.WithDeferredSync commits, is read back at once, and is on disk after
// Close and a reopen; without durable writes the mark changes nothing.
func TestDeferredUpdate(t *testing.T) {
	for _, syncWrites := range []bool{true, false} {
		dir := t.TempDir()
		store, err := Open(Options{Dir: dir, SyncWrites: syncWrites, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		ctx := kv.WithDeferredSync(context.Background())
		for _, k := range []string{"a", "b", "c"} {
			if err := store.Update(ctx, func(w kv.Writer) error { return w.Put([]byte(k), []byte("v-"+k), 0) }); err != nil {
				t.Fatalf("sync_writes %v: %v", syncWrites, err)
			}
		}
		if err := store.View(context.Background(), func(r kv.Reader) error {
			_, err := r.Get([]byte("c"))
			return err
		}); err != nil {
			t.Fatalf("sync_writes %v: reading the deferred commit back: %v", syncWrites, err)
		}
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
		store, err = Open(Options{Dir: dir, SyncWrites: syncWrites, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.View(context.Background(), func(r kv.Reader) error {
			for _, k := range []string{"a", "b", "c"} {
				if v, err := r.Get([]byte(k)); err != nil || string(v) != "v-"+k {
					return errors.Join(err, errors.New("key "+k+": got "+string(v)))
				}
			}
			return nil
		}); err != nil {
			t.Errorf("sync_writes %v: after a reopen: %v", syncWrites, err)
		}
		store.Close()
	}
}

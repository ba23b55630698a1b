package certstorage

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// lockRow reads a lock's row as the database has it.
func lockRow(t *testing.T, pool *pgxpool.Pool, s *Storage, name string) (token string, expires time.Time) {
	t.Helper()
	err := pool.QueryRow(testCtx(t), `SELECT token, expires FROM `+s.locks+` WHERE name = $1`, name).Scan(&token, &expires)
	if err != nil {
		t.Fatalf("reading lock %s: %v", name, err)
	}
	return token, expires
}

// TestLockExclusion: two nodes, each with its own pool, never hold one
// lock at the same time, whichever goroutines ask; a waiting node gets
// the lock once it is released, not before.
func TestLockExclusion(t *testing.T) {
	dsn := newDatabase(t)
	ctx := testCtx(t)
	opts := Options{LockPoll: 20 * time.Millisecond}
	a := newNode(t, dsn, opts)
	b := newNode(t, dsn, opts)

	if err := a.Lock(ctx, "issue_cert_x.example"); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.TryLock(ctx, "issue_cert_x.example"); ok || err != nil {
		t.Fatalf("TryLock on the other node = %v, %v while the lock is held", ok, err)
	}
	if ok, err := a.TryLock(ctx, "issue_cert_x.example"); ok || err != nil {
		t.Fatalf("TryLock on the holding node = %v, %v while the lock is held", ok, err)
	}
	// Another name is independent.
	if ok, err := b.TryLock(ctx, "issue_cert_y.example"); !ok || err != nil {
		t.Fatalf("TryLock of another name = %v, %v", ok, err)
	}
	if err := b.Unlock(ctx, "issue_cert_y.example"); err != nil {
		t.Fatal(err)
	}

	var released atomic.Bool
	refused := make(chan struct{}, 100)
	b.onTry = func(string, bool) {
		select {
		case refused <- struct{}{}:
		default:
		}
	}
	got := make(chan error, 1)
	go func() {
		err := b.Lock(ctx, "issue_cert_x.example")
		if err == nil && !released.Load() {
			err = errors.New("the waiting node got the lock before it was released")
		}
		got <- err
	}()
	// The waiting node has tried, and been refused, twice.
	for range 2 {
		select {
		case <-refused:
		case err := <-got:
			t.Fatalf("Lock returned %v while the lock was held", err)
		}
	}
	released.Store(true)
	if err := a.Unlock(ctx, "issue_cert_x.example"); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	b.onTry = nil
	if err := b.Unlock(ctx, "issue_cert_x.example"); err != nil {
		t.Fatal(err)
	}
	// Unlocking a lock not held is harmless.
	if err := a.Unlock(ctx, "issue_cert_x.example"); err != nil {
		t.Errorf("a second Unlock: %v", err)
	}

	// Many goroutines on both nodes: at most one inside at a time.
	var inside, entries atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for range 3 {
				if err := s.Lock(ctx, "shared"); err != nil {
					t.Error(err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				entries.Add(1)
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := s.Unlock(ctx, "shared"); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if entries.Load() != 48 {
		t.Errorf("%d entries, want 48", entries.Load())
	}
}

// TestLockContext: a Lock waiting on a held lock returns when its
// context ends, and takes nothing.
func TestLockContext(t *testing.T) {
	dsn := newDatabase(t)
	a := newNode(t, dsn, Options{})
	b := newNode(t, dsn, Options{LockPoll: 20 * time.Millisecond})
	ctx := testCtx(t)
	if err := a.Lock(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() { got <- b.Lock(wctx, "l") }()
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock after its context ended: %v, want context.Canceled", err)
	}
	b.mu.Lock()
	n := len(b.held)
	b.mu.Unlock()
	if n != 0 {
		t.Errorf("the cancelled node holds %d locks", n)
	}
}

// TestLockRenewed: while held, a lock's lease is renewed, so it outlives
// its first lease; after Unlock no renewal runs.
func TestLockRenewed(t *testing.T) {
	dsn := newDatabase(t)
	pool := newPool(t, dsn)
	a, err := New(pool, Options{LockTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	renewals := make(chan bool, 100)
	a.onRenew = func(_ string, ok bool) {
		select {
		case renewals <- ok:
		default:
		}
	}
	ctx := testCtx(t)
	if err := a.Lock(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	token, first := lockRow(t, pool, a, "l")
	for range 2 {
		select {
		case ok := <-renewals:
			if !ok {
				t.Fatal("a renewal of a held lock failed")
			}
		case <-ctx.Done():
			t.Fatal("no renewal")
		}
	}
	token2, later := lockRow(t, pool, a, "l")
	if token2 != token || !later.After(first) {
		t.Errorf("after two renewals the lease ends at %v (token %s), first %v (token %s)", later, token2, first, token)
	}
	if err := a.Unlock(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+a.locks).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d lock rows after Unlock (%v)", n, err)
	}
	// Unlock waits for the renewer to return: nothing renews afterwards.
	select {
	case <-renewals:
		t.Error("a renewal after Unlock")
	default:
	}
}

// TestStaleLockTakenOver: a node that died holding a lock (its renewals
// stopped, its row left behind) does not block the others for longer
// than the lease: another node waiting in Lock takes it over, not before
// the lease has run out by the database's clock, and the dead holder
// cannot release the new holder's lock.
func TestStaleLockTakenOver(t *testing.T) {
	dsn := newDatabase(t)
	ctx := testCtx(t)
	const ttl = 2 * time.Second
	poolA := newPool(t, dsn)
	a, err := New(poolA, Options{LockTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	b := newNode(t, dsn, Options{LockTTL: ttl, LockPoll: 50 * time.Millisecond})
	if err := a.Lock(ctx, "issue_cert_dead.example"); err != nil {
		t.Fatal(err)
	}
	// The node dies: its renewer stops with it, nothing is released.
	a.mu.Lock()
	h := a.held["issue_cert_dead.example"]
	a.mu.Unlock()
	h.stop()
	<-h.done
	deadToken, deadExpires := lockRow(t, poolA, a, "issue_cert_dead.example")

	if err := b.Lock(ctx, "issue_cert_dead.example"); err != nil {
		t.Fatalf("the lock of a dead node was not taken over: %v", err)
	}
	token, expires := lockRow(t, poolA, a, "issue_cert_dead.example")
	if token == deadToken {
		t.Fatal("the lock row still carries the dead holder's token")
	}
	// The new lease began at the take-over, by the database's clock.
	if takenAt := expires.Add(-ttl); takenAt.Before(deadExpires) {
		t.Errorf("taken over at %v, before the dead lease ended at %v", takenAt, deadExpires)
	}
	// The dead holder's late Unlock does not release the new holder.
	if err := a.Unlock(ctx, "issue_cert_dead.example"); err != nil {
		t.Fatal(err)
	}
	if tok, _ := lockRow(t, poolA, a, "issue_cert_dead.example"); tok != token {
		t.Error("the dead holder's Unlock removed the new holder's lock")
	}
	if ok, err := a.TryLock(ctx, "issue_cert_dead.example"); ok || err != nil {
		t.Errorf("TryLock on the old node = %v, %v while the new holder renews", ok, err)
	}
}

// TestCloseReleasesLocks: a Storage that closes (Caddy unloading the
// configuration) releases its locks at once.
func TestCloseReleasesLocks(t *testing.T) {
	dsn := newDatabase(t)
	ctx := testCtx(t)
	a, err := New(newPool(t, dsn), Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := newNode(t, dsn, Options{})
	for _, name := range []string{"one", "two"} {
		if err := a.Lock(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"one", "two"} {
		if ok, err := b.TryLock(ctx, name); !ok || err != nil {
			t.Errorf("TryLock(%s) after the holder closed = %v, %v", name, ok, err)
		}
	}
}

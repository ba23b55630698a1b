package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
	"github.com/tokenvault/tokenvault/vaultstore/kv/postgres/pgtest"
)

// terminateAll ends every session on the database but the caller's.
func terminateAll(t *testing.T, ctx context.Context, dsn string) int {
	t.Helper()
	a := admin(t, dsn)
	var n int
	err := a.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n)
	if err != nil {
		t.Fatalf("terminating sessions: %v", err)
	}
	a.Close(ctx)
	return n
}

// warm fills the pool with n connections.
func warm(t *testing.T, s *Store, n int) {
	t.Helper()
	var wg sync.WaitGroup
	var ready sync.WaitGroup
	ready.Add(n)
	for range n {
		wg.Go(func() {
			err := s.View(t.Context(), func(r kv.Reader) error {
				_, err := r.Get([]byte("warm"))
				ready.Done()
				ready.Wait() // hold the connection until all are taken
				return err
			})
			if err != nil && !errors.Is(err, kv.ErrNotFound) {
				t.Errorf("View: %v", err)
			}
		})
	}
	wg.Wait()
}

// TestReconnectAfterTerminate ends every pooled connection's backend, as
// a restarted or failed-over server would: each later Update either
// succeeds, and its increment is there, or fails with kv.ErrUnavailable;
// none reports a false success, and the store recovers by itself.
func TestReconnectAfterTerminate(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	o := testOptions(t, dsn, "kv")
	s := open(t, o)
	ctx := t.Context()
	key := []byte("counter")
	var ok, unavailable int
	for round := range 3 {
		warm(t, s, int(o.MaxConns))
		if n := terminateAll(t, ctx, dsn); n < 1 {
			t.Fatalf("round %d: terminated %d sessions, want the pool's", round, n)
		}
		for range 20 {
			err := s.Update(ctx, func(w kv.Writer) error {
				var n uint64
				if v, err := w.Get(key); err == nil {
					n = binary.BigEndian.Uint64(v)
				} else if !errors.Is(err, kv.ErrNotFound) {
					return err
				}
				return w.Put(key, binary.BigEndian.AppendUint64(nil, n+1), 0)
			})
			switch {
			case err == nil:
				ok++
			case errors.Is(err, kv.ErrUnavailable):
				unavailable++
			default:
				t.Fatalf("round %d: Update = %v, want nil or kv.ErrUnavailable", round, err)
			}
		}
	}
	var got uint64
	err := s.View(ctx, func(r kv.Reader) error {
		v, err := r.Get(key)
		if err == nil {
			got = binary.BigEndian.Uint64(v)
		}
		return err
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	t.Logf("%d succeeded, %d unavailable; counter %d", ok, unavailable, got)
	if got < uint64(ok) || got > uint64(ok+unavailable) {
		t.Fatalf("counter = %d after %d successes and %d unavailable: a success was not committed, or a failure was", got, ok, unavailable)
	}
	if ok < 50 {
		t.Fatalf("only %d of 60 Updates succeeded: the pool does not recover from dead connections", ok)
	}
}

// TestCommitOutcomeUnknown ends the backend while it runs COMMIT (held
// there by a deferred trigger that sleeps): Update must not report
// success, nor run fn again, and fails with kv.ErrUnavailable.
func TestCommitOutcomeUnknown(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	o := testOptions(t, dsn, "kv")
	o.StatementTimeout = 2 * time.Minute
	s := open(t, o)
	ctx := t.Context()
	a := admin(t, dsn)
	for _, q := range []string{
		`CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(60); RETURN NULL; END $$`,
		`CREATE CONSTRAINT TRIGGER slow AFTER INSERT ON kv DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW WHEN (NEW.key = 'slow'::bytea) EXECUTE FUNCTION slow_commit()`,
	} {
		if _, err := a.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	runs := 0
	done := make(chan error, 1)
	go func() {
		done <- s.Update(ctx, func(w kv.Writer) error {
			runs++
			return w.Put([]byte("slow"), []byte("v"), 0)
		})
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		var n int
		err := a.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event = 'PgSleep' AND pid <> pg_backend_pid()`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the commit never reached the sleeping trigger")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("Update did not return after its backend was terminated")
	}
	if !errors.Is(err, kv.ErrUnavailable) || !strings.Contains(err.Error(), "may or may not") {
		t.Fatalf("Update = %v, want kv.ErrUnavailable saying the outcome is unknown", err)
	}
	if runs != 1 {
		t.Fatalf("fn ran %d times: a commit of unknown outcome must not be retried", runs)
	}
	var v []byte
	err = s.View(ctx, func(r kv.Reader) error { var err error; v, err = r.Get([]byte("slow")); return err })
	if !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("after the terminated commit: Get = %q, %v; want kv.ErrNotFound (PostgreSQL aborted it)", v, err)
	}
}

// TestStatementTimeout: a statement stuck behind a lock fails after the
// statement timeout with kv.ErrUnavailable; the caller's own deadline
// gives its context's error instead.
func TestStatementTimeout(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	o := testOptions(t, dsn, "kv")
	o.StatementTimeout = time.Second
	s := open(t, o)
	ctx := t.Context()
	get := func(ctx context.Context) error {
		return s.View(ctx, func(r kv.Reader) error { _, err := r.Get([]byte("k")); return err })
	}
	if err := s.Update(ctx, func(w kv.Writer) error { return w.Put([]byte("k"), []byte("v"), 0) }); err != nil {
		t.Fatal(err)
	}
	a := admin(t, dsn)
	tx, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE kv IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	if err := get(ctx); !errors.Is(err, kv.ErrUnavailable) {
		t.Fatalf("View behind a lock = %v, want kv.ErrUnavailable after the statement timeout", err)
	}
	err = s.Update(ctx, func(w kv.Writer) error { return w.Put([]byte("k"), []byte("v2"), 0) })
	if !errors.Is(err, kv.ErrUnavailable) {
		t.Fatalf("Update behind a lock = %v, want kv.ErrUnavailable", err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := get(short); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kv.ErrUnavailable) {
		t.Fatalf("View with the caller's deadline = %v, want context.DeadlineExceeded", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := get(ctx); err != nil {
		t.Fatalf("View after the lock went: %v", err)
	}
}

package badgerkv

import (
	"context"
	"errors"
	"testing"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// kv.WithCommitted's function runs once the transaction has committed
// (its writes visible to a new transaction) and before Update returns;
// never for a transaction that fails, and once for one that ran again
// after a conflict.
func TestUpdateCallsCommitted(t *testing.T) {
	for _, syncWrites := range []bool{false, true} {
		s, err := Open(Options{Dir: t.TempDir(), SyncWrites: syncWrites})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		calls, seen := 0, false
		cctx := kv.WithCommitted(ctx, func() {
			calls++
			// a new transaction sees the commit already
			seen = s.View(ctx, func(r kv.Reader) error { _, err := r.Get([]byte("k")); return err }) == nil
		})
		if err := s.Update(cctx, func(w kv.Writer) error { return w.Put([]byte("k"), []byte("v"), 0) }); err != nil {
			t.Fatal(err)
		}
		if calls != 1 || !seen {
			t.Errorf("sync %v: committed called %d times, write visible then: %v", syncWrites, calls, seen)
		}
		failed := errors.New("refused")
		if err := s.Update(cctx, func(w kv.Writer) error { _ = w.Put([]byte("x"), []byte("v"), 0); return failed }); !errors.Is(err, failed) || calls != 1 {
			t.Errorf("sync %v: a failed transaction: %v, committed called %d times", syncWrites, err, calls)
		}
		// a transaction that loses a conflict once, then commits
		runs := 0
		err = s.Update(cctx, func(w kv.Writer) error {
			runs++
			if _, err := w.Get([]byte("k")); err != nil {
				return err
			}
			if runs == 1 { // another transaction changes what this one read
				if err := s.Update(ctx, func(w2 kv.Writer) error { return w2.Put([]byte("k"), []byte("w"), 0) }); err != nil {
					return err
				}
			}
			return w.Put([]byte("k"), []byte("z"), 0)
		})
		if err != nil || runs != 2 || calls != 2 {
			t.Errorf("sync %v: after a conflict: %v, %d runs, committed called %d times in all", syncWrites, err, runs, calls)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
	"github.com/tokenvault/tokenvault/vaultstore/kv/postgres/pgtest"
)

// TestDeferredSyncCommitsAsynchronously: an Update marked
// kv.WithDeferredSync runs with synchronous_commit off, for its own
// transaction only: the next unmarked Update on the same pooled
// connection runs with the server's setting again, and both commit.
func TestDeferredSyncCommitsAsynchronously(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	o := testOptions(t, dsn, "kv")
	o.MaxConns = 1 // one connection: the SET must not outlive its transaction
	s := open(t, o)
	setting := func(ctx context.Context, key string) string {
		t.Helper()
		var got string
		err := s.Update(ctx, func(w kv.Writer) error {
			tx := w.(*txn)
			if err := tx.Put([]byte(key), []byte("v"), 0); err != nil {
				return err
			}
			return tx.roundTrip("show", []stmt{{sql: "SHOW synchronous_commit", rows: func(rows pgx.Rows) error {
				for rows.Next() {
					if err := rows.Scan(&got); err != nil {
						return err
					}
				}
				return nil
			}}}, -1)
		})
		if err != nil {
			t.Fatalf("Update %s: %v", key, err)
		}
		return got
	}
	if got := setting(kv.WithDeferredSync(t.Context()), "deferred"); got != "off" {
		t.Errorf("a deferred Update runs with synchronous_commit %q, want off", got)
	}
	if got := setting(t.Context(), "durable"); got != "on" {
		t.Errorf("the next Update runs with synchronous_commit %q, want on (the server's)", got)
	}
	if err := s.View(t.Context(), func(r kv.Reader) error {
		for _, k := range []string{"deferred", "durable"} {
			if _, err := r.Get([]byte(k)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Errorf("reading both commits back: %v", err)
	}
}

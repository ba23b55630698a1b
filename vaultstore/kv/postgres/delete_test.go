package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
	"github.com/tokenvault/tokenvault/vaultstore/kv/postgres/pgtest"
)

// TestPurge: expired rows leave the table itself, not only the reads,
// in batches, while live rows stay.
func TestPurge(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	o := testOptions(t, dsn, "kv")
	o.PurgeInterval = 200 * time.Millisecond
	s := open(t, o)
	ctx := t.Context()
	const expiring, kept = purgeBatch + 500, 5 // more than one batch
	err := s.Update(ctx, func(w kv.Writer) error {
		for i := range expiring {
			if err := w.Put(fmt.Appendf(nil, "e/%05d", i), []byte("v"), time.Second); err != nil {
				return err
			}
		}
		for i := range kept {
			if err := w.Put(fmt.Appendf(nil, "k/%d", i), []byte("v"), time.Duration(i)*time.Hour); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a := admin(t, dsn)
	rows := func() int {
		var n int
		if err := a.QueryRow(ctx, `SELECT count(*) FROM kv`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(eventually)
	for rows() != kept {
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %d rows, want the %d live ones", eventually, rows(), kept)
		}
		time.Sleep(100 * time.Millisecond)
	}
	n, err := s.purge(ctx)
	if err != nil || n != 0 {
		t.Fatalf("a purge with nothing to do: %d, %v", n, err)
	}
}

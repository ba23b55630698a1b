package postgres

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap/zaptest"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
	"github.com/tokenvault/tokenvault/vaultstore/kv/kvtest"
	"github.com/tokenvault/tokenvault/vaultstore/kv/postgres/pgtest"
)

// testOptions are the options of the tests' stores: a small pool, since
// several engineers' tests share the machine's PostgreSQL, and no purge
// unless a test asks for it.
func testOptions(t testing.TB, dsn, table string) Options {
	return Options{DSN: dsn, Table: table, MaxConns: 6, PurgeInterval: -1, Logger: zaptest.NewLogger(t)}
}

// open opens a store, closed when t ends.
func open(t testing.TB, o Options) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Open(ctx, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestConformance runs the kv suite, each store on a table of its own in
// one database.
func TestConformance(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	var n atomic.Int64
	kvtest.Run(t, func(t *testing.T) kv.KV {
		s, err := Open(t.Context(), testOptions(t, dsn, fmt.Sprintf("kv_%d", n.Add(1))))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	}, kvtest.PhantomSafe())
}

// admin connects to dsn for a test's own SQL.
func admin(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
	"github.com/tokenvault/tokenvault/vaultstore/kv/postgres/pgtest"
)

func TestOpenOptions(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"no DSN", Options{}, "no DSN"},
		{"upper case table", Options{DSN: "postgres://x/y", Table: "KV"}, "table name"},
		{"quoted table", Options{DSN: "postgres://x/y", Table: `kv"; DROP TABLE x; --`}, "table name"},
		{"long table", Options{DSN: "postgres://x/y", Table: strings.Repeat("k", 49)}, "table name"},
		{"negative pool", Options{DSN: "postgres://x/y", MaxConns: -1}, "MaxConns"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(t.Context(), tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open = %v, want an error about %s", err, tc.want)
			}
		})
	}
}

// TestOpenUnreachable: Open fails fast, wrapping kv.ErrUnavailable, and
// the error names the server without the password.
func TestOpenUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := Open(ctx, Options{DSN: "postgres://vault:hunter2secret@127.0.0.1:1/vault?sslmode=disable&connect_timeout=5"})
	if !errors.Is(err, kv.ErrUnavailable) {
		t.Fatalf("Open = %v, want kv.ErrUnavailable", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("the error shows the password: %v", err)
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1/vault") {
		t.Errorf("the error does not name the server: %v", err)
	}
}

// TestOpenSchemaRace opens several stores at once on a database without
// the table: all succeed, and they share one table.
func TestOpenSchemaRace(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	const nodes = 4
	stores := make([]*Store, nodes)
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range nodes {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = Open(t.Context(), testOptions(t, dsn, "raced"))
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	for i, s := range stores {
		if err := s.Update(t.Context(), func(w kv.Writer) error { return w.Put(fmt.Appendf(nil, "node/%d", i), []byte("x"), 0) }); err != nil {
			t.Fatalf("Update on node %d: %v", i, err)
		}
	}
	n := 0
	err := stores[0].View(t.Context(), func(r kv.Reader) error {
		return r.Scan([]byte("node/"), nil, func(_, _ []byte) error { n++; return nil })
	})
	if err != nil || n != nodes {
		t.Fatalf("node 0 sees %d entries (%v), want %d", n, err, nodes)
	}
}

func TestPing(t *testing.T) {
	s := open(t, testOptions(t, pgtest.NewDatabase(t), "kv"))
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	_ = s.Close()
	if err := s.Ping(t.Context()); !errors.Is(err, kv.ErrClosed) {
		t.Fatalf("Ping after Close = %v, want kv.ErrClosed", err)
	}
}

package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
	"github.com/tokenvault/tokenvault/vaultstore/kv/postgres/pgtest"
)

// benchStore opens a store with the default pool on a fresh database.
func benchStore(b *testing.B) *Store {
	o := testOptions(b, pgtest.NewDatabase(b), "kv")
	o.MaxConns = DefaultMaxConns
	return open(b, o)
}

// value is a record-sized value (a sealed token is a few hundred bytes).
var value = make([]byte, 300)

// BenchmarkGet reads one key in a View: BEGIN and SELECT in one round
// trip, then ROLLBACK.
func BenchmarkGet(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	if err := s.Update(ctx, func(w kv.Writer) error { return w.Put([]byte("k"), value, 0) }); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		err := s.View(ctx, func(r kv.Reader) error { _, err := r.Get([]byte("k")); return err })
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdate writes a record and two index entries, after reading
// one key, as a tokenize does: two round trips.
func BenchmarkUpdate(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		err := s.Update(ctx, func(w kv.Writer) error {
			if _, err := w.Get(fmt.Appendf(nil, "fp/%d", i)); err != kv.ErrNotFound {
				return fmt.Errorf("Get = %v", err)
			}
			for _, k := range []string{"rec/%d", "fp/%d", "order/%d"} {
				if err := w.Put(fmt.Appendf(nil, k, i), value, 0); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParallelUpdate runs BenchmarkUpdate's transaction from many
// goroutines on distinct keys, plus a per-goroutine counter; it reports
// how many runs lost a conflict (predicate locks are per index page, so
// neighbours can conflict).
func BenchmarkParallelUpdate(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	var next, runs, ops atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		g := next.Add(1)
		counter := fmt.Appendf(nil, "count/%d", g)
		for pb.Next() {
			i := next.Add(1)
			ops.Add(1)
			err := s.Update(ctx, func(w kv.Writer) error {
				runs.Add(1)
				var n uint64
				if v, err := w.Get(counter); err == nil {
					n = binary.BigEndian.Uint64(v)
				}
				for _, k := range []string{"rec/%d", "fp/%d", "order/%d"} {
					if err := w.Put(fmt.Appendf(nil, k, i), value, 0); err != nil {
						return err
					}
				}
				return w.Put(counter, binary.BigEndian.AppendUint64(nil, n+1), 0)
			})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(runs.Load()-ops.Load())/float64(ops.Load()), "retries/op")
}

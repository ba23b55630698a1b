package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

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

// tokenize is shaped like the vault's tokenize: it reads the tenant and
// its data key (the read check locks both at commit), looks for a
// fingerprint (missing), and writes a record and two index entries; two
// round trips.
func tokenize(w kv.Writer, i int64) error {
	for _, k := range []string{"tenant", "datakey"} {
		if _, err := w.Get([]byte(k)); err != nil {
			return fmt.Errorf("Get(%s) = %w", k, err)
		}
	}
	// ids and fingerprints are random in the vault, so spread the keys
	// over the index as they would be (sequential keys would all land in
	// the last index page, where SERIALIZABLE's page locks make every
	// pair of transactions conflict)
	id := fmt.Sprintf("%016x", rand.New(rand.NewPCG(uint64(i), 0)).Uint64())
	if _, err := w.Get([]byte("fp/" + id)); err != kv.ErrNotFound {
		return fmt.Errorf("Get = %v", err)
	}
	for _, k := range []string{"rec/", "fp/", "order/"} {
		if err := w.Put([]byte(k+id), value, 0); err != nil {
			return err
		}
	}
	return nil
}

// seedRows is how many rows the benchmarks' table starts with: a vault's
// table is large, and SERIALIZABLE's predicate locks cover index and
// heap pages, so on a nearly empty table every pair of concurrent writers
// touches the same pages and conflicts.
const seedRows = 100_000

// seed writes the keys tokenize reads, and seedRows others with random
// keys.
func seed(b *testing.B, s *Store) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 0
	err := s.Load(context.Background(), func() ([]byte, []byte, time.Time, error) {
		if n++; n > seedRows {
			return nil, nil, time.Time{}, io.EOF
		}
		return fmt.Appendf(nil, "%s/%016x", []string{"rec", "fp", "order"}[n%3], r.Uint64()), value, time.Time{}, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.pool.Exec(context.Background(), "ANALYZE kv"); err != nil {
		b.Fatal(err)
	}
	err = s.Update(context.Background(), func(w kv.Writer) error {
		if err := w.Put([]byte("tenant"), value, 0); err != nil {
			return err
		}
		return w.Put([]byte("datakey"), value, 0)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkUpdate runs tokenize transactions one after another.
func BenchmarkUpdate(b *testing.B) {
	s := benchStore(b)
	seed(b, s)
	ctx := context.Background()
	var i int64
	b.ReportAllocs()
	for b.Loop() {
		i++
		if err := s.Update(ctx, func(w kv.Writer) error { return tokenize(w, i) }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParallelUpdate runs tokenize from many goroutines on distinct
// keys, each also bumping a counter of its own; it reports how many runs
// lost a conflict (predicate locks cover index pages, so neighbours can
// conflict).
func BenchmarkParallelUpdate(b *testing.B) {
	s := benchStore(b)
	seed(b, s)
	ctx := context.Background()
	var next, runs, ops atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(4)
	b.ResetTimer()
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
				if err := tokenize(w, i); err != nil {
					return err
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

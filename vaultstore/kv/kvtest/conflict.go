package kvtest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

func (s *suite) conflicts() []subtest {
	return []subtest{
		{"Counter", s.testCounter},
		{"WriteSkew", s.testWriteSkew},
		{"PhantomWriteSkew", s.testPhantomWriteSkew},
		{"StaleReadRetried", s.testStaleReadRetried},
		{"BoundedRetries", s.testBoundedRetries},
	}
}

// increment adds one to the counter under key, read then written in one
// Update, as the vault keeps its counters.
func increment(w kv.Writer, key []byte) error {
	var n uint64
	v, err := w.Get(key)
	switch {
	case errors.Is(err, kv.ErrNotFound):
	case err != nil:
		return err
	case len(v) != 8:
		return fmt.Errorf("counter holds %d bytes", len(v))
	default:
		n = binary.BigEndian.Uint64(v)
	}
	return w.Put(key, binary.BigEndian.AppendUint64(nil, n+1), 0)
}

// testCounter has writers increment one counter concurrently: no
// increment is lost or counted twice. An Update that fails with
// kv.ErrConflict applied nothing and is called again, as a caller would.
func (s *suite) testCounter(t *testing.T) {
	st := s.store(t)
	const writers, each = 4, 50
	key := []byte("counter")
	var wg sync.WaitGroup
	var conflicts atomic.Int64
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			for done := 0; done < each; {
				err := st.Update(ctx(t), func(w kv.Writer) error { return increment(w, key) })
				switch {
				case err == nil:
					done++
				case errors.Is(err, kv.ErrConflict):
					conflicts.Add(1)
				default:
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Update: %v", err)
	}
	v, err := get(t, st, key)
	if err != nil {
		t.Fatal(err)
	}
	if n := binary.BigEndian.Uint64(v); n != writers*each {
		t.Fatalf("counter = %d after %d×%d increments, want %d", n, writers, each, writers*each)
	}
	if c := conflicts.Load(); c > writers*each/10 {
		t.Errorf("%d Updates gave up with kv.ErrConflict among %d: retries should hide nearly all", c, writers*each)
	}
}

// barrier lets two transactions' first runs meet after their reads, so
// that they overlap; later runs pass at once. An engine that serializes
// transactions by making the second wait would never let both meet, so
// the wait is bounded.
type barrier struct {
	wg   sync.WaitGroup
	once [2]sync.Once
}

func newBarrier() *barrier {
	b := &barrier{}
	b.wg.Add(2)
	return b
}

func (b *barrier) arrive(i int) {
	first := false
	b.once[i].Do(func() { first = true; b.wg.Done() })
	if !first {
		return
	}
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// testWriteSkew is the on-call doctors: each of two transactions reads
// both flags and clears its own if the other is still set. Run serially,
// one flag stays set; a store that let both commit on stale reads would
// clear both.
func (s *suite) testWriteSkew(t *testing.T) {
	st := s.store(t)
	keys := [2][]byte{[]byte("oncall/a"), []byte("oncall/b")}
	put(t, st, entry{keys[0], []byte("on")}, entry{keys[1], []byte("on")})
	b := newBarrier()
	var wg sync.WaitGroup
	var errs [2]error
	for i := range 2 {
		wg.Go(func() {
			errs[i] = st.Update(ctx(t), func(w kv.Writer) error {
				other, err := w.Get(keys[1-i])
				if err != nil {
					return err
				}
				if _, err := w.Get(keys[i]); err != nil {
					return err
				}
				b.arrive(i)
				if string(other) != "on" {
					return nil // the other one is off duty: stay
				}
				return w.Put(keys[i], []byte("off"), 0)
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Update %d: %v", i, err)
		}
	}
	on := 0
	for _, k := range keys {
		v, err := get(t, st, k)
		if err != nil {
			t.Fatal(err)
		}
		if string(v) == "on" {
			on++
		}
	}
	if on != 1 {
		t.Fatalf("%d doctors on call, want exactly 1: both transactions committed on stale reads", on)
	}
}

// testPhantomWriteSkew: two transactions each find no key under a prefix
// and insert one there; exactly one may commit so (see PhantomSafe).
func (s *suite) testPhantomWriteSkew(t *testing.T) {
	if !s.cfg.phantomSafe {
		t.Skip("the engine does not claim PhantomSafe: kv.KV promises conflicts on keys read, not on ranges scanned")
	}
	st := s.store(t)
	b := newBarrier()
	var wg sync.WaitGroup
	var errs [2]error
	for i := range 2 {
		wg.Go(func() {
			errs[i] = st.Update(ctx(t), func(w kv.Writer) error {
				empty := true
				err := w.Scan([]byte("lock/"), nil, func(_, _ []byte) error {
					empty = false
					return kv.ErrStopScan
				})
				if err != nil {
					return err
				}
				b.arrive(i)
				if !empty {
					return nil
				}
				return w.Put(fmt.Appendf(nil, "lock/%d", i), []byte("held"), 0)
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Update %d: %v", i, err)
		}
	}
	if got := keysOf(scanView(t, st, []byte("lock/"), nil)); len(got) != 1 {
		t.Fatalf("keys under the prefix = %q, want exactly one", got)
	}
}

// testStaleReadRetried: transaction A reads x, then B (another
// transaction) changes x and commits, then A writes from what it read,
// to x itself (a lost update) or to another key y (a decision on stale
// data). A must run again, and write from B's value.
func (s *suite) testStaleReadRetried(t *testing.T) {
	for _, target := range []string{"x", "y"} {
		t.Run("writes "+target, func(t *testing.T) {
			st := s.store(t)
			x := []byte("x")
			put(t, st, entry{x, binary.BigEndian.AppendUint64(nil, 10)})
			runs := 0
			err := st.Update(ctx(t), func(w kv.Writer) error {
				runs++
				v, err := w.Get(x)
				if err != nil {
					return err
				}
				if runs == 1 {
					done := make(chan error, 1)
					go func() {
						done <- st.Update(ctx(t), func(w kv.Writer) error {
							return w.Put(x, binary.BigEndian.AppendUint64(nil, 100), 0)
						})
					}()
					if err := <-done; err != nil {
						t.Errorf("the interfering Update: %v", err)
					}
				}
				return w.Put([]byte(target), binary.BigEndian.AppendUint64(nil, binary.BigEndian.Uint64(v)+1), 0)
			})
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			v, err := get(t, st, []byte(target))
			if err != nil {
				t.Fatal(err)
			}
			if n := binary.BigEndian.Uint64(v); n != 101 || runs < 2 {
				t.Fatalf("%s = %d after %d runs, want 101 after at least 2: the run on stale data committed", target, n, runs)
			}
		})
	}
}

// testBoundedRetries makes every run of a transaction lose a conflict:
// Update gives up after a bounded number of runs with kv.ErrConflict,
// having committed nothing.
func (s *suite) testBoundedRetries(t *testing.T) {
	st := s.store(t)
	key := []byte("contended")
	put(t, st, entry{key, []byte("0")})
	var runs, interfered atomic.Int32
	start := time.Now()
	err := st.Update(ctx(t), func(w kv.Writer) error {
		runs.Add(1)
		if _, err := w.Get(key); err != nil {
			return err
		}
		done := make(chan error, 1)
		go func() {
			done <- st.Update(ctx(t), func(w kv.Writer) error {
				return w.Put(key, fmt.Appendf(nil, "other %d", interfered.Add(1)), 0)
			})
		}()
		if err := <-done; err != nil {
			return fmt.Errorf("the interfering Update: %w", err)
		}
		return w.Put(key, []byte("mine"), 0)
	})
	if !errors.Is(err, kv.ErrConflict) {
		t.Fatalf("Update = %v after %d runs, want kv.ErrConflict", err, runs.Load())
	}
	if n := runs.Load(); n < 2 || n > 100 {
		t.Fatalf("fn ran %d times, want a few retries and a bound", n)
	}
	t.Logf("gave up after %d runs in %s", runs.Load(), time.Since(start))
	mustGet(t, st, key, fmt.Appendf(nil, "other %d", interfered.Load()))
}

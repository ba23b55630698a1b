package kvtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

func (s *suite) closing() []subtest {
	return []subtest{
		{"WhileWriting", s.testCloseWhileWriting},
		{"CallsAfterClose", s.testCallsAfterClose},
	}
}

// testCloseWhileWriting closes the store while writers and readers run:
// Close returns, every call returns (nil or kv.ErrClosed; the suite
// cannot reopen a store, so it does not check durability), and nothing
// panics.
func (s *suite) testCloseWhileWriting(t *testing.T) {
	st := s.store(t)
	const writers, readers = 4, 2
	var wrote atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers+readers)
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				err := st.Update(context.Background(), func(tx kv.Writer) error {
					return tx.Put(fmt.Appendf(nil, "w/%d/%06d", w, i), []byte("v"), 0)
				})
				if err != nil {
					if !errors.Is(err, kv.ErrClosed) {
						errs <- fmt.Errorf("writer %d: Update = %w, want nil or kv.ErrClosed", w, err)
					}
					return
				}
				wrote.Add(1)
			}
		})
	}
	for r := range readers {
		wg.Go(func() {
			for {
				err := st.View(context.Background(), func(tx kv.Reader) error {
					_, err := scan(tx, []byte("w/"), nil)
					return err
				})
				if err != nil {
					if !errors.Is(err, kv.ErrClosed) {
						errs <- fmt.Errorf("reader %d: View = %w, want nil or kv.ErrClosed", r, err)
					}
					return
				}
			}
		})
	}
	waitUntil(t, eventually, "some writes to commit", func() bool { return wrote.Load() >= 20 })
	closed := make(chan error, 1)
	go func() { closed <- st.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("Close did not return while transactions ran: deadlock?")
	}
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(2 * time.Minute):
		t.Fatal("writers or readers still running after Close: deadlock?")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// testCallsAfterClose: every call after Close fails with kv.ErrClosed,
// and a second Close neither panics nor blocks.
func (s *suite) testCallsAfterClose(t *testing.T) {
	st := s.store(t)
	put(t, st, entry{[]byte("k"), []byte("v")})
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	c := ctx(t)
	calls := []struct {
		name string
		call func() error
	}{
		{"Update", func() error {
			return st.Update(c, func(w kv.Writer) error { return w.Put([]byte("k"), []byte("v2"), 0) })
		}},
		{"View", func() error {
			return st.View(c, func(r kv.Reader) error { _, err := r.Get([]byte("k")); return err })
		}},
		{"DeletePrefix", func() error { return st.DeletePrefix(c, []byte("k")) }},
	}
	if sn, ok := st.(kv.Snapshotter); ok {
		calls = append(calls, struct {
			name string
			call func() error
		}{"Snapshot", func() error {
			return sn.Snapshot(c, func([]byte, []byte, time.Time) error { return nil })
		}})
	}
	for _, call := range calls {
		if err := call.call(); !errors.Is(err, kv.ErrClosed) {
			t.Errorf("%s after Close = %v, want kv.ErrClosed", call.name, err)
		}
	}
	done := make(chan struct{})
	go func() { _ = st.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("a second Close blocked")
	}
}

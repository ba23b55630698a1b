package kvtest

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

func (s *suite) transactions() []subtest {
	return []subtest{
		{"RollbackOnError", s.testRollbackOnError},
		{"ErrorNotRetried", s.testErrorNotRetried},
		{"ReadYourOwnWrites", s.testReadYourOwnWrites},
		{"ViewIsSnapshot", s.testViewIsSnapshot},
	}
}

func (s *suite) testRollbackOnError(t *testing.T) {
	st := s.store(t)
	put(t, st, entry{[]byte("kept"), []byte("1")}, entry{[]byte("changed"), []byte("old")})
	err := st.Update(ctx(t), func(w kv.Writer) error {
		if err := w.Put([]byte("new"), []byte("x"), 0); err != nil {
			return err
		}
		if err := w.Put([]byte("changed"), []byte("new"), 0); err != nil {
			return err
		}
		if err := w.Delete([]byte("kept")); err != nil {
			return err
		}
		if _, err := w.Get([]byte("new")); err != nil { // the writes reached the engine
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v, want fn's error", err)
	}
	mustNotFind(t, st, []byte("new"))
	mustGet(t, st, []byte("changed"), []byte("old"))
	mustGet(t, st, []byte("kept"), []byte("1"))
}

func (s *suite) testErrorNotRetried(t *testing.T) {
	st := s.store(t)
	var runs atomic.Int32
	err := st.Update(ctx(t), func(w kv.Writer) error {
		runs.Add(1)
		if err := w.Put([]byte("k"), []byte("v"), 0); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) || runs.Load() != 1 {
		t.Fatalf("Update = %v after %d runs, want fn's error after one run", err, runs.Load())
	}
	err = st.View(ctx(t), func(r kv.Reader) error { return errBoom })
	if !errors.Is(err, errBoom) {
		t.Fatalf("View = %v, want fn's error", err)
	}
}

func (s *suite) testReadYourOwnWrites(t *testing.T) {
	st := s.store(t)
	put(t, st, entry{[]byte("p/1"), []byte("committed")}, entry{[]byte("p/3"), []byte("committed")})
	err := st.Update(ctx(t), func(w kv.Writer) error {
		if err := w.Put([]byte("k"), []byte("mine"), 0); err != nil {
			return err
		}
		if v, err := w.Get([]byte("k")); err != nil || string(v) != "mine" {
			t.Errorf("Get after Put in the transaction = %q, %v; want %q", v, err, "mine")
		}
		if err := w.Delete([]byte("k")); err != nil {
			return err
		}
		if v, err := w.Get([]byte("k")); !errors.Is(err, kv.ErrNotFound) {
			t.Errorf("Get after Delete in the transaction = %q, %v; want kv.ErrNotFound", v, err)
		}
		if err := w.Delete([]byte("p/1")); err != nil {
			return err
		}
		if err := w.Put([]byte("p/2"), []byte("new"), 0); err != nil {
			return err
		}
		if err := w.Put([]byte("p/3"), []byte("rewritten"), 0); err != nil {
			return err
		}
		got, err := scan(w, []byte("p/"), nil)
		if err != nil {
			return err
		}
		want := []entry{{[]byte("p/2"), []byte("new")}, {[]byte("p/3"), []byte("rewritten")}}
		if !slices.EqualFunc(got, want, entryEqual) {
			t.Errorf("Scan after writes in the transaction = %v, want %v", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	mustNotFind(t, st, []byte("p/1"))
	mustGet(t, st, []byte("p/2"), []byte("new"))
	mustGet(t, st, []byte("p/3"), []byte("rewritten"))
}

func entryEqual(a, b entry) bool {
	return string(a.key) == string(b.key) && string(a.value) == string(b.value)
}

// testViewIsSnapshot commits a change while a View runs, after its first
// read: the View sees none of it, in Get or Scan.
func (s *suite) testViewIsSnapshot(t *testing.T) {
	st := s.store(t)
	put(t, st, entry{[]byte("s/x"), []byte("1")}, entry{[]byte("s/y"), []byte("1")})
	err := st.View(ctx(t), func(r kv.Reader) error {
		if v, err := r.Get([]byte("s/x")); err != nil || string(v) != "1" {
			t.Errorf("first Get = %q, %v", v, err)
		}
		done := make(chan error, 1)
		go func() {
			done <- st.Update(ctx(t), func(w kv.Writer) error {
				for _, k := range []string{"s/x", "s/y", "s/z"} {
					if err := w.Put([]byte(k), []byte("2"), 0); err != nil {
						return err
					}
				}
				return w.Delete([]byte("s/y"))
			})
		}()
		if err := <-done; err != nil {
			t.Errorf("concurrent Update: %v", err)
		}
		for _, k := range []string{"s/x", "s/y"} {
			if v, err := r.Get([]byte(k)); err != nil || string(v) != "1" {
				t.Errorf("Get(%q) after a concurrent commit = %q, %v; want the snapshot's %q", k, v, err, "1")
			}
		}
		if v, err := r.Get([]byte("s/z")); !errors.Is(err, kv.ErrNotFound) {
			t.Errorf("Get of a key created by a concurrent commit = %q, %v; want kv.ErrNotFound", v, err)
		}
		got, err := scan(r, []byte("s/"), nil)
		want := []entry{{[]byte("s/x"), []byte("1")}, {[]byte("s/y"), []byte("1")}}
		if err != nil || !slices.EqualFunc(got, want, entryEqual) {
			t.Errorf("Scan after a concurrent commit = %v, %v; want %v", got, err, want)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	mustGet(t, st, []byte("s/x"), []byte("2"))
	mustNotFind(t, st, []byte("s/y"))
}

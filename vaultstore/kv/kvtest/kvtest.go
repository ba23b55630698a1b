// Package kvtest is the conformance suite of the kv interface: every
// engine runs it, so that the vault cannot tell engines apart where it
// relies on their behaviour.
//
// An engine's test calls Run with a function that opens a fresh, empty
// store:
//
//	func TestConformance(t *testing.T) {
//		kvtest.Run(t, func(t *testing.T) kv.KV { return openEmpty(t) })
//	}
//
// open is called once or more per subtest, with the subtest's t; it may
// register cleanups of its own on t (removing a directory, dropping a
// database). The suite closes every store it opened when the subtest ends
// (some subtests close theirs earlier, and Close must then tolerate a
// second call); open must not close it itself.
package kvtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// Option changes what Run expects of an engine.
type Option func(*config)

type config struct {
	phantomSafe bool
}

// PhantomSafe declares that the engine's Update also detects conflicts on
// the ranges a transaction scanned, not only on the keys it read: two
// transactions that each find no key under a prefix and then insert one
// there cannot both commit. kv.KV does not promise it (Badger tracks the
// keys read, not the ranges); PostgreSQL's SERIALIZABLE does. Without the
// option, the subtest that checks it is skipped.
func PhantomSafe() Option { return func(c *config) { c.phantomSafe = true } }

// Run runs the conformance suite against the stores open returns, as
// subtests of t.
func Run(t *testing.T, open func(t *testing.T) kv.KV, opts ...Option) {
	s := &suite{open: open}
	for _, o := range opts {
		o(&s.cfg)
	}
	groups := []struct {
		name  string
		tests []subtest
	}{
		{"Basics", s.basics()},
		{"Txn", s.transactions()},
		{"Conflict", s.conflicts()},
		{"Scan", s.scans()},
		{"TTL", s.ttl()},
		{"DeletePrefix", s.deletePrefix()},
		{"Close", s.closing()},
		{"Backup", s.backup()},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, st := range g.tests {
				t.Run(st.name, st.run)
			}
		})
	}
}

// subtest is one named check.
type subtest struct {
	name string
	run  func(t *testing.T)
}

type suite struct {
	open func(t *testing.T) kv.KV
	cfg  config
}

// store opens a fresh store that is closed when t ends.
func (s *suite) store(t *testing.T) kv.KV {
	t.Helper()
	st := s.open(t)
	if st == nil {
		t.Fatal("kvtest: open returned nil")
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// eventually is how long the suite waits for what should happen soon:
// generous, since the machine running it may be busy.
const eventually = 30 * time.Second

// ctx returns a context that ends with t, bounded by a few minutes so a
// hung engine fails the test rather than the whole run.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	return c
}

// entry is a key and its value.
type entry struct{ key, value []byte }

func (e entry) String() string { return fmt.Sprintf("%q=%q", e.key, e.value) }

// put stores entries in one Update.
func put(t *testing.T, st kv.KV, entries ...entry) {
	t.Helper()
	err := st.Update(ctx(t), func(w kv.Writer) error {
		for _, e := range entries {
			if err := w.Put(e.key, e.value, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update putting %d entries: %v", len(entries), err)
	}
}

// putMany stores n entries key(i) = value(i), in Updates of batch entries.
func putMany(t *testing.T, st kv.KV, n int, key, value func(i int) []byte) {
	t.Helper()
	const batch = 500
	for lo := 0; lo < n; lo += batch {
		err := st.Update(ctx(t), func(w kv.Writer) error {
			for i := lo; i < min(n, lo+batch); i++ {
				if err := w.Put(key(i), value(i), 0); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Update putting entries %d to %d: %v", lo, min(n, lo+batch), err)
		}
	}
}

// get reads key in a View.
func get(t *testing.T, st kv.KV, key []byte) ([]byte, error) {
	t.Helper()
	var v []byte
	err := st.View(ctx(t), func(r kv.Reader) error {
		var err error
		v, err = r.Get(key)
		return err
	})
	return v, err
}

// mustGet reads key in a View and fails t unless it holds want.
func mustGet(t *testing.T, st kv.KV, key, want []byte) {
	t.Helper()
	v, err := get(t, st, key)
	if err != nil {
		t.Fatalf("Get(%q): %v, want %q", key, err, want)
	}
	if !bytes.Equal(v, want) {
		t.Fatalf("Get(%q) = %q, want %q", key, v, want)
	}
}

// mustNotFind fails t unless key holds no live value.
func mustNotFind(t *testing.T, st kv.KV, key []byte) {
	t.Helper()
	v, err := get(t, st, key)
	if !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("Get(%q) = %q, %v; want kv.ErrNotFound", key, v, err)
	}
}

// scan collects a Scan.
func scan(r kv.Reader, prefix, after []byte) ([]entry, error) {
	var out []entry
	err := r.Scan(prefix, after, func(k, v []byte) error {
		out = append(out, entry{k, v})
		return nil
	})
	return out, err
}

// scanView collects a Scan in a View.
func scanView(t *testing.T, st kv.KV, prefix, after []byte) []entry {
	t.Helper()
	var out []entry
	err := st.View(ctx(t), func(r kv.Reader) error {
		var err error
		out, err = scan(r, prefix, after)
		return err
	})
	if err != nil {
		t.Fatalf("Scan(%q, %q): %v", prefix, after, err)
	}
	return out
}

// keysOf returns the keys of entries, as strings for readable failures.
func keysOf(entries []entry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = string(e.key)
	}
	return out
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, deadline time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("after %s: still waiting for %s", deadline, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// errBoom is an error of the caller's, which the store must hand back.
var errBoom = errors.New("kvtest: boom")

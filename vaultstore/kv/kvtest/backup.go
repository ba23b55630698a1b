package kvtest

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

func (s *suite) backup() []subtest {
	return []subtest{
		{"SnapshotLoad", s.testSnapshotLoad},
		{"SnapshotIsConsistent", s.testSnapshotConsistent},
	}
}

// backupEntry is one entry of a snapshot.
type backupEntry struct {
	key, value []byte
	expiresAt  time.Time
}

// snapshot collects a Snapshot.
func snapshot(t *testing.T, sn kv.Snapshotter, during func(n int)) []backupEntry {
	t.Helper()
	var out []backupEntry
	err := sn.Snapshot(ctx(t), func(k, v []byte, exp time.Time) error {
		out = append(out, backupEntry{bytes.Clone(k), bytes.Clone(v), exp})
		if during != nil {
			during(len(out))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return out
}

// testSnapshotLoad round-trips a store through Snapshot and Load into a
// second, empty store: the same live entries, in key order, with their
// expiries (to the second: Badger keeps whole seconds); an entry whose
// expiry passed is not loaded.
func (s *suite) testSnapshotLoad(t *testing.T) {
	src := s.store(t)
	sn, ok := src.(kv.Snapshotter)
	if !ok {
		t.Skip("the engine does not implement kv.Snapshotter")
	}
	const n = 1500
	key := func(i int) []byte { return fmt.Appendf(nil, "b/%05d\x00\xff", i) }
	putMany(t, src, n, key, func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, i%300) })
	expiry := time.Now().Add(time.Hour)
	err := src.Update(ctx(t), func(w kv.Writer) error { return w.Put([]byte("ttl"), []byte("hour"), time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	got := snapshot(t, sn, nil)
	if len(got) != n+1 {
		t.Fatalf("Snapshot gave %d entries, want %d", len(got), n+1)
	}
	if !slices.IsSortedFunc(got, func(a, b backupEntry) int { return bytes.Compare(a.key, b.key) }) {
		t.Fatal("Snapshot is not in key order")
	}
	for _, e := range got {
		switch {
		case string(e.key) == "ttl":
			if d := e.expiresAt.Sub(expiry); d < -time.Minute || d > time.Minute {
				t.Fatalf("Snapshot: the entry with a 1h TTL expires at %s, want about %s", e.expiresAt, expiry)
			}
		case !e.expiresAt.IsZero():
			t.Fatalf("Snapshot: %q expires at %s, want no expiry", e.key, e.expiresAt)
		}
	}

	dst := s.store(t)
	ld, ok := dst.(kv.Loader)
	if !ok {
		t.Skip("the engine does not implement kv.Loader")
	}
	stream := append(slices.Clone(got), backupEntry{[]byte("gone"), []byte("x"), time.Now().Add(-time.Minute)})
	i := 0
	err = ld.Load(ctx(t), func() ([]byte, []byte, time.Time, error) {
		if i == len(stream) {
			return nil, nil, time.Time{}, io.EOF
		}
		e := stream[i]
		i++
		return e.key, e.value, e.expiresAt, nil
	})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	mustNotFind(t, dst, []byte("gone"))
	loaded := snapshot(t, dst.(kv.Snapshotter), nil)
	if len(loaded) != len(got) {
		t.Fatalf("after Load: %d entries, want %d", len(loaded), len(got))
	}
	for j := range got {
		a, b := got[j], loaded[j]
		if !bytes.Equal(a.key, b.key) || !bytes.Equal(a.value, b.value) || a.expiresAt.IsZero() != b.expiresAt.IsZero() ||
			a.expiresAt.Sub(b.expiresAt).Abs() > time.Second {
			t.Fatalf("entry %d: loaded %q (expiry %s), want %q (expiry %s)", j, b.key, b.expiresAt, a.key, a.expiresAt)
		}
	}
	mustGet(t, dst, key(7), bytes.Repeat([]byte{7}, 7))
}

// testSnapshotConsistent commits changes while a Snapshot streams: it
// shows the store as it was when it began.
func (s *suite) testSnapshotConsistent(t *testing.T) {
	st := s.store(t)
	sn, ok := st.(kv.Snapshotter)
	if !ok {
		t.Skip("the engine does not implement kv.Snapshotter")
	}
	const n = 1200
	key := func(i int) []byte { return fmt.Appendf(nil, "c/%05d", i) }
	putMany(t, st, n, key, func(int) []byte { return []byte("before") })
	got := snapshot(t, sn, func(seen int) {
		if seen != 1 {
			return
		}
		err := st.Update(ctx(t), func(w kv.Writer) error {
			if err := w.Put(key(n-1), []byte("after"), 0); err != nil {
				return err
			}
			if err := w.Delete(key(n / 2)); err != nil {
				return err
			}
			return w.Put([]byte("c/zz new"), []byte("after"), 0)
		})
		if err != nil {
			t.Errorf("Update during the Snapshot: %v", err)
		}
	})
	if len(got) != n {
		t.Fatalf("Snapshot gave %d entries, want the %d there when it began", len(got), n)
	}
	for i, e := range got {
		if !bytes.Equal(e.key, key(i)) || string(e.value) != "before" {
			t.Fatalf("Snapshot[%d] = %q=%q, want %q=before", i, e.key, e.value, key(i))
		}
	}
}

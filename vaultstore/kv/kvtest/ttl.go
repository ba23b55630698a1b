package kvtest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

func (s *suite) ttl() []subtest {
	return []subtest{
		{"Expires", s.testTTLExpires},
		{"InsideTxn", s.testTTLInsideTxn},
	}
}

// testTTLExpires: an entry with a short time to live vanishes from Get and
// Scan; entries with a long one or none stay, and so does an entry whose
// short TTL a later Put without one replaced. Engines count expiry in
// whole seconds (Badger), so the suite polls with a generous deadline and
// never asserts when exactly an entry goes.
func (s *suite) testTTLExpires(t *testing.T) {
	st := s.store(t)
	err := st.Update(ctx(t), func(w kv.Writer) error {
		for _, p := range []struct {
			key string
			ttl time.Duration
		}{{"t/short", 2 * time.Second}, {"t/long", time.Hour}, {"t/none", 0}, {"t/renewed", 2 * time.Second}} {
			if err := w.Put([]byte(p.key), []byte("v"), p.ttl); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	put(t, st, entry{[]byte("t/renewed"), []byte("again")})
	waitUntil(t, eventually, "the entry with a 2s TTL to expire", func() bool {
		_, err := get(t, st, []byte("t/short"))
		return errors.Is(err, kv.ErrNotFound)
	})
	if got, want := keysOf(scanView(t, st, []byte("t/"), nil)), []string{"t/long", "t/none", "t/renewed"}; !slices.Equal(got, want) {
		t.Fatalf("Scan after expiry = %q, want %q", got, want)
	}
	mustGet(t, st, []byte("t/long"), []byte("v"))
	mustGet(t, st, []byte("t/none"), []byte("v"))
	mustGet(t, st, []byte("t/renewed"), []byte("again"))
	err = st.Update(ctx(t), func(w kv.Writer) error {
		if v, err := w.Get([]byte("t/short")); !errors.Is(err, kv.ErrNotFound) {
			t.Errorf("Get of the expired entry in Update = %q, %v; want kv.ErrNotFound", v, err)
		}
		return w.Put([]byte("t/short"), []byte("back"), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	mustGet(t, st, []byte("t/short"), []byte("back"))
}

func (s *suite) testTTLInsideTxn(t *testing.T) {
	st := s.store(t)
	err := st.Update(ctx(t), func(w kv.Writer) error {
		if err := w.Put([]byte("k"), []byte("v"), time.Hour); err != nil {
			return err
		}
		if v, err := w.Get([]byte("k")); err != nil || string(v) != "v" {
			t.Errorf("Get of an entry with a TTL written in the transaction = %q, %v", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mustGet(t, st, []byte("k"), []byte("v"))
}

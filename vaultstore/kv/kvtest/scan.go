package kvtest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

func (s *suite) scans() []subtest {
	return []subtest{
		{"Order", s.testScanOrder},
		{"Stop", s.testScanStop},
		{"Error", s.testScanError},
		{"ReadWriteInside", s.testScanReadWriteInside},
		{"ManyPages", s.testScanManyPages},
	}
}

func (s *suite) testScanOrder(t *testing.T) {
	st := s.store(t)
	keys := []string{"a", "a/1", "a/10", "a/2", "ab", "b", "b/1", "\xff", "\xff\x00", "\xff\xff\x01", "\x00", "\x00a"}
	var entries []entry
	for _, k := range keys {
		entries = append(entries, entry{[]byte(k), []byte("v" + k)})
	}
	put(t, st, entries...)
	all := slices.Clone(keys)
	slices.Sort(all) // strings compare bytewise
	tests := []struct {
		name          string
		prefix, after []byte
		want          []string
	}{
		{"prefix", []byte("a/"), nil, []string{"a/1", "a/10", "a/2"}},
		{"prefix is a key", []byte("a"), nil, []string{"a", "a/1", "a/10", "a/2", "ab"}},
		{"after a key", []byte("a/"), []byte("a/1"), []string{"a/10", "a/2"}},
		{"after the last key", []byte("a/"), []byte("a/2"), nil},
		{"after a missing key", []byte("a/"), []byte("a/15"), []string{"a/2"}},
		{"after the prefix itself", []byte("a/"), []byte("a/"), []string{"a/1", "a/10", "a/2"}},
		{"after past the prefix", []byte("a/"), []byte("a0"), nil},
		{"no match", []byte("c"), nil, nil},
		{"0xff prefix", []byte("\xff"), nil, []string{"\xff", "\xff\x00", "\xff\xff\x01"}},
		{"0xff 0xff prefix", []byte("\xff\xff"), nil, []string{"\xff\xff\x01"}},
		{"0xff prefix after", []byte("\xff"), []byte("\xff"), []string{"\xff\x00", "\xff\xff\x01"}},
		{"0x00 prefix", []byte("\x00"), nil, []string{"\x00", "\x00a"}},
		{"empty prefix", nil, nil, all},
		{"empty prefix after", []byte{}, []byte("b"), []string{"b/1", "\xff", "\xff\x00", "\xff\xff\x01"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			check := func(where string, r kv.Reader) {
				got, err := scan(r, tc.prefix, tc.after)
				if err != nil {
					t.Fatalf("Scan in %s: %v", where, err)
				}
				if !slices.Equal(keysOf(got), tc.want) && (len(got) > 0 || len(tc.want) > 0) {
					t.Fatalf("Scan(%q, %q) in %s = %q, want %q", tc.prefix, tc.after, where, keysOf(got), tc.want)
				}
				for _, e := range got {
					if string(e.value) != "v"+string(e.key) {
						t.Fatalf("Scan in %s: %q holds %q", where, e.key, e.value)
					}
				}
			}
			if err := st.View(ctx(t), func(r kv.Reader) error { check("View", r); return nil }); err != nil {
				t.Fatal(err)
			}
			if err := st.Update(ctx(t), func(w kv.Writer) error { check("Update", w); return nil }); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func (s *suite) testScanStop(t *testing.T) {
	st := s.store(t)
	putMany(t, st, 10, func(i int) []byte { return fmt.Appendf(nil, "s/%02d", i) }, func(int) []byte { return []byte("v") })
	var seen []string
	err := st.View(ctx(t), func(r kv.Reader) error {
		return r.Scan([]byte("s/"), nil, func(k, _ []byte) error {
			seen = append(seen, string(k))
			if len(seen) == 3 {
				return kv.ErrStopScan
			}
			return nil
		})
	})
	if err != nil {
		t.Fatalf("View = %v, want nil after kv.ErrStopScan", err)
	}
	if want := []string{"s/00", "s/01", "s/02"}; !slices.Equal(seen, want) {
		t.Fatalf("seen %q, want %q", seen, want)
	}
}

func (s *suite) testScanError(t *testing.T) {
	st := s.store(t)
	putMany(t, st, 10, func(i int) []byte { return fmt.Appendf(nil, "s/%02d", i) }, func(int) []byte { return []byte("v") })
	calls := 0
	err := st.View(ctx(t), func(r kv.Reader) error {
		return r.Scan([]byte("s/"), nil, func(k, _ []byte) error {
			if calls++; calls == 2 {
				return errBoom
			}
			return nil
		})
	})
	if !errors.Is(err, errBoom) || calls != 2 {
		t.Fatalf("View = %v after %d calls, want fn's error after 2", err, calls)
	}
	err = st.Update(ctx(t), func(w kv.Writer) error {
		if err := w.Put([]byte("written"), []byte("x"), 0); err != nil {
			return err
		}
		return w.Scan([]byte("s/"), nil, func(k, _ []byte) error { return errBoom })
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v, want fn's error", err)
	}
	mustNotFind(t, st, []byte("written"))
}

// testScanReadWriteInside reads and writes from inside a scan in an
// Update, as the vault does when it re-seals records: every key is seen
// once, and every write is committed.
func (s *suite) testScanReadWriteInside(t *testing.T) {
	st := s.store(t)
	const n = 700 // more than one page of a paging engine
	key := func(i int) []byte { return fmt.Appendf(nil, "r/%04d", i) }
	putMany(t, st, n, key, func(i int) []byte { return fmt.Appendf(nil, "v%d", i) })
	visits := map[string]int{}
	err := st.Update(ctx(t), func(w kv.Writer) error {
		clear(visits)
		return w.Scan([]byte("r/"), nil, func(k, v []byte) error {
			visits[string(k)]++
			again, err := w.Get(k)
			if err != nil {
				return fmt.Errorf("Get(%q) inside the scan: %w", k, err)
			}
			if string(again) != string(v) {
				return fmt.Errorf("Get(%q) inside the scan = %q, the scan gave %q", k, again, v)
			}
			if err := w.Put(k, append(v, '!'), 0); err != nil {
				return err
			}
			return w.Put(append([]byte("copy/"), k...), v, 0)
		})
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if len(visits) != n {
		t.Fatalf("the scan saw %d keys, want %d", len(visits), n)
	}
	for k, c := range visits {
		if c != 1 {
			t.Fatalf("the scan saw %q %d times", k, c)
		}
	}
	for _, i := range []int{0, 1, n / 2, n - 1} {
		mustGet(t, st, key(i), fmt.Appendf(nil, "v%d!", i))
		mustGet(t, st, append([]byte("copy/"), key(i)...), fmt.Appendf(nil, "v%d", i))
	}
	if got := len(scanView(t, st, []byte("copy/"), nil)); got != n {
		t.Fatalf("%d copies, want %d", got, n)
	}
}

func (s *suite) testScanManyPages(t *testing.T) {
	st := s.store(t)
	const n = 2500
	key := func(i int) []byte { return fmt.Appendf(nil, "m/%05d", i) }
	value := func(i int) []byte { return fmt.Appendf(nil, "value %d", i) }
	putMany(t, st, n, key, value)
	put(t, st, entry{[]byte("m"), []byte("outside")}, entry{[]byte("m0"), []byte("outside")})
	check := func(got []entry, from int) {
		t.Helper()
		if len(got) != n-from {
			t.Fatalf("Scan gave %d entries, want %d", len(got), n-from)
		}
		for j, e := range got {
			i := from + j
			if string(e.key) != string(key(i)) || string(e.value) != string(value(i)) {
				t.Fatalf("Scan[%d] = %v, want %q=%q", j, e, key(i), value(i))
			}
		}
	}
	check(scanView(t, st, []byte("m/"), nil), 0)
	check(scanView(t, st, []byte("m/"), key(1233)), 1234)
	seen := 0
	err := st.View(ctx(t), func(r kv.Reader) error {
		return r.Scan([]byte("m/"), nil, func(_, _ []byte) error {
			if seen++; seen == 1700 {
				return kv.ErrStopScan
			}
			return nil
		})
	})
	if err != nil || seen != 1700 {
		t.Fatalf("stopped scan: %v after %d entries, want nil after 1700", err, seen)
	}
}

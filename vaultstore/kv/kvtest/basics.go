package kvtest

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

func (s *suite) basics() []subtest {
	return []subtest{
		{"GetPutDelete", s.testGetPutDelete},
		{"NotFound", s.testNotFound},
		{"EmptyValue", s.testEmptyValue},
		{"Copies", s.testCopies},
		{"BinaryKeys", s.testBinaryKeys},
	}
}

func (s *suite) testGetPutDelete(t *testing.T) {
	st := s.store(t)
	k := []byte("k")
	put(t, st, entry{k, []byte("one")})
	mustGet(t, st, k, []byte("one"))
	put(t, st, entry{k, []byte("two")})
	mustGet(t, st, k, []byte("two"))
	if err := st.Update(ctx(t), func(w kv.Writer) error { return w.Delete(k) }); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	mustNotFind(t, st, k)
	if err := st.Update(ctx(t), func(w kv.Writer) error { return w.Delete([]byte("never written")) }); err != nil {
		t.Fatalf("Delete of a missing key: %v, want nil", err)
	}
	put(t, st, entry{k, []byte("three")})
	mustGet(t, st, k, []byte("three"))
}

func (s *suite) testNotFound(t *testing.T) {
	st := s.store(t)
	put(t, st, entry{[]byte("a"), []byte("1")})
	for _, key := range [][]byte{[]byte("b"), []byte("a\x00"), []byte("A"), {0xff}} {
		mustNotFind(t, st, key)
		err := st.Update(ctx(t), func(w kv.Writer) error {
			_, err := w.Get(key)
			return err
		})
		if !errors.Is(err, kv.ErrNotFound) {
			t.Fatalf("Get(%q) in Update: %v, want kv.ErrNotFound", key, err)
		}
	}
}

func (s *suite) testEmptyValue(t *testing.T) {
	st := s.store(t)
	put(t, st, entry{[]byte("empty"), []byte{}}, entry{[]byte("nil"), nil})
	for _, k := range []string{"empty", "nil"} {
		v, err := get(t, st, []byte(k))
		if err != nil || len(v) != 0 {
			t.Fatalf("Get(%q) = %q, %v; want an empty value", k, v, err)
		}
	}
	if got := keysOf(scanView(t, st, nil, nil)); !slices.Equal(got, []string{"empty", "nil"}) {
		t.Fatalf("Scan = %q, want both keys with empty values", got)
	}
}

// testCopies checks that the store keeps none of the caller's slices once
// Update returned, and that what it hands out is the caller's to change.
// (Badger may keep the slices passed to Put until the commit, so the suite
// does not change them inside the transaction.)
func (s *suite) testCopies(t *testing.T) {
	st := s.store(t)
	key, value := []byte("p/key"), []byte("value")
	put(t, st, entry{key, value})
	key[0], value[0] = 'X', 'X'
	mustGet(t, st, []byte("p/key"), []byte("value"))
	mustNotFind(t, st, []byte("X/key"))

	v, err := get(t, st, []byte("p/key"))
	if err != nil {
		t.Fatal(err)
	}
	v[0] = 'Y'
	mustGet(t, st, []byte("p/key"), []byte("value"))

	var kept []entry
	err = st.View(ctx(t), func(r kv.Reader) error {
		return r.Scan([]byte("p/"), nil, func(k, v []byte) error {
			kept = append(kept, entry{k, v})
			k[0], v[0] = 'Z', 'Z'
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	mustGet(t, st, []byte("p/key"), []byte("value"))
	if len(kept) != 1 || string(kept[0].key) != "Z/key" || string(kept[0].value) != "Zalue" {
		t.Fatalf("scanned entries changed after the View: %v", kept)
	}

	err = st.Update(ctx(t), func(w kv.Writer) error {
		v, err := w.Get([]byte("p/key"))
		if err != nil {
			return err
		}
		v[0] = 'W'
		again, err := w.Get([]byte("p/key"))
		if err != nil {
			return err
		}
		if string(again) != "value" {
			t.Errorf("Get in Update after changing the slice of an earlier Get = %q, want %q", again, "value")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (s *suite) testBinaryKeys(t *testing.T) {
	st := s.store(t)
	keys := [][]byte{
		{0x00}, {0x00, 0x00}, {0x00, 0xff}, {0x01, 0x00, 0x02}, {0x7f}, {0x80}, {0xfe, 0xff},
		{0xff}, {0xff, 0x00}, {0xff, 0xff}, {0xff, 0xff, 0xff},
		[]byte("a"), []byte("a\x00"), []byte("a\x00b"), []byte("a\xff"), []byte("ab"),
	}
	var entries []entry
	for i, k := range keys {
		entries = append(entries, entry{k, []byte{byte(i), 0x00, 0xff}})
	}
	put(t, st, entries...)
	for _, e := range entries {
		mustGet(t, st, e.key, e.value)
	}
	slices.SortFunc(entries, func(a, b entry) int { return bytes.Compare(a.key, b.key) })
	got := scanView(t, st, nil, nil)
	if len(got) != len(entries) {
		t.Fatalf("Scan found %d keys, want %d: %v", len(got), len(entries), got)
	}
	for i := range got {
		if !bytes.Equal(got[i].key, entries[i].key) || !bytes.Equal(got[i].value, entries[i].value) {
			t.Fatalf("Scan[%d] = %v, want %v (byte order)", i, got[i], entries[i])
		}
	}
}

package kvtest

import (
	"fmt"
	"slices"
	"testing"
)

func (s *suite) deletePrefix() []subtest {
	return []subtest{
		{"ManyKeys", s.testDeletePrefixMany},
		{"Edges", s.testDeletePrefixEdges},
	}
}

func (s *suite) testDeletePrefixMany(t *testing.T) {
	st := s.store(t)
	const n = 2500 // more than one batch
	putMany(t, st, n, func(i int) []byte { return fmt.Appendf(nil, "d/%05d", i) }, func(int) []byte { return []byte("v") })
	others := []string{"c", "d", "d0", "d.", "e/1", "d/"}
	for _, k := range others {
		put(t, st, entry{[]byte(k), []byte("other")})
	}
	if err := st.DeletePrefix(ctx(t), []byte("d/")); err != nil {
		t.Fatalf("DeletePrefix: %v", err)
	}
	want := []string{"c", "d", "d.", "d0", "e/1"} // "d/" is under the prefix
	if got := keysOf(scanView(t, st, nil, nil)); !slices.Equal(got, want) {
		if len(got) > 10 {
			got = append(got[:10], "...")
		}
		t.Fatalf("after DeletePrefix: keys %q, want %q", got, want)
	}
}

func (s *suite) testDeletePrefixEdges(t *testing.T) {
	st := s.store(t)
	put(t, st, entry{[]byte("a"), []byte("1")}, entry{[]byte("\xff\x01"), []byte("2")}, entry{[]byte("\xff"), []byte("3")}, entry{[]byte("\xfe"), []byte("4")})
	if err := st.DeletePrefix(ctx(t), []byte("nothing/")); err != nil {
		t.Fatalf("DeletePrefix of an empty range: %v", err)
	}
	if err := st.DeletePrefix(ctx(t), []byte("\xff")); err != nil {
		t.Fatalf("DeletePrefix(0xff): %v", err)
	}
	if got, want := keysOf(scanView(t, st, nil, nil)), []string{"a", "\xfe"}; !slices.Equal(got, want) {
		t.Fatalf("after DeletePrefix(0xff): keys %q, want %q", got, want)
	}
	if err := st.DeletePrefix(ctx(t), nil); err != nil {
		t.Fatalf("DeletePrefix(nil): %v", err)
	}
	if got := scanView(t, st, nil, nil); len(got) != 0 {
		t.Fatalf("after DeletePrefix(nil): %v, want nothing", got)
	}
}

package vaultstore

import "github.com/tokenvault/tokenvault/internal/bounded"

// activeMarkEntries bounds the activity markers remembered in memory:
// about 10 MiB of keys.
const activeMarkEntries = 1 << 16

// activeMarks remembers activity markers (activeTokenKey) known to be
// stored, so a read of a token already marked this month skips the
// storage lookup that would find its marker. A key is remembered only
// once its marker was seen in committed storage or written durably, and
// markers are never deleted one by one (only with their tenant, whose id
// is never reused, or by their TTL, which outlasts their month), so a
// remembered key is always stored. Forgetting one costs a lookup.
type activeMarks struct {
	keys *bounded.Map[struct{}]
}

func newActiveMarks() activeMarks {
	return activeMarks{keys: bounded.New[struct{}](activeMarkEntries)}
}

// known reports whether the marker key is remembered as stored.
func (a activeMarks) known(key []byte) bool {
	_, ok := a.keys.Get(string(key))
	return ok
}

// stored remembers that the marker key is stored.
func (a activeMarks) stored(key []byte) { a.keys.Put(string(key), struct{}{}) }

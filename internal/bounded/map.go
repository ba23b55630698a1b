// Package bounded holds a map that never grows past a set size, for the
// caches of compiled expressions and decoded records.
package bounded

import "sync"

// Map is a map safe for concurrent use that holds at most its max entries:
// a full map drops an arbitrary one (Go's map order) to make room. It
// suits caches whose entries are all about equally cheap to rebuild.
type Map[V any] struct {
	mu  sync.RWMutex
	max int
	m   map[string]V
}

// New returns an empty Map holding at most size entries (at least one).
func New[V any](size int) *Map[V] {
	return &Map[V]{max: max(size, 1), m: make(map[string]V)}
}

// Get returns the value stored under k.
func (b *Map[V]) Get(k string) (V, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	v, ok := b.m[k]
	return v, ok
}

// Put stores v under k, dropping another entry first when the map is full.
func (b *Map[V]) Put(k string, v V) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.m[k]; !ok && len(b.m) >= b.max {
		for old := range b.m {
			delete(b.m, old)
			break
		}
	}
	b.m[k] = v
}

// Len reports the number of entries.
func (b *Map[V]) Len() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.m)
}

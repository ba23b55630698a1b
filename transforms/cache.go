package transforms

import "container/list"

// lru is a small least-recently-used map. It is not safe for concurrent
// use: a worker runs one job at a time and owns its caches.
type lru[K comparable, V any] struct {
	max   int
	order *list.List // front = most recent; elements hold *lruEntry
	items map[K]*list.Element
}

type lruEntry[K comparable, V any] struct {
	key K
	val V
}

func newLRU[K comparable, V any](max int) *lru[K, V] {
	return &lru[K, V]{max: max, order: list.New(), items: make(map[K]*list.Element)}
}

// get returns the value for k and marks it recently used.
func (c *lru[K, V]) get(k K) (V, bool) {
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*lruEntry[K, V]).val, true
	}
	var zero V
	return zero, false
}

// put stores v under k, evicting the least recently used entry when full.
func (c *lru[K, V]) put(k K, v V) {
	if e, ok := c.items[k]; ok {
		e.Value.(*lruEntry[K, V]).val = v
		c.order.MoveToFront(e)
		return
	}
	c.items[k] = c.order.PushFront(&lruEntry[K, V]{key: k, val: v})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*lruEntry[K, V]).key)
	}
}

// remove drops k.
func (c *lru[K, V]) remove(k K) {
	if e, ok := c.items[k]; ok {
		c.order.Remove(e)
		delete(c.items, k)
	}
}

// clear drops every entry.
func (c *lru[K, V]) clear() {
	c.order.Init()
	clear(c.items)
}

// len returns the number of entries.
func (c *lru[K, V]) len() int { return c.order.Len() }

// has reports whether k is present, without marking it used.
func (c *lru[K, V]) has(k K) bool {
	_, ok := c.items[k]
	return ok
}

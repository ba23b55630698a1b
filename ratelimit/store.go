package ratelimit

import (
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxShards is the number of shards of a rule's store when MaxEntries is large
// enough; minShardEntries is the capacity below which fewer shards are used, so
// that a small MaxEntries still leaves each shard room to choose a victim.
const (
	maxShards       = 64
	minShardEntries = 16
)

// notBlocked is the blockedUntil of a counter that has never been blocked.
const notBlocked = math.MinInt64

// entry is one counter: a token bucket and an optional block. Times are
// nanoseconds since the Limiter's epoch.
type entry struct {
	key string
	lim rate.Limiter
	// blockedUntil is when the block ends; the counter is blocked while
	// now < blockedUntil.
	blockedUntil int64
	// idleAt is when the counter becomes idle: bucket full and not blocked.
	// It never decreases.
	idleAt int64
}

// slot is a counter's place in its shard's eviction heap. at is the counter's
// idleAt when the slot was last ordered: a lower bound of it, since idleAt
// only grows. Requests update idleAt alone, in O(1); eviction brings stale
// slots up to date as they reach the top.
type slot struct {
	at int64
	e  *entry
}

// shard is one lock's worth of counters of one rule.
type shard struct {
	mu   sync.Mutex
	m    map[string]*entry
	heap []slot // 4-ary min-heap on at
	cap  int
	_    [64]byte // keep neighbouring shards' mutexes off one cache line
}

// store holds the counters of one rule.
type store struct {
	rule   Rule
	rate   rate.Limit
	seed   maphash.Seed
	mask   uint64
	shards []shard
}

func newStore(r Rule, maxEntries int) *store {
	n := maxShards
	for n > 1 && maxEntries/n < minShardEntries {
		n /= 2
	}
	s := &store{
		rule:   r,
		rate:   rate.Limit(float64(r.Limit) / r.Per.Seconds()),
		seed:   maphash.MakeSeed(),
		mask:   uint64(n - 1),
		shards: make([]shard, n),
	}
	base, extra := maxEntries/n, maxEntries%n
	for i := range s.shards {
		s.shards[i].m = make(map[string]*entry)
		s.shards[i].cap = base
		if i < extra {
			s.shards[i].cap++
		}
	}
	return s
}

// shard returns the shard that holds key.
func (s *store) shard(key string) *shard {
	return &s.shards[maphash.String(s.seed, key)&s.mask]
}

// refill returns how long the bucket takes to gain tokens, rounded up to the
// nanosecond.
func (s *store) refill(tokens float64) time.Duration {
	if tokens <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(tokens * float64(s.rule.Per) / float64(s.rule.Limit)))
}

// untilToken returns how long from t until e's bucket holds a whole token,
// given that it holds tokens at t. It is checked against the bucket's own
// arithmetic, so a request at t plus the result is allowed by the bucket.
func (s *store) untilToken(e *entry, t time.Time, tokens float64) time.Duration {
	if tokens >= 1 {
		return 0
	}
	d := s.refill(1 - tokens)
	for step := time.Duration(1); e.lim.TokensAt(t.Add(d)) < 1; step *= 2 {
		d += step
	}
	return d
}

// insert adds a counter for key with a full bucket that becomes idle (again)
// at idleAt, first evicting the counter that is idle soonest if the shard is
// full. The shard is locked.
func (sh *shard) insert(s *store, key string, idleAt int64) *entry {
	if len(sh.m) >= sh.cap && len(sh.heap) > 0 {
		sh.evict()
	}
	// The key may share memory with a larger string of the caller's (a
	// header, an address); a counter must not keep that alive.
	key = strings.Clone(key)
	e := &entry{key: key, blockedUntil: notBlocked, idleAt: idleAt}
	// A zero rate.Limiter whose last update is the zero time is full as soon
	// as it is used: tokens accrue from year 1 and are capped at the burst.
	e.lim.SetLimitAt(time.Time{}, s.rate)
	e.lim.SetBurstAt(time.Time{}, s.rule.Limit)
	sh.m[key] = e
	sh.heap = append(sh.heap, slot{at: idleAt, e: e})
	sh.up(len(sh.heap) - 1)
	return e
}

// setIdleAt records when e becomes idle, never earlier than recorded before.
func setIdleAt(e *entry, idleAt int64) {
	e.idleAt = max(e.idleAt, idleAt)
}

// evict removes the counter with the least idleAt. Every slot's at is a lower
// bound of its counter's idleAt, so a top slot that is up to date holds the
// least idleAt of the shard; a stale one is brought up to date and sunk.
// Each counter is refreshed at most once per change of its idleAt, so the
// cost is O(log n) amortised over the requests.
func (sh *shard) evict() {
	for {
		top := &sh.heap[0]
		if idle := top.e.idleAt; top.at < idle {
			top.at = idle
			sh.down(0)
			continue
		}
		delete(sh.m, top.e.key)
		last := len(sh.heap) - 1
		sh.heap[0] = sh.heap[last]
		sh.heap[last] = slot{}
		sh.heap = sh.heap[:last]
		if last > 0 {
			sh.down(0)
		}
		return
	}
}

const arity = 4

func (sh *shard) up(i int) {
	h := sh.heap
	x := h[i]
	for i > 0 {
		p := (i - 1) / arity
		if h[p].at <= x.at {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = x
}

func (sh *shard) down(i int) {
	h := sh.heap
	n := len(h)
	x := h[i]
	for {
		c := arity*i + 1
		if c >= n {
			break
		}
		m := c
		for j := c + 1; j < c+arity && j < n; j++ {
			if h[j].at < h[m].at {
				m = j
			}
		}
		if x.at <= h[m].at {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = x
}

// len returns the number of counters held.
func (s *store) len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

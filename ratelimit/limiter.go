package ratelimit

import (
	"fmt"
	"time"
)

// DefaultMaxEntries is the number of counters a rule holds when
// Options.MaxEntries is not set.
const DefaultMaxEntries = 100_000

// Options configure a Limiter.
type Options struct {
	// Rules are the limits to enforce, usually DefaultRules(). The Limiter
	// keeps its own copy.
	Rules []Rule
	// MaxEntries bounds the counters held per rule; 0 or less means
	// DefaultMaxEntries. See the package doc for what happens at the bound.
	MaxEntries int
	// Now is the clock; nil means time.Now. When set, it is also the clock
	// of the shared state in Redis (in tests); otherwise that state runs on
	// the Redis server's clock, the one every node agrees on.
	Now func() time.Time
	// Redis, when set, holds the counters every node shares: the Limiter
	// decides in Redis, and on its own (with the counters of this process)
	// only while Redis does not answer.
	Redis *Redis
}

// Limiter decides requests against a set of rules. It is safe for concurrent
// use.
type Limiter struct {
	stores []*store
	now    func() time.Time
	epoch  time.Time

	redis         *Redis
	redisRules    []redisRule // one per store
	injectedClock bool
}

// New returns a Limiter for o. It panics if a rule is invalid: an empty or
// duplicate Name, a nil Match or Counter, a Limit below 1, a Per not positive
// or a negative Block; rules are program constants, not input.
func New(o Options) *Limiter {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	maxEntries := o.MaxEntries
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	l := &Limiter{now: now, epoch: now(), redis: o.Redis, injectedClock: o.Now != nil}
	seen := make(map[string]bool, len(o.Rules))
	for _, r := range o.Rules {
		if err := validate(r); err != nil {
			panic(err)
		}
		if seen[r.Name] {
			panic(fmt.Errorf("ratelimit: duplicate rule name %q", r.Name))
		}
		seen[r.Name] = true
		l.stores = append(l.stores, newStore(r, maxEntries))
		if l.redis != nil {
			l.redisRules = append(l.redisRules, newRedisRule(l.redis.prefix, r))
		}
	}
	return l
}

func validate(r Rule) error {
	switch {
	case r.Name == "":
		return fmt.Errorf("ratelimit: rule without a name")
	case r.Match == nil || r.Counter == nil:
		return fmt.Errorf("ratelimit: rule %q: Match and Counter are required", r.Name)
	case r.Limit < 1:
		return fmt.Errorf("ratelimit: rule %q: limit %d is below 1", r.Name, r.Limit)
	case r.Per <= 0:
		return fmt.Errorf("ratelimit: rule %q: period %v is not positive", r.Name, r.Per)
	case r.Block < 0:
		return fmt.Errorf("ratelimit: rule %q: block %v is negative", r.Name, r.Block)
	}
	return nil
}

// hit is one rule that applies to the request being decided.
type hit struct {
	s       *store
	sh      *shard
	key     string
	e       *entry  // nil: no counter yet, i.e. a full bucket
	tokens  float64 // in the bucket at the decision time
	blocked bool
}

// stackHits is how many applicable rules Allow tracks without allocating.
const stackHits = 16

// Allow decides one request. Every applicable rule is checked; the request is
// rejected if any rule rejects it ("the lowest rate that applies"), and then
// it consumes nothing from the rules that would have allowed it. A block rule
// whose rate the request exceeds starts its block. With Options.Redis the
// counters are the cluster's, unless Redis does not answer.
func (l *Limiter) Allow(r *Request) Decision {
	if l.redis != nil {
		if d, ok := l.allowShared(r); ok {
			return d
		}
		l.redis.onLocal()
	}
	return l.allowLocal(r)
}

// allowLocal decides one request with the counters of this process.
func (l *Limiter) allowLocal(r *Request) Decision {
	var buf [stackHits]hit
	hits := buf[:0]
	for _, s := range l.stores {
		if !s.rule.Match(r) {
			continue
		}
		key, ok := s.rule.Counter(r)
		if !ok {
			continue
		}
		hits = append(hits, hit{s: s, sh: s.shard(key), key: key})
	}
	if len(hits) == 0 {
		return Decision{Allowed: true}
	}
	// Locks are taken in table order (each rule has its own shards), so
	// concurrent requests cannot deadlock. The clock is read under the locks
	// so that a counter never sees time go backwards.
	for i := range hits {
		hits[i].sh.mu.Lock()
	}
	defer unlock(hits)
	t := l.now()
	now := int64(t.Sub(l.epoch))
	rejected := false
	for i := range hits {
		h := &hits[i]
		h.e = h.sh.m[h.key]
		if h.e == nil {
			h.tokens = float64(h.s.rule.Limit)
			continue
		}
		h.tokens = h.e.lim.TokensAt(t)
		h.blocked = now < h.e.blockedUntil
		if h.blocked || h.tokens < 1 {
			rejected = true
		}
	}
	if rejected {
		return reject(hits, t, now)
	}
	return admit(hits, t, now)
}

func unlock(hits []hit) {
	for i := range hits {
		hits[i].sh.mu.Unlock()
	}
}

// admit takes one token from every applicable counter, creating the missing
// ones, and reports the rule with the least remaining. The shards are locked.
func admit(hits []hit, t time.Time, now int64) Decision {
	d := Decision{Allowed: true}
	for i := range hits {
		h := &hits[i]
		left := h.tokens - 1
		reset := h.s.refill(float64(h.s.rule.Limit) - left)
		idleAt := now + int64(reset)
		if h.e == nil {
			h.e = h.sh.insert(h.s, h.key, idleAt)
		}
		h.e.lim.AllowN(t, 1) // cannot fail: TokensAt(t) >= 1 under the same lock
		setIdleAt(h.e, max(idleAt, h.e.blockedUntil))
		remaining := int(left)
		if i == 0 || remaining < d.Remaining || remaining == d.Remaining && reset > d.Reset {
			d.Rule, d.Limit, d.Remaining, d.Reset = h.s.rule.Name, h.s.rule.Limit, remaining, reset
		}
	}
	return d
}

// reject consumes nothing, starts the block of every block rule whose rate is
// exceeded, and reports the rejecting rule that holds the request back
// longest. The shards are locked.
func reject(hits []hit, t time.Time, now int64) Decision {
	var d Decision
	found := false
	for i := range hits {
		h := &hits[i]
		if h.e == nil || !h.blocked && h.tokens >= 1 {
			continue // this rule would have allowed the request
		}
		if !h.blocked && h.s.rule.Block > 0 {
			h.e.blockedUntil = now + int64(h.s.rule.Block)
			setIdleAt(h.e, h.e.blockedUntil)
			h.blocked = true
		}
		retry := h.s.untilToken(h.e, t, h.tokens)
		var reset time.Duration
		if h.blocked {
			reset = time.Duration(h.e.blockedUntil - now)
			retry = max(retry, reset)
		} else {
			reset = h.s.refill(float64(h.s.rule.Limit) - h.tokens)
		}
		if !found || retry > d.RetryAfter {
			d.Rule, d.Limit, d.Reset, d.RetryAfter = h.s.rule.Name, h.s.rule.Limit, reset, retry
			found = true
		}
	}
	return d
}

// Len reports the number of counters held, over all rules.
func (l *Limiter) Len() int {
	n := 0
	for _, s := range l.stores {
		n += s.len()
	}
	return n
}

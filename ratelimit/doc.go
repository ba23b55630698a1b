// Package ratelimit enforces the rate limits of the token vault interface
// ("Rate limits apply at the lowest rate available to a request. Exceeding a
// limit gives 429.") without knowing anything about HTTP routing, Caddy or
// storage: the HTTP edge describes each request as a [Request], asks a
// [Limiter] for a [Decision], and turns a rejection into a 429 whose headers
// [Decision.Headers] writes.
//
// # Rules
//
// A [Rule] is one row of the interface's Limits table: which requests it
// applies to (Match), which counter a request is charged to (Counter), a token
// bucket of Limit requests per Per, and an action. [DefaultRules] returns the
// whole table. Every rule whose Match and Counter accept a request applies to
// it; the request is allowed only if every applicable rule allows it, so the
// lowest rate that applies is the one that binds (a test-tenant key is held to
// 50 requests per 10 s even though its private application would allow 2000).
//
// A throttle rule (Block == 0) rejects only the requests over its rate: a
// counter whose bucket is empty rejects until one token has refilled. A block
// rule (Block > 0) rejects everything from a counter for Block once the
// counter's rate is exceeded, whatever its bucket holds meanwhile; requests
// rejected during the block neither extend it nor consume tokens, and a
// request that finds the block over but the bucket still empty exceeds the
// rate again and starts a new block.
//
// # Decisions are all or nothing
//
// A rejected request consumes nothing from any counter: the rules that would
// have allowed it are left exactly as they were, so a client held back by one
// rule does not also drain the others. The flip side: requests rejected by
// one rule count toward no other, so a client that keeps hammering after a 429
// does not trip the global block by that alone.
//
// To make the check-then-consume atomic across rules, Allow locks the shard of
// every applicable counter (always in table order, so concurrent requests
// cannot deadlock), reads the clock, checks every bucket with
// rate.Limiter.TokensAt, and only if all pass takes one token from each with
// rate.Limiter.AllowN. Every call into golang.org/x/time/rate passes the time
// explicitly, so an injected clock (Options.Now) drives everything and the
// wall clock is never read.
//
// # Memory
//
// Counters are created on first use, so an attacker who controls IPs (an IPv6
// /64 holds 2^64 of them) or API key identifiers could otherwise grow the
// limiter without bound. Each rule therefore holds at most Options.MaxEntries
// counters, spread over up to 64 shards (one mutex and one map each) by a seeded
// hash of the counter key. Counters are never created for a rejected request.
//
// When a shard is full, the counter that is evicted is the one that will be
// idle soonest: idle meaning its bucket is full again and it is not blocked,
// the state of a counter that was never seen. Each shard keeps its counters in
// a min-heap on that idle time, refreshed lazily (a request only records the
// counter's new idle time; eviction re-sorts a stale top), so a request costs
// O(1) in the heap and eviction amortised O(log n), and the victim is exactly
// the counter idle soonest. A shard thus
// evicts idle counters first, and an idle counter carries no information:
// forgetting it changes no future decision. Only when no counter of the shard
// is idle (a flood of distinct active counters faster than their buckets
// refill) is an active counter evicted, and the one chosen is the one whose
// state is closest to idle, which minimises what is forgotten.
//
// The trade-off: evicting an active counter forgets it. Its next request finds
// a full bucket and no block, so under such a flood a client can get up to one
// extra burst per eviction. The heap order makes that costly for an attacker:
// a blocked or heavily used counter is evicted only after every counter of its
// shard that would recover sooner, so a flood of one-shot addresses (idle again
// after Per/Limit) pushes out other one-shot addresses, not the counters that
// are being held back. Raising MaxEntries narrows the window at about 230 bytes
// per counter (see BenchmarkMillionIPs); the worst case for a Limiter is
// len(Rules) * MaxEntries counters.
//
// Idle counters are not swept on a timer: they stay until their shard needs
// the room, which is bounded by MaxEntries anyway and keeps the limiter free of
// goroutines.
//
// # Shared state in Redis
//
// With Options.Redis, the counters are the cluster's: every node asks Redis,
// so a client's budget is one budget wherever its requests land. A decision
// is one call of one Lua script (EVALSHA), which checks and charges every
// applicable counter atomically with the semantics above (all or nothing,
// blocks, the same Decision), as a generic cell rate algorithm: a counter is
// a hash holding when its bucket would be full again and when its block
// ends, in whole microseconds of the Redis server's clock, and it expires
// once idle, so Redis holds only active counters. Keys are the configured
// prefix, the rule's name and a hash of the rule's parameters and the
// counter key: Redis never sees a client address or an API key id.
// (go-redis/redis_rate implements GCRA too, but one key per call: it cannot
// charge several rules all or nothing, nor block.)
//
// Each call is bounded by a short timeout. When a call fails, the node falls
// back to its own counters (the local limiter, fresh for the clients it had
// not seen locally) and leaves Redis alone behind a circuit: after
// RedisOptions.RetryMin one decision probes Redis, and each failed probe
// doubles the wait up to RetryMax. The transition down and the one back up
// are logged once each and reported through RedisOptions.OnState; every local
// decision meanwhile through OnLocal.
//
// # Headers
//
// [Decision.Headers] writes RateLimit-Limit, RateLimit-Remaining and
// RateLimit-Reset for the most restrictive applicable rule, and Retry-After on
// a rejection, as whole seconds rounded up. Retry-After is the time until a
// request would pass every rule that rejected it.
package ratelimit

package ratelimit

import (
	"sync"
	"sync/atomic"
	"time"
)

// flapWindow is how long Redis must have answered since it came back for a
// new failure to start the backoff afresh; a failure sooner continues it, so
// a flapping Redis is probed (and logged) less and less often.
const flapWindow = time.Minute

// circuit keeps calls away from a Redis that stopped answering. Closed (up),
// every decision goes to Redis. The first failure opens it (down): decisions
// are local and Redis is left alone until retryAt, when exactly one decision
// probes it. A probe that succeeds closes the circuit; one that fails doubles
// the wait, between min and max.
type circuit struct {
	down atomic.Bool // read without the lock on every decision

	mu      sync.Mutex
	probing bool
	retryAt time.Time
	wait    time.Duration
	upSince time.Time

	min, max time.Duration
	now      func() time.Time
	// onDown and onUp are called outside the lock, once per transition.
	onDown func(error)
	onUp   func()
}

// acquire reports whether a decision may call Redis, and whether that call
// is the probe of an open circuit, which must be reported with probe=true.
func (c *circuit) acquire() (ok, probe bool) {
	if !c.down.Load() {
		return true, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.down.Load() {
		return true, false
	}
	if c.probing || c.now().Before(c.retryAt) {
		return false, false
	}
	c.probing = true
	return true, true
}

// report records the outcome of a call that acquire allowed.
func (c *circuit) report(probe bool, err error) {
	if err == nil && !probe {
		return // up and answering: nothing changes
	}
	c.mu.Lock()
	now := c.now()
	switch {
	case err == nil: // the probe succeeded
		c.probing = false
		c.upSince = now
		c.down.Store(false)
		c.mu.Unlock()
		c.onUp()
		return
	case probe: // still down
		c.probing = false
		c.backoff(now, c.wait*2)
		c.mu.Unlock()
		return
	case c.down.Load():
		// a call that started before another one opened the circuit
		c.mu.Unlock()
		return
	}
	next := c.min
	if now.Sub(c.upSince) < flapWindow {
		next = c.wait * 2
	}
	c.backoff(now, next)
	c.down.Store(true)
	c.mu.Unlock()
	c.onDown(err)
}

// backoff leaves Redis alone for wait, kept within [min, max]. c.mu is held.
func (c *circuit) backoff(now time.Time, wait time.Duration) {
	c.wait = min(max(wait, c.min), c.max)
	c.retryAt = now.Add(c.wait)
}

// isUp reports whether decisions go to Redis.
func (c *circuit) isUp() bool { return !c.down.Load() }

// Package testclock is the fake clock of the tests: it stands still until
// the test moves it, so that what a test asserts about time does not hang
// on the machine's speed. Safe for concurrent use: the code under test
// reads it from its own goroutines.
package testclock

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when told to. Pass its Now method
// where the code under test takes a clock (func() time.Time).
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New is a clock standing at t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now is the time the clock stands at.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d (back, when d is negative).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Set puts the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

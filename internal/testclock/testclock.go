// Package testclock is the fake clock of the tests: it stands still until
// the test moves it, so that what a test asserts about time does not hang
// on the machine's speed. Safe for concurrent use: the code under test
// reads it from its own goroutines.
package testclock

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when told to, or, made by NewStepping,
// by a fixed step after each reading. Pass its Now method where the code
// under test takes a clock (func() time.Time).
type Clock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

// New is a clock standing at t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// NewStepping is a clock at t that moves forward by step after each
// reading, so that records the code under test writes one after another
// carry distinct, ordered times without the test moving the clock.
func NewStepping(t time.Time, step time.Duration) *Clock { return &Clock{t: t, step: step} }

// Now is the time the clock stands at. A stepping clock then moves on by
// its step.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.t
	c.t = c.t.Add(c.step)
	return t
}

// Peek is the time the next Now returns, without moving the clock.
func (c *Clock) Peek() time.Time {
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

package testclock

import (
	"sync"
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	start := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	c := New(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now = %v, want %v", got, start)
	}
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("a second reading moved the clock: %v", got)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); c.Advance(time.Second); _ = c.Now() }()
	}
	wg.Wait()
	if got, want := c.Now(), start.Add(8*time.Second); !got.Equal(want) {
		t.Fatalf("after 8 concurrent Advance(1s): %v, want %v", got, want)
	}
	c.Advance(-3 * time.Second)
	if got, want := c.Now(), start.Add(5*time.Second); !got.Equal(want) {
		t.Fatalf("after Advance(-3s): %v, want %v", got, want)
	}
	c.Set(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("after Set: %v, want %v", got, start)
	}
}

func TestSteppingClock(t *testing.T) {
	start := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	c := NewStepping(start, time.Millisecond)
	if got := c.Peek(); !got.Equal(start) {
		t.Fatalf("Peek = %v, want %v", got, start)
	}
	for i := range 3 {
		want := start.Add(time.Duration(i) * time.Millisecond)
		if got := c.Now(); !got.Equal(want) {
			t.Fatalf("reading %d = %v, want %v", i, got, want)
		}
	}
	if got, want := c.Peek(), start.Add(3*time.Millisecond); !got.Equal(want) {
		t.Fatalf("Peek after three readings = %v, want %v", got, want)
	}
	if got, want := c.Peek(), start.Add(3*time.Millisecond); !got.Equal(want) {
		t.Fatalf("a Peek moved the clock: %v, want %v", got, want)
	}
	c.Advance(time.Hour)
	if got, want := c.Now(), start.Add(time.Hour+3*time.Millisecond); !got.Equal(want) {
		t.Fatalf("after Advance(1h) = %v, want %v", got, want)
	}
}

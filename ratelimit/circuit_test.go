package ratelimit

import (
	"errors"
	"testing"
	"time"
)

// TestCircuit walks the circuit through an outage on an injected clock: one
// transition down, no call while open, one probe at a time, a doubling wait
// bounded by max, one transition up, and a continued backoff when Redis fails
// again soon after it came back.
func TestCircuit(t *testing.T) {
	clk := newClock()
	var downs, ups int
	c := &circuit{min: 100 * time.Millisecond, max: time.Second, now: clk.Now,
		onDown: func(error) { downs++ }, onUp: func() { ups++ }}
	errDown := errors.New("connection refused")

	mustAcquire := func(step string, wantOK, wantProbe bool) {
		t.Helper()
		if ok, probe := c.acquire(); ok != wantOK || probe != wantProbe {
			t.Fatalf("%s: acquire = %v, %v; want %v, %v", step, ok, probe, wantOK, wantProbe)
		}
	}

	mustAcquire("up", true, false)
	c.report(false, nil)
	// two calls in flight when Redis goes away: one transition
	mustAcquire("up, second call", true, false)
	c.report(false, errDown)
	c.report(false, errDown)
	if downs != 1 || c.isUp() {
		t.Fatalf("after two failures: %d transitions down, up=%v", downs, c.isUp())
	}
	mustAcquire("open", false, false)

	// each failed probe doubles the wait, up to max
	for i, wait := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		wait *= time.Millisecond
		clk.Advance(wait - time.Millisecond)
		mustAcquire("before the wait is over", false, false)
		clk.Advance(time.Millisecond)
		mustAcquire("probe", true, true)
		mustAcquire("while probing", false, false)
		c.report(true, errDown)
		if downs != 1 {
			t.Fatalf("failed probe %d logged a new transition", i+1)
		}
	}

	clk.Advance(time.Second)
	mustAcquire("probe", true, true)
	c.report(true, nil)
	if ups != 1 || !c.isUp() {
		t.Fatalf("after a successful probe: %d transitions up, up=%v", ups, c.isUp())
	}
	mustAcquire("up again", true, false)

	// a failure soon after recovery continues the backoff (Redis flaps)
	clk.Advance(time.Second)
	c.report(false, errDown)
	if downs != 2 {
		t.Fatalf("second outage: %d transitions down", downs)
	}
	clk.Advance(999 * time.Millisecond)
	mustAcquire("flapping: the wait is not reset", false, false)
	clk.Advance(time.Millisecond)
	mustAcquire("probe", true, true)
	c.report(true, nil)

	// a failure long after recovery starts again from min
	clk.Advance(2 * flapWindow)
	c.report(false, errDown)
	clk.Advance(100 * time.Millisecond)
	mustAcquire("after a long time up, the wait starts from min", true, true)
	c.report(true, nil)
	if downs != 3 || ups != 3 {
		t.Fatalf("%d transitions down and %d up, want 3 and 3", downs, ups)
	}
}

package transforms

import (
	"runtime/metrics"
	"time"
)

// watchInterval is how often the memory watchdog samples the worker.
const watchInterval = 5 * time.Millisecond

// memoryInUse returns the memory the Go runtime of this process holds
// from the OS: everything it has mapped and not released, which covers
// the heap, goroutine stacks and the runtime's own metadata.
func memoryInUse(samples []metrics.Sample) uint64 {
	metrics.Read(samples)
	total, released := samples[0].Value.Uint64(), samples[1].Value.Uint64()
	if released > total {
		return 0
	}
	return total - released
}

func memorySamples() []metrics.Sample {
	return []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
}

// watchMemory samples the process every interval while a run is under
// way and calls over (which exits the worker) once it holds more than
// limit bytes. goja has no memory limit of its own and native built-ins
// ignore interrupts, so the only reliable way to stop a run that
// allocates without bound is to end its process; the parent maps the exit
// code to KindMemory. The returned function stops the watchdog.
func watchMemory(limit uint64, interval time.Duration, over func(used uint64)) (stop func()) {
	done := make(chan struct{})
	go func() {
		samples := memorySamples()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if used := memoryInUse(samples); used > limit {
					over(used)
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

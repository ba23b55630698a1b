package badgerkv

import (
	"sync"
	"time"
)

// DeferredSyncDelay is how long after a commit marked kv.WithDeferredSync
// the sync that makes it durable begins at the latest: the commits that
// arrive meanwhile share that sync. The sync may first linger (at most
// syncLinger) for transactions under way, as every sync does, and then
// takes the disk's sync latency, so such a commit is on disk within
// DeferredSyncDelay + syncLinger + one sync of its commit (2.5 ms plus
// about 1 ms on the disk the figures come from), unless the process is
// starved of CPU. Until then it survives a crash of the process (the
// operating system holds Badger's memory-mapped log), not a power loss.
const DeferredSyncDelay = 2 * time.Millisecond

// deferredSync syncs commits marked kv.WithDeferredSync in the
// background: the first such commit not yet covered starts a timer of
// delay, and when it fires one group sync (see groupSync) covers every
// commit made until then. A sync that a durable write runs meanwhile
// covers them too, and then none is added.
type deferredSync struct {
	group *groupSync
	delay time.Duration
	stop  <-chan struct{}
	kick  chan struct{}

	mu      sync.Mutex
	want    uint64    // the latest sync a deferred commit needs
	pending bool      // a deferred commit waits for the timer
	since   time.Time // when the earliest waiting one committed
}

func newDeferredSync(group *groupSync, delay time.Duration, stop <-chan struct{}) *deferredSync {
	return &deferredSync{group: group, delay: delay, stop: stop, kick: make(chan struct{}, 1)}
}

// need asks for sync number target (groupSync.endDeferred) within the
// delay.
func (d *deferredSync) need(target uint64) {
	d.mu.Lock()
	d.want = max(d.want, target)
	if !d.pending {
		d.pending, d.since = true, time.Now()
	}
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// run syncs what need asks for until stop is closed, then once more for
// whatever is left. A failed sync is kept by the group, which fails every
// later write, and logged by the sync function.
func (d *deferredSync) run() {
	timer := time.NewTimer(0)
	<-timer.C
	for {
		select {
		case <-d.stop:
			d.syncNow()
			return
		case <-d.kick:
		}
		d.mu.Lock()
		wait := time.Until(d.since.Add(d.delay))
		pending := d.pending
		d.mu.Unlock()
		if !pending {
			continue // covered by the previous round
		}
		if wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-d.stop:
				timer.Stop()
				d.syncNow()
				return
			}
		}
		d.syncNow()
	}
}

// syncNow runs the sync every deferred commit so far needs.
func (d *deferredSync) syncNow() {
	d.mu.Lock()
	target := d.want
	d.pending = false
	d.mu.Unlock()
	if target > 0 {
		_ = d.group.awaitSync(target)
	}
}

package vaultstore

import (
	"sync"
	"time"
)

// syncLinger bounds how long a sync, or an audit batch, waits for work
// already under way to join it (see groupSync). Each sync costs this
// machine about 70 µs of CPU and two device flushes whatever it covers,
// so under load fewer, fuller syncs leave more CPU to requests; the wait
// adds at most this much to a request that is already queued behind
// others, and nothing when the vault is idle.
const syncLinger = 500 * time.Microsecond

// groupSync makes committed writes durable with one fsync shared by every
// transaction that committed before it started (group commit). Badger's
// own SyncWrites syncs once per transaction, which caps durable writes at
// the disk's fsync rate; here concurrent writers wait together for one
// sync, and none is acknowledged before a sync that began after its
// commit has finished.
//
// A transaction announces itself with begin before it runs. A writer that
// is about to start a sync while other announced transactions are still
// running lingers (at most linger) until they have committed, so they
// share its sync instead of each starting the next one (PostgreSQL's
// commit_delay with commit_siblings). A lone writer never waits.
type groupSync struct {
	sync   func() error
	linger time.Duration

	mu        sync.Mutex
	cond      *sync.Cond
	running   bool          // a sync is running or lingering
	active    int           // transactions begun and not yet ended
	joined    chan struct{} // closed when active reaches 0 while a sync lingers
	started   uint64        // syncs begun
	completed uint64        // the latest sync finished
	err       error         // that sync's error
}

func newGroupSync(syncFn func() error, linger time.Duration) *groupSync {
	g := &groupSync{sync: syncFn, linger: linger}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// begin announces a transaction that may need a sync. Every begin is
// followed by one end.
func (g *groupSync) begin() {
	g.mu.Lock()
	g.active++
	g.mu.Unlock()
}

// end closes a transaction announced with begin. When it committed
// writes, end returns once a sync that began after the commit has
// finished, with that sync's error.
func (g *groupSync) end(committed bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active--
	if g.active == 0 && g.joined != nil {
		close(g.joined)
		g.joined = nil
	}
	if !committed {
		return nil
	}
	// a sync running now may have begun before our commit: we need the next
	target := g.started + 1
	for g.completed < target {
		if g.running {
			g.cond.Wait()
			continue
		}
		g.running = true
		if g.active > 0 && g.linger > 0 {
			g.lingerLocked()
		}
		g.started++
		gen := g.started
		g.mu.Unlock()
		err := g.sync()
		g.mu.Lock()
		g.running = false
		g.completed, g.err = gen, err
		g.cond.Broadcast()
	}
	return g.err
}

// lingerLocked waits, with g.mu released, until every running
// transaction has ended or g.linger has passed. Writers that commit
// meanwhile find g.running set and wait for the sync that follows.
func (g *groupSync) lingerLocked() {
	joined := make(chan struct{})
	g.joined = joined
	g.mu.Unlock()
	timer := time.NewTimer(g.linger)
	select {
	case <-joined:
	case <-timer.C:
	}
	timer.Stop()
	g.mu.Lock()
	if g.joined == joined {
		g.joined = nil
	}
}

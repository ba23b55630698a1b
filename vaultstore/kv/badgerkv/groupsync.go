package badgerkv

import (
	"fmt"
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

// lingerAge is how recently a running transaction must have begun for a
// sync to wait for it: a request's transaction commits within
// microseconds, while a long one (a key rotation batch, a tenant delete)
// would otherwise make every sync wait the full linger while it runs.
const lingerAge = 4 * syncLinger

// groupSync makes committed writes durable with one fsync shared by every
// transaction that committed before it started (group commit). Badger's
// own SyncWrites syncs once per transaction, which caps durable writes at
// the disk's fsync rate; here concurrent writers wait together for one
// sync, and none is acknowledged before a sync that began after its
// commit has finished.
//
// A transaction announces itself with begin before it runs. A writer that
// is about to start a sync while other transactions that began within
// lingerAge are still running lingers (at most linger) until they have
// ended, so they share its sync instead of each starting the next one
// (PostgreSQL's commit_delay with commit_siblings). A lone writer never
// waits.
//
// A failed sync fails every write after it, until the store is opened
// again: after a failed fsync the kernel may have dropped the dirty pages,
// and a later sync that succeeds proves nothing about them.
type groupSync struct {
	sync   func() error
	linger time.Duration

	mu        sync.Mutex
	cond      *sync.Cond
	running   bool                 // a sync is running or lingering
	active    map[uint64]time.Time // running transactions, by id: when each began
	lastID    uint64
	waitFor   map[uint64]bool // while a sync lingers: the transactions it waits for
	joined    chan struct{}   // closed when waitFor empties
	started   uint64          // syncs begun
	completed uint64          // the latest sync finished
	err       error           // the first failed sync's error, kept
}

func newGroupSync(syncFn func() error, linger time.Duration) *groupSync {
	g := &groupSync{sync: syncFn, linger: linger, active: map[uint64]time.Time{}}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// begin announces a transaction that may need a sync and returns its id.
// Every begin is followed by one end with that id.
func (g *groupSync) begin() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lastID++
	g.active[g.lastID] = time.Now()
	return g.lastID
}

// end closes the transaction id. When it committed writes, end returns
// once a sync that began after the commit has finished, with the error of
// any sync that failed.
func (g *groupSync) end(id uint64, committed bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.endLocked(id)
	if !committed {
		return nil
	}
	// a sync running now may have begun before our commit: we need the next
	return g.syncLocked(g.started + 1)
}

// endDeferred closes the transaction id, which committed writes that may
// be synced later (kv.WithDeferredSync), and returns the sync that makes
// them durable, for awaitSync. It fails, as end does, once a sync has
// failed.
func (g *groupSync) endDeferred(id uint64) (target uint64, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.endLocked(id)
	return g.started + 1, g.err
}

// awaitSync returns once sync number target has finished, running it
// (and lingering first, as end does) when no other writer does, with the
// error of any sync that failed.
func (g *groupSync) awaitSync(target uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.syncLocked(target)
}

// endLocked forgets the running transaction id. Call with g.mu held.
func (g *groupSync) endLocked(id uint64) {
	delete(g.active, id)
	if g.waitFor[id] {
		delete(g.waitFor, id)
		if len(g.waitFor) == 0 {
			close(g.joined)
			g.waitFor, g.joined = nil, nil
		}
	}
}

// syncLocked returns once sync number target has finished. Call with g.mu
// held.
func (g *groupSync) syncLocked(target uint64) error {
	for g.completed < target && g.err == nil {
		if g.running {
			g.cond.Wait()
			continue
		}
		g.running = true
		if g.linger > 0 {
			g.lingerLocked()
		}
		g.started++
		gen := g.started
		g.mu.Unlock()
		err := g.runSync()
		g.mu.Lock()
		g.running = false
		g.completed = gen
		if err != nil && g.err == nil {
			g.err = err
		}
		g.cond.Broadcast()
	}
	return g.err
}

// runSync runs the sync, turning a panic into its error so that end keeps
// its lock state (a panic between Unlock and Lock would leave end's
// deferred Unlock to a mutex not held: a fatal error, not a panic).
func (g *groupSync) runSync() (err error) {
	defer func() {
		if x := recover(); x != nil {
			err = fmt.Errorf("sync panicked: %v", x)
		}
	}()
	return g.sync()
}

// lingerLocked waits, with g.mu released, until every transaction that
// began within lingerAge has ended, or g.linger has passed. Writers that
// commit meanwhile find g.running set and wait for the sync that follows.
// Call with g.mu held.
func (g *groupSync) lingerLocked() {
	young := time.Now().Add(-lingerAge)
	for id, began := range g.active {
		if began.After(young) {
			if g.waitFor == nil {
				g.waitFor = map[uint64]bool{}
			}
			g.waitFor[id] = true
		}
	}
	if len(g.waitFor) == 0 {
		return
	}
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
		g.waitFor, g.joined = nil, nil
	}
}

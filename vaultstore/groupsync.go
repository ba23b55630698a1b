package vaultstore

import "sync"

// groupSync makes committed writes durable with one fsync shared by every
// transaction that committed before it started (group commit). Badger's
// own SyncWrites syncs once per transaction, which caps durable writes at
// the disk's fsync rate; here concurrent writers wait together for one
// sync, and none is acknowledged before a sync that began after its
// commit has finished.
type groupSync struct {
	sync func() error

	mu        sync.Mutex
	cond      *sync.Cond
	running   bool
	started   uint64 // syncs begun
	completed uint64 // the latest sync finished
	err       error  // that sync's error
}

func newGroupSync(syncFn func() error) *groupSync {
	g := &groupSync{sync: syncFn}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// wait returns once a sync that began after the call has finished, and
// that sync's error. Call it after a transaction commits.
func (g *groupSync) wait() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	// a sync running now may have begun before our commit: we need the next
	target := g.started + 1
	for g.completed < target {
		if g.running {
			g.cond.Wait()
			continue
		}
		g.running = true
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

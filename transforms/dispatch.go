package transforms

import (
	"context"
	"slices"
	"time"
)

// Dispatch: which worker runs a job, and when.
//
// A run whose tenant is below its cap (fairqueue.go) takes, in this
// order, an idle worker (one that keeps its realm warm first), a new
// worker while fewer than MaxWorkers are alive, or a place in the pipe of
// a busy worker (pipelining): its job frame is sent while the worker's
// current run goes on, and the worker starts it as soon as that run's
// result is written, without waiting for the pool to hand it the next
// job. Otherwise it waits, for QueueTimeout at most, in its tenant's
// queue: the tenants are served round-robin, each in order of arrival.
//
// A queued job has not started: the worker runs one job at a time, in
// order. The result frame of the run before it marks the hand-over, and
// the pool tracks it: until that frame has come back, a death of the
// worker (crash, memory, the deadline, a protocol error, a retired
// engine) belongs to the run under way, and the queued run is placed
// again (R-JS-1: a worker death fails only its own run); after it, the
// queued run is the worker's, and a death fails it. A queued run whose
// caller leaves (its context ends, or its queue deadline passes) or that
// moves to another worker is cancelled in the worker, which skips a job
// cancelled before it started; the pool drains its frame before the
// worker serves anything else, answering none of its svc calls.

// queueWindow bounds pipelining: a job is queued only behind a run that
// started less than queueWindow ago, and a queued job still waiting after
// queueWindow rejoins the waiting runs, in its order of arrival, to move
// to the first worker or place that comes free elsewhere. A run stuck
// behind a slow one then waits about as long as it would have without
// pipelining. (Pool.window is this, unless a test changed it.)
const queueWindow = 10 * time.Millisecond

// ticket is a run's claim on the pool, from Run until the run owns a
// worker. Its fields are guarded by the pool's mutex.
type ticket struct {
	tenant string     // whose share of the pool the run takes (fairqueue.go)
	aff    uint64     // realm affinity (Pool.affinity)
	since  time.Time  // arrival, which orders its tenant's waiting runs
	grant  chan grant // the pool's answers, one at a time, sent under p.mu
	waits  bool       // in p.fair's queues
	holds  bool       // counted in its tenant's held workers (fairQueue.hold)
	queue  *queued    // its job frame's place in a busy worker's pipe
}

// grantKind says what a grant gives.
type grantKind int

// Grant kinds.
const (
	// grantIdle: w, an idle worker, is the run's.
	grantIdle grantKind = iota + 1
	// grantStart: the run may start a worker of its own.
	grantStart
	// grantQueue: the run sends its job frame, with id q.id, to w, whose
	// current run goes on, and waits for its turn.
	grantQueue
	// grantTurn: the run before q on w has ended; q's job is w's run.
	grantTurn
)

// grant is what the pool gives a ticket.
type grant struct {
	kind grantKind
	w    *proc
	q    *queued // grantQueue, grantTurn
}

// queued is a job frame in a busy worker's pipe, queued behind the run
// under way there: at most one per worker (proc.next). Its fields are
// guarded by the pool's mutex.
type queued struct {
	id uint64
	w  *proc
	t  *ticket // nil once its run left: the worker's next release drains it
	// sent: the job frame is in the pipe. Until then the pool sends the
	// ticket nothing more, and notes in ended what became of the run before
	// it: the turn came (turnReady) or the worker was lost (workerLost).
	sent  bool
	ended int
}

// What became of the run before a queued job whose frame was not sent
// yet.
const (
	turnReady = iota + 1
	workerLost
)

// acquire returns t's first grant, waiting until deadline (the end of
// QueueTimeout), ctx ends or the pool closes.
func (p *Pool) acquire(ctx context.Context, t *ticket, deadline time.Time) (grant, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return grant{}, newError(KindBusy, "the pool is closed")
	}
	if p.fair.next(p.limit()) == nil && !p.fair.waits(t.tenant) {
		if g, ok := p.place(t); ok {
			p.mu.Unlock()
			return g, nil
		}
	}
	p.enqueue(t)
	p.mu.Unlock()
	return p.wait(ctx, t, deadline, false)
}

// wait waits for t's next grant. A queued ticket (its frame in a busy
// worker's pipe) rejoins the waiting runs after queueWindow. When the
// wait fails, t leaves: a grant that came meanwhile is given back, and a
// frame t left in a pipe is drained by its worker.
func (p *Pool) wait(ctx context.Context, t *ticket, deadline time.Time, queued bool) (grant, error) {
	expire := time.NewTimer(time.Until(deadline))
	defer expire.Stop()
	var rejoin <-chan time.Time
	if queued {
		r := time.NewTimer(p.window)
		defer r.Stop()
		rejoin = r.C
	}
	var err error
	for err == nil {
		select {
		case g := <-t.grant:
			return g, nil
		case <-rejoin:
			rejoin = nil
			p.mu.Lock()
			if t.queue != nil && !t.waits {
				p.enqueue(t)
				p.dispatch()
			}
			p.mu.Unlock()
		case <-expire.C:
			err = ErrBusy
		case <-ctx.Done():
			err = &Error{Kind: KindTimeout, Message: "the run's context ended while it waited for a worker", cause: context.Cause(ctx)}
		case <-p.closing:
			err = newError(KindBusy, "the pool is closed")
		}
	}
	var g grant
	p.mu.Lock()
	select {
	case g = <-t.grant:
	default:
		p.withdraw(t)
	}
	if g.kind == grantTurn {
		// The worker drains t's job (giveBack). A run of t's tenant queued
		// behind it came on t's hold, and takes it over.
		g.w.holder = nil
		if q := g.w.next; q != nil && q.t != nil && q.t.tenant == t.tenant {
			p.fair.hold(q.t)
		}
	}
	if p.fair.unhold(t) {
		p.dispatch() // its tenant may have a run waiting on it
	}
	p.mu.Unlock()
	if g.kind != 0 {
		p.giveBack(g)
	}
	return grant{}, err
}

// enqueue adds t to its tenant's waiting runs, in order of arrival. Call
// with p.mu held.
func (p *Pool) enqueue(t *ticket) {
	p.fair.push(t)
}

// unwait removes t from the waiting runs without serving it. Call with
// p.mu held.
func (p *Pool) unwait(t *ticket) {
	p.fair.remove(t, false)
}

// dispatch gives what has come free to the waiting runs: round-robin
// between the tenants below their cap, first come first served within a
// tenant (fairqueue.go). Call with p.mu held, after anything that may
// free a worker, a place or a tenant's share.
func (p *Pool) dispatch() {
	if p.closed {
		return
	}
	p.fair.serve(p.limit(), func(t *ticket) bool {
		g, ok := p.place(t)
		if ok {
			t.grant <- g
		}
		return ok
	})
}

// place finds t a worker or a place, and reports false when there is
// none: an idle worker, a new worker while fewer than MaxWorkers are
// alive or starting, or a place behind a busy worker's young run
// (pickBusy). A ticket already queued leaves its place for the new one.
//
// It keeps to t's tenant's share (fairqueue.go). A worker, or a place
// behind another tenant's run, is a hold: only a tenant below its cap, or
// a ticket that holds one already, gets it. A place behind a run of t's
// own tenant is not: the worker passes from one of the tenant's runs to
// the next (handOver moves the hold), and a tenant at its cap may take
// it. Call with p.mu held.
func (p *Pool) place(t *ticket) (grant, bool) {
	var g grant
	var ok bool
	if p.fair.mayHold(t, p.limit()) {
		g, ok = p.placeAny(t)
	} else if w := p.pickBusy(t, true); w != nil {
		g, ok = p.queueBehind(t, w), true
	}
	switch {
	case !ok:
	case g.kind == grantQueue && p.ownRun(g.w, t):
		p.fair.unhold(t) // the run ahead's hold passes to t at the hand-over
	default:
		p.fair.hold(t)
	}
	return g, ok
}

// ownRun reports whether the run under way on w is one of t's tenant's.
// Call with p.mu held.
func (p *Pool) ownRun(w *proc, t *ticket) bool {
	return w.holder != nil && w.holder != t && w.holder.tenant == t.tenant
}

// placeAny is place for a ticket that may hold a worker. Call with p.mu
// held.
func (p *Pool) placeAny(t *ticket) (grant, bool) {
	for len(p.idle) > 0 {
		i := p.pickIdle(t.aff)
		w := p.idle[i]
		p.idle = slices.Delete(p.idle, i, i+1)
		if !w.alive() {
			p.forget(w)
			continue
		}
		p.move(t)
		p.busy++
		w.holder = t
		return grant{kind: grantIdle, w: w}, true
	}
	if len(p.alive)+p.starting < p.opts.MaxWorkers {
		p.move(t)
		p.starting++
		return grant{kind: grantStart}, true
	}
	if w := p.pickBusy(t, false); w != nil {
		return p.queueBehind(t, w), true
	}
	return grant{}, false
}

// queueBehind gives t the place behind w's run. Call with p.mu held.
func (p *Pool) queueBehind(t *ticket, w *proc) grant {
	p.move(t)
	q := &queued{id: p.nextID.Add(1), w: w, t: t}
	w.next, t.queue = q, q
	p.queued++
	return grant{kind: grantQueue, w: w, q: q}
}

// move makes a queued ticket leave its place, for a better one. Call with
// p.mu held.
func (p *Pool) move(t *ticket) {
	if t.queue != nil {
		t.queue.t, t.queue = nil, nil
		p.queued--
		p.requeued++
	}
}

// pickIdle returns the index in p.idle of the worker to run a job with
// affinity aff on: for a job with a realm (aff != 0), an idle worker that
// keeps the job's realm warm, then the worker whose slot the hash names,
// then, like any job, the most recently used. Call with p.mu held and
// p.idle not empty.
func (p *Pool) pickIdle(aff uint64) int {
	last := len(p.idle) - 1
	if aff == 0 {
		return last
	}
	for i := last; i >= 0; i-- {
		if p.idle[i].warm.has(aff) {
			return i
		}
	}
	slot := int(aff % uint64(p.opts.MaxWorkers))
	for i := last; i >= 0; i-- {
		if p.idle[i].slot == slot {
			return i
		}
	}
	return last
}

// pickBusy returns the busy worker to queue t's job behind, or nil: one
// whose current job frame is sent, with nothing queued yet, whose run
// started less than the queue window ago, and, when own is set, whose run
// is one of t's tenant's. It prefers, like pickIdle, the worker that keeps
// the job's realm warm, then the one its hash names, then the one whose
// run started first (the first to finish, among runs alike). Call with
// p.mu held.
func (p *Pool) pickBusy(t *ticket, own bool) *proc {
	var best *proc
	bestRank := 3
	now := time.Now()
	aff := t.aff
	slot := int(aff % uint64(p.opts.MaxWorkers))
	for w := range p.alive {
		if w.busySince.IsZero() || w.next != nil || now.Sub(w.busySince) >= p.window || !w.alive() || own && !p.ownRun(w, t) {
			continue
		}
		rank := 2
		switch {
		case aff != 0 && w.warm.has(aff):
			rank = 0
		case aff != 0 && w.slot == slot:
			rank = 1
		}
		if rank < bestRank || rank == bestRank && w.busySince.Before(best.busySince) {
			best, bestRank = w, rank
		}
	}
	return best
}

// markSent notes that q's job frame is in its worker's pipe. When the run
// before it ended meanwhile, it returns the grant that follows: the turn,
// or a new place for a run whose worker was lost. Otherwise (ok false) the
// run waits, queued when its place still stands.
func (p *Pool) markSent(q *queued) (g grant, ok, queuedWait bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q.sent = true
	switch q.ended {
	case turnReady:
		q.w.busySince = time.Now()
		return grant{kind: grantTurn, w: q.w, q: q}, true, false
	case workerLost:
		t := q.t
		q.t = nil
		if !p.closed {
			if g, ok := p.place(t); ok {
				return g, true, false
			}
		}
		p.enqueue(t) // wait sees the pool closing
		return grant{}, false, false
	}
	return grant{}, false, true
}

// withdraw takes t out of the pool: out of the waiting runs, and out of
// its place in a busy worker's pipe, which the worker then drains. Call
// with p.mu held.
func (p *Pool) withdraw(t *ticket) {
	if t.waits {
		p.unwait(t)
	}
	if t.queue != nil {
		t.queue.t, t.queue = nil, nil
		p.queued--
	}
}

// giveBack returns a grant that came as its run left.
func (p *Pool) giveBack(g grant) {
	switch g.kind {
	case grantIdle:
		p.release(g.w, true, 0, nil)
	case grantStart:
		p.mu.Lock()
		p.starting--
		p.dispatch()
		p.mu.Unlock()
	case grantQueue: // the job frame was not sent
		p.mu.Lock()
		q := g.q
		q.t = nil
		switch q.ended {
		case 0: // still queued: the place goes away
			q.w.next = nil
			p.queued--
			p.dispatch()
		case turnReady: // the worker is the run's, and idle
			p.mu.Unlock()
			p.release(q.w, true, 0, nil)
			return
		}
		p.mu.Unlock()
	case grantTurn: // the job frame is in the pipe
		p.mu.Lock()
		if !p.closed {
			p.bgWG.Add(1) // under the lock: Close waits only after closing
			go p.drain(g.w, g.q.id)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		p.release(g.w, false, 0, nil)
	}
}

// drain waits for the end of job id on w, whose run left before its
// turn: it cancels it (a worker skips a job cancelled before it started),
// answers none of its svc calls, drops its console lines, then releases
// w.
func (p *Pool) drain(w *proc, id uint64) {
	defer p.bgWG.Done()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, healthy := p.runOn(ctx, w, id, nil, nil, nil, p.opts.KillGrace, true)
	p.release(w, healthy, 0, nil)
}

// release ends the run under way on w: run t's (which then ends its hold
// on its tenant's share), or a drain or a grant given back (t nil). An
// unhealthy worker is retired. healthy means the run's result frame came
// back and the worker may go on: it then starts the job queued behind,
// if any, which is w's run from here on; otherwise a queued run is placed
// again. With nothing queued, w goes back to the idle list. It notes
// whether the worker kept the realm of aff.
func (p *Pool) release(w *proc, healthy bool, aff uint64, t *ticket) {
	if !healthy && w.alive() {
		w.kill(KindCrash) // retired: its engine state is suspect
		<-w.exited
	}
	p.mu.Lock()
	p.busy--
	w.busySince, w.holder = time.Time{}, nil
	if t != nil {
		p.fair.unhold(t)
		p.runs++
		if w.ranWarm {
			p.warm++
		}
		if aff != 0 {
			if w.kept {
				w.warm.put(aff, struct{}{})
			} else {
				w.warm.remove(aff)
			}
		}
	}
	q := w.next
	w.next = nil
	switch {
	case healthy && !p.closed && q != nil:
		p.handOver(w, q)
	case healthy && !p.closed && w.alive():
		w.lastUsed = p.opts.now()
		p.idle = append(p.idle, w)
	case w.alive(): // the pool closed during the run
		w.kill(KindClosed)
		delete(p.alive, w)
		p.killed[KindClosed]++
		p.lost(q)
	default:
		p.forget(w)
		p.lost(q)
	}
	replenish := !p.closed && len(p.alive)+p.starting < p.opts.MinWorkers
	if replenish {
		p.bgWG.Add(1) // under the lock: Close waits only after closing
	}
	p.dispatch()
	p.mu.Unlock()
	if replenish {
		go func() {
			defer p.bgWG.Done()
			p.replenish()
		}()
	}
}

// handOver makes q's job, which the worker starts next, w's run: its
// ticket's turn, or a drain when its run left. Call with p.mu held.
func (p *Pool) handOver(w *proc, q *queued) {
	p.busy++
	t := q.t
	w.holder = t
	if t == nil {
		w.busySince = time.Now()
		p.bgWG.Add(1) // under the lock: Close waits only after closing
		go p.drain(w, q.id)
		return
	}
	t.queue = nil
	p.queued--
	if t.waits {
		p.unwait(t)
	}
	p.fair.hold(t) // from the tenant's run that ended, when it was queued behind one
	if !q.sent {
		q.ended = turnReady // markSent gives the turn
		return
	}
	q.t = nil
	w.busySince = time.Now()
	t.grant <- grant{kind: grantTurn, w: w, q: q}
}

// lost places again the run queued in q (if any) on a worker that was lost
// before it started the job: first in line, by its arrival. Call with
// p.mu held.
func (p *Pool) lost(q *queued) {
	if q == nil || q.t == nil {
		return
	}
	t := q.t
	t.queue = nil
	p.queued--
	p.requeued++
	if !q.sent {
		q.ended = workerLost // markSent places it
		return
	}
	q.t = nil
	if !t.waits {
		p.enqueue(t)
	}
}

// forget drops a dead worker. Call with p.mu held.
func (p *Pool) forget(w *proc) {
	if !p.alive[w] {
		return
	}
	delete(p.alive, w)
	cause := w.cause()
	if cause == "" {
		cause = w.exitError().Kind
	}
	p.killed[cause]++
}

// replenish starts workers until MinWorkers are alive or starting.
func (p *Pool) replenish() {
	for {
		p.mu.Lock()
		need := !p.closed && len(p.alive)+p.starting < p.opts.MinWorkers
		if need {
			p.starting++
		}
		p.mu.Unlock()
		if !need {
			return
		}
		if _, err := p.startWorker(nil); err != nil {
			return
		}
	}
}

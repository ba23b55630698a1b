package transforms

import (
	"slices"
)

// Fair sharing of the pool between tenants (security requirement R-JS-8).
//
// A tenant holds a worker from the moment one of its runs is granted it
// until that run ends: the worker runs the job, is starting for it, or
// has the job queued in its pipe behind another tenant's run (a queued
// job takes the worker next, so it counts). No tenant holds more than
// MaxWorkersPerTenant at once. A run of a tenant at its cap waits for one
// of that tenant's own runs to end, however many workers are idle; it
// never takes another. It may still be pipelined behind one of its own
// tenant's young runs (dispatch.go): that worker passes from one of the
// tenant's runs to the next, and the hold with it.
//
// The waiting runs are kept in one queue per tenant, in order of
// arrival, and the tenants that have runs waiting are served round-robin:
// when a worker or a place comes free it goes to the first run of the
// next tenant in the ring that is below its cap, and that tenant moves to
// the end of the ring. A tenant that saturates its share therefore waits
// on itself alone, and however many runs it sends, the other tenants are
// served in turn with it. A run still waits no longer than QueueTimeout.
//
// Runs of jobs that name no tenant (no RealmScope.Tenant: the server's own
// health checks, and code checked with Pool.ValidateCode) form one more
// tenant, "", capped like the others.

// fairQueue holds the runs waiting for a worker, per tenant, and what
// each tenant holds. It is guarded by the pool's mutex.
type fairQueue struct {
	// tenants are the tenants that hold a worker or wait for one; a
	// tenant with neither is dropped.
	tenants map[string]*tenantQueue
	// ring lists the tenants with runs waiting, the next to serve first.
	ring []*tenantQueue
}

// tenantQueue is one tenant's share of the pool.
type tenantQueue struct {
	name    string
	waiting []*ticket // by arrival
	held    int       // tickets holding a worker or a place (ticket.holds)
}

// tenant returns name's entry, creating it.
func (f *fairQueue) tenant(name string) *tenantQueue {
	tq := f.tenants[name]
	if tq == nil {
		if f.tenants == nil {
			f.tenants = make(map[string]*tenantQueue)
		}
		tq = &tenantQueue{name: name}
		f.tenants[name] = tq
	}
	return tq
}

// drop forgets tq once it neither holds nor waits.
func (f *fairQueue) drop(tq *tenantQueue) {
	if tq.held == 0 && len(tq.waiting) == 0 {
		delete(f.tenants, tq.name)
	}
}

// push adds t to its tenant's queue, in order of arrival; a tenant that
// had none waiting joins the ring at its end.
func (f *fairQueue) push(t *ticket) {
	tq := f.tenant(t.tenant)
	i := len(tq.waiting)
	for i > 0 && tq.waiting[i-1].since.After(t.since) {
		i--
	}
	tq.waiting = slices.Insert(tq.waiting, i, t)
	if len(tq.waiting) == 1 {
		f.ring = append(f.ring, tq)
	}
	t.waits = true
}

// remove takes t out of its tenant's queue. served says that t leaves
// because it was given a worker or a place: its tenant then moves to the
// end of the ring (round-robin); a run that leaves for another reason
// (it gave up, or its turn came on the worker it was queued at) changes
// no tenant's turn.
func (f *fairQueue) remove(t *ticket, served bool) {
	t.waits = false
	tq := f.tenants[t.tenant]
	if tq == nil {
		return
	}
	if i := slices.Index(tq.waiting, t); i >= 0 {
		tq.waiting = slices.Delete(tq.waiting, i, i+1)
	}
	if r := slices.Index(f.ring, tq); r >= 0 && (served || len(tq.waiting) == 0) {
		f.ring = slices.Delete(f.ring, r, r+1)
		if len(tq.waiting) > 0 {
			f.ring = append(f.ring, tq)
		}
	}
	f.drop(tq)
}

// mayHold reports whether t may be given a worker or a place: it holds
// one already (it moves), or its tenant is below limit.
func (f *fairQueue) mayHold(t *ticket, limit int) bool {
	if t.holds {
		return true
	}
	tq := f.tenants[t.tenant]
	return tq == nil || tq.held < limit
}

// candidate returns the run of tq to serve next. capped says that tq is
// at limit and the run holds nothing: it may only be pipelined behind one
// of its tenant's own runs. Else it is the first run, when tq is below
// limit, or the first that holds a place already (a queued run that may
// move).
func (tq *tenantQueue) candidate(limit int) (t *ticket, capped bool) {
	if tq.held < limit {
		return tq.waiting[0], false
	}
	for _, t := range tq.waiting {
		if t.holds {
			return t, false
		}
	}
	return tq.waiting[0], true
}

// next returns the waiting run that would take a free worker first, or
// nil when no run that waits may take one.
func (f *fairQueue) next(limit int) *ticket {
	for _, tq := range f.ring {
		if t, capped := tq.candidate(limit); !capped {
			return t
		}
	}
	return nil
}

// waits reports whether tenant has runs waiting.
func (f *fairQueue) waits(tenant string) bool {
	tq := f.tenants[tenant]
	return tq != nil && len(tq.waiting) > 0
}

// serve offers the waiting runs to place, round-robin: each tenant's
// candidate in ring order, the ring starting afresh after each run
// placed, whose tenant moves to its end. place gives t a worker or a
// place, or reports false. Once a run that is not capped finds nothing,
// no worker is free: only capped runs (which look for a place behind their
// own tenant's runs) are offered after it. It returns when a whole round
// places nothing.
func (f *fairQueue) serve(limit int, place func(t *ticket) bool) {
	full := false
	for i := 0; i < len(f.ring); {
		t, capped := f.ring[i].candidate(limit)
		switch {
		case full && !capped:
			i++
		case !place(t):
			full = full || !capped
			i++
		default:
			f.remove(t, true)
			i = 0
		}
	}
}

// hold counts t as holding a worker or a place, once.
func (f *fairQueue) hold(t *ticket) {
	if !t.holds {
		t.holds = true
		f.tenant(t.tenant).held++
	}
}

// unhold ends t's hold, and reports whether it had one.
func (f *fairQueue) unhold(t *ticket) bool {
	if !t.holds {
		return false
	}
	t.holds = false
	if tq := f.tenants[t.tenant]; tq != nil {
		tq.held--
		f.drop(tq)
	}
	return true
}

// each calls fn for every waiting run.
func (f *fairQueue) each(fn func(*ticket)) {
	for _, tq := range f.ring {
		for _, t := range tq.waiting {
			fn(t)
		}
	}
}

// limit is a tenant's cap: MaxWorkersPerTenant.
func (p *Pool) limit() int { return p.opts.MaxWorkersPerTenant }

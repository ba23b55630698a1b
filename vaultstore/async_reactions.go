package vaultstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Asynchronous reactions: POST /reactors/{id}/react-async queues a
// reaction and answers its id at once; a dispatcher of the node (package
// caddymodule) claims queued reactions and runs them in the transform
// workers; GET /reactors/{id}/results/{request_id} reads the outcome.
//
// A reaction's arguments are detokenized when it is queued, with the
// caller's rights, and kept sealed with the tenant's data key until it
// runs; its outcome is sealed the same way. Every record expires with the
// result (24 hours after queueing by default), through the engine's time
// to live and a check against the vault's clock on every read.
//
// What a crash does: a reaction still queued when the process dies runs
// after the restart (or on another node). A reaction that was running is
// never run again, since its code may already have called third parties:
// it is marked failed, at once when the next process starts on a store no
// other process shares (Badger), or once its lease runs out on a shared
// one (PostgreSQL), where another node may still be running it.

// Asynchronous reaction statuses.
const (
	AsyncPending   = "pending"
	AsyncRunning   = "running"
	AsyncCompleted = "completed"
	AsyncFailed    = "failed"
)

const (
	// DefaultAsyncResultTTL is how long an asynchronous reaction and its
	// result are kept, counted from queueing.
	DefaultAsyncResultTTL = 24 * time.Hour
	// DefaultAsyncQueuePerTenant bounds the reactions a tenant may have
	// queued or running at once.
	DefaultAsyncQueuePerTenant = 100
	// AsyncLease is how long a node may run a reaction it claimed before
	// others take it for dead: well beyond a run's 30 s limit and the
	// workers' queueing.
	AsyncLease = 2 * time.Minute
)

// ErrQueueFull: the tenant has as many asynchronous reactions queued or
// running as it may.
var ErrQueueFull = errors.New("the tenant's queue of asynchronous reactions is full")

// AsyncReaction is an asynchronous reaction as its owner sees it, without
// its arguments.
type AsyncReaction struct {
	ID          string     `json:"id"`
	ReactorID   string     `json:"reactor_id"`
	Status      string     `json:"status"`
	CreatedAt   *Timestamp `json:"created_at"`
	StartedAt   *Timestamp `json:"started_at,omitempty"`
	CompletedAt *Timestamp `json:"completed_at,omitempty"`
	ExpiresAt   *Timestamp `json:"expires_at"`
	// ResultStatus is the HTTP status the synchronous call would have
	// answered, once the reaction completed or failed.
	ResultStatus int `json:"-"`
	// Result is the body the synchronous call would have answered.
	Result json.RawMessage `json:"-"`
}

// asyncRecord is an asynchronous reaction as stored, sealed.
type asyncRecord struct {
	AsyncReaction
	ResultStatus int             `json:"result_status,omitempty"`
	Result       json.RawMessage `json:"result,omitempty"`
	CallerID     string          `json:"caller_id"`
	Args         json.RawMessage `json:"args,omitempty"` // detokenized; dropped once run
	LeaseUntil   *Timestamp      `json:"lease_until,omitempty"`
	QueueKey     string          `json:"queue_key"`
}

// AsyncJob is a claimed reaction for a node to run.
type AsyncJob struct {
	TenantID  string
	ID        string
	ReactorID string
	// CallerID is the application (or session) that queued the reaction.
	CallerID string
	// Args is the JSON of the detokenized arguments.
	Args []byte
}

func asyncKey(tenantID, id string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/areact/" + id)
}

// asyncTenantQueueKey marks a reaction of the tenant queued or running;
// the count of these is what the per-tenant bound limits.
func asyncTenantQueueKey(tenantID, id string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/areactq/" + id)
}

func asyncTenantQueuePrefix(tenantID string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/areactq/")
}

// asyncQueueKey is the reaction's place in the queue every node reads,
// oldest first.
func asyncQueueKey(at time.Time, tenantID, id string) []byte {
	return fmt.Appendf(nil, "%sareactq/%016x/%s/%s", keyVersion, at.UnixNano(), tenantID, id)
}

func asyncQueuePrefix() []byte { return []byte(keyVersion + "areactq/") }

// asyncRunningKey marks a reaction some node claimed and runs, for the
// check of leases: the queue then holds only reactions waiting to run.
func asyncRunningKey(tenantID, id string) []byte {
	return []byte(keyVersion + "areactr/" + tenantID + "/" + id)
}

func asyncRunningPrefix() []byte { return []byte(keyVersion + "areactr/") }

// parseAsyncRunningKey returns the tenant and reaction of a running entry;
// "" for an entry of another shape.
func parseAsyncRunningKey(key []byte) (tenantID, id string) {
	parts := strings.Split(string(key[len(asyncRunningPrefix()):]), "/") // {tenant}/{id}
	if len(parts) != 2 || !isID(parts[1]) || parts[0] == "" {
		return "", ""
	}
	return parts[0], parts[1]
}

// parseAsyncQueueKey returns the tenant and reaction of a queue entry;
// "" for an entry of another shape.
func parseAsyncQueueKey(key []byte) (tenantID, id string) {
	parts := strings.Split(string(key[len(asyncQueuePrefix()):]), "/") // {created}/{tenant}/{id}
	if len(parts) != 3 || !isID(parts[2]) || parts[1] == "" {
		return "", ""
	}
	return parts[1], parts[2]
}

// EnqueueAsyncReaction queues a reaction of reactor reactorID by caller
// with args (JSON, already detokenized). limit bounds the tenant's
// reactions queued or running (ErrQueueFull beyond it) and ttl how long
// the reaction and its result are kept; zero means the default.
func (s *Store) EnqueueAsyncReaction(ctx context.Context, tenantID, reactorID string, caller *Application, args []byte, limit int, ttl time.Duration) (*AsyncReaction, error) {
	if !isID(reactorID) {
		return nil, ErrNotFound
	}
	if limit <= 0 {
		limit = DefaultAsyncQueuePerTenant
	}
	if ttl <= 0 {
		ttl = DefaultAsyncResultTTL
	}
	var out AsyncReaction
	err := s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		if _, err := w.Get(reactorKey(tenantID, reactorID)); err != nil {
			return err
		}
		queued := 0
		if err := w.Scan(asyncTenantQueuePrefix(tenantID), nil, func(_, _ []byte) error {
			if queued++; queued >= limit {
				return ErrStopScan
			}
			return nil
		}); err != nil {
			return err
		}
		if queued >= limit {
			return ErrQueueFull
		}
		now := s.now()
		id := uuid.NewString()
		rec := &asyncRecord{
			AsyncReaction: AsyncReaction{ID: id, ReactorID: reactorID, Status: AsyncPending, CreatedAt: stamp(now), ExpiresAt: stamp(now.Add(ttl))},
			CallerID:      caller.ID, Args: args, QueueKey: string(asyncQueueKey(now, tenantID, id)),
		}
		if err := s.writeAudit(w, tk, t, byApp(caller, "reactor", reactorID, "react-async", "asynchronous reaction "+id+" queued")); err != nil {
			return err
		}
		if err := s.putAsync(w, tk, tenantID, rec, now); err != nil {
			return err
		}
		if err := w.Put(asyncTenantQueueKey(tenantID, id), nil, ttl); err != nil {
			return err
		}
		out = rec.AsyncReaction
		return w.Put([]byte(rec.QueueKey), nil, ttl)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// putAsync writes a reaction sealed, to vanish when it expires.
func (s *Store) putAsync(w Writer, tk *tenantKeys, tenantID string, rec *asyncRecord, now time.Time) error {
	ttl := rec.ExpiresAt.Sub(now)
	if ttl <= 0 {
		return w.Delete(asyncKey(tenantID, rec.ID))
	}
	sealed, err := tk.sealRecord("areact", tenantID, rec.ID, rec)
	if err != nil {
		return err
	}
	return w.Put(asyncKey(tenantID, rec.ID), sealed, ttl)
}

// getAsync reads a reaction of the tenant; an expired one is ErrNotFound.
func (s *Store) getAsync(r Reader, tk *tenantKeys, tenantID, id string) (*asyncRecord, error) {
	var rec asyncRecord
	if err := s.getSealed(r, tk, "areact", tenantID, id, asyncKey(tenantID, id), &rec); err != nil {
		return nil, err
	}
	if !s.now().Before(rec.ExpiresAt.Time) {
		return nil, ErrNotFound
	}
	return &rec, nil
}

// GetAsyncReaction returns a reaction of the tenant's reactor reactorID
// with its result once it has one, to the application that queued it: a
// result can hold what the reactor detokenized, so an application that
// may invoke the reactor but not read those tokens must not read another
// application's result. Another tenant's reaction, another reactor's,
// another application's, or an expired one is ErrNotFound.
func (s *Store) GetAsyncReaction(ctx context.Context, tenantID, reactorID, id string, caller *Application) (*AsyncReaction, error) {
	if !isID(id) || !isID(reactorID) {
		return nil, ErrNotFound
	}
	var out *AsyncReaction
	err := s.kv.View(ctx, func(r Reader) error {
		tk, err := s.tenantKeysFor(r, tenantID)
		if err != nil {
			return err
		}
		rec, err := s.getAsync(r, tk, tenantID, id)
		if err != nil {
			return err
		}
		if rec.ReactorID != reactorID || caller == nil || rec.CallerID != caller.ID {
			return ErrNotFound
		}
		a := rec.AsyncReaction
		a.ResultStatus, a.Result = rec.ResultStatus, rec.Result
		out = &a
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ClaimAsyncReactions claims up to max queued reactions, oldest first,
// for this node to run within AsyncLease. First it fails the running
// reactions whose runner's lease ran out; on the way it drops entries of
// reactions or tenants that are gone.
func (s *Store) ClaimAsyncReactions(ctx context.Context, max int) ([]*AsyncJob, error) {
	running, err := s.scanKeys(ctx, asyncRunningPrefix(), 0)
	if err != nil {
		return nil, err
	}
	for _, key := range running {
		if err := s.checkLease(ctx, key, false); err != nil {
			return nil, err
		}
	}
	queued, err := s.scanKeys(ctx, asyncQueuePrefix(), 2*max+8)
	if err != nil {
		return nil, err
	}
	var jobs []*AsyncJob
	for _, key := range queued {
		if len(jobs) >= max {
			break
		}
		job, err := s.claimAsync(ctx, key)
		if err != nil {
			return jobs, err
		}
		if job != nil {
			jobs = append(jobs, job)
		}
	}
	return jobs, nil
}

// scanKeys lists the keys under prefix, at most limit of them (0: all).
func (s *Store) scanKeys(ctx context.Context, prefix []byte, limit int) ([][]byte, error) {
	var keys [][]byte
	err := s.kv.View(ctx, func(r Reader) error {
		keys = keys[:0]
		return r.Scan(prefix, nil, func(key, _ []byte) error {
			keys = append(keys, key)
			if limit > 0 && len(keys) >= limit {
				return ErrStopScan
			}
			return nil
		})
	})
	return keys, err
}

// asyncEntry reads the reaction an index entry names, inside w; it
// deletes the entry and answers nil when the reaction or its tenant is
// gone.
func (s *Store) asyncEntry(w Writer, entry []byte, tenantID, id string) (*tenantKeys, *asyncRecord, error) {
	if _, err := w.Get(entry); err != nil {
		return nil, nil, nil // taken or finished meanwhile
	}
	if tenantID == "" {
		return nil, nil, w.Delete(entry) // not ours to read
	}
	tk, err := s.tenantKeysFor(w, tenantID)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, w.Delete(entry) // the tenant is gone
	}
	if err != nil {
		return nil, nil, err
	}
	rec, err := s.getAsync(w, tk, tenantID, id)
	if errors.Is(err, ErrNotFound) {
		if err := w.Delete(asyncTenantQueueKey(tenantID, id)); err != nil {
			return nil, nil, err
		}
		return nil, nil, w.Delete(entry)
	}
	if err != nil {
		return nil, nil, err
	}
	return tk, rec, nil
}

// claimAsync claims the reaction of one queue entry, if it is pending.
func (s *Store) claimAsync(ctx context.Context, queueKey []byte) (*AsyncJob, error) {
	tenantID, id := parseAsyncQueueKey(queueKey)
	var job *AsyncJob
	err := s.kv.Update(ctx, func(w Writer) error {
		job = nil
		tk, rec, err := s.asyncEntry(w, queueKey, tenantID, id)
		if err != nil || rec == nil {
			return err
		}
		if rec.Status != AsyncPending {
			return w.Delete(queueKey) // claimed or finished: the entry is stale
		}
		now := s.now()
		rec.Status, rec.StartedAt, rec.LeaseUntil = AsyncRunning, stamp(now), stamp(now.Add(AsyncLease))
		job = &AsyncJob{TenantID: tenantID, ID: id, ReactorID: rec.ReactorID, CallerID: rec.CallerID, Args: rec.Args}
		if err := w.Delete(queueKey); err != nil {
			return err
		}
		if err := w.Put(asyncRunningKey(tenantID, id), nil, rec.ExpiresAt.Sub(now)); err != nil {
			return err
		}
		return s.putAsync(w, tk, tenantID, rec, now)
	})
	if err != nil {
		return nil, err
	}
	return job, nil
}

// checkLease fails the running reaction of one running entry if its
// runner's lease ran out, or at once with force.
func (s *Store) checkLease(ctx context.Context, runningKey []byte, force bool) error {
	tenantID, id := parseAsyncRunningKey(runningKey)
	return s.kv.Update(ctx, func(w Writer) error {
		tk, rec, err := s.asyncEntry(w, runningKey, tenantID, id)
		if err != nil || rec == nil {
			return err
		}
		now := s.now()
		switch {
		case rec.Status != AsyncRunning:
			return w.Delete(runningKey)
		case !force && rec.LeaseUntil != nil && now.Before(rec.LeaseUntil.Time):
			return nil // its runner still holds it
		}
		return s.finishAsync(w, tk, tenantID, rec, now, AsyncFailed, interruptedStatus, interruptedProblem)
	})
}

// The outcome of a reaction whose run was cut short by the death of its
// process: an RFC 7807 problem, as the synchronous call answers failures.
const interruptedStatus = 500

var interruptedProblem = json.RawMessage(`{"type":"about:blank","title":"Internal Server Error","status":500,"detail":"the vault stopped while the reaction ran; it was not run again, since its code may have called third parties before it stopped"}`)

// finishAsync records a reaction's outcome and takes it off the queues.
func (s *Store) finishAsync(w Writer, tk *tenantKeys, tenantID string, rec *asyncRecord, now time.Time, status string, resultStatus int, result json.RawMessage) error {
	rec.Status, rec.ResultStatus, rec.Result = status, resultStatus, result
	rec.CompletedAt, rec.LeaseUntil, rec.Args = stamp(now), nil, nil
	if err := w.Delete([]byte(rec.QueueKey)); err != nil {
		return err
	}
	if err := w.Delete(asyncRunningKey(tenantID, rec.ID)); err != nil {
		return err
	}
	if err := w.Delete(asyncTenantQueueKey(tenantID, rec.ID)); err != nil {
		return err
	}
	return s.putAsync(w, tk, tenantID, rec, now)
}

// FinishAsyncReaction records the outcome of a claimed reaction: the
// HTTP status and body the synchronous call would have answered; a 2xx
// status completes it, any other fails it.
func (s *Store) FinishAsyncReaction(ctx context.Context, job *AsyncJob, resultStatus int, result json.RawMessage) error {
	status := AsyncFailed
	if resultStatus >= 200 && resultStatus < 300 {
		status = AsyncCompleted
	}
	return s.kv.Update(ctx, func(w Writer) error {
		tk, err := s.tenantKeysFor(w, job.TenantID)
		if err != nil {
			return err
		}
		rec, err := s.getAsync(w, tk, job.TenantID, job.ID)
		if err != nil {
			return err
		}
		if rec.Status != AsyncRunning {
			return nil // failed as interrupted meanwhile: that stands
		}
		return s.finishAsync(w, tk, job.TenantID, rec, s.now(), status, resultStatus, result)
	})
}

// ReleaseAsyncReaction puts a claimed reaction that did not start (the
// workers were busy) back in the queue.
func (s *Store) ReleaseAsyncReaction(ctx context.Context, job *AsyncJob) error {
	return s.kv.Update(ctx, func(w Writer) error {
		tk, err := s.tenantKeysFor(w, job.TenantID)
		if err != nil {
			return err
		}
		rec, err := s.getAsync(w, tk, job.TenantID, job.ID)
		if err != nil || rec.Status != AsyncRunning {
			return err
		}
		now := s.now()
		rec.Status, rec.StartedAt, rec.LeaseUntil = AsyncPending, nil, nil
		if err := w.Delete(asyncRunningKey(job.TenantID, job.ID)); err != nil {
			return err
		}
		if err := w.Put([]byte(rec.QueueKey), nil, rec.ExpiresAt.Sub(now)); err != nil {
			return err
		}
		return s.putAsync(w, tk, job.TenantID, rec, now)
	})
}

// RecoverAsyncReactions fails, on a store no other process shares, every
// reaction left running by a process that died; it reports how many. On a
// shared store it does nothing: the leases decide (ClaimAsyncReactions).
func (s *Store) RecoverAsyncReactions(ctx context.Context) (int, error) {
	if s.shared {
		return 0, nil
	}
	running, err := s.scanKeys(ctx, asyncRunningPrefix(), 0)
	if err != nil {
		return 0, err
	}
	for i, key := range running {
		if err := s.checkLease(ctx, key, true); err != nil {
			return i, err
		}
	}
	return len(running), nil
}

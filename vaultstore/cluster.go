package vaultstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// Several vault processes may share one engine (PostgreSQL). What each
// keeps in memory must then follow what the others write, and background
// work must run once across them, not once per process:
//
//   - the credential cache is dropped whenever any process commits a change
//     to a record credentials resolve to (the engine's Watcher), and is not
//     trusted while the engine cannot promise to tell (Watcher.Healthy);
//   - the decoded-record cache needs nothing: every lookup compares the
//     stored bytes (recordCache);
//   - background jobs (the sweep, usage folds, re-seals, tenant deletions)
//     run under a lease: an entry naming the process that holds it until a
//     time, taken in a transaction, so one process runs each job, and
//     another takes it over once a holder that died has let it lapse.
//
// With Badger, the only process is the whole cluster: there is no
// watcher, and no lease is needed.

// leasesPrefix holds the leases; outside every tenant's keys and left out
// of backups.
var leasesPrefix = []byte("tokenvault/lease/")

// lease is the stored form of a lease.
type lease struct {
	Holder string    `json:"holder"`
	Until  time.Time `json:"until"`
}

// newNodeID names this process among those sharing the engine.
func newNodeID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// errLeaseHeld reports a job another process is running.
var errLeaseHeld = errors.New("another vault process holds the lease")

// takeLease takes the named lease for ttl, or extends it when this process
// holds it; errLeaseHeld when another process holds it.
func (s *Store) takeLease(ctx context.Context, name string, ttl time.Duration) error {
	key := append(append([]byte(nil), leasesPrefix...), name...)
	// leases are about processes that live and die in real time: the
	// wall clock, never a test's injected one
	now := time.Now()
	return s.kv.Update(ctx, func(w Writer) error {
		raw, err := w.Get(key)
		switch {
		case err == nil:
			var l lease
			if json.Unmarshal(raw, &l) == nil && l.Holder != s.node && now.Before(l.Until) {
				return errLeaseHeld
			}
		case !errors.Is(err, ErrNotFound):
			return err
		}
		raw, err = json.Marshal(lease{Holder: s.node, Until: now.Add(ttl)})
		if err != nil {
			return err
		}
		// the entry outlives its lease a little, so a holder that died
		// leaves nothing behind for long
		return w.Put(key, raw, ttl+time.Hour)
	})
}

// releaseLease gives the named lease up, if this process holds it.
func (s *Store) releaseLease(ctx context.Context, name string) error {
	key := append(append([]byte(nil), leasesPrefix...), name...)
	return s.kv.Update(ctx, func(w Writer) error {
		raw, err := w.Get(key)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var l lease
		if json.Unmarshal(raw, &l) == nil && l.Holder != s.node {
			return nil
		}
		return w.Delete(key)
	})
}

// jobLeaseTTL is how long a job's lease lasts without renewal: the
// longest a job whose process died waits for another to take it over.
const jobLeaseTTL = 2 * time.Minute

// exclusively runs job under the named lease, renewing it while the job
// runs, and releases it after. It reports false, without running job,
// when another process holds the lease.
func (s *Store) exclusively(ctx context.Context, name string, job func(context.Context) error) (bool, error) {
	if !s.shared {
		return true, job(ctx)
	}
	if err := s.takeLease(ctx, name, jobLeaseTTL); errors.Is(err, errLeaseHeld) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("taking the %s lease: %w", name, err)
	}
	jobCtx, cancel := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(jobLeaseTTL / 4)
		defer t.Stop()
		for {
			select {
			case <-jobCtx.Done():
				return
			case <-t.C:
				if err := s.takeLease(jobCtx, name, jobLeaseTTL); err != nil && jobCtx.Err() == nil {
					// another process may take the job over: stop ours
					s.logger.Warn("renewing a job's lease failed; the job stops", zap.String("job", name), zap.Error(err))
					cancel()
					return
				}
			}
		}
	}()
	err := job(jobCtx)
	cancel()
	<-renewed
	if rerr := s.releaseLease(context.WithoutCancel(ctx), name); rerr != nil && err == nil {
		s.logger.Warn("releasing a job's lease failed; it lapses by itself", zap.String("job", name), zap.Error(rerr))
	}
	return true, err
}

// watchSharedChanges subscribes the credential cache to changes other
// processes commit, when the engine is shared.
func (s *Store) watchSharedChanges(engine KV) error {
	w, ok := engine.(kv.Watcher)
	if !ok {
		return nil
	}
	s.shared = true
	s.credentials.trusted = w.Healthy
	if err := w.Watch(credentialRecord, func([]byte) { s.credentials.invalidate() }); err != nil {
		return fmt.Errorf("watching for changes by other nodes: %w", err)
	}
	return nil
}

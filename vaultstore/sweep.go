package vaultstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// sweepInterval is how often expired tokens are purged and ended CVC keys
// shredded; an expired token is invisible at once and gone within this.
const sweepInterval = time.Minute

func (s *Store) sweepLoop() {
	defer s.wg.Done()
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.backgroundWork(s.ctx)
		}
	}
}

// sweepLeaseTTL is how long the sweeping process keeps the sweep without
// renewing it: the longest the sweep pauses when that process dies.
const sweepLeaseTTL = 3 * sweepInterval

// backgroundWork is what the sweep loop does each interval. CVC keys are
// shredded by every process (each drops the keys it holds in memory); the
// rest runs in one process of those sharing the engine, under a lease, and
// picks up what a process that died left unfinished.
func (s *Store) backgroundWork(ctx context.Context) {
	if err := s.cvc.shred(ctx, s.now()); err != nil && ctx.Err() == nil {
		s.logger.Warn("shredding ended cvc keys failed", zap.Error(err))
	}
	if !s.holdSweep(ctx) {
		return
	}
	if err := errors.Join(s.purgeExpired(ctx, s.now()), s.resumeTenantDeletions(ctx), s.resumeReseals(ctx), s.sweepDocumentUploads(ctx, s.now()), s.purgeAuditChains(ctx, s.now())); err != nil && ctx.Err() == nil {
		s.logger.Warn("sweep failed", zap.Error(err))
	}
}

// holdSweep reports whether this process is the one that sweeps. With a
// shared engine, one process sweeps while it lives: it takes the lease or
// renews it, and keeps it from one sweep to the next (it is never
// released), and another takes over once it has lapsed.
func (s *Store) holdSweep(ctx context.Context) bool {
	if !s.shared {
		return true
	}
	err := s.takeLease(ctx, "sweep", sweepLeaseTTL)
	if err != nil && !errors.Is(err, errLeaseHeld) && ctx.Err() == nil {
		s.logger.Warn("taking the sweep lease failed", zap.Error(err))
	}
	return err == nil
}

// Sweep purges tokens whose expiry has passed, with their index entries
// and counts, destroys CVC keys whose retention has ended, removes
// audit records past their tenant's log retention and the content of
// abandoned document uploads. It runs every minute; tests call it with
// their own clock.
func (s *Store) Sweep(ctx context.Context) error {
	now := s.now()
	return errors.Join(s.purgeExpired(ctx, now), s.cvc.shred(ctx, now), s.sweepDocumentUploads(ctx, now), s.purgeAuditChains(ctx, now))
}

func (s *Store) purgeExpired(ctx context.Context, now time.Time) error {
	prefix := expiryPrefix()
	for {
		var due [][]byte
		err := s.kv.View(ctx, func(r Reader) error {
			return r.Scan(prefix, nil, func(key, _ []byte) error {
				at, _, _, ok := parseExpiryKey(key)
				if ok && at.After(now) || len(due) == 100 {
					return ErrStopScan
				}
				due = append(due, key) // an unreadable entry is dropped by purgeOne
				return nil
			})
		})
		if err != nil || len(due) == 0 {
			return err
		}
		var failed int
		for _, key := range due {
			if err := s.purgeOne(ctx, key, now); err != nil {
				// one record that cannot be purged must not hold up the rest
				s.logger.Warn("purging an expired token failed", zap.Error(err))
				failed++
			}
		}
		if failed == len(due) {
			return fmt.Errorf("purging expired tokens: %d failed", failed)
		}
	}
}

// purgeOne removes the token an expiry entry names, if it is still the
// token that expires then (an update may have moved its expiry).
func (s *Store) purgeOne(ctx context.Context, key []byte, now time.Time) error {
	at, tid, id, ok := parseExpiryKey(key)
	purged := ""
	err := s.kv.Update(ctx, func(w Writer) error {
		purged = ""
		if err := w.Delete(key); err != nil || !ok {
			return err
		}
		tk, err := s.tenantKeysFor(w, tid)
		if errors.Is(err, ErrNotFound) {
			return nil // the tenant is gone, and its records with it
		} else if err != nil {
			return err
		}
		var rec tokenRecord
		err = s.getSealed(w, tk, "token", tid, id, tokenKey(tid, id), &rec)
		if errors.Is(err, ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		if rec.ExpiresAt == nil || !rec.ExpiresAt.Equal(at) || !rec.expired(now) {
			return nil
		}
		if err := s.removeToken(w, &rec); err != nil {
			return err
		}
		purged = rec.Type
		return s.countToken(w, &rec, -1, nil)
	})
	if err == nil && purged != "" {
		s.emit(EventTokenExpired, purged, 1)
	}
	return err
}

// parseExpiryKey splits v1/exp/{ns hex}/{tenant}/{token}.
func parseExpiryKey(key []byte) (time.Time, string, string, bool) {
	rest := key[len(expiryPrefix()):]
	parts := bytes.SplitN(rest, []byte("/"), 3)
	if len(parts) != 3 {
		return time.Time{}, "", "", false
	}
	ns, err := strconv.ParseUint(string(parts[0]), 16, 64)
	if err != nil {
		return time.Time{}, "", "", false
	}
	return time.Unix(0, int64(ns)), string(parts[1]), string(parts[2]), true
}

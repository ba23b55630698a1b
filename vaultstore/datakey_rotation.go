package vaultstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Data key rotation gives a tenant a new data key version for new writes,
// then re-seals its records under it in the background, and destroys the
// old versions once nothing sealed under them is left. Records under any
// live version stay readable throughout. Every step is one transaction,
// and what is left to do can be read from the data itself (records whose
// seal names an old version; more than one version stored), so an
// interrupted rotation resumes when the store opens.

// DataKeyStatus describes a tenant's data keys and any re-seal under way.
type DataKeyStatus struct {
	TenantID string   `json:"tenant_id"`
	Current  uint32   `json:"current_version"`
	Versions []uint32 `json:"versions"`
	Reseal   *Reseal  `json:"reseal,omitempty"`
}

// Reseal is the progress of re-sealing a tenant's records.
type Reseal struct {
	Running    bool       `json:"running"`
	Resealed   int64      `json:"resealed"`
	StartedAt  *Timestamp `json:"started_at,omitempty"`
	FinishedAt *Timestamp `json:"finished_at,omitempty"`
	Error      string     `json:"error,omitempty"`
}

// sealedPrefixes are the key prefixes of a tenant whose values are sealed
// under its data key, with the record kind their seal binds.
func sealedPrefixes(tenantID string) []struct {
	prefix []byte
	kind   string
} {
	t := keyVersion + "t/" + tenantID + "/"
	return []struct {
		prefix []byte
		kind   string
	}{
		{[]byte(t + "app/"), "application"},
		{[]byte(t + "appkey/"), "apikey"},
		{[]byte(t + "tok/"), "token"},
		{[]byte(t + "proxy/"), "proxy"},
		{[]byte(t + "reactor/"), "reactor"},
		{[]byte(t + "idem/"), "idempotency"},
		{[]byte(t + "log/"), "audit"},
		{[]byte(t + "ckey/"), "clientkey"},
		{[]byte(t + "doc/"), "document"},
		{[]byte(t + "docc/"), "docchunk"},
		{[]byte(t + "intent/"), tokenIntentKind},
		{[]byte(t + "wh/"), webhookKind},
		{webhookQueueTenantPrefix(tenantID), webhookEventKind},
	}
}

// resealers tracks the re-seals under way, by tenant.
type resealers struct {
	mu      sync.Mutex
	running map[string]*Reseal
}

// RotateDataKey starts a new data key version for a tenant's new writes
// and re-seals its records under it in the background.
func (s *Store) RotateDataKey(ctx context.Context, tenantID string) (*DataKeyStatus, error) {
	if !isID(tenantID) {
		return nil, ErrNotFound
	}
	if err := s.addDataKeyVersion(ctx, tenantID); err != nil {
		return nil, err
	}
	s.startReseal(tenantID)
	return s.DataKeyStatus(ctx, tenantID)
}

// addDataKeyVersion stores a new data key version, which new writes use
// from the moment it commits.
func (s *Store) addDataKeyVersion(ctx context.Context, tenantID string) error {
	var version uint32
	err := s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		version = 0
		for v := range tk.Versions() {
			version = max(version, v)
		}
		version++
		raw := randomBytes(MasterKeySize)
		defer clear(raw)
		wrapped, err := s.masters.wrap(version, raw, dataKeyAAD(tenantID, version))
		if err != nil {
			return err
		}
		if err := w.Put(dataKeyKey(tenantID, version), wrapped, 0); err != nil {
			return err
		}
		// rewriting the tenant record makes every write that read it
		// before this commit conflict and retry with the new key
		if err := putSealed(w, tk, "tenant", tenantID, tenantID, tenantKey(tenantID), t); err != nil {
			return err
		}
		return s.writeAudit(w, tk, t, byActor("", "tenant", tenantID, "update", fmt.Sprintf("data key version %d started", version)))
	})
	if err != nil {
		return err
	}
	s.keys.invalidate(tenantID)
	return nil
}

// DataKeyStatus reports a tenant's data key versions and re-seal progress.
func (s *Store) DataKeyStatus(ctx context.Context, tenantID string) (*DataKeyStatus, error) {
	if !isID(tenantID) {
		return nil, ErrNotFound
	}
	st := &DataKeyStatus{TenantID: tenantID}
	err := s.kv.View(ctx, func(r Reader) error {
		st.Versions = st.Versions[:0]
		tk, err := s.tenantKeysFor(r, tenantID)
		if err != nil {
			return err
		}
		st.Current = tk.Current()
		return r.Scan(dataKeyPrefix(tenantID), nil, func(key, wrapped []byte) error {
			v, err := sealedVersion(wrapped)
			if err != nil {
				return err
			}
			st.Versions = append(st.Versions, v)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(st.Versions, func(i, j int) bool { return st.Versions[i] < st.Versions[j] })
	s.reseals.mu.Lock()
	if r := s.reseals.running[tenantID]; r != nil {
		copied := *r
		st.Reseal = &copied
	}
	s.reseals.mu.Unlock()
	return st, nil
}

// startReseal re-seals a tenant's records in the background, unless that
// is running already.
func (s *Store) startReseal(tenantID string) {
	s.reseals.mu.Lock()
	defer s.reseals.mu.Unlock()
	if s.reseals.running == nil {
		s.reseals.running = map[string]*Reseal{}
	}
	if r := s.reseals.running[tenantID]; r != nil && r.Running {
		return
	}
	r := &Reseal{Running: true, StartedAt: s.stampNow()}
	s.reseals.running[tenantID] = r
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ran, err := s.exclusively(s.ctx, "reseal/"+tenantID, func(ctx context.Context) error { return s.reseal(ctx, tenantID, r) })
		if !ran && err == nil {
			err = errors.New("another vault process is re-sealing this tenant")
		}
		s.reseals.mu.Lock()
		r.Running, r.FinishedAt = false, s.stampNow()
		if err != nil {
			r.Error = "the re-seal stopped here; it resumes within minutes, in this process or another one sharing the store"
		}
		s.reseals.mu.Unlock()
		if err != nil && s.ctx.Err() == nil {
			s.logger.Error("re-sealing a tenant's records failed", zap.String("tenant_id", tenantID), zap.Error(err))
		}
	}()
}

// resealBatch bounds the records re-sealed in one transaction.
const resealBatch = 200

// reseal re-seals every record of the tenant under the current data key
// version, then destroys the versions nothing uses any more. A write that
// sealed under an old version meanwhile (with keys it loaded before the
// rotation) is caught by another pass.
func (s *Store) reseal(ctx context.Context, tenantID string, progress *Reseal) error {
	for pass := 0; pass < 3; pass++ {
		if err := s.resealPass(ctx, tenantID, progress); err != nil {
			return err
		}
		left, err := s.destroyUnusedDataKeys(ctx, tenantID)
		if err != nil || left == 0 {
			return err
		}
	}
	return errors.New("records kept appearing under an old data key version")
}

// resealPass re-seals the records found under an old version.
func (s *Store) resealPass(ctx context.Context, tenantID string, progress *Reseal) error {
	for _, p := range sealedPrefixes(tenantID) {
		var after []byte
		for {
			var stale [][]byte
			var last []byte
			err := s.kv.View(ctx, func(r Reader) error {
				stale, last = stale[:0], nil
				tk, err := s.tenantKeysFor(r, tenantID)
				if err != nil {
					return err
				}
				scanned, batch := 0, resealBatch
				if p.kind == "docchunk" {
					batch = documentBatchChunks // a chunk is 64 KiB: a transaction holds a megabyte
				}
				return r.Scan(p.prefix, after, func(key, sealed []byte) error {
					if scanned == 4*resealBatch || len(stale) == batch {
						return ErrStopScan
					}
					scanned++
					last = key
					if v, err := sealedVersion(sealed); err == nil && v != tk.Current() {
						stale = append(stale, key)
					}
					return nil
				})
			})
			if errors.Is(err, ErrNotFound) {
				return nil // the tenant is gone
			} else if err != nil {
				return err
			}
			if last == nil {
				break
			}
			if len(stale) > 0 {
				n, err := s.resealKeys(ctx, tenantID, p.kind, stale)
				if err != nil {
					return err
				}
				s.reseals.mu.Lock()
				progress.Resealed += int64(n)
				s.reseals.mu.Unlock()
			}
			after = last
		}
	}
	return nil
}

// resealKeys re-seals the records under keys whose seal names an old
// version, in one transaction.
func (s *Store) resealKeys(ctx context.Context, tenantID, kind string, keys [][]byte) (int, error) {
	n := 0
	err := s.kv.Update(ctx, func(w Writer) error {
		n = 0
		tk, err := s.tenantKeysFor(w, tenantID)
		if err != nil {
			return err
		}
		for _, key := range keys {
			sealed, err := w.Get(key)
			if errors.Is(err, ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			next, changed, err := tk.reseal(kind, tenantID, lastSegment(key), sealed)
			if err != nil {
				return err
			}
			if !changed {
				continue
			}
			// a record's time to live is not known here: audit records keep
			// the tenant's retention, idempotency records (a day at most)
			// get a fresh day
			ttl := time.Duration(0)
			switch kind {
			case "audit":
				ttl = s.auditTTL(w, tenantID, key)
			case "idempotency":
				ttl = idempotencyTTL
			case tokenIntentKind:
				if ttl = s.intentTTL(tk, tenantID, key, next); ttl <= 0 {
					if err := w.Delete(key); err != nil {
						return err
					}
					continue
				}
			}
			if err := w.Put(key, next, ttl); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// auditTTL is what is left of an audit record's retention.
func (s *Store) auditTTL(r Reader, tenantID string, key []byte) time.Duration {
	at, ok := auditSlotTime(lastSegment(key))
	if !ok {
		return time.Hour
	}
	var t Tenant
	retention := time.Duration(DefaultQuotas.LogRetentionSeconds) * time.Second
	if tk, err := s.tenantKeysFor(r, tenantID); err == nil {
		if s.getSealed(r, tk, "tenant", tenantID, tenantID, tenantKey(tenantID), &t) == nil && t.Quotas.LogRetentionSeconds > 0 {
			retention = time.Duration(t.Quotas.LogRetentionSeconds) * time.Second
		}
	}
	return max(time.Until(at.Add(retention)), time.Second)
}

// destroyUnusedDataKeys deletes the tenant's old data key versions that
// no record is sealed under, and returns how many old versions are still
// in use. It checks every sealed record and deletes in one transaction
// that also rewrites the tenant record, so a write that raced it (with a
// key it loaded before) conflicts and retries.
func (s *Store) destroyUnusedDataKeys(ctx context.Context, tenantID string) (int, error) {
	var destroyed []uint32
	left := 0
	err := s.kv.Update(ctx, func(w Writer) error {
		destroyed, left = destroyed[:0], 0
		tk, t, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		used := map[uint32]bool{tk.Current(): true}
		for _, p := range sealedPrefixes(tenantID) {
			if err := w.Scan(p.prefix, nil, func(_, sealed []byte) error {
				if v, err := sealedVersion(sealed); err == nil {
					used[v] = true
				}
				return nil
			}); err != nil {
				return err
			}
		}
		// the tenant record is rewritten under the current version below
		for v := range tk.Versions() {
			if used[v] && v != tk.Current() {
				left++
			}
			if !used[v] {
				if err := w.Delete(dataKeyKey(tenantID, v)); err != nil {
					return err
				}
				destroyed = append(destroyed, v)
			}
		}
		if len(destroyed) == 0 {
			return nil
		}
		return putSealed(w, tk, "tenant", tenantID, tenantID, tenantKey(tenantID), t)
	})
	if errors.Is(err, ErrNotFound) {
		return 0, nil // the tenant is gone
	} else if err != nil {
		return 0, err
	}
	if len(destroyed) > 0 {
		s.keys.invalidate(tenantID)
		s.logger.Info("old data key versions destroyed", zap.String("tenant_id", tenantID), zap.Int("versions", len(destroyed)))
	}
	return left, nil
}

// resumeReseals restarts the re-seal of every tenant that holds more than
// one data key version (a rotation a stop interrupted).
func (s *Store) resumeReseals(ctx context.Context) error {
	var tenants []string
	err := s.kv.View(ctx, func(r Reader) error {
		tenants = tenants[:0]
		prefix := []byte(keyVersion + "dek/")
		count := map[string]int{}
		if err := r.Scan(prefix, nil, func(key, _ []byte) error {
			tid, _, _ := strings.Cut(string(key[len(prefix):]), "/")
			count[tid]++
			return nil
		}); err != nil {
			return err
		}
		for tid, n := range count {
			if n > 1 {
				tenants = append(tenants, tid)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, tid := range tenants {
		s.startReseal(tid)
	}
	return nil
}

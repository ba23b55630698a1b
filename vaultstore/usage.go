package vaultstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// TypeMetrics counts the live tokens of one type.
type TypeMetrics struct {
	Count         int64      `json:"count"`
	LastCreatedAt *Timestamp `json:"last_created_at,omitempty"`
}

// TokenReport is the token part of a tenant's usage report.
type TokenReport struct {
	MetricsByType               map[string]TypeMetrics `json:"metrics_by_type"`
	IncludedMonthlyActiveTokens int64                  `json:"included_monthly_active_tokens"`
	MonthlyActiveTokens         int64                  `json:"monthly_active_tokens"`
	TotalTokens                 int64                  `json:"total_tokens"`
}

// UsageReport is GET /tenants/self/reports/usage. Total tokens appear
// inside token_report and at the top level; clients read either.
type UsageReport struct {
	TokenReport TokenReport `json:"token_report"`
	TotalTokens int64       `json:"total_tokens"`
}

// foldThreshold is how many count changes of a tenant start a fold of
// them into the totals, in the background: counted as they are written,
// and, after a restart, as a list or usage report sums them. A fold makes
// the creates of the tenant then in flight run again (see foldUsage), so
// it should not come too often; a read sums at most about this many.
const foldThreshold = 8192

// foldQuietAfter is how long a tenant's count changes wait, once no new
// one comes, before they are folded. Without it a burst of writes that
// stopped short of foldThreshold would leave every later list and usage
// report summing its changes: at 8,000 of them about 15 ms a read.
const foldQuietAfter = time.Second

// usageFolds keeps the background folds: the count changes written per
// tenant since its last fold began, the tenants whose fold runs, and the
// tenants waiting for a quiet moment to fold, with their latest change.
type usageFolds struct {
	mu         sync.Mutex
	changes    map[string]int
	running    map[string]bool
	lastChange map[string]time.Time
}

// Usage reports a tenant's token counts by type and its monthly active
// tokens: distinct tokens created, read or used this calendar month (UTC).
func (s *Store) Usage(ctx context.Context, t *Tenant) (*UsageReport, error) {
	rep := &UsageReport{TokenReport: TokenReport{
		MetricsByType:               map[string]TypeMetrics{},
		IncludedMonthlyActiveTokens: t.Quotas.IncludedMonthlyActiveTokens,
	}}
	var deltas int
	err := s.kv.View(ctx, func(r Reader) error {
		deltas = 0
		cells, n, err := sumUsage(r, t.ID)
		if err != nil {
			return err
		}
		deltas = n
		clear(rep.TokenReport.MetricsByType)
		rep.TokenReport.TotalTokens = 0
		for cell, m := range cells {
			byType := rep.TokenReport.MetricsByType[cell.tokenType]
			byType.add(m)
			rep.TokenReport.MetricsByType[cell.tokenType] = byType
			rep.TokenReport.TotalTokens += m.Count
		}
		rep.TokenReport.MonthlyActiveTokens = 0
		return r.Scan(activeTokenPrefix(t.ID, s.now()), nil, func(_, _ []byte) error {
			rep.TokenReport.MonthlyActiveTokens++
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	rep.TotalTokens = rep.TokenReport.TotalTokens
	s.foldUsageIfNeeded(t.ID, deltas)
	return rep, nil
}

// add adds m's count to c and keeps the later creation time.
func (c *TypeMetrics) add(m TypeMetrics) {
	c.Count += m.Count
	if m.LastCreatedAt != nil && (c.LastCreatedAt == nil || m.LastCreatedAt.After(c.LastCreatedAt.Time)) {
		c.LastCreatedAt = m.LastCreatedAt
	}
}

// usageCell is what a token count is kept for: one type in one container.
type usageCell struct{ tokenType, container string }

// usageEpochs reads a tenant's current epoch (the one changes go into) and
// the last epoch folded into the totals.
func usageEpochs(r Reader, tenantID string) (current, folded uint64, err error) {
	if current, err = readUsageEpoch(r, usageCurrentEpochKey(tenantID), 1); err != nil {
		return 0, 0, err
	}
	folded, err = readUsageEpoch(r, usageFoldedEpochKey(tenantID), 0)
	return current, folded, err
}

// readUsageEpoch reads an epoch number, absent when there is none.
func readUsageEpoch(r Reader, key []byte, absent uint64) (uint64, error) {
	v, err := r.Get(key)
	if errors.Is(err, ErrNotFound) {
		return absent, nil
	} else if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("usage epoch: malformed")
	}
	return binary.BigEndian.Uint64(v), nil
}

// putUsageEpoch writes an epoch number.
func putUsageEpoch(w Writer, key []byte, epoch uint64) error {
	return w.Put(key, binary.BigEndian.AppendUint64(nil, epoch), 0)
}

// sumUsage adds up a tenant's token count totals and the changes not yet
// folded, by type and container, and counts the changes. It reads only the
// totals and the epochs not yet folded.
func sumUsage(r Reader, tenantID string) (map[usageCell]TypeMetrics, int, error) {
	current, folded, err := usageEpochs(r, tenantID)
	if err != nil {
		return nil, 0, err
	}
	return sumUsageEpochs(r, tenantID, folded, current)
}

// sumUsageEpochs is sumUsage over the totals and the changes of the
// epochs after folded up to through.
func sumUsageEpochs(r Reader, tenantID string, folded, through uint64) (map[usageCell]TypeMetrics, int, error) {
	out := map[usageCell]TypeMetrics{}
	add := func(rest []byte, raw []byte) error {
		typ, hexContainer, _ := strings.Cut(string(rest), "/")
		hexContainer, _, _ = strings.Cut(hexContainer, "/")
		container, err := hex.DecodeString(hexContainer)
		if err != nil || typ == "" {
			return fmt.Errorf("usage count: malformed key")
		}
		var d usageDelta
		if err := json.Unmarshal(raw, &d); err != nil {
			return fmt.Errorf("usage count: %w", err)
		}
		c := usageCell{typ, string(container)}
		m := out[c]
		m.add(TypeMetrics{Count: d.Count, LastCreatedAt: d.LastCreatedAt})
		out[c] = m
		return nil
	}
	prefix := usageTotalPrefix(tenantID)
	if err := r.Scan(prefix, nil, func(key, raw []byte) error { return add(key[len(prefix):], raw) }); err != nil {
		return nil, 0, err
	}
	deltas := 0
	for e := folded + 1; e <= through; e++ {
		prefix := usageEpochPrefix(tenantID, e)
		if err := r.Scan(prefix, nil, func(key, raw []byte) error {
			deltas++
			return add(key[len(prefix):], raw)
		}); err != nil {
			return nil, 0, err
		}
	}
	return out, deltas, nil
}

// noteUsageChange counts a change written to a tenant's token counts (or
// about to be: a transaction run again counts again, which only folds a
// little early) and starts a fold once foldThreshold have piled up.
func (s *Store) noteUsageChange(tenantID string) {
	s.folds.mu.Lock()
	defer s.folds.mu.Unlock()
	if s.folds.changes == nil {
		s.folds.changes = map[string]int{}
	}
	if s.folds.changes[tenantID]++; s.folds.changes[tenantID] >= foldThreshold {
		s.startFoldLocked(tenantID)
	}
	s.foldWhenQuietLocked(tenantID, true)
}

// foldWhenQuietLocked arranges a fold of the tenant's changes once
// foldQuietAfter has passed without a new change; a change (changed)
// pushes that moment back, a read that found changes does not.
// s.folds.mu is held.
func (s *Store) foldWhenQuietLocked(tenantID string, changed bool) {
	_, armed := s.folds.lastChange[tenantID]
	if armed && !changed {
		return
	}
	if s.folds.lastChange == nil {
		s.folds.lastChange = map[string]time.Time{}
	}
	s.folds.lastChange[tenantID] = time.Now()
	if !armed {
		time.AfterFunc(foldQuietAfter, func() { s.foldIfQuiet(tenantID) })
	}
}

// foldIfQuiet folds the tenant's changes if none came for foldQuietAfter
// and no fold runs; otherwise it looks again when that time is up.
func (s *Store) foldIfQuiet(tenantID string) {
	s.folds.mu.Lock()
	defer s.folds.mu.Unlock()
	if s.ctx.Err() != nil {
		return
	}
	wait := foldQuietAfter - time.Since(s.folds.lastChange[tenantID])
	if s.folds.running[tenantID] {
		wait = foldQuietAfter // what the running fold missed waits for the next look
	}
	if wait > 0 {
		time.AfterFunc(wait, func() { s.foldIfQuiet(tenantID) })
		return
	}
	delete(s.folds.lastChange, tenantID)
	s.startFoldLocked(tenantID)
}

// foldUsageIfNeeded starts a fold of a tenant's count changes when a read
// summed foldThreshold of them, and otherwise, when it summed any, arranges
// one for when writes are quiet (changes written before a restart are not
// counted by noteUsageChange). The read does not wait for it.
func (s *Store) foldUsageIfNeeded(tenantID string, deltas int) {
	if deltas == 0 {
		return
	}
	s.folds.mu.Lock()
	defer s.folds.mu.Unlock()
	if deltas >= foldThreshold {
		s.startFoldLocked(tenantID)
		return
	}
	s.foldWhenQuietLocked(tenantID, false) // changes written before a restart
}

// startFoldLocked starts a background fold of the tenant's count changes
// unless one runs or the store is closing; s.folds.mu is held. A failed
// fold leaves the changes for the next one.
func (s *Store) startFoldLocked(tenantID string) {
	if s.folds.running[tenantID] || s.ctx.Err() != nil {
		return
	}
	if s.folds.running == nil {
		s.folds.running = map[string]bool{}
	}
	s.folds.running[tenantID] = true
	delete(s.folds.changes, tenantID)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_, err := s.exclusively(s.ctx, "fold/"+tenantID, func(ctx context.Context) error { return s.foldUsage(ctx, tenantID) })
		s.folds.mu.Lock()
		delete(s.folds.running, tenantID)
		s.folds.mu.Unlock()
		if err != nil && s.ctx.Err() == nil {
			s.logger.Warn("folding token counts failed", zap.Error(err))
		}
	}()
}

// foldUsage folds a tenant's count changes into one total per type and
// container. The first transaction starts a new epoch: a create reads the
// current epoch to write its change there, so one that read the old epoch
// and commits after this conflicts and runs again in the new one. The
// second adds every closed epoch to the totals and records it as folded;
// creates do not read what it writes, so they never conflict with it.
// Last, the folded changes, which no read visits any more, are deleted in
// batches, so a fold of any size needs no large transaction.
func (s *Store) foldUsage(ctx context.Context, tenantID string) error {
	var closed uint64
	if err := s.kv.Update(ctx, func(w Writer) error {
		// A fold after the tenant's deletion writes nothing; reading the
		// tenant makes a deletion committed meanwhile a conflict.
		if _, err := w.Get(tenantKey(tenantID)); err != nil {
			return err
		}
		current, err := readUsageEpoch(w, usageCurrentEpochKey(tenantID), 1)
		if err != nil {
			return err
		}
		closed = current
		return putUsageEpoch(w, usageCurrentEpochKey(tenantID), current+1)
	}); errors.Is(err, ErrNotFound) {
		return nil // the tenant is gone, and its changes with it
	} else if err != nil {
		return err
	}
	var from uint64 // the first epoch this fold adds
	if err := s.kv.Update(ctx, func(w Writer) error {
		_, folded, err := usageEpochs(w, tenantID)
		from = folded + 1
		if err != nil || folded >= closed {
			return err // another fold got here first
		}
		cells, _, err := sumUsageEpochs(w, tenantID, folded, closed)
		if err != nil {
			return err
		}
		if err := putUsageTotals(w, tenantID, cells); err != nil {
			return err
		}
		return putUsageEpoch(w, usageFoldedEpochKey(tenantID), closed)
	}); err != nil {
		return err
	}
	if from > closed {
		return nil
	}
	return s.deleteFoldedChanges(ctx, tenantID, from, closed)
}

// deleteFoldedChanges deletes the changes of the epochs from first to last,
// which are folded. It starts at the first, never visiting the deletion
// marks of earlier folds; so a fold interrupted while deleting leaves its
// changes behind, where no read counts them.
func (s *Store) deleteFoldedChanges(ctx context.Context, tenantID string, first, last uint64) error {
	prefix, end := usageChangesPrefix(tenantID), usageEpochPrefix(tenantID, last+1)
	start := usageEpochPrefix(tenantID, first)
	for {
		var keys [][]byte
		if err := s.kv.View(ctx, func(r Reader) error {
			keys = keys[:0]
			return r.Scan(prefix, start, func(key, _ []byte) error {
				if len(keys) == resealBatch || bytes.Compare(key, end) >= 0 {
					return ErrStopScan
				}
				keys = append(keys, key)
				return nil
			})
		}); err != nil || len(keys) == 0 {
			return err
		}
		if err := s.deleteKeys(ctx, keys); err != nil {
			return err
		}
		start = keys[len(keys)-1]
	}
}

// deleteKeys deletes keys, resealBatch to a transaction.
func (s *Store) deleteKeys(ctx context.Context, keys [][]byte) error {
	for len(keys) > 0 {
		batch := keys[:min(len(keys), resealBatch)]
		if err := s.kv.Update(ctx, func(w Writer) error {
			for _, k := range batch {
				if err := w.Delete(k); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
		keys = keys[len(batch):]
	}
	return nil
}

// putUsageTotals writes one total per cell.
func putUsageTotals(w Writer, tenantID string, cells map[usageCell]TypeMetrics) error {
	for cell, m := range cells {
		raw, err := json.Marshal(usageDelta{Count: m.Count, LastCreatedAt: m.LastCreatedAt})
		if err != nil {
			return err
		}
		if err := w.Put(usageTotalKey(tenantID, cell.tokenType, cell.container), raw, 0); err != nil {
			return err
		}
	}
	return nil
}

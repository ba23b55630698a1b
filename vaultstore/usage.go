package vaultstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

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

// foldThreshold is how many count changes of a tenant Usage lets pile up
// before folding them into totals.
const foldThreshold = 256

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
		byType, n, err := sumUsage(r, t.ID)
		if err != nil {
			return err
		}
		deltas = n
		for typ, m := range byType {
			rep.TokenReport.MetricsByType[typ] = m
			rep.TokenReport.TotalTokens += m.Count
		}
		return r.Scan(activeTokenPrefix(t.ID, s.now()), nil, func(_, _ []byte) error {
			rep.TokenReport.MonthlyActiveTokens++
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	rep.TotalTokens = rep.TokenReport.TotalTokens
	if deltas >= foldThreshold {
		if err := s.foldUsage(ctx, t.ID); err != nil {
			s.logger.Warn("folding usage counts failed", zap.Error(err))
		}
	}
	return rep, nil
}

// sumUsage adds up a tenant's usage totals and deltas by type, and
// counts the deltas.
func sumUsage(r Reader, tenantID string) (map[string]TypeMetrics, int, error) {
	out := map[string]TypeMetrics{}
	deltas := 0
	prefix := usagePrefix(tenantID)
	err := r.Scan(prefix, nil, func(key, raw []byte) error {
		typ, rest, _ := strings.Cut(string(key[len(prefix):]), "/")
		if rest != "total" {
			deltas++
		}
		var d usageDelta
		if err := json.Unmarshal(raw, &d); err != nil {
			return fmt.Errorf("usage count: %w", err)
		}
		m := out[typ]
		m.Count += d.Count
		if d.LastCreatedAt != nil && (m.LastCreatedAt == nil || d.LastCreatedAt.After(m.LastCreatedAt.Time)) {
			m.LastCreatedAt = d.LastCreatedAt
		}
		out[typ] = m
		return nil
	})
	return out, deltas, err
}

// foldUsage replaces a tenant's count changes by one total per type. It
// reads only the changes it deletes, so creates running meanwhile do not
// conflict with it.
func (s *Store) foldUsage(ctx context.Context, tenantID string) error {
	return s.kv.Update(ctx, func(w Writer) error {
		var keys [][]byte
		prefix := usagePrefix(tenantID)
		if err := w.Scan(prefix, nil, func(key, _ []byte) error {
			keys = append(keys, key)
			return nil
		}); err != nil {
			return err
		}
		byType, _, err := sumUsage(w, tenantID)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := w.Delete(k); err != nil {
				return err
			}
		}
		for typ, m := range byType {
			raw, err := json.Marshal(usageDelta{Count: m.Count, LastCreatedAt: m.LastCreatedAt})
			if err != nil {
				return err
			}
			if err := w.Put(usageTotalKey(tenantID, typ), raw, 0); err != nil {
				return err
			}
		}
		return nil
	})
}

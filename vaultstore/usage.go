package vaultstore

import (
	"context"
	"encoding/json"
	"strings"
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

// Usage reports a tenant's token counts by type and its monthly active
// tokens: distinct tokens created, read or used this calendar month (UTC).
func (s *Store) Usage(ctx context.Context, t *Tenant) (*UsageReport, error) {
	rep := &UsageReport{TokenReport: TokenReport{
		MetricsByType:               map[string]TypeMetrics{},
		IncludedMonthlyActiveTokens: t.Quotas.IncludedMonthlyActiveTokens,
	}}
	err := s.kv.View(ctx, func(r Reader) error {
		prefix := usagePrefix(t.ID)
		err := r.Scan(prefix, nil, func(key, raw []byte) error {
			tokenType, _, _ := strings.Cut(string(key[len(prefix):]), "/")
			var c usageCounter
			if err := json.Unmarshal(raw, &c); err != nil {
				return err
			}
			m := rep.TokenReport.MetricsByType[tokenType]
			m.Count += c.Count
			if c.LastCreatedAt != nil && (m.LastCreatedAt == nil || c.LastCreatedAt.After(m.LastCreatedAt.Time)) {
				m.LastCreatedAt = c.LastCreatedAt
			}
			rep.TokenReport.MetricsByType[tokenType] = m
			rep.TokenReport.TotalTokens += c.Count
			return nil
		})
		if err != nil {
			return err
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
	return rep, nil
}

package vaultstore

import (
	"errors"
	"time"
)

// countedFilter reports whether a list with filter f can take its total
// from the kept token counts: they are kept by type and container, so a
// filter on ids, metadata or fingerprint needs the records.
func (f TokenFilter) countedFilter() bool {
	return len(f.IDs) == 0 && len(f.Metadata) == 0 && f.Fingerprint == ""
}

// liveTokenTotal counts the tokens of the caller's tenant that f's type and
// container select and the caller may read, without visiting them: the
// kept counts by type and container, less the tokens whose expiry has
// passed but which the sweep has not purged yet (they are invisible at
// once, but counted until purged). It also returns how many count changes
// it summed, for the caller to fold them.
func (s *Store) liveTokenTotal(r Reader, tk *tenantKeys, req TokenRequest, f TokenFilter, now time.Time) (total, deltas int, err error) {
	readable := map[string]bool{}
	counted := func(c usageCell) bool {
		if (f.Type != "" && c.tokenType != f.Type) || (f.Container != "" && c.container != f.Container) {
			return false
		}
		ok, seen := readable[c.container]
		if !seen {
			_, ok = req.Application.grant("token:read", c.container)
			readable[c.container] = ok
		}
		return ok
	}
	cells, deltas, err := sumUsage(r, req.Tenant.ID)
	if err != nil {
		return 0, 0, err
	}
	var n int64
	for c, m := range cells {
		if counted(c) {
			n += m.Count
		}
	}
	tid := req.Tenant.ID
	err = r.Scan(expiryPrefix(), nil, func(key, _ []byte) error {
		at, entryTenant, id, ok := parseExpiryKey(key)
		if !ok || entryTenant != tid {
			return nil
		}
		if at.After(now) {
			return ErrStopScan
		}
		var rec tokenRecord
		err := s.getSealed(r, tk, "token", tid, id, tokenKey(tid, id), &rec)
		if errors.Is(err, ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		// the entry of the token's own expiry, as purgeOne checks
		if rec.ExpiresAt != nil && rec.ExpiresAt.Equal(at) && rec.expired(now) && counted(usageCell{rec.Type, rec.container()}) {
			n--
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return int(max(n, 0)), deltas, nil
}

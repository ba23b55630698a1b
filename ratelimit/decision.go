package ratelimit

import (
	"net/http"
	"strconv"
	"time"
)

// Decision is the outcome of Allow for one request.
type Decision struct {
	// Allowed reports whether the request may proceed; if not, answer 429.
	Allowed bool
	// Rule is the name of the rule that rejected the request (of those that
	// did, the one that holds it back longest) or, when allowed, of the rule
	// reported in the headers; "" when no rule applied.
	Rule string
	// Limit is the limit of Rule, for RateLimit-Limit: when allowed, the
	// most restrictive applicable rule, the one with the least remaining.
	Limit int
	// Remaining is what is left of Rule's limit, for RateLimit-Remaining;
	// never negative, 0 when rejected.
	Remaining int
	// Reset is how long until Rule's bucket is full again, for
	// RateLimit-Reset; for a blocked counter, until the block ends.
	Reset time.Duration
	// RetryAfter is, when rejected, how long until a request would pass every
	// rule that rejected this one (for a blocked counter, at least until the
	// block ends).
	RetryAfter time.Duration
}

// Headers sets RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset on h
// and, when the request was rejected, Retry-After. Durations are whole
// seconds rounded up; Retry-After is at least 1. When no rule applied it sets
// nothing.
func (d Decision) Headers(h http.Header) {
	if d.Rule == "" {
		return
	}
	h.Set("RateLimit-Limit", strconv.Itoa(d.Limit))
	h.Set("RateLimit-Remaining", strconv.Itoa(max(d.Remaining, 0)))
	h.Set("RateLimit-Reset", strconv.FormatInt(ceilSeconds(d.Reset), 10))
	if !d.Allowed {
		h.Set("Retry-After", strconv.FormatInt(max(ceilSeconds(d.RetryAfter), 1), 10))
	}
}

// ceilSeconds returns d in whole seconds, rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

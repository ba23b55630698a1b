package ratelimit

import (
	"net/http"
	"testing"
	"time"
)

func TestHeaders(t *testing.T) {
	tests := []struct {
		name string
		d    Decision
		want map[string]string // absent key: header must be absent
	}{
		{"allowed", Decision{Allowed: true, Rule: RuleTestTenant, Limit: 50, Remaining: 49, Reset: 200 * time.Millisecond},
			map[string]string{"RateLimit-Limit": "50", "RateLimit-Remaining": "49", "RateLimit-Reset": "1"}},
		{"allowed, full reset", Decision{Allowed: true, Rule: RuleGlobal, Limit: 2000, Remaining: 0, Reset: 10 * time.Second},
			map[string]string{"RateLimit-Limit": "2000", "RateLimit-Remaining": "0", "RateLimit-Reset": "10"}},
		{"allowed, reset just over a second", Decision{Allowed: true, Rule: RulePublicApp, Limit: 50, Remaining: 48, Reset: time.Second + time.Nanosecond},
			map[string]string{"RateLimit-Limit": "50", "RateLimit-Remaining": "48", "RateLimit-Reset": "2"}},
		{"rejected throttle", Decision{Rule: RuleTestTenant, Limit: 50, Reset: 10 * time.Second, RetryAfter: 200 * time.Millisecond},
			map[string]string{"RateLimit-Limit": "50", "RateLimit-Remaining": "0", "RateLimit-Reset": "10", "Retry-After": "1"}},
		{"rejected block", Decision{Rule: RuleManagementApp, Limit: 200, Reset: 60 * time.Second, RetryAfter: 60 * time.Second},
			map[string]string{"RateLimit-Limit": "200", "RateLimit-Remaining": "0", "RateLimit-Reset": "60", "Retry-After": "60"}},
		{"rejected, 1.5 s", Decision{Rule: RulePublicApp, Limit: 50, Reset: 1500 * time.Millisecond, RetryAfter: 1500 * time.Millisecond},
			map[string]string{"RateLimit-Limit": "50", "RateLimit-Remaining": "0", "RateLimit-Reset": "2", "Retry-After": "2"}},
		{"rejected, no wait still says 1", Decision{Rule: "x", Limit: 1},
			map[string]string{"RateLimit-Limit": "1", "RateLimit-Remaining": "0", "RateLimit-Reset": "0", "Retry-After": "1"}},
		{"negative remaining clamps", Decision{Allowed: true, Rule: "x", Limit: 5, Remaining: -3, Reset: -time.Second},
			map[string]string{"RateLimit-Limit": "5", "RateLimit-Remaining": "0", "RateLimit-Reset": "0"}},
		{"no rule", Decision{Allowed: true}, map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			tt.d.Headers(h)
			for _, k := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After"} {
				want, present := tt.want[k]
				if got := h.Values(k); !present && len(got) != 0 || present && (len(got) != 1 || got[0] != want) {
					t.Errorf("%s = %q, want %q (present %v)", k, got, want, present)
				}
			}
			if len(h) != len(tt.want) {
				t.Errorf("headers %v, want exactly %v", h, tt.want)
			}
		})
	}
}

package caddymodule

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tokenvault/tokenvault/ratelimit"
	"github.com/tokenvault/tokenvault/vaultstore"
)

// RateLimits configures the rate limits of one handler: the interface's
// table by default, with rows changed or switched off, or none at all.
type RateLimits struct {
	// Off switches every limit off for this handler (benchmarks, trusted
	// internal callers).
	Off bool `json:"off,omitempty"`
	// Rules change rows of the default table, by name (test-tenant,
	// api-tokens-search, api-tokens-list, api-tokens-create,
	// api-account-updater, private-application, public-application,
	// management-application, proxy-key, proxy-hostname, global,
	// legacy-api-key, api-documents).
	Rules map[string]RateLimitRule `json:"rules,omitempty"`
}

// RateLimitRule changes one row of the table.
type RateLimitRule struct {
	// Off removes the row.
	Off bool `json:"off,omitempty"`
	// Limit is how many requests the rule allows per Per (at least 1).
	Limit int `json:"limit,omitempty"`
	// Per is the period Limit counts over (positive).
	Per caddy.Duration `json:"per,omitempty"`
	// Block, when set, blocks the counter this long once over the rate.
	Block caddy.Duration `json:"block,omitempty"`
}

// validate checks the rules against the interface's table.
func (c *RateLimits) validate() error {
	_, err := c.rules()
	return err
}

// rules is the effective table; nil when limits are off.
func (c *RateLimits) rules() ([]ratelimit.Rule, error) {
	if c != nil && c.Off {
		return nil, nil
	}
	rules := ratelimit.DefaultRules()
	if c == nil {
		return rules, nil
	}
	for name, change := range c.Rules {
		i := slices.IndexFunc(rules, func(r ratelimit.Rule) bool { return r.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("rate_limits: no rule named %q", name)
		}
		if change.Off {
			rules = slices.Delete(rules, i, i+1)
			continue
		}
		if change.Limit < 1 || change.Per <= 0 || change.Block < 0 {
			return nil, fmt.Errorf("rate_limits: rule %q needs a limit of at least 1 and a positive period", name)
		}
		rules[i].Limit, rules[i].Per, rules[i].Block = change.Limit, time.Duration(change.Per), time.Duration(change.Block)
	}
	return rules, nil
}

// limiters hold limiter state across config reloads, keyed by the table
// they enforce and the Redis they share it through, so a reload does not
// hand every client a fresh budget.
var limiters = caddy.NewUsagePool()

type pooledLimiter struct{ *ratelimit.Limiter }

func (pooledLimiter) Destruct() error { return nil }

// limits is a handler's rate limiting.
type limits struct {
	limiter *ratelimit.Limiter // nil: off
	poolKey string
}

// provision loads (or shares) the limiter for the configuration, on the
// vault app's Redis when it has one.
func (l *limits) provision(cfg *RateLimits, app *App) error {
	rules, err := cfg.rules()
	if err != nil || rules == nil {
		return err
	}
	raw, _ := json.Marshal(cfg)
	poolKey := "ratelimit:" + string(raw) + "|" + app.rateLimitRedisKey
	shared := app.rateLimitRedis
	val, _, err := limiters.LoadOrNew(poolKey, func() (caddy.Destructor, error) {
		return pooledLimiter{ratelimit.New(ratelimit.Options{Rules: rules, Redis: shared})}, nil
	})
	if err != nil {
		return err
	}
	l.poolKey, l.limiter = poolKey, val.(pooledLimiter).Limiter
	return nil
}

// cleanup releases this config's reference to the limiter.
func (l *limits) cleanup() error {
	if l.poolKey == "" {
		return nil
	}
	_, err := limiters.Delete(l.poolKey)
	return err
}

// check decides a request, sets the RateLimit headers, and returns a 429
// error when it is over a limit.
func (l *limits) check(w http.ResponseWriter, req *ratelimit.Request) error {
	if l.limiter == nil {
		return nil
	}
	d := l.limiter.Allow(req)
	d.Headers(w.Header())
	if d.Allowed {
		return nil
	}
	vaultMetrics.rateLimited.WithLabelValues(d.Rule).Inc()
	return errStatus(http.StatusTooManyRequests, "too many requests; retry after the time in Retry-After")
}

// limitRequest describes a request to the limiter: the client address as
// Caddy resolved it (honouring trusted_proxies; an IPv6 client counts by
// its /64, which one host usually holds whole), and the caller once
// authenticated. A tenant whose rate_limit quota is "exempt" is limited
// by address only.
func limitRequest(r *http.Request, path string, p *vaultstore.Principal) *ratelimit.Request {
	req := &ratelimit.Request{IP: clientIP(r), Method: r.Method, Path: path}
	if p != nil && p.Tenant.Quotas.RateLimit != vaultstore.RateLimitExempt {
		req.APIKey, req.TenantType, req.AppType = p.KeyID, p.Tenant.Type, p.Application.Type
	}
	return req
}

// clientIP is the request's client address for rate limiting.
func clientIP(r *http.Request) string {
	s, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	if s == "" {
		s = r.RemoteAddr
		if host, _, err := net.SplitHostPort(s); err == nil {
			s = host
		}
	}
	addr, err := netip.ParseAddr(s)
	if err != nil {
		return s
	}
	addr = addr.Unmap().WithZone("")
	if addr.Is6() {
		return netip.PrefixFrom(addr, 64).Masked().String()
	}
	return addr.String()
}

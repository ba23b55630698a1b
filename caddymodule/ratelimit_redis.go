package caddymodule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/ratelimit"
)

// Defaults of RateLimitRedis.
const (
	defaultRateLimitKeyPrefix = "tokenvault:ratelimit:"
	maxRateLimitRedisTimeout  = 5 * time.Second
)

// RateLimitRedis makes the rate limits cluster-wide: every node configured
// with the same Redis and key prefix charges the same counters, so a client's
// budget is one budget wherever its requests land. While Redis does not
// answer, each node enforces the limits on its own.
type RateLimitRedis struct {
	// URL is the Redis server: redis://[[user]:password@]host[:port][/db],
	// or rediss:// for TLS. A URL with a password must be a placeholder such
	// as {env.TV_REDIS_URL}, or give the password as one
	// (redis://:{env.TV_REDIS_PASSWORD}@redis:6379), so that the password
	// never appears in the adapted configuration.
	URL string `json:"url,omitempty"`

	// KeyPrefix starts every key the vault writes to Redis. The nodes of
	// one cluster share it; clusters (or other users) sharing one Redis
	// need different prefixes. Default: "tokenvault:ratelimit:".
	KeyPrefix string `json:"key_prefix,omitempty"`

	// Timeout bounds each call to Redis; a request whose call takes longer
	// is decided by the node's local limiter. At most 5s. Default: 100ms.
	Timeout caddy.Duration `json:"timeout,omitempty"`
}

// placeholderPattern matches a Caddy placeholder such as {env.NAME}.
var placeholderPattern = regexp.MustCompile(`\{[^{}]+\}`)

// validate checks the configuration without resolving placeholders.
func (c *RateLimitRedis) validate() error {
	if c == nil {
		return nil
	}
	switch {
	case strings.TrimSpace(c.URL) == "":
		return errors.New("rate_limit_redis: url is required")
	case c.Timeout < 0 || time.Duration(c.Timeout) > maxRateLimitRedisTimeout:
		return fmt.Errorf("rate_limit_redis: timeout must be between 0 and %v", maxRateLimitRedisTimeout)
	case isPlaceholder(c.URL):
		return nil
	}
	// A literal URL: its password, if any, must be a placeholder. The
	// placeholders are replaced by a marker for parsing; a password
	// without the marker was written out.
	const marker = "tvplaceholder"
	u, err := url.Parse(placeholderPattern.ReplaceAllString(c.URL, marker))
	if err != nil {
		return errors.New("rate_limit_redis: url is not a valid URL")
	}
	if pw, ok := u.User.Password(); ok && pw != "" && !strings.Contains(pw, marker) {
		return errors.New("rate_limit_redis: a url with a password must be a placeholder such as {env.TV_REDIS_URL}, or give the password as one, never the password itself")
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return errors.New("rate_limit_redis: url must start with redis:// or rediss://")
	}
	return nil
}

// redisLimits hold each Redis connection once per process, keyed by a hash
// of what it was made from, so that a reload keeps the connections and the
// circuit's view of whether Redis is up.
var redisLimits = caddy.NewUsagePool()

// pooledRedis is a Redis connection and the limiters' state in it.
type pooledRedis struct {
	client *redis.Client
	shared *ratelimit.Redis
}

// Destruct closes the connections when the last config using them is gone.
func (p pooledRedis) Destruct() error { return p.client.Close() }

// silenceRedisLog sends go-redis's own log (a line per failed dial) to the
// debug level: the vault logs Redis going away and coming back once each.
var silenceRedisLog = sync.OnceFunc(func() {
	redis.SetLogger(redisDebugLog{caddy.Log().Named("vault.ratelimit.redis")})
})

// redisDebugLog is go-redis's logger on zap at debug level.
type redisDebugLog struct{ l *zap.Logger }

func (r redisDebugLog) Printf(_ context.Context, format string, v ...any) {
	if ce := r.l.Check(zap.DebugLevel, "go-redis"); ce != nil {
		ce.Write(zap.String("detail", fmt.Sprintf(format, v...)))
	}
}

// provisionRateLimitRedis connects (or shares the connection) to the Redis
// of rate_limit_redis, if configured, and registers its metrics.
func (a *App) provisionRateLimitRedis(ctx caddy.Context) error {
	c := a.RateLimitRedis
	if c == nil {
		return nil
	}
	rawURL := strings.TrimSpace(caddy.NewReplacer().ReplaceAll(c.URL, ""))
	if rawURL == "" {
		return errors.New("rate_limit_redis: the url placeholder resolved to nothing")
	}
	prefix := c.KeyPrefix
	if prefix == "" {
		prefix = defaultRateLimitKeyPrefix
	}
	timeout := time.Duration(c.Timeout)
	if timeout == 0 {
		timeout = ratelimit.DefaultRedisTimeout
	}
	opts, err := ratelimit.RedisClientOptions(rawURL, timeout)
	if err != nil {
		return fmt.Errorf("rate_limit_redis: %w", err)
	}
	// The key holds no secret: the URL is hashed.
	sum := sha256.Sum256([]byte(rawURL + "\x00" + prefix + "\x00" + timeout.String()))
	key := "ratelimit-redis:" + hex.EncodeToString(sum[:])
	logger := a.logger.Named("ratelimit").With(zap.String("redis", opts.Addr), zap.String("key_prefix", prefix))
	val, _, err := redisLimits.LoadOrNew(key, func() (caddy.Destructor, error) {
		silenceRedisLog()
		client := redis.NewClient(opts)
		shared, err := ratelimit.NewRedis(ratelimit.RedisOptions{
			Client: client, Prefix: prefix, Timeout: timeout, Logger: logger,
			OnState: func(up bool) { rateLimitRedisMetrics.up.Set(boolGauge(up)) },
			OnLocal: rateLimitRedisMetrics.fallbacks.Inc,
		})
		if err != nil {
			client.Close()
			return nil, err
		}
		rateLimitRedisMetrics.up.Set(1)
		return pooledRedis{client: client, shared: shared}, nil
	})
	if err != nil {
		return fmt.Errorf("rate_limit_redis: %w", err)
	}
	a.rateLimitRedis, a.rateLimitRedisKey = val.(pooledRedis).shared, key
	if err := registerRateLimitRedisMetrics(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	return nil
}

// cleanupRateLimitRedis releases this config's reference to the Redis
// connection; the last one closes it.
func (a *App) cleanupRateLimitRedis() error {
	if a.rateLimitRedisKey == "" {
		return nil
	}
	_, err := redisLimits.Delete(a.rateLimitRedisKey)
	a.rateLimitRedis, a.rateLimitRedisKey = nil, ""
	return err
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

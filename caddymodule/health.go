package caddymodule

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/transforms"
)

// healthTimeout bounds one health check.
const healthTimeout = 5 * time.Second

// healthReport is the answer of a health check: "ok", "degraded" (the
// storage's disk is too full for writes, reads work; or the Redis of
// rate_limit_redis does not answer, so each node limits on its own) or
// "unavailable", and each part's state. It names failing parts, never
// their errors (those go to the log). Disk is there for an engine on a
// local disk, Storage for one on a database several nodes share, Redis
// when rate_limit_redis is configured.
type healthReport struct {
	Status  string            `json:"status"`
	Checks  map[string]string `json:"checks"`
	Disk    *diskReport       `json:"disk,omitempty"`
	Storage *storageReport    `json:"storage,omitempty"`
	Redis   *redisReport      `json:"redis,omitempty"`
}

// storageReport is the store's database in a health report.
type storageReport struct {
	// Engine names the database: "postgres".
	Engine string `json:"engine"`
	// OK reports whether it answered the store's write and read.
	OK bool `json:"ok"`
}

// redisReport is the Redis of rate_limit_redis in a health report.
type redisReport struct {
	// OK reports whether Redis answered a PING.
	OK bool `json:"ok"`
	// SharedLimits reports whether rate limits are decided in Redis, for
	// the whole cluster; false from a failed call until a probe succeeds,
	// while the node decides on its own.
	SharedLimits bool `json:"shared_limits"`
}

// Values of checks.redis.
const (
	redisOK          = "ok"
	redisUnreachable = "unreachable" // status degraded, 200: the node serves with its own limits
)

// redisPingTimeout bounds the health check's PING to Redis.
const redisPingTimeout = time.Second

// diskReport is the storage's file system in a health report.
type diskReport struct {
	// FreeBytes is the space left for the vault on it.
	FreeBytes int64 `json:"free_bytes"`
	// MarginBytes is the free space under which writes are refused with
	// 507; ReadReserveBytes is its last part, which only reads' audit
	// records may use.
	MarginBytes      int64 `json:"margin_bytes"`
	ReadReserveBytes int64 `json:"read_reserve_bytes"`
	// Writable reports whether writes are admitted.
	Writable bool `json:"writable"`
	// RefusedWrites counts writes refused for space since the start.
	RefusedWrites int64 `json:"refused_writes"`
}

// Values of checks.disk.
const (
	diskOK   = "ok"   // writes admitted
	diskLow  = "low"  // writes refused (507), reads go on: status degraded, 200
	diskFull = "full" // reads refused too, their audit records no longer fit: 503
)

// checkHealth checks every part of the vault: the store answers a write
// and a read (only a read while its disk is too full for writes), a
// transform worker runs code, the storage's disk has room, and the Redis
// of rate_limit_redis answers a PING. It returns 200 (status ok or
// degraded) or 503 and the report.
func (a *App) checkHealth(ctx context.Context) (int, healthReport) {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	if a.Store() == nil { // Start has not opened the store yet, or failed to
		return http.StatusServiceUnavailable, healthReport{Status: "unavailable", Checks: map[string]string{"store": "starting"}}
	}
	rep := healthReport{Status: "ok", Checks: map[string]string{}}
	checks := map[string]func(context.Context) error{
		"store":      a.store.CheckHealth,
		"transforms": a.checkWorkers,
	}
	for part, check := range checks {
		if err := check(ctx); err != nil {
			a.logger.Error("health check failed", zap.String("part", part), scrubbedError(err))
			rep.Status, rep.Checks[part] = "unavailable", "failing"
			continue
		}
		rep.Checks[part] = "ok"
	}
	if d, ok := a.store.Disk(); ok {
		rep.Disk = &diskReport{FreeBytes: d.FreeBytes, MarginBytes: d.MarginBytes, ReadReserveBytes: d.ReserveBytes,
			Writable: d.Writable, RefusedWrites: d.RefusedWrites}
		// the space guard logs its own changes of state, once each
		switch {
		case !d.ReadsAudited:
			rep.Checks["disk"], rep.Status = diskFull, "unavailable"
		case !d.Writable:
			rep.Checks["disk"] = diskLow
			if rep.Status == "ok" {
				rep.Status = "degraded"
			}
		default:
			rep.Checks["disk"] = diskOK
		}
	}
	if a.Postgres != nil {
		rep.Storage = &storageReport{Engine: "postgres", OK: rep.Checks["store"] == "ok"}
	}
	if a.rateLimitRedis != nil {
		rep.Redis = &redisReport{SharedLimits: a.rateLimitRedis.Up()}
		if err := a.pingRedis(ctx); err != nil {
			// the limiter logs Redis going away and coming back, once each
			if ce := a.logger.Check(zap.DebugLevel, "health check: redis does not answer"); ce != nil {
				ce.Write(scrubbedError(err))
			}
			rep.Checks["redis"] = redisUnreachable
			if rep.Status == "ok" {
				rep.Status = "degraded"
			}
		} else {
			rep.Redis.OK, rep.Checks["redis"] = true, redisOK
		}
	}
	if rep.Status == "unavailable" {
		return http.StatusServiceUnavailable, rep
	}
	return http.StatusOK, rep
}

// pingRedis sends PING on the Redis connection the rate limiters share.
func (a *App) pingRedis(ctx context.Context) error {
	var client *redis.Client
	redisLimits.Range(func(key, value any) bool {
		if key != a.rateLimitRedisKey {
			return true
		}
		if p, ok := value.(pooledRedis); ok {
			client = p.client
		}
		return false
	})
	if client == nil {
		return errors.New("the redis connection is not open")
	}
	ctx, cancel := context.WithTimeout(ctx, redisPingTimeout)
	defer cancel()
	return client.Ping(ctx).Err()
}

// serveHealth answers a health check request.
func (a *App) serveHealth(w http.ResponseWriter, r *http.Request) error {
	status, rep := a.checkHealth(r.Context())
	return writeJSON(w, status, rep)
}

// healthCode is the trivial reactor the health check runs.
const healthCode = "module.exports = () => ({ raw: { ok: true } })"

// checkWorkers runs trivial code in a worker: workers start and answer.
func (a *App) checkWorkers(ctx context.Context) error {
	_, err := a.workers.Run(ctx, transforms.Job{Kind: transforms.JobReactor, Code: healthCode})
	return err
}

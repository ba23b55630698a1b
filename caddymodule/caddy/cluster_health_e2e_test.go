package main

// Health of a cluster's node: /healthz (vault_api's health_path, what the
// load balancer checks) and GET /vault/health (admin API) name the
// database and the Redis of rate_limit_redis, and say what a node can do
// while either is away.

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// TestClusterHealth: with PostgreSQL and Redis up, both reports say ok and
// name them; with Redis away (rate_limit_redis on a closed port) a node
// stays in the load balancer's rotation and serves, its health says
// degraded (200) with redis unreachable and the database fine, and each
// node enforces the rate limits on its own; with the database away (a
// private PostgreSQL server, stopped) health is 503 naming the storage,
// and ok again once it is back.
func TestClusterHealth(t *testing.T) {
	t.Parallel()
	t.Run("up", func(t *testing.T) {
		needRedis(t)
		c := startCluster(t, clusterOpts{Nodes: 2, NoBalancer: true, RedisURL: "redis://" + machineRedisAddr})
		cleanRedisPrefix(t, c.RedisKeyPrefix)
		for i, n := range c.Nodes {
			for _, h := range []apiResponse{expectT(t, n, http.StatusOK, http.MethodGet, "/healthz", "", nil), n.adminGet("/vault/health")} {
				if h.Status != http.StatusOK || testjson.Str(h.Body, "status") != "ok" || testjson.Str(h.Body, "checks", "store") != "ok" ||
					testjson.Str(h.Body, "storage", "engine") != "postgres" || testjson.Field(h.Body, "storage", "ok") != true ||
					testjson.Field(h.Body, "redis", "ok") != true || testjson.Field(h.Body, "redis", "shared_limits") != true || testjson.Str(h.Body, "checks", "redis") != "ok" {
					t.Errorf("node %d health: %d %s", i, h.Status, h.Raw)
				}
			}
		}
	})

	t.Run("redis away", func(t *testing.T) {
		const budget = 10
		closed := freePorts(t, 1)[0]
		c := startCluster(t, clusterOpts{
			Nodes:      2,
			RedisURL:   fmt.Sprintf("redis://127.0.0.1:%d", closed),
			RateLimits: true,
			APIOptions: fmt.Sprintf("rate_limits {\n\t\t\ttest-tenant %d 1h\n\t\t}", budget),
		})
		for i, n := range c.Nodes {
			for _, h := range []apiResponse{expectT(t, n, http.StatusOK, http.MethodGet, "/healthz", "", nil), n.adminGet("/vault/health")} {
				if h.Status != http.StatusOK || testjson.Str(h.Body, "status") != "degraded" || testjson.Str(h.Body, "checks", "store") != "ok" ||
					testjson.Str(h.Body, "storage", "engine") != "postgres" || testjson.Field(h.Body, "storage", "ok") != true ||
					testjson.Field(h.Body, "redis", "ok") != false || testjson.Str(h.Body, "checks", "redis") != "unreachable" {
					t.Errorf("node %d health with Redis away: %d %s", i, h.Status, h.Raw)
				}
			}
		}
		ct := c.createTenant("Local Limits Co")
		const sent = 3 * budget
		admitted := 0
		for i := range sent {
			switch r := c.LB.do(http.MethodGet, "/tenants/self", ct.Key, nil); r.Status {
			case http.StatusOK:
				admitted++
			case http.StatusTooManyRequests:
			default:
				t.Fatalf("request %d through the load balancer: %d %s", i, r.Status, r.Raw)
			}
		}
		// round robin: each node saw half the requests and admitted its own budget
		if want := budget * len(c.Nodes); admitted != want {
			t.Errorf("%d of %d requests admitted with Redis away, want %d (each node's own budget of %d)", admitted, sent, want, budget)
		}
		for i, n := range c.Nodes {
			if h := n.adminGet("/vault/health"); testjson.Field(h.Body, "redis", "shared_limits") != false {
				t.Errorf("node %d health after limiting on its own: %s", i, h.Raw)
			}
		}
		t.Logf("Redis away: health degraded (200), %d of %d requests admitted by %d nodes' own limits of %d", admitted, sent, len(c.Nodes), budget)
	})

	t.Run("database away", func(t *testing.T) {
		pg := startPrivatePostgres(t)
		c := startCluster(t, clusterOpts{Nodes: 2, NoBalancer: true, DSN: pg.createDatabase("tv_health")})
		pg.stop()
		for i, n := range c.Nodes {
			for _, h := range []apiResponse{n.do(http.MethodGet, "/healthz", "", nil), n.adminGet("/vault/health")} {
				if h.Status != http.StatusServiceUnavailable || testjson.Str(h.Body, "status") != "unavailable" || testjson.Str(h.Body, "checks", "store") != "failing" ||
					testjson.Str(h.Body, "storage", "engine") != "postgres" || testjson.Field(h.Body, "storage", "ok") != false {
					t.Errorf("node %d health with the database away: %d %s", i, h.Status, h.Raw)
				}
			}
		}
		pg.start()
		for i, n := range c.Nodes {
			if err := waitHealthy(n.client, n.baseURL+"/healthz", clusterHealthTimeout); err != nil {
				t.Errorf("node %d once the database is back: %v", i, err)
			}
			if h := n.adminGet("/vault/health"); h.Status != http.StatusOK || testjson.Field(h.Body, "storage", "ok") != true {
				t.Errorf("node %d admin health once the database is back: %d %s", i, h.Status, h.Raw)
			}
		}
	})
}

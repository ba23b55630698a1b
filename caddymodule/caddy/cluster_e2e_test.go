package main

// End-to-end tests of a cluster (issue 21): several vault nodes on one
// PostgreSQL database, Redis for rate limits, a load balancer in front
// (cluster_harness_test.go). They need the machine's PostgreSQL
// (pgtest.AdminURL) and, for the rate limits, Redis at 127.0.0.1:6379:
//
//	go test -count=1 ./caddymodule/caddy/ -run Cluster -v
//
// TestClusterNodeSDKs runs only with TV_SDK=1, as TestNodeSDKs does.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// Bounds of the cluster tests.
const (
	// invalidationDeadline bounds how long a change made through one node
	// may take to show on another (the target is under a second).
	invalidationDeadline = 5 * time.Second
	// machineRedis is the machine's Redis.
	machineRedisAddr = "127.0.0.1:6379"
)

// TestClusterNodeSDKs: the official Node SDK suites, unchanged, through
// the load balancer in front of three nodes; every node served part of
// them and logged no credential.
func TestClusterNodeSDKs(t *testing.T) {
	t.Parallel()
	node, dir := sdkTools(t)
	dest := newEchoDestination(t)
	c := startCluster(t, clusterOpts{
		Nodes:        3,
		HeaderPrefix: "BT",
		// basis-theory-js switches every API host but localhost to https.
		SiteHosts:  []string{"localhost"},
		VaultExtra: egressLoopback,
	})
	runSDKSuites(t, node, dir, dest, c.Nodes[0], fmt.Sprintf("http://localhost:%d", c.LB.apiPort))
	for i, n := range c.Nodes {
		if served := apiRequestsLogged(t, n.accessLog); served == 0 {
			t.Errorf("node %d served none of the suites' requests: the load balancer did not spread them", i)
		} else {
			t.Logf("node %d served %d API requests", i, served)
		}
		checkSDKAccessLog(t, n.accessLog)
	}
}

// apiRequestsLogged counts the access log's entries for other paths than
// /healthz (the load balancer's checks).
func apiRequestsLogged(t *testing.T, path string) int {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the access log: %v", err)
	}
	n := 0
	for _, line := range strings.Split(string(raw), "\n") {
		var entry struct {
			Request struct {
				URI string `json:"uri"`
			} `json:"request"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Request.URI != "" && entry.Request.URI != "/healthz" {
			n++
		}
	}
	return n
}

// cacheScenario is one change made through node A and how the other
// nodes show it.
type cacheScenario struct {
	// probe asks a node for the state the change alters.
	probe func(n *server) (apiResponse, error)
	// before and after recognize the state before and after the change.
	before, after func(apiResponse) bool
	// change makes the change through node A.
	change func(t *testing.T)
	// verify, when set, checks what the change must have left alone.
	verify func(t *testing.T)
}

// TestClusterCaches: a change made through node A (a key revoked, an
// application deleted or its permissions changed, a proxy changed or
// deleted, a tenant deleted) shows on nodes B and C, whose caches were
// warm with the old state, within invalidationDeadline; the delays are
// logged. The answer never goes back to the old state afterwards.
func TestClusterCaches(t *testing.T) {
	t.Parallel()
	dest := newEchoDestination(t)
	c := startCluster(t, clusterOpts{Nodes: 3, NoBalancer: true, VaultExtra: egressLoopback})
	a, others := c.Nodes[0], c.Nodes[1:]
	ct := c.createTenant("Cache Co")
	mgmt := ct.Key
	doomed := c.createTenant("Doomed Cache Co")

	statusIs := func(want int) func(apiResponse) bool {
		return func(r apiResponse) bool { return r.Status == want }
	}
	get := func(path, key string) func(n *server) (apiResponse, error) {
		return func(n *server) (apiResponse, error) { return n.request(http.MethodGet, path, key, nil) }
	}
	// newProxy creates a proxy to dest's path and returns its id and a
	// probe invoking it with a key allowed to.
	newProxy := func(t *testing.T, path string) (string, func(n *server) (apiResponse, error)) {
		_, useKey, _ := createAppT(t, a, mgmt, map[string]any{"name": "caller", "type": "private", "permissions": []string{"token:use"}})
		r := expectT(t, a, http.StatusCreated, http.MethodPost, "/proxies", mgmt, map[string]any{"name": "moving", "destination_url": dest.URL + path})
		id, key := testjson.Str(r.Body, "id"), testjson.Str(r.Body, "key")
		return id, func(n *server) (apiResponse, error) {
			return n.request(http.MethodPost, "/proxy", useKey, map[string]any{"a": 1}, "SVC-PROXY-KEY", key)
		}
	}
	reached := func(path string) func(apiResponse) bool {
		return func(r apiResponse) bool { return r.Status == http.StatusOK && testjson.Str(r.Body, "path") == path }
	}

	cases := []struct {
		name    string
		arrange func(t *testing.T) cacheScenario
	}{
		{"api key revoked", func(t *testing.T) cacheScenario {
			appID, key, keyID := createAppT(t, a, mgmt, map[string]any{"name": "revoked", "type": "private", "permissions": []string{"token:read"}})
			other := testjson.Str(expectT(t, a, http.StatusCreated, http.MethodPost, "/applications/"+appID+"/keys", mgmt, nil).Body, "key")
			return cacheScenario{
				probe: get("/applications/key", key), before: statusIs(http.StatusOK), after: statusIs(http.StatusUnauthorized),
				change: func(t *testing.T) {
					expectT(t, a, http.StatusNoContent, http.MethodDelete, "/applications/"+appID+"/keys/"+keyID, mgmt, nil)
				},
				verify: func(t *testing.T) {
					for i, n := range c.Nodes {
						if r, err := n.request(http.MethodGet, "/applications/key", other, nil); err != nil || r.Status != http.StatusOK {
							t.Errorf("node %d: the application's other key: %v %d %s", i, err, r.Status, r.Raw)
						}
					}
				},
			}
		}},
		{"application deleted", func(t *testing.T) cacheScenario {
			appID, key, _ := createAppT(t, a, mgmt, map[string]any{"name": "gone", "type": "private", "permissions": []string{"token:read"}})
			return cacheScenario{
				probe: get("/applications/key", key), before: statusIs(http.StatusOK), after: statusIs(http.StatusUnauthorized),
				change: func(t *testing.T) {
					expectT(t, a, http.StatusNoContent, http.MethodDelete, "/applications/"+appID, mgmt, nil)
				},
			}
		}},
		{"permissions changed", func(t *testing.T) cacheScenario {
			appID, key, _ := createAppT(t, a, mgmt, map[string]any{"name": "reader", "type": "private", "permissions": []string{"token:create", "token:read"}})
			tokenID := testjson.Str(expectT(t, a, http.StatusCreated, http.MethodPost, "/tokens", key, map[string]any{"type": "token", "data": "cache"}).Body, "id")
			return cacheScenario{
				probe: get("/tokens/"+tokenID, key), before: statusIs(http.StatusOK), after: statusIs(http.StatusForbidden),
				change: func(t *testing.T) {
					expectT(t, a, http.StatusOK, http.MethodPut, "/applications/"+appID, mgmt, map[string]any{"name": "reader", "permissions": []string{"token:create"}})
				},
				verify: func(t *testing.T) {
					for i, n := range c.Nodes {
						if r, err := n.request(http.MethodPost, "/tokens", key, map[string]any{"type": "token", "data": "still"}); err != nil || r.Status != http.StatusCreated {
							t.Errorf("node %d: create with the permission kept: %v %d %s", i, err, r.Status, r.Raw)
						}
					}
				},
			}
		}},
		{"proxy changed", func(t *testing.T) cacheScenario {
			id, probe := newProxy(t, "/before")
			return cacheScenario{
				probe: probe, before: reached("/before"), after: reached("/after"),
				change: func(t *testing.T) {
					expectT(t, a, http.StatusNoContent, http.MethodPatch, "/proxies/"+id, mgmt, map[string]any{"destination_url": dest.URL + "/after"},
						"Content-Type", "application/merge-patch+json")
				},
			}
		}},
		{"proxy deleted", func(t *testing.T) cacheScenario {
			id, probe := newProxy(t, "/deleted")
			return cacheScenario{
				probe: probe, before: reached("/deleted"), after: statusIs(http.StatusUnauthorized),
				change: func(t *testing.T) {
					expectT(t, a, http.StatusNoContent, http.MethodDelete, "/proxies/"+id, mgmt, nil)
				},
			}
		}},
		{"tenant deleted", func(t *testing.T) cacheScenario {
			_, appKey, _ := createAppT(t, a, doomed.Key, map[string]any{"name": "doomed app", "type": "private", "permissions": []string{"token:read"}})
			return cacheScenario{
				probe: get("/tenants/self", doomed.Key), before: statusIs(http.StatusOK), after: statusIs(http.StatusUnauthorized),
				change: func(t *testing.T) {
					expectT(t, a, http.StatusNoContent, http.MethodDelete, "/tenants/self", doomed.Key, nil)
				},
				verify: func(t *testing.T) {
					for i, n := range c.Nodes {
						if r, err := n.request(http.MethodGet, "/applications/key", appKey, nil); err != nil || r.Status != http.StatusUnauthorized {
							t.Errorf("node %d: the deleted tenant's application key: %v %d %s", i, err, r.Status, r.Raw)
						}
						if r, err := n.request(http.MethodGet, "/tenants/self", mgmt, nil); err != nil || r.Status != http.StatusOK {
							t.Errorf("node %d: the other tenant's key: %v %d %s", i, err, r.Status, r.Raw)
						}
					}
				},
			}
		}},
	}

	var summary []string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := tc.arrange(t)
			for i, n := range others {
				for range 2 { // the second answer comes from a warm cache
					if r, err := sc.probe(n); err != nil || !sc.before(r) {
						t.Fatalf("node %d before the change: %v %d %s", i+1, err, r.Status, r.Raw)
					}
				}
			}
			sc.change(t)
			changed := time.Now()
			delays := make([]time.Duration, len(others))
			var wg sync.WaitGroup
			for i, n := range others {
				wg.Add(1)
				go func() {
					defer wg.Done()
					d, err := awaitState(n, changed, sc.probe, sc.after)
					if err != nil {
						t.Errorf("node %d: %v", i+1, err)
						return
					}
					delays[i] = d
				}()
			}
			if r, err := sc.probe(a); err != nil || !sc.after(r) {
				t.Errorf("node 0, which made the change, answers %v %d %s", err, r.Status, r.Raw)
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			for i, n := range others {
				for range 3 {
					if r, err := sc.probe(n); err != nil || !sc.after(r) {
						t.Errorf("node %d went back to the old state: %v %d %s", i+1, err, r.Status, r.Raw)
					}
				}
			}
			if sc.verify != nil {
				sc.verify(t)
			}
			var parts []string
			for i, d := range delays {
				parts = append(parts, fmt.Sprintf("node %d %v", i+1, d.Round(100*time.Microsecond)))
			}
			t.Logf("the change through node 0 showed after: %s", strings.Join(parts, ", "))
			summary = append(summary, tc.name+": "+strings.Join(parts, ", "))
		})
	}
	t.Logf("cache invalidation across nodes (change acknowledged by node 0 until another node's answer showed it):\n\t%s", strings.Join(summary, "\n\t"))
}

// awaitState polls probe on node until accept takes its answer, at most
// invalidationDeadline after since, and returns the time from since to
// that answer.
func awaitState(node *server, since time.Time, probe func(*server) (apiResponse, error), accept func(apiResponse) bool) (time.Duration, error) {
	var last string
	for {
		r, err := probe(node)
		now := time.Now()
		if err == nil && accept(r) {
			return now.Sub(since), nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%d %s", r.Status, r.Raw)
		}
		if now.Sub(since) > invalidationDeadline {
			return 0, fmt.Errorf("still the old state %v after the change; last answer: %s", invalidationDeadline, last)
		}
		time.Sleep(time.Millisecond)
	}
}

// createAppT is server.createApp failing t, for subtests.
func createAppT(t *testing.T, s *server, mgmtKey string, body any) (id, key, keyID string) {
	t.Helper()
	r := expectT(t, s, http.StatusCreated, http.MethodPost, "/applications", mgmtKey, body)
	id, key, keyID = testjson.Str(r.Body, "id"), testjson.Str(r.Body, "key"), testjson.Str(r.Body, "keys", 0, "id")
	if id == "" || key == "" || keyID == "" {
		t.Fatalf("POST /applications: incomplete answer: %s", r.Raw)
	}
	return id, key, keyID
}

// TestClusterExactness: what must happen once happens once across nodes.
// The same idempotency key sent at the same moment to three nodes creates
// one token; token counts (list totals, usage report) are exact on every
// node after concurrent creates and deletes spread over the nodes, before
// and after the counts are folded; and monthly active tokens count each
// token once however many nodes read it. A request the vault refuses as
// busy (503 with Retry-After: nothing written) is sent again, as a client
// would.
func TestClusterExactness(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{Nodes: 3, NoBalancer: true})

	t.Run("idempotency key", func(t *testing.T) {
		ct := c.createTenant("Idempotent Co")
		_, key, _ := createAppT(t, c.Nodes[0], ct.Key, map[string]any{"name": "writer", "type": "private", "permissions": []string{"token:create", "token:read"}})
		const rounds, perNode = 5, 4
		for round := range rounds {
			idem := fmt.Sprintf("cluster-idem-%d-%s", round, randomHex(4))
			body := map[string]any{"type": "token", "data": map[string]any{"round": round}}
			type answer struct {
				node   int
				status int
				id     string
				err    error
			}
			answers := make(chan answer, perNode*len(c.Nodes))
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, n := range c.Nodes {
				for range perNode {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						r, err := n.request(http.MethodPost, "/tokens", key, body, "SVC-IDEMPOTENCY-KEY", idem)
						answers <- answer{i, r.Status, testjson.Str(r.Body, "id"), err}
					}()
				}
			}
			close(start)
			wg.Wait()
			close(answers)
			ids := map[string]int{}
			statuses := map[int]int{}
			for a := range answers {
				if a.err != nil {
					t.Errorf("round %d, node %d: %v", round, a.node, a.err)
					continue
				}
				statuses[a.status]++
				switch a.status {
				case http.StatusCreated:
					ids[a.id]++
				case http.StatusConflict: // the first is still running
				case http.StatusServiceUnavailable: // busy: nothing written, the key released
				default:
					t.Errorf("round %d, node %d: status %d", round, a.node, a.status)
				}
			}
			if len(ids) != 1 {
				t.Fatalf("round %d: %d distinct tokens from one idempotency key (statuses %v): %v", round, len(ids), statuses, ids)
			}
			var id string
			for id = range ids {
			}
			for i, n := range c.Nodes { // the kept answer, on every node
				r := expectT(t, n, http.StatusCreated, http.MethodPost, "/tokens", key, body, "SVC-IDEMPOTENCY-KEY", idem)
				if got := testjson.Str(r.Body, "id"); got != id {
					t.Errorf("round %d: node %d repeats token %s, want %s", round, i, got, id)
				}
			}
			t.Logf("round %d: %d requests on %d nodes, statuses %v, one token", round, perNode*len(c.Nodes), len(c.Nodes), statuses)
		}
		for i, n := range c.Nodes {
			if total := listTotal(t, n, key); total != rounds {
				t.Errorf("node %d: %d tokens listed, want %d (one per idempotency key)", i, total, rounds)
			}
		}
	})

	t.Run("counts", func(t *testing.T) {
		ct := c.createTenant("Counted Co")
		mgmt := ct.Key
		_, key, _ := createAppT(t, c.Nodes[0], mgmt, map[string]any{"name": "writer", "type": "private",
			"permissions": []string{"token:create", "token:read", "token:delete"}})
		const workers, perWorker, deletes = 6, 15, 12
		created := spread(t, c.Nodes, workers, perWorker, func(n *server, w, i int) (string, error) {
			r, err := requestRetryingBusy(n, http.MethodPost, "/tokens", key, map[string]any{"type": "token", "data": map[string]any{"w": w, "i": i}})
			if err != nil {
				return "", err
			}
			if r.Status != http.StatusCreated {
				return "", fmt.Errorf("POST /tokens: %d %s", r.Status, r.Raw)
			}
			return testjson.Str(r.Body, "id"), nil
		})
		if t.Failed() {
			return
		}
		want := workers * perWorker
		checkCounts(t, c.Nodes, key, mgmt, want, want, "after the creates")
		// concurrent deletes spread over the nodes
		doomed := created[:deletes]
		spread(t, c.Nodes, deletes, 1, func(n *server, w, _ int) (string, error) {
			r, err := requestRetryingBusy(n, http.MethodDelete, "/tokens/"+doomed[w], key, nil)
			if err == nil && r.Status != http.StatusNoContent {
				err = fmt.Errorf("DELETE /tokens/{id}: %d %s", r.Status, r.Raw)
			}
			return "", err
		})
		want -= deletes
		// monthly active tokens: every token created this month, deleted
		// or not, once
		mat := workers * perWorker
		checkCounts(t, c.Nodes, key, mgmt, want, mat, "after the deletes")
		// every node reads every token left: still each token once
		left := created[deletes:]
		spread(t, c.Nodes, len(c.Nodes)*2, len(left), func(n *server, _, i int) (string, error) {
			r, err := requestRetryingBusy(n, http.MethodGet, "/tokens/"+left[i], key, nil)
			if err == nil && r.Status != http.StatusOK {
				err = fmt.Errorf("GET /tokens/{id}: %d %s", r.Status, r.Raw)
			}
			return "", err
		})
		checkCounts(t, c.Nodes, key, mgmt, want, mat, "after every node read every token")
		// the counts are folded once no change came for a second, under a
		// lease, by one node: still exact after it
		time.Sleep(3 * time.Second)
		checkCounts(t, c.Nodes, key, mgmt, want, mat, "after the fold")
	})
}

// busyAttempts bounds the attempts of a request the vault refuses as busy.
const busyAttempts = 5

// requestRetryingBusy sends a request as a client would: again, after
// Retry-After (at most a second), while the vault answers 503 with
// Retry-After, which promises that nothing was written (a transaction
// that kept losing serialization conflicts to concurrent ones).
func requestRetryingBusy(n *server, method, path, key string, body any, hdr ...string) (apiResponse, error) {
	for attempt := 1; ; attempt++ {
		r, err := n.request(method, path, key, body, hdr...)
		if err != nil || r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" || attempt == busyAttempts {
			return r, err
		}
		wait, _ := strconv.Atoi(r.Header.Get("Retry-After"))
		time.Sleep(min(time.Duration(wait)*time.Second, time.Second))
	}
}

// spread runs workers goroutines, worker w on node w mod len(nodes), each
// calling op perWorker times, and returns the ids op returned; an error
// fails t.
func spread(t *testing.T, nodes []*server, workers, perWorker int, op func(n *server, w, i int) (string, error)) []string {
	t.Helper()
	var (
		mu  sync.Mutex
		ids []string
		wg  sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := nodes[w%len(nodes)]
			for i := range perWorker {
				id, err := op(n, w, i)
				if err != nil {
					t.Errorf("worker %d on node %d: %v", w, w%len(nodes), err)
					return
				}
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ids
}

// listTotal is the total_items of GET /tokens as key sees it on n.
func listTotal(t *testing.T, n *server, key string) int {
	t.Helper()
	r := expectT(t, n, http.StatusOK, http.MethodGet, "/tokens?size=1", key, nil)
	total, ok := testjson.Field(r.Body, "pagination", "total_items").(float64)
	if !ok {
		t.Fatalf("GET /tokens: no pagination.total_items: %s", r.Raw)
	}
	return int(total)
}

// checkCounts checks, on every node, the token list's total and the
// usage report's totals and monthly active tokens.
func checkCounts(t *testing.T, nodes []*server, key, mgmt string, tokens, active int, when string) {
	t.Helper()
	for i, n := range nodes {
		if total := listTotal(t, n, key); total != tokens {
			t.Errorf("%s: node %d lists %d tokens, want %d", when, i, total, tokens)
		}
		r := expectT(t, n, http.StatusOK, http.MethodGet, "/tenants/self/reports/usage", mgmt, nil)
		got := map[string]any{
			"total_tokens":                             testjson.Field(r.Body, "total_tokens"),
			"token_report.total_tokens":                testjson.Field(r.Body, "token_report", "total_tokens"),
			"token_report.metrics_by_type.token.count": testjson.Field(r.Body, "token_report", "metrics_by_type", "token", "count"),
		}
		for name, v := range got {
			if f, _ := v.(float64); int(f) != tokens {
				t.Errorf("%s: node %d: usage %s = %v, want %d", when, i, name, v, tokens)
			}
		}
		if mat, _ := testjson.Field(r.Body, "token_report", "monthly_active_tokens").(float64); int(mat) != active {
			t.Errorf("%s: node %d: monthly_active_tokens = %v, want %d", when, i, mat, active)
		}
	}
}

// TestClusterRateLimits: with rate_limit_redis, a test tenant's budget is
// one budget for the cluster: through the load balancer (round robin over
// three nodes) exactly the budget is admitted, then 429 with Retry-After,
// and every node refused some requests although none had admitted the
// budget itself.
func TestClusterRateLimits(t *testing.T) {
	t.Parallel()
	needRedis(t)
	// 30 an hour: no request comes back into the budget while the test
	// runs (one every 2 minutes), so the count is exact on a slow machine
	const budget, sent = 30, 90
	c := startCluster(t, clusterOpts{
		Nodes:      3,
		RedisURL:   "redis://" + machineRedisAddr,
		RateLimits: true,
		APIOptions: fmt.Sprintf("rate_limits {\n\t\t\ttest-tenant %d 1h\n\t\t}", budget),
	})
	cleanRedisPrefix(t, c.RedisKeyPrefix)
	ct := c.createTenant("Limited Co")
	admitted, refused := 0, 0
	for i := range sent {
		r := c.LB.do(http.MethodGet, "/tenants/self", ct.Key, nil)
		switch r.Status {
		case http.StatusOK:
			if refused > 0 {
				t.Errorf("request %d admitted after %d refusals", i, refused)
			}
			admitted++
		case http.StatusTooManyRequests:
			refused++
			if r.Header.Get("Retry-After") == "" {
				t.Errorf("request %d: 429 without Retry-After", i)
			}
			if err := isProblem(r); err != nil {
				t.Errorf("request %d: 429: %v", i, err)
			}
		default:
			t.Fatalf("request %d: %d %s", i, r.Status, r.Raw)
		}
	}
	if admitted != budget {
		t.Errorf("%d of %d requests admitted through the load balancer, want exactly the budget %d", admitted, sent, budget)
	}
	var perNode []string
	for i, n := range c.Nodes {
		ok := metricInt(n.metric(`tokenvault_requests_total{code="200",operation="GET /tenants/self",tenant=""}`))
		limited := metricInt(n.metric(`tokenvault_requests_total{code="429",operation="GET /tenants/self",tenant=""}`))
		perNode = append(perNode, fmt.Sprintf("node %d: %d admitted, %d refused", i, ok, limited))
		if limited == 0 || ok >= budget {
			t.Errorf("node %d admitted %d and refused %d: the budget was not shared", i, ok, limited)
		}
	}
	t.Logf("%d requests through the load balancer, budget %d: %d admitted, %d refused (%s)", sent, budget, admitted, refused, strings.Join(perNode, "; "))
}

// metricInt is a metric's value as an integer; 0 when absent.
func metricInt(v string) int {
	var f float64
	fmt.Sscan(v, &f)
	return int(f)
}

// needRedis skips the test when the machine's Redis does not answer.
func needRedis(t *testing.T) {
	t.Helper()
	if !dialable(machineRedisAddr) {
		t.Skipf("Redis does not answer at %s", machineRedisAddr)
	}
}

// cleanRedisPrefix deletes the keys under prefix from the machine's Redis
// when the test ends.
func cleanRedisPrefix(t *testing.T, prefix string) {
	t.Cleanup(func() {
		client := redis.NewClient(&redis.Options{Addr: machineRedisAddr})
		defer client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := client.Scan(ctx, 0, prefix+"*", 100).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			client.Del(ctx, keys...)
		}
	})
}

// TestClusterBackgroundWork: two nodes, started together so that their
// minute's sweeps come due at about the same moment; tokens that expire
// are gone to both at once, and purged from the database within the
// sweep interval (a minute) plus a margin, all by the one node that holds
// the sweep's lease (its expired-token counter has them all, the other's
// none). Meanwhile the lease entries in the database are polled and
// logged (each names one holder; a job that ends releases its lease, so a
// short one may run between two polls). It takes about a minute; -short
// skips it.
func TestClusterBackgroundWork(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the minute's sweep")
	}
	t.Parallel()
	c := startCluster(t, clusterOpts{Nodes: 2, NoBalancer: true})
	started := time.Now()
	db := connectDB(t, c.DSN)
	names := storeNodeIDs(t, c, db)
	leases := watchLeases(t, c.DSN, names)
	ct := c.createTenant("Expiring Co")
	_, key, _ := createAppT(t, c.Nodes[0], ct.Key, map[string]any{"name": "writer", "type": "private", "permissions": []string{"token:create", "token:read"}})

	const expiring = 5
	expiresAt := time.Now().Add(3 * time.Second)
	var ids []string
	for i := range expiring {
		r := c.Nodes[i%2].expect(http.StatusCreated, http.MethodPost, "/tokens", key,
			map[string]any{"type": "token", "data": i, "expires_at": expiresAt.UTC().Format(time.RFC3339Nano)})
		ids = append(ids, testjson.Str(r.Body, "id"))
	}
	kept := testjson.Str(c.Nodes[0].expect(http.StatusCreated, http.MethodPost, "/tokens", key, map[string]any{"type": "token", "data": "kept"}).Body, "id")
	for i, n := range c.Nodes {
		n.expect(http.StatusOK, http.MethodGet, "/tokens/"+ids[i], key, nil)
	}
	time.Sleep(time.Until(expiresAt) + 100*time.Millisecond)
	for i, n := range c.Nodes {
		for _, id := range ids {
			if r := n.do(http.MethodGet, "/tokens/"+id, key, nil); r.Status != http.StatusNotFound {
				t.Errorf("node %d: expired token: %d %s, want 404 at once", i, r.Status, r.Raw)
			}
		}
		n.expect(http.StatusOK, http.MethodGet, "/tokens/"+kept, key, nil)
	}

	// purged: the token records leave the table
	deadline := started.Add(time.Minute + 45*time.Second)
	var purgedAfter time.Duration
	for {
		var left int
		err := db.QueryRow(context.Background(), `SELECT count(*) FROM tokenvault_kv WHERE key = ANY($1::bytea[])`, tokenRecordKeys(ct.Tenant.ID, ids)).Scan(&left)
		if err != nil {
			t.Fatalf("counting token records: %v", err)
		}
		if left == 0 {
			purgedAfter = time.Since(expiresAt)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d expired tokens still stored %v after the nodes started (the sweep runs every minute)", left, expiring, time.Since(started).Round(time.Second))
		}
		time.Sleep(250 * time.Millisecond)
	}
	expired, purgers := 0, 0
	var byNode []string
	for i, n := range c.Nodes {
		v := metricInt(n.metric(`tokenvault_tokens_total{event="expired",type="token"}`))
		expired += v
		if v > 0 {
			purgers++
		}
		byNode = append(byNode, fmt.Sprintf("node %d purged %d", i, v))
	}
	if expired != expiring || purgers != 1 {
		t.Errorf("%s; want all %d expired tokens purged by one node", strings.Join(byNode, ", "), expiring)
	}
	if total := listTotal(t, c.Nodes[1], key); total != 1 {
		t.Errorf("after the purge node 1 lists %d tokens, want 1", total)
	}
	seen := leases.stop()
	t.Logf("expired tokens purged %v after they expired (%s); lease entries seen: %s", purgedAfter.Round(time.Millisecond), strings.Join(byNode, ", "), seen)
}

// tokenRecordKeys are the engine's keys of a tenant's token records
// (vaultstore/keys.go: v1/t/{tenant}/tok/{id}).
func tokenRecordKeys(tenantID string, ids []string) [][]byte {
	var keys [][]byte
	for _, id := range ids {
		keys = append(keys, []byte("v1/t/"+tenantID+"/tok/"+id))
	}
	return keys
}

// connectDB connects to dsn for the test's own queries; closed when the
// test ends.
func connectDB(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting to the cluster's database: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// leaseWatch polls the lease entries of the cluster's table
// (tokenvault/lease/<job>, JSON {holder, until}) and records their
// holders. It cannot judge a change of holder: a lease released and taken
// by another node between two polls looks like one taken over.
type leaseWatch struct {
	t    *testing.T
	done chan struct{}
	wg   sync.WaitGroup
	// what was seen: per lease, the holders in order
	holders map[string][]string
}

// leasePollInterval is how often the lease entries are read.
const leasePollInterval = 20 * time.Millisecond

// storeNodeIDs maps the stores' node ids to the cluster's node names
// ("node 0"): each node's health check writes an entry of its own,
// v1/health/<node id>, holding the time it wrote; the nodes are checked
// one after the other, and the freshest entry after each check is that
// node's. Nothing else may check the nodes meanwhile (no load balancer).
func storeNodeIDs(t *testing.T, c *cluster, db *pgx.Conn) map[string]string {
	t.Helper()
	names := map[string]string{}
	for i, n := range c.Nodes {
		n.expect(http.StatusOK, http.MethodGet, "/healthz", "", nil)
		var key []byte
		err := db.QueryRow(context.Background(), `SELECT key FROM tokenvault_kv WHERE key >= $1 AND key < $2 ORDER BY convert_from(value, 'UTF8')::numeric DESC LIMIT 1`,
			[]byte("v1/health/"), []byte("v1/health0")).Scan(&key)
		if err != nil {
			t.Fatalf("reading the health entries: %v", err)
		}
		names[strings.TrimPrefix(string(key), "v1/health/")] = fmt.Sprintf("node %d", i)
	}
	return names
}

// watchLeases starts watching the lease entries of the database at dsn;
// names maps node ids to the names it reports.
func watchLeases(t *testing.T, dsn string, names map[string]string) *leaseWatch {
	conn := connectDB(t, dsn)
	w := &leaseWatch{t: t, done: make(chan struct{}), holders: map[string][]string{}}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(leasePollInterval)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			rows, err := conn.Query(ctx, `SELECT key, value FROM tokenvault_kv WHERE key >= $1 AND key < $2 AND (expires_at IS NULL OR expires_at > now())`,
				[]byte("tokenvault/lease/"), []byte("tokenvault/lease0"))
			current := map[string]string{}
			if err == nil {
				for rows.Next() {
					var k, v []byte
					if rows.Scan(&k, &v) != nil {
						continue
					}
					var l struct {
						Holder string    `json:"holder"`
						Until  time.Time `json:"until"`
					}
					if json.Unmarshal(v, &l) != nil || l.Holder == "" || l.Until.IsZero() {
						t.Errorf("lease entry %s does not name a holder and a time: %q", k, v)
						continue
					}
					if name, ok := names[l.Holder]; ok {
						l.Holder = name
					}
					current[string(k)] = l.Holder
				}
				rows.Close()
				err = rows.Err()
			}
			cancel()
			if err != nil {
				continue // the test's end may close the database under it
			}
			for name, holder := range current {
				if hs := w.holders[name]; len(hs) == 0 || hs[len(hs)-1] != holder {
					w.holders[name] = append(hs, holder)
				}
			}
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

// stop ends the watch and describes what it saw.
func (w *leaseWatch) stop() string {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	w.wg.Wait()
	if len(w.holders) == 0 {
		return "none (each job ran between two polls)"
	}
	var names []string
	for name := range w.holders {
		names = append(names, name)
	}
	sort.Strings(names)
	var parts []string
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s held by %v", strings.TrimPrefix(name, "tokenvault/lease/"), w.holders[name]))
	}
	return strings.Join(parts, "; ")
}

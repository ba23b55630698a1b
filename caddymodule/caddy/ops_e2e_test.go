package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// TestOperationsEndToEnd: rate limits (kept across a reload), health,
// metrics, quotas through the CLI and the audit log, through the built
// binary.
func TestOperationsEndToEnd(t *testing.T) {
	// index_cache is deprecated: the configuration still loads, with a
	// warning. The test tenant's row is stretched from 50 per 10 s to 50
	// per hour: at the interface's rate a token comes back every 200 ms,
	// less than a reload takes on a busy machine, so "the budget survived"
	// would depend on the machine's speed; at 50 per hour one comes back
	// every 72 s, far longer than the test runs.
	s := startServer(t, serverOpts{RateLimits: true,
		APIOptions: "health_path /healthz\n\t\trate_limits {\n\t\t\ttest-tenant 50 1h\n\t\t}",
		VaultExtra: "cache {\n\t\t\tblock_cache 64MiB\n\t\t\tindex_cache 32MiB\n\t\t}"})
	ct := s.createTenant("ops")
	mgmt := ct.Key

	t.Run("deprecated cache option", func(t *testing.T) {
		if !strings.Contains(s.stderr(), "cache index_cache has no effect and will be removed") {
			t.Errorf("no deprecation warning for index_cache in the server's log:\n%s", tail(s.stderr(), 2000))
		}
	})

	t.Run("health", func(t *testing.T) {
		r := s.adminGet("/vault/health")
		if r.Status != http.StatusOK || testjson.Str(r.Body, "status") != "ok" || testjson.Str(r.Body, "checks", "store") != "ok" {
			t.Errorf("admin health: %d %s", r.Status, r.Raw)
		}
		r = s.do(http.MethodGet, "/healthz", "", nil)
		if r.Status != http.StatusOK || testjson.Str(r.Body, "status") != "ok" {
			t.Errorf("vault_api health_path: %d %s", r.Status, r.Raw)
		}
	})

	t.Run("quotas through the CLI", func(t *testing.T) {
		out, errOut, err := s.runCLI("vault", "tenant", "quotas", ct.Tenant.ID, "--tokenize-limit", "2", "--log-retention", "48h", "--address", s.adminAddr)
		if err != nil {
			t.Fatalf("quotas: %v\n%s\n%s", err, out, errOut)
		}
		var tenant map[string]any
		if err := json.Unmarshal([]byte(out), &tenant); err != nil {
			t.Fatalf("quotas output: %v: %s", err, out)
		}
		q, _ := tenant["quotas"].(map[string]any)
		if q["tokenize_limit"] != 2.0 || q["log_retention_seconds"] != 172800.0 || q["cvc_retention_seconds"] != 3600.0 {
			t.Errorf("quotas after the change: %v", q)
		}
		if _, _, err := s.runCLI("vault", "tenant", "quotas", ct.Tenant.ID, "--tokenize-limit", "0", "--address", s.adminAddr); err == nil {
			t.Error("a tokenize limit of 0 was accepted")
		}
	})

	t.Run("metrics", func(t *testing.T) {
		_, key, _ := s.createApp(mgmt, map[string]any{"name": "m", "type": "private", "permissions": []string{"token:create"}})
		if r := s.do(http.MethodPost, "/tokens", key, map[string]any{"type": "card", "data": map[string]any{
			"number": "4242424242424242", "expiration_month": 12, "expiration_year": 2030}}); r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Raw)
		}
		r := s.adminGet("/metrics")
		body := string(r.Raw)
		for _, want := range []string{
			`tokenvault_requests_total{code="201",operation="POST /tokens",tenant=""} 1`,
			`tokenvault_tokens_total{event="created",type="card"} 1`,
			`tokenvault_store_size_bytes{part="vlog"}`,
			`tokenvault_store_gc_runs_total 0`,
			`tokenvault_store_block_cache_bytes `,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		if strings.Contains(body, ct.Tenant.ID) {
			t.Error("/metrics names the tenant without metrics_per_tenant")
		}
		if strings.Contains(body, "4242424242424242") {
			t.Error("/metrics holds the card number")
		}
	})

	t.Run("audit log", func(t *testing.T) {
		r := s.do(http.MethodGet, "/logs?entity_type=token&size=100", mgmt, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("logs: %d %s", r.Status, r.Raw)
		}
		data, _ := testjson.Field(r.Body, "data").([]any)
		if len(data) != 1 || testjson.Str(data[0], "operation") != "create" || testjson.Str(data[0], "actor_type") != "application" {
			t.Errorf("token records: %s", r.Raw)
		}
		if strings.Contains(string(r.Raw), "4242424242424242") {
			t.Error("an audit record holds the card number")
		}
	})

	// last: it leaves a key throttled
	t.Run("rate limits survive a reload", func(t *testing.T) {
		// the test tenant's row, stretched above to 50 requests per hour
		// per address and key, so no request comes back during the test
		_, key, _ := s.createApp(mgmt, map[string]any{"name": "rl", "type": "private", "permissions": []string{"token:read"}})
		for i := 0; i < 50; i++ {
			r := s.do(http.MethodGet, "/applications/key", key, nil)
			if r.Status != http.StatusOK {
				t.Fatalf("request %d: %d %s", i+1, r.Status, r.Raw)
			}
		}
		r := s.do(http.MethodGet, "/applications/key", key, nil)
		if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" || r.Header.Get("RateLimit-Limit") != "50" {
			t.Fatalf("request 51: %d %v %s", r.Status, r.Header, r.Raw)
		}
		if err := s.reload(""); err != nil {
			t.Fatal(err)
		}
		if r := s.do(http.MethodGet, "/applications/key", key, nil); r.Status != http.StatusTooManyRequests {
			t.Errorf("after a reload the budget was reset: %d", r.Status)
		}
		body := string(s.adminGet("/metrics").Raw)
		for _, want := range []string{
			`tokenvault_requests_total{code="429",operation="GET /applications/key",tenant=""}`,
			`tokenvault_rate_limited_total{scope="test-tenant"}`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}

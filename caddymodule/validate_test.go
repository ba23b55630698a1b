package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// validConfig is a Caddy JSON config with the vault app, a vault_api and a
// vault_proxy handler, each of whose settings the cases of
// TestValidateRefusesBadJSONConfig spoil one at a time.
func validConfig(storage string) map[string]any {
	return map[string]any{
		"admin": map[string]any{"disabled": true},
		"apps": map[string]any{
			"vault": map[string]any{
				"storage":    storage,
				"master_key": "{env.TV_TEST_KEY}",
			},
			"http": map[string]any{"servers": map[string]any{"vault": map[string]any{
				"listen": []string{"127.0.0.1:0"},
				"routes": []any{
					map[string]any{"handle": []any{map[string]any{"handler": "vault_api", "health_path": "/healthz"}}},
					map[string]any{"handle": []any{map[string]any{"handler": "vault_proxy", "proxy_key": "{env.TV_PROXY_KEY}"}}},
				},
			}}},
		},
	}
}

// TestValidateRefusesBadJSONConfig: every check the Caddyfile adapter
// makes is made on JSON too, by Validate, as `caddy validate` and a
// config load run it; the refusal names the field.
func TestValidateRefusesBadJSONConfig(t *testing.T) {
	t.Setenv("TV_TEST_KEY", testKey(1))
	t.Setenv("TV_PROXY_KEY", "key_test")
	t.Setenv("TV_PG", "postgres://127.0.0.1:1/none") // resolved, never connected to
	vault := func(c map[string]any) map[string]any { return c["apps"].(map[string]any)["vault"].(map[string]any) }
	handler := func(i int) func(c map[string]any) map[string]any {
		return func(c map[string]any) map[string]any {
			routes := c["apps"].(map[string]any)["http"].(map[string]any)["servers"].(map[string]any)["vault"].(map[string]any)["routes"].([]any)
			return routes[i].(map[string]any)["handle"].([]any)[0].(map[string]any)
		}
	}
	api, proxy := handler(0), handler(1)
	tests := []struct {
		name    string
		in      func(map[string]any) map[string]any // the object the setting goes in
		key     string
		value   any
		wantErr string
	}{
		{"cache records negative", vault, "cache", map[string]any{"records": -1}, "records"},
		{"block_cache negative", vault, "cache", map[string]any{"block_cache": -1}, "block_cache"},
		{"block_cache past 1 TiB", vault, "cache", map[string]any{"block_cache": int64(2) << 40}, "block_cache"},
		{"index_cache negative", vault, "cache", map[string]any{"index_cache": -1}, "index_cache"},
		{"min_workers above max_workers", vault, "transforms", map[string]any{"min_workers": 5, "max_workers": 2}, "min_workers"},
		{"min_workers above the default max_workers", vault, "transforms", map[string]any{"min_workers": 9}, "min_workers"},
		{"max_workers negative", vault, "transforms", map[string]any{"max_workers": -1}, "max_workers"},
		{"max_workers_per_tenant above max_workers", vault, "transforms", map[string]any{"max_workers": 2, "max_workers_per_tenant": 3}, "max_workers_per_tenant"},
		{"transforms timeout negative", vault, "transforms", map[string]any{"timeout": -1}, "timeout"},
		{"queue_timeout negative", vault, "transforms", map[string]any{"queue_timeout": -1}, "queue_timeout"},
		{"memory_limit negative", vault, "transforms", map[string]any{"memory_limit": -1}, "memory_limit"},
		{"header_prefix", vault, "header_prefix", "B T", "header_prefix"},
		{"master_key literal", vault, "master_key", testKey(1), "master_key must be a placeholder"},
		{"previous_master_keys literal", vault, "previous_master_keys", []string{testKey(2)}, "previous_master_keys"},
		{"postgres without connection_string", vault, "postgres", map[string]any{}, "connection_string"},
		{"postgres max_conns negative", vault, "postgres", map[string]any{"connection_string": "{env.TV_PG}", "max_conns": -1}, "max_conns"},
		{"rate_limit_redis without url", vault, "rate_limit_redis", map[string]any{"timeout": 1}, "url"},
		{"health_path relative", api, "health_path", "healthz", "health_path"},
		{"vault_api rule unknown", api, "rate_limits", map[string]any{"rules": map[string]any{"no-such-rule": map[string]any{"off": true}}}, "no-such-rule"},
		{"vault_api rule without limit", api, "rate_limits", map[string]any{"rules": map[string]any{"global": map[string]any{"per": 1e9}}}, "global"},
		{"vault_proxy key literal", proxy, "proxy_key", "key_test", "proxy_key"},
		{"vault_proxy rule unknown", proxy, "rate_limits", map[string]any{"rules": map[string]any{"no-such-rule": map[string]any{"off": true}}}, "no-such-rule"},
	}
	validate := func(t *testing.T, c map[string]any) error {
		t.Helper()
		raw, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var cfg caddy.Config
		if err := json.Unmarshal(raw, &cfg); err != nil {
			t.Fatal(err)
		}
		return caddy.Validate(&cfg)
	}
	// the control: the config unspoiled passes, so each refusal below is
	// its one setting's
	if err := validate(t, validConfig(t.TempDir())); err != nil {
		t.Fatalf("the valid config: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig(t.TempDir())
			tt.in(c)[tt.key] = tt.value
			err := validate(t, c)
			if err == nil {
				t.Fatalf("%s: %v accepted", tt.key, tt.value)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not name %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), testKey(1)) || strings.Contains(err.Error(), testKey(2)) {
				t.Error("the error quotes a key")
			}
		})
	}
}

package caddymodule

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// The JSON form is checked too: a configuration written by hand must not
// carry a password in the clear either.
func TestPostgresConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		config  PostgresConfig
		wantErr string
	}{
		{"placeholder", PostgresConfig{ConnectionString: "{env.TV_PG}"}, ""},
		{"file placeholder and settings", PostgresConfig{ConnectionString: "{file./run/secrets/pg}", MaxConns: 4, StatementTimeout: caddy.Duration(time.Second)}, ""},
		{"missing", PostgresConfig{}, "connection_string is required"},
		{"literal", PostgresConfig{ConnectionString: "postgres://vault:hunter2@db/vault"}, "must be a placeholder"},
		{"negative pool", PostgresConfig{ConnectionString: "{env.TV_PG}", MaxConns: -1}, "max_conns"},
		{"negative timeout", PostgresConfig{ConnectionString: "{env.TV_PG}", StatementTimeout: -1}, "statement_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.config.validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("validate: %v, want an error containing %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

// The resolved options carry the connection string, while the pool key
// that names the store in memory is a digest of it.
func TestPostgresConfigOptions(t *testing.T) {
	t.Setenv("TV_TEST_PG", "postgres://vault:hunter2@127.0.0.1:5432/vault")
	c := PostgresConfig{ConnectionString: "{env.TV_TEST_PG}", Table: "vault_eu", MaxConns: 8, StatementTimeout: caddy.Duration(3 * time.Second)}
	o, key, err := c.options()
	if err != nil {
		t.Fatal(err)
	}
	if o.DSN != "postgres://vault:hunter2@127.0.0.1:5432/vault" || o.Table != "vault_eu" || o.MaxConns != 8 || o.StatementTimeout != 3*time.Second {
		t.Errorf("options %+v", o)
	}
	if !strings.HasPrefix(key, "postgres:") || strings.Contains(key, "hunter2") {
		t.Errorf("pool key %q", key)
	}
	c.ConnectionString = "{env.TV_TEST_PG_UNSET}"
	if _, _, err := c.options(); err == nil || !strings.Contains(err.Error(), "resolved to nothing") {
		t.Errorf("an empty placeholder: %v", err)
	}
}

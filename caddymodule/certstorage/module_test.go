package certstorage

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

// secretDSN is a literal connection string whose password must never
// come back in an error.
const secretDSN = "postgres://vault:s3cr3t-pw@db.internal:5432/vault"

// TestModuleValidate: the connection string must be one {env.*} or
// {file.*} placeholder; the table a plain identifier.
func TestModuleValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    Module
		ok   bool
	}{
		{"env placeholder", Module{ConnectionString: "{env.TV_PG}"}, true},
		{"file placeholder", Module{ConnectionString: "{file./run/secrets/tv_pg}"}, true},
		{"with a table", Module{ConnectionString: "{env.TV_PG}", Table: "certs"}, true},
		{"missing", Module{}, false},
		{"URL literal", Module{ConnectionString: secretDSN}, false},
		{"key=value literal", Module{ConnectionString: "host=db password=s3cr3t-pw"}, false},
		{"placeholder inside a literal", Module{ConnectionString: "postgres://vault:{env.PW}@db/vault"}, false},
		{"two placeholders", Module{ConnectionString: "{env.A}{env.B}"}, false},
		{"another placeholder kind", Module{ConnectionString: "{system.hostname}"}, false},
		{"empty env name", Module{ConnectionString: "{env.}"}, false},
		{"bad table", Module{ConnectionString: "{env.TV_PG}", Table: "Certs; drop"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.m.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok %v", err, tc.ok)
			}
			if err != nil && strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

// TestModuleProvisionRefusesLiteral: Provision refuses a literal too,
// before using it, without showing it.
func TestModuleProvisionRefusesLiteral(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	m := &Module{ConnectionString: secretDSN}
	err := m.Provision(ctx)
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("Provision() = %v, want a refusal without the password", err)
	}
	if err := m.Cleanup(); err != nil {
		t.Errorf("Cleanup after a failed Provision: %v", err)
	}
	if _, err := m.CertMagicStorage(); err == nil {
		t.Error("an unprovisioned module gave a storage")
	}
}

// TestModuleProvision: placeholders resolve from the environment and from
// files; two configurations on the same database and table (a reload)
// share one Storage, which keeps working until the last lets go.
func TestModuleProvision(t *testing.T) {
	dsn := newDatabase(t)
	t.Setenv("TV_CERT_TEST_PG", dsn)
	file := filepath.Join(t.TempDir(), "pg")
	if err := os.WriteFile(file, []byte(dsn+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()

	provision := func(m *Module) *Storage {
		t.Helper()
		if err := m.Provision(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
		cs, err := m.CertMagicStorage()
		if err != nil {
			t.Fatal(err)
		}
		return cs.(*Storage)
	}
	old := &Module{ConnectionString: "{env.TV_CERT_TEST_PG}"}
	s1 := provision(old)
	if err := s1.Store(ctx, "certificates/x", []byte("x")); err != nil {
		t.Fatal(err)
	}
	next := &Module{ConnectionString: "{env.TV_CERT_TEST_PG}", Table: DefaultTable}
	if s2 := provision(next); s2 != s1 {
		t.Error("a reload with the same database and table got a Storage of its own")
	}
	if err := old.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if got, err := s1.Load(ctx, "certificates/x"); err != nil || string(got) != "x" {
		t.Fatalf("after the old configuration's cleanup: %q, %v", got, err)
	}

	fromFile := &Module{ConnectionString: "{file." + file + "}", Table: "file_certs"}
	s3 := provision(fromFile)
	if s3 == s1 {
		t.Error("another table shares a Storage")
	}
	if s3.Exists(ctx, "certificates/x") {
		t.Error("another table sees the default table's keys")
	}
	if err := fromFile.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if err := next.Cleanup(); err != nil {
		t.Fatal(err)
	}

	unset := &Module{ConnectionString: "{env.TV_CERT_TEST_UNSET}"}
	if err := unset.Provision(ctx); err == nil || !strings.Contains(err.Error(), "TV_CERT_TEST_UNSET") {
		t.Errorf("an unset variable: %v", err)
	}
	t.Setenv("TV_CERT_TEST_BAD", "postgres://vault:s3cr3t-pw@db.internal:notaport/vault")
	bad := &Module{ConnectionString: "{env.TV_CERT_TEST_BAD}"}
	if err := bad.Provision(ctx); err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("an unparsable connection string: %v, want a refusal without the password", err)
	}
}

// TestCaddyfile: the global storage option adapts to JSON that holds the
// placeholder, never a literal; a literal fails to adapt.
func TestCaddyfile(t *testing.T) {
	adapt := func(src string) ([]byte, error) {
		t.Helper()
		out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(src), nil)
		return out, err
	}
	out, err := adapt(`{
	storage vault_postgres {
		connection_string {env.TV_PG}
		table whitelabel_certs
	}
}
:8080 {
	respond "ok"
}
`)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Storage map[string]string `json:"storage"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"module": "vault_postgres", "connection_string": "{env.TV_PG}", "table": "whitelabel_certs"}
	for k, v := range want {
		if cfg.Storage[k] != v {
			t.Errorf("adapted storage %q = %q, want %q (%s)", k, cfg.Storage[k], v, out)
		}
	}

	for _, tc := range []struct{ name, body, wantErr string }{
		{"literal", "connection_string " + secretDSN, "placeholder"},
		{"quoted key=value literal", `connection_string "host=db password=s3cr3t-pw"`, "placeholder"},
		{"missing", "table certs", "connection_string is required"},
		{"bad table", "connection_string {env.TV_PG}\n\t\ttable Bad-Name", "table"},
		{"unknown option", "connection_string {env.TV_PG}\n\t\tpassword x", "unrecognized"},
		{"twice", "connection_string {env.A}\n\t\tconnection_string {env.B}", "already set"},
		{"extra argument", "connection_string {env.A} {env.B}", "wrong argument count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := adapt("{\n\tstorage vault_postgres {\n\t\t" + tc.body + "\n\t}\n}\n")
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("adapt = %s, %v; want an error about %q", out, err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(string(out), "s3cr3t") {
				t.Errorf("the password shows: %v %s", err, out)
			}
		})
	}

	// The module parses on its own, as UnmarshalModule calls it.
	var m Module
	d := caddyfile.NewTestDispenser("vault_postgres {\n connection_string {file./run/secrets/pg}\n}")
	if err := m.UnmarshalCaddyfile(d); err != nil || m.ConnectionString != "{file./run/secrets/pg}" || m.Table != "" {
		t.Errorf("UnmarshalCaddyfile = %v, %+v", err, m)
	}
}

package caddymodule

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/tokenvault/tokenvault/vaultstore"
)

func testKey(b byte) string {
	return base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(rune('A'+b)), 32)))
}

// provisionApp provisions and starts a, as Caddy runs a config, and
// cleans it up when the test ends.
func provisionApp(t *testing.T, a *App) error {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(func() { cancel(); a.Cleanup() })
	if err := a.Provision(ctx); err != nil {
		return err
	}
	if err := a.Validate(); err != nil {
		return err
	}
	return a.Start()
}

func TestAppRefusesBadKeyConfig(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TV_TEST_KEY", testKey(1))
	t.Setenv("TV_SHORT_KEY", base64.StdEncoding.EncodeToString(make([]byte, 16)))
	tests := []struct {
		name    string
		app     App
		wantErr string
	}{
		{"no key", App{Storage: dir}, "master_key or master_key_file is required"},
		{"both", App{Storage: dir, MasterKey: "{env.TV_TEST_KEY}", MasterKeyFile: filepath.Join(t.TempDir(), "k")}, "mutually exclusive"},
		{"literal key", App{Storage: dir, MasterKey: testKey(1)}, "must be a placeholder"},
		{"empty placeholder", App{Storage: dir, MasterKey: "{env.TV_UNSET_KEY}"}, "resolved to nothing"},
		{"short key", App{Storage: dir, MasterKey: "{env.TV_SHORT_KEY}"}, "must decode to 32 bytes"},
		{"key file inside storage", App{Storage: dir, MasterKeyFile: filepath.Join(dir, "master.key")}, "must not be inside the storage directory"},
		{"bad header prefix", App{Storage: dir, MasterKey: "{env.TV_TEST_KEY}", HeaderPrefix: "B T"}, "header_prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.app
			err := provisionApp(t, &a)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("want error containing %q, got %v", tt.wantErr, err)
			}
			if strings.Contains(err.Error(), testKey(1)) {
				t.Fatal("error quotes the key")
			}
		})
	}
}

func TestAppCreatesKeyFileOnce(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "secrets", "master.key")
	storage := t.TempDir()
	a := App{Storage: storage, MasterKeyFile: keyFile}
	if err := provisionApp(t, &a); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", info.Mode().Perm())
	}
	first, _ := os.ReadFile(keyFile)
	a.Cleanup()

	b := App{Storage: storage, MasterKeyFile: keyFile}
	if err := provisionApp(t, &b); err != nil {
		t.Fatalf("second start with the same key file: %v", err)
	}
	second, _ := os.ReadFile(keyFile)
	if string(first) != string(second) {
		t.Fatal("the key file was rewritten")
	}
}

// TestAppSharesStoreAcrossReload provisions the next config's app before
// cleaning up the old one, as a Caddy reload does.
func TestAppSharesStoreAcrossReload(t *testing.T) {
	t.Setenv("TV_TEST_KEY", testKey(1))
	t.Setenv("TV_OTHER_KEY", testKey(2))
	storage := t.TempDir()
	old := App{Storage: storage, MasterKey: "{env.TV_TEST_KEY}"}
	if err := provisionApp(t, &old); err != nil {
		t.Fatal(err)
	}
	created, err := old.Store().CreateTenant(context.Background(), vaultstoreTenant("reload"))
	if err != nil {
		t.Fatal(err)
	}

	next := App{Storage: storage, MasterKey: "{env.TV_TEST_KEY}"}
	if err := provisionApp(t, &next); err != nil {
		t.Fatalf("provisioning the next config on the same storage: %v", err)
	}
	if next.Store() != old.Store() {
		t.Fatal("the next config opened a second store")
	}
	old.Cleanup()
	if _, err := next.Store().GetTenant(context.Background(), created.Tenant.ID); err != nil {
		t.Fatalf("store unusable after the old config's cleanup: %v", err)
	}

	changed := App{Storage: storage, MasterKey: "{env.TV_OTHER_KEY}"}
	if err := provisionApp(t, &changed); err == nil || !strings.Contains(err.Error(), "restart") {
		t.Fatalf("a reload with another master key must be refused, got %v", err)
	}
	if _, err := next.Store().GetTenant(context.Background(), created.Tenant.ID); err != nil {
		t.Fatalf("a refused reload closed the store: %v", err)
	}
}

func vaultstoreTenant(name string) vaultstore.NewTenant {
	return vaultstore.NewTenant{Name: name, Type: vaultstore.TenantTest}
}

func TestAppRefusesNewKeyFileForExistingStore(t *testing.T) {
	storage := t.TempDir()
	keyFile := filepath.Join(t.TempDir(), "master.key")
	a := App{Storage: storage, MasterKeyFile: keyFile}
	if err := provisionApp(t, &a); err != nil {
		t.Fatal(err)
	}
	a.Cleanup()
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	b := App{Storage: storage, MasterKeyFile: keyFile}
	err := provisionApp(t, &b)
	if err == nil || !strings.Contains(err.Error(), "already holds a store") {
		t.Fatalf("want a refusal naming the existing store, got %v", err)
	}
	if _, err := os.Stat(keyFile); !os.IsNotExist(err) {
		t.Fatal("a new key file was written for an existing store")
	}
}

package caddymodule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// provisionOnly provisions and validates a without starting it, as
// `caddy validate` does, and cleans it up when the test ends.
func provisionOnly(t *testing.T, a *App) error {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(func() { cancel(); a.Cleanup() })
	if err := a.Provision(ctx); err != nil {
		return err
	}
	return a.Validate()
}

// treeDigest is every file under dir with a digest of its content; nil
// when dir does not exist.
func treeDigest(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(raw)
		out[path] = hex.EncodeToString(sum[:])
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAppProvisionLeavesNoTrace: Provision (all `caddy validate` runs)
// creates neither the storage directory nor the master key file and opens
// nothing; Start does, and the store is there only from then on.
func TestAppProvisionLeavesNoTrace(t *testing.T) {
	t.Setenv("TV_TEST_KEY", testKey(1))
	tests := []struct {
		name    string
		keyFile bool
	}{
		{"master_key_file", true},
		{"master_key placeholder", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			storage, keyFile := filepath.Join(root, "data"), filepath.Join(root, "secrets", "master.key")
			a := App{Storage: storage, MasterKey: "{env.TV_TEST_KEY}"}
			if tt.keyFile {
				a = App{Storage: storage, MasterKeyFile: keyFile}
			}
			if err := provisionOnly(t, &a); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{storage, filepath.Dir(keyFile)} {
				if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("Provision created %s (%v)", p, err)
				}
			}
			if a.Store() != nil {
				t.Error("the store is open after Provision")
			}
			if status, rep := a.checkHealth(context.Background()); status != http.StatusServiceUnavailable || rep.Checks["store"] != "starting" {
				t.Errorf("health before Start: %d %+v", status, rep)
			}
			if err := a.Start(); err != nil {
				t.Fatal(err)
			}
			if a.Store() == nil {
				t.Fatal("no store after Start")
			}
			if _, err := os.Stat(filepath.Join(storage, "tokenvault.json")); err != nil {
				t.Errorf("Start did not create the store: %v", err)
			}
			if _, err := os.Stat(keyFile); tt.keyFile && err != nil {
				t.Errorf("Start did not create the key file: %v", err)
			}
		})
	}
}

// TestAppProvisionChecksTheKeyBesideARunningStore: with the store open
// elsewhere (as by a running server while `caddy validate` runs),
// Provision accepts the right key and refuses a wrong one, reading the
// key's check value only: no file of the store changes. Start then finds
// the directory locked, and requests waiting for it get 503.
func TestAppProvisionChecksTheKeyBesideARunningStore(t *testing.T) {
	t.Setenv("TV_TEST_KEY", testKey(1))
	t.Setenv("TV_OTHER_KEY", testKey(2))
	storage := t.TempDir()
	key := []byte(strings.Repeat(string(rune('A'+1)), 32))
	held, err := vaultstore.Open(vaultstore.Options{Dir: storage, MasterKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	before := treeDigest(t, storage)

	tests := []struct {
		name, key, wantErr string
	}{
		{"right key", "{env.TV_TEST_KEY}", ""},
		{"wrong key", "{env.TV_OTHER_KEY}", "master key does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := App{Storage: storage, MasterKey: tt.key}
			err := provisionOnly(t, &a)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Provision: %v, want %q", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if err := a.Start(); err == nil || !strings.Contains(err.Error(), "locked") {
				t.Fatalf("Start on a directory another store holds: %v, want a lock error", err)
			}
			if _, err := a.waitStore(context.Background()); !errors.Is(err, errVaultNotRunning) {
				t.Errorf("a request after the failed Start: %v, want errVaultNotRunning", err)
			}
		})
	}
	if after := treeDigest(t, storage); !mapsEqualString(before, after) {
		t.Errorf("the checks changed the store's files:\nbefore %v\nafter  %v", before, after)
	}
}

func mapsEqualString(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestAppRequestsWaitForStart: a request that reaches the API, or the
// admin API, between Provision and Start (Caddy starts apps in no fixed
// order) waits for the store rather than failing, and one whose config
// never starts gets 503.
func TestAppRequestsWaitForStart(t *testing.T) {
	t.Setenv("TV_TEST_KEY", testKey(1))
	tests := []struct {
		name       string
		start      bool
		wantStatus int
	}{
		{"started", true, http.StatusUnauthorized}, // the API answered: no key
		{"cleaned up unstarted", false, http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &App{Storage: t.TempDir(), MasterKey: "{env.TV_TEST_KEY}"}
			ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
			t.Cleanup(func() { cancel(); a.Cleanup() })
			if err := a.Provision(ctx); err != nil {
				t.Fatal(err)
			}
			h := &API{}
			h.wire(a, zap.NewNop())
			answered := make(chan int, 1)
			admin := make(chan error, 1)
			go func() {
				w := httptest.NewRecorder()
				_ = h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/tenants/self", nil), nil)
				answered <- w.Code
			}()
			go func() {
				app, err := (AdminAPI{vault: a}).vaultApp(context.Background())
				if err == nil && app != a {
					err = errors.New("the admin API returned another app")
				}
				admin <- err
			}()
			if tt.start {
				if err := a.Start(); err != nil {
					t.Fatal(err)
				}
			} else {
				cancel() // the config is dropped, as after a failed start
			}
			if got := <-answered; got != tt.wantStatus {
				t.Errorf("API: status %d, want %d", got, tt.wantStatus)
			}
			if err := <-admin; (err == nil) != tt.start {
				t.Errorf("admin API: %v", err)
			}
		})
	}
}

// TestAdminAPIUsesItsConfigsVault: the admin API takes the vault app of
// the config it is provisioned with, as Caddy's own admin APIs do; a
// config without one answers 503 naming that.
func TestAdminAPIUsesItsConfigsVault(t *testing.T) {
	t.Setenv("TV_TEST_KEY", testKey(1))
	tests := []struct {
		name      string
		apps      map[string]any
		wantVault bool
	}{
		{"with a vault app", map[string]any{"vault": map[string]any{"storage": t.TempDir(), "master_key": "{env.TV_TEST_KEY}"}}, true},
		{"without one", map[string]any{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := json.Marshal(map[string]any{"apps": tt.apps})
			if err != nil {
				t.Fatal(err)
			}
			var cfg caddy.Config
			if err := json.Unmarshal(raw, &cfg); err != nil {
				t.Fatal(err)
			}
			// provisioned, never started: the vault app holds nothing
			// that needs a cleanup
			ctx, err := caddy.ProvisionContext(&cfg)
			if err != nil {
				t.Fatal(err)
			}
			admin := new(AdminAPI)
			if err := admin.Provision(ctx); err != nil {
				t.Fatal(err)
			}
			if !tt.wantVault {
				if admin.vault != nil {
					t.Fatal("the admin API found a vault app the config does not have")
				}
				w := httptest.NewRecorder()
				if err := adminProblems(admin.handleHealth)(w, httptest.NewRequest(http.MethodGet, "/vault/health", nil)); err != nil {
					t.Fatal(err)
				}
				if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "not configured") {
					t.Errorf("health without a vault app: %d %s", w.Code, w.Body)
				}
				return
			}
			want, err := ctx.App("vault")
			if err != nil {
				t.Fatal(err)
			}
			if admin.vault != want.(*App) {
				t.Fatal("the admin API holds another vault app than its config's")
			}
		})
	}
}

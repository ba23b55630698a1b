package caddymodule

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"
)

// TestCaddyfileAdapt runs the fixtures in testdata/caddyfile_adapt, in
// Caddy's own format: a Caddyfile, a line of dashes, then the expected
// JSON or a fragment of the expected error.
func TestCaddyfileAdapt(t *testing.T) {
	files, err := filepath.Glob("../testdata/caddyfile_adapt/*.caddyfiletest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures found: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			caddyfile, expected, ok := strings.Cut(string(raw), "----------")
			if !ok {
				t.Fatal("fixture has no ---------- separator")
			}
			caddyfile, expected = strings.TrimSpace(caddyfile)+"\n", strings.TrimSpace(expected)
			if strings.HasPrefix(expected, "{") {
				if !caddytest.CompareAdapt(t, file, caddyfile, "caddyfile", expected) {
					t.Error("adapted JSON differs")
				}
				return
			}
			_, _, err = caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
			if err == nil || !strings.Contains(err.Error(), expected) {
				t.Fatalf("want an error containing %q, got %v", expected, err)
			}
		})
	}
}

// TestExampleCaddyfile keeps the quick start's configuration valid and
// its access log free of the vault's credentials.
func TestExampleCaddyfile(t *testing.T) {
	raw, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	adapted, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt(raw, map[string]any{"filename": "Caddyfile.example"})
	if err != nil {
		t.Fatalf("Caddyfile.example does not adapt: %v", err)
	}
	if len(warnings) > 0 {
		t.Errorf("Caddyfile.example adapts with warnings: %v", warnings)
	}
	var cfg struct {
		Apps struct {
			Vault *App `json:"vault"`
		} `json:"apps"`
		Logging struct {
			Logs map[string]struct {
				Encoder struct {
					Fields map[string]struct {
						Filter string `json:"filter"`
					} `json:"fields"`
				} `json:"encoder"`
			} `json:"logs"`
		} `json:"logging"`
	}
	if err := json.Unmarshal(adapted, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Apps.Vault == nil || cfg.Apps.Vault.MasterKeyFile == "" {
		t.Fatalf("the example has no vault app with a master key file: %s", adapted)
	}
	deleted := map[string]bool{}
	for _, l := range cfg.Logging.Logs {
		for field, f := range l.Encoder.Fields {
			if f.Filter == "delete" {
				deleted[field] = true
			}
		}
	}
	for _, h := range []string{"request>headers>Svc-Api-Key", "request>headers>Svc-Proxy-Key"} {
		if !deleted[h] {
			t.Errorf("the example's access log keeps %s", h)
		}
	}
}

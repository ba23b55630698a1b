package caddymodule

import (
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

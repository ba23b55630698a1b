package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/version"
)

// TestVersionIsSemver: the version is x.y.z, so that "v" + Version is a
// Go module version a release can be tagged with.
func TestVersionIsSemver(t *testing.T) {
	if !regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$`).MatchString(version.Version) {
		t.Errorf("version %q is not MAJOR.MINOR.PATCH", version.Version)
	}
	if modulePath != "github.com/tokenvault/tokenvault" {
		t.Errorf("modulePath = %q", modulePath)
	}
}

// TestBuildVersions: what `caddy vault version` reads from the build
// information of each kind of build.
func TestBuildVersions(t *testing.T) {
	tests := []struct {
		name       string
		bi         *debug.BuildInfo
		wantModule string
	}{
		{"no build information", nil, ""},
		{"built from a checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: modulePath, Version: "(devel)"}}, "(devel)"},
		{"xcaddy, a release", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "caddy"},
			Deps: []*debug.Module{{Path: "github.com/caddyserver/caddy/v2", Version: "v2.11.9"}, {Path: modulePath, Version: "v0.9.0", Sum: "h1:x"}}}, "v0.9.0"},
		{"xcaddy, a local replacement", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "caddy"},
			Deps: []*debug.Module{{Path: modulePath, Version: "v0.9.0", Replace: &debug.Module{Path: "/src/tokenvault", Version: "(devel)"}}}}, "v0.9.0 => /src/tokenvault (devel)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := buildVersions(tt.bi, "v2.11.9 h1:c")
			if v.Tokenvault != version.Version || v.Module != tt.wantModule || v.Caddy != "v2.11.9 h1:c" {
				t.Errorf("got %+v, want module %q", v, tt.wantModule)
			}
			var out bytes.Buffer
			if err := v.write(&out); err != nil {
				t.Fatal(err)
			}
			if first, _, _ := strings.Cut(out.String(), "\n"); first != "Tokenvault "+version.Version {
				t.Errorf("first line %q", first)
			}
		})
	}
}

// TestVersionCommand runs `caddy vault version` in-process.
func TestVersionCommand(t *testing.T) {
	c := versionCommand()
	var out bytes.Buffer
	c.SetOut(&out)
	c.SetArgs(nil)
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "Tokenvault "+version.Version+"\n") || !strings.Contains(out.String(), "\nCaddy ") {
		t.Errorf("output:\n%s", out.String())
	}
}

// TestAdminHealthShowsVersion: GET /vault/health on the admin API names
// Tokenvault's version; the public health_path does not.
func TestAdminHealthShowsVersion(t *testing.T) {
	t.Setenv("TV_TEST_KEY", testKey(1))
	a := &App{Storage: t.TempDir(), MasterKey: "{env.TV_TEST_KEY}"}
	if err := provisionApp(t, a); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	if err := (AdminAPI{vault: a}).handleHealth(w, httptest.NewRequest(http.MethodGet, "/vault/health", nil)); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Version string            `json:"version"`
		Status  string            `json:"status"`
		Checks  map[string]string `json:"checks"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, w.Body)
	}
	if w.Code != http.StatusOK || rep.Version != version.Version || rep.Status != "ok" || rep.Checks["store"] != "ok" {
		t.Errorf("admin health: %d %s", w.Code, w.Body)
	}

	h := &API{HealthPath: "/healthz"}
	h.wire(a, a.logger)
	pw := httptest.NewRecorder()
	if err := h.ServeHTTP(pw, httptest.NewRequest(http.MethodGet, "/healthz", nil).WithContext(context.Background()), nil); err != nil {
		t.Fatal(err)
	}
	if pw.Code != http.StatusOK || strings.Contains(pw.Body.String(), "version") {
		t.Errorf("public health: %d %s", pw.Code, pw.Body)
	}
}

// TestReleaseFilesNameVersion: CHANGELOG.md's latest release and
// SECURITY.md's supported line are the version compiled in.
func TestReleaseFilesNameVersion(t *testing.T) {
	changelog, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	releases := regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$`).FindAllStringSubmatch(string(changelog), -1)
	if len(releases) == 0 || releases[0][1] != version.Version {
		t.Errorf("CHANGELOG.md's latest release is %v, want %s", releases, version.Version)
	}
	if !strings.Contains(string(changelog), "["+version.Version+"]: ") {
		t.Errorf("CHANGELOG.md has no link for [%s]", version.Version)
	}
	security, err := os.ReadFile("../SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	major, minor, _ := strings.Cut(version.Version, ".")
	minor, _, _ = strings.Cut(minor, ".")
	if line := "| " + major + "." + minor + ".x"; !strings.Contains(string(security), line) {
		t.Errorf("SECURITY.md does not list %s.%s.x as supported", major, minor)
	}
}

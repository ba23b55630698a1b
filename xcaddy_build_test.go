package tokenvault_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/tokenvault/tokenvault"
)

// buildTimeout bounds the build of TestXcaddyBuild: a cold build of Caddy
// and the vault takes minutes on a busy two-core machine; with the build
// cache of the other tests, well under one.
const buildTimeout = 15 * time.Minute

// xcaddyMain is xcaddy's template of the generated main package
// (mainModuleTemplate in xcaddy's environment.go).
const xcaddyMain = `package main

import (
	caddycmd "{{.CaddyModule}}/cmd"

	// plug in Caddy modules here
	_ "{{.CaddyModule}}/modules/standard"
	{{- range .Plugins}}
	_ "{{.}}"
	{{- end}}
)

func main() {
	caddycmd.Main()
}
`

// manifest is the part of xcaddy.json this test builds from.
type manifest struct {
	CaddyVersion string `json:"caddy_version"`
	Plugins      []struct {
		ModulePath string `json:"module_path"`
		Version    string `json:"version"`
	} `json:"plugins"`
	Replacements []struct {
		Old string `json:"old"`
		New string `json:"new"`
	} `json:"replacements"`
	Project struct {
		ExpectModules  []string `json:"expect_modules"`
		ExpectCommands []string `json:"expect_commands"`
	} `json:"x_tokenvault"`
}

// TestXcaddyBuild builds Caddy as the README's `xcaddy build v2.11.9
// --with github.com/tokenvault/tokenvault@v<Version>=.` does, from
// xcaddy.json: a new module "caddy" whose main is xcaddy's template
// importing the plugin's module path, requiring Caddy and the plugin at
// their versions, the plugin replaced by this checkout. The binary must
// list every vault module and command, and show Tokenvault's version in
// `caddy build-info`, `caddy list-modules --versions` and `caddy vault
// version`.
func TestXcaddyBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the xcaddy-style build of Caddy with the plugin (a minute or more)")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH")
	}
	repo, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("xcaddy.json")
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("xcaddy.json: %v", err)
	}
	goVersion := goDirective(t)

	dir := t.TempDir()
	var mainGo bytes.Buffer
	tpl := template.Must(template.New("main").Parse(xcaddyMain))
	data := struct {
		CaddyModule string
		Plugins     []string
	}{CaddyModule: "github.com/caddyserver/caddy/v2"}
	var gomod strings.Builder
	fmt.Fprintf(&gomod, "module caddy\n\ngo %s\n\nrequire github.com/caddyserver/caddy/v2 %s\n", goVersion, m.CaddyVersion)
	for _, p := range m.Plugins {
		data.Plugins = append(data.Plugins, p.ModulePath)
		fmt.Fprintf(&gomod, "require %s %s\n", p.ModulePath, p.Version)
	}
	for _, r := range m.Replacements {
		// xcaddy resolves a relative replacement against its working
		// directory, the checkout; "path@version" is go.mod's "path version"
		fmt.Fprintf(&gomod, "replace %s => %s\n", strings.Replace(r.Old, "@", " ", 1), filepath.Join(repo, r.New))
	}
	if err := tpl.Execute(&mainGo, data); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile("go.sum") // the same build list: the checkout's sums
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"main.go": mainGo.Bytes(), "go.mod": []byte(gomod.String()), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	bin := filepath.Join(dir, "caddy")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	build := exec.CommandContext(ctx, goTool, "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"))
	start := time.Now()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of the generated module failed: %v\ngo.mod:\n%s\n%s", err, gomod.String(), out)
	}
	t.Logf("built in %v", time.Since(start).Round(time.Second))

	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "HOME="+dir)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("caddy %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	listed := strings.Fields(run("list-modules"))
	for _, id := range m.Project.ExpectModules {
		if !contains(listed, id) {
			t.Errorf("caddy list-modules does not list %s", id)
		}
	}
	help := run("help")
	for _, c := range m.Project.ExpectCommands {
		if !regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(c) + `\s`).MatchString(help) {
			t.Errorf("caddy help does not list the %s command:\n%s", c, help)
		}
	}

	release := "v" + tokenvault.Version
	versions := run("list-modules", "--versions", "--skip-standard")
	if !regexp.MustCompile(`(?m)^vault ` + regexp.QuoteMeta(release) + `(\s|$)`).MatchString(versions) {
		t.Errorf("caddy list-modules --versions does not show vault at %s:\n%s", release, versions)
	}
	if info := run("build-info"); !regexp.MustCompile(`(?m)^dep\s+github\.com/tokenvault/tokenvault\s+` + regexp.QuoteMeta(release) + `\s*$`).MatchString(info) {
		t.Errorf("caddy build-info does not show github.com/tokenvault/tokenvault %s:\n%s", release, info)
	}
	vv := run("vault", "version")
	if !strings.HasPrefix(vv, "Tokenvault "+tokenvault.Version+"\n") || !strings.Contains(vv, "module github.com/tokenvault/tokenvault "+release+" => "+repo) {
		t.Errorf("caddy vault version:\n%s", vv)
	}
}

// goDirective is the go line of the checkout's go.mod.
func goDirective(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	match := regexp.MustCompile(`(?m)^go (\S+)`).FindSubmatch(raw)
	if match == nil {
		t.Fatal("go.mod has no go directive")
	}
	return string(match[1])
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

package caddymodule

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/tokenvault/tokenvault/internal/version"
)

// xcaddyManifest is the part of xcaddy.json the build relies on.
type xcaddyManifest struct {
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
		MainPackage    string   `json:"main_package"`
		ExpectModules  []string `json:"expect_modules"`
		ExpectCommands []string `json:"expect_commands"`
		Equivalent     string   `json:"xcaddy_equivalent"`
	} `json:"x_tokenvault"`
}

// TestXcaddyManifest keeps xcaddy.json true to go.mod, to the custom
// main package and to the modules this package registers.
func TestXcaddyManifest(t *testing.T) {
	raw, err := os.ReadFile("../xcaddy.json")
	if err != nil {
		t.Fatal(err)
	}
	var m xcaddyManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("xcaddy.json: %v", err)
	}

	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var caddyVersion string
	if match := regexp.MustCompile(`(?m)^\s*github\.com/caddyserver/caddy/v2 (v\S+)`).FindSubmatch(gomod); match != nil {
		caddyVersion = string(match[1])
	}
	if m.CaddyVersion != caddyVersion {
		t.Errorf("caddy_version %q, go.mod has %q", m.CaddyVersion, caddyVersion)
	}

	mainFile := filepath.Join("..", m.Project.MainPackage, "main.go")
	f, err := parser.ParseFile(token.NewFileSet(), mainFile, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatalf("parsing %s: %v", mainFile, err)
	}
	var imports []string
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		imports = append(imports, p)
	}
	// xcaddy's generated main imports each plugin's module path: its root
	// package (tokenvault.go) registers every vault module.
	want := []string{"github.com/caddyserver/caddy/v2/modules/standard"}
	for _, p := range m.Plugins {
		want = append(want, p.ModulePath)
	}
	// The plugin is pinned at the release the code says it is, so that
	// `caddy build-info` and `caddy list-modules --versions` of an xcaddy
	// build show it; the checkout replaces that version.
	if len(m.Plugins) != 1 || m.Plugins[0].ModulePath != modulePath || m.Plugins[0].Version != "v"+version.Version {
		t.Errorf("plugins = %+v, want %s at v%s", m.Plugins, modulePath, version.Version)
	}
	if len(m.Replacements) != 1 || m.Replacements[0].Old != modulePath+"@v"+version.Version || m.Replacements[0].New != "." {
		t.Errorf("replacements = %+v, want %s@v%s => .", m.Replacements, modulePath, version.Version)
	}
	if want := "xcaddy build " + m.CaddyVersion + " --with " + modulePath + "@v" + version.Version + "=. "; !strings.HasPrefix(m.Project.Equivalent, want) {
		t.Errorf("xcaddy_equivalent %q, want it to start with %q", m.Project.Equivalent, want)
	}
	for _, w := range want {
		if !slices.Contains(imports, w) {
			t.Errorf("%s does not import %s", mainFile, w)
		}
	}

	if len(m.Project.ExpectModules) == 0 {
		t.Error("expect_modules is empty")
	}
	for _, id := range m.Project.ExpectModules {
		if _, err := caddy.GetModule(id); err != nil {
			t.Errorf("module %s is not registered: %v", id, err)
		}
	}
	ours := reflect.TypeOf(App{}).PkgPath()
	for _, id := range caddy.Modules() {
		info, _ := caddy.GetModule(id)
		typ := reflect.TypeOf(info.New())
		if typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if pkg := typ.PkgPath(); (pkg == ours || strings.HasPrefix(pkg, ours+"/")) && !slices.Contains(m.Project.ExpectModules, id) {
			t.Errorf("module %s is registered but missing from expect_modules", id)
		}
	}
	for _, name := range m.Project.ExpectCommands {
		if _, ok := caddycmd.Commands()[name]; !ok {
			t.Errorf("command %s is not registered", name)
		}
	}
}

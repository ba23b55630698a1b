package caddymodule

import (
	"go/ast"
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

	"github.com/tokenvault/tokenvault/caddymodule/certstorage"
	"github.com/tokenvault/tokenvault/caddymodule/console"
)

// configurationDoc is the configuration reference that
// TestConfigurationDocs keeps whole.
const configurationDoc = "../docs/configuration.md"

// TestConfigurationDocs: docs/configuration.md names, in code (a code
// span or a fenced block), every option the Caddyfile adapter reads (the
// first word of each line of the syntax in the doc comments of
// UnmarshalCaddyfile and the unmarshal* helpers, and every string those
// functions compare an option with), every JSON field of the vault's
// modules, and every vault module's ID. So an option added to the code
// and not to the reference fails here.
func TestConfigurationDocs(t *testing.T) {
	raw, err := os.ReadFile(configurationDoc)
	if err != nil {
		t.Fatal(err)
	}
	documented := codeWords(string(raw))

	options := map[string]string{} // name -> where the code reads it
	for _, dir := range []string{".", "certstorage", "console"} {
		caddyfileOptions(t, dir, options)
	}
	if len(options) < 30 {
		t.Fatalf("found only %d Caddyfile options in the code: the scan no longer sees them (%v)", len(options), options)
	}
	for _, name := range sortedKeys(options) {
		if !documented[name] {
			t.Errorf("Caddyfile option %q (%s) is not named in %s", name, options[name], configurationDoc)
		}
	}

	fields := map[string]string{}
	for _, m := range []any{App{}, API{}, ProxyHandler{}, TLSPermission{}, certstorage.Module{}, console.Console{}} {
		jsonFields(reflect.TypeOf(m), reflect.TypeOf(m).Name(), fields)
	}
	for _, name := range sortedKeys(fields) {
		if !documented[name] {
			t.Errorf("JSON field %q (%s) is not named in %s", name, fields[name], configurationDoc)
		}
	}

	var ids []string
	for _, id := range caddy.Modules() {
		info, err := caddy.GetModule(id)
		if err != nil {
			t.Fatal(err)
		}
		typ := reflect.TypeOf(info.New())
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if strings.HasPrefix(typ.PkgPath(), "github.com/tokenvault/tokenvault/") {
			ids = append(ids, id)
		}
	}
	if len(ids) < 6 {
		t.Fatalf("found only the vault modules %v", ids)
	}
	for _, id := range ids {
		if !strings.Contains(string(raw), "`"+id+"`") {
			t.Errorf("module %s is not named (in backticks) in %s", id, configurationDoc)
		}
	}
}

var (
	fenceRE    = regexp.MustCompile("(?ms)^```[^\n]*\n(.*?)^```")
	codeSpanRE = regexp.MustCompile("`([^`]+)`")
	wordRE     = regexp.MustCompile(`[A-Za-z0-9_]+`)
	optionRE   = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	syntaxRE   = regexp.MustCompile(`^\s+([a-z][a-z0-9_]*)`)
)

// codeWords are the words of a Markdown text's fenced blocks and code
// spans.
func codeWords(md string) map[string]bool {
	words := map[string]bool{}
	add := func(code string) {
		for _, w := range wordRE.FindAllString(code, -1) {
			words[w] = true
		}
	}
	for _, m := range fenceRE.FindAllStringSubmatch(md, -1) {
		add(m[1])
	}
	for _, m := range codeSpanRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(md, ""), -1) {
		add(m[1])
	}
	return words
}

// caddyfileOptions adds the options that the Caddyfile functions of the
// package in dir read: functions named UnmarshalCaddyfile or unmarshal*.
func caddyfileOptions(t *testing.T, dir string, options map[string]string) {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || (fn.Name.Name != "UnmarshalCaddyfile" && !strings.HasPrefix(fn.Name.Name, "unmarshal")) {
				continue
			}
			where := filepath.Join(dir, filepath.Base(file)) + " " + fn.Name.Name
			if fn.Doc != nil {
				for _, line := range strings.Split(fn.Doc.Text(), "\n") {
					if m := syntaxRE.FindStringSubmatch(line); m != nil {
						options[m[1]] = where + " doc"
					}
				}
			}
			literal := func(e ast.Expr) {
				if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil && optionRE.MatchString(s) {
						options[s] = where
					}
				}
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CaseClause:
					for _, e := range n.List {
						literal(e)
					}
				case *ast.BinaryExpr:
					if n.Op == token.EQL || n.Op == token.NEQ {
						literal(n.X)
						literal(n.Y)
					}
				}
				return true
			})
		}
	}
}

// jsonFields adds the JSON names of typ's fields, and of the structs of
// this module they hold, to fields.
func jsonFields(typ reflect.Type, path string, fields map[string]string) {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct || !strings.HasPrefix(typ.PkgPath(), "github.com/tokenvault/tokenvault/") {
		return
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			if f.Anonymous {
				jsonFields(f.Type, path, fields)
			}
			continue
		}
		fields[name] = path + "." + f.Name
		jsonFields(f.Type, path+"."+f.Name, fields)
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

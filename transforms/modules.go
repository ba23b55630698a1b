package transforms

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/dop251/goja"
)

// ErrorsModule is the name under which code requires the reactor error
// types (AuthenticationError, CustomHttpResponseError, ...).
const ErrorsModule = "@basis-theory/basis-theory-reactor-formulas-sdk-js"

// builtinModules maps the modules every run may require to their
// implementation. Node's core names may also be written with "node:".
var builtinModules = map[string]string{
	"crypto":      "crypto",
	"buffer":      "buffer",
	"url":         "url",
	"querystring": "querystring",
	ErrorsModule:  "errors",
}

// Limits on operator modules.
const (
	maxModuleFile  = 4 << 20  // bytes of one file
	maxModuleBytes = 16 << 20 // bytes loaded by one run
)

// builtinName returns the implementation of a built-in module name, or "".
func builtinName(name string) string {
	if rest, ok := strings.CutPrefix(name, "node:"); ok {
		if rest == ErrorsModule {
			return ""
		}
		name = rest
	}
	return builtinModules[name]
}

func isBuiltinModule(name string) bool { return builtinName(name) != "" }

var packageNameRE = regexp.MustCompile(`^(@[a-zA-Z0-9][a-zA-Z0-9._~-]*/)?[a-zA-Z0-9][a-zA-Z0-9._~-]*$`)

// validPackageName reports whether name is an npm package name
// ("name" or "@scope/name") that cannot escape a directory.
func validPackageName(name string) bool {
	return len(name) <= 214 && packageNameRE.MatchString(name) && !strings.Contains(name, "..")
}

// splitPackage splits a bare require name into its package and the path
// inside the package: "@s/p/lib/x" -> "@s/p", "lib/x".
func splitPackage(spec string) (pkg, sub string) {
	parts := strings.SplitN(spec, "/", 3)
	if strings.HasPrefix(spec, "@") {
		if len(parts) < 2 {
			return spec, ""
		}
		pkg = parts[0] + "/" + parts[1]
		if len(parts) == 3 {
			sub = parts[2]
		}
		return pkg, sub
	}
	pkg, sub, _ = strings.Cut(spec, "/")
	return pkg, sub
}

// moduleAllowed reports whether tenant code may require name: a built-in
// module, or a package of allow (or a file inside one).
func moduleAllowed(name string, allow []string) bool {
	if isBuiltinModule(name) {
		return true
	}
	if isRelative(name) || strings.HasPrefix(name, "/") {
		return false
	}
	pkg, sub := splitPackage(name)
	if !validPackageName(pkg) || !slices.Contains(allow, pkg) {
		return false
	}
	return sub == "" || cleanSubpath(sub) != ""
}

func isRelative(spec string) bool {
	return spec == "." || spec == ".." || strings.HasPrefix(spec, "./") || strings.HasPrefix(spec, "../")
}

// cleanSubpath returns sub cleaned, or "" when it leaves its package.
func cleanSubpath(sub string) string {
	c := path.Clean("/" + sub)
	if c == "/" || strings.Contains(sub, "\\") || strings.ContainsRune(sub, 0) {
		return ""
	}
	return c[1:]
}

// moduleKey identifies a compiled operator module file by content version.
type moduleKey struct {
	path  string
	size  int64
	mtime time.Time
}

// moduleScope is where a require function resolves from: tenant code
// (pkg == ""), or a file inside an operator package.
type moduleScope struct {
	pkg     string // package name, "" for tenant code
	root    string // real path of the package directory
	dir     string // real path of the requiring file's directory
	virtDir string // the same directory as the code sees it
}

// makeRequire returns the require function of a module scope.
func (rt *jobRuntime) makeRequire(scope moduleScope) goja.Value {
	return rt.vm.ToValue(func(call goja.FunctionCall) goja.Value {
		arg := call.Argument(0)
		if _, ok := arg.Export().(string); !ok {
			panic(rt.vm.NewTypeError("The \"id\" argument must be of type string"))
		}
		return rt.require(scope, arg.String())
	})
}

// require loads one module for scope, or throws a module error.
func (rt *jobRuntime) require(scope moduleScope, spec string) goja.Value {
	if name := builtinName(spec); name != "" {
		return rt.requireBuiltin(name)
	}
	if rt.cfg.modulesDir == "" && scope.pkg == "" {
		panic(rt.moduleError("module %q is not allowed", spec))
	}
	if isRelative(spec) {
		if scope.pkg == "" {
			panic(rt.moduleError("module %q is not allowed: transform code cannot require files", spec))
		}
		file := filepath.Join(scope.dir, filepath.FromSlash(spec))
		return rt.requireFile(scope.pkg, scope.root, file, spec)
	}
	pkg, sub := splitPackage(spec)
	if !validPackageName(pkg) || !slices.Contains(rt.cfg.allowModules, pkg) {
		panic(rt.moduleError("module %q is not allowed", spec))
	}
	root, err := filepath.EvalSymlinks(filepath.Join(rt.cfg.modulesDir, filepath.FromSlash(pkg)))
	if err != nil {
		panic(rt.moduleError("module %q is not installed", spec))
	}
	if sub == "" {
		main, err := packageMain(root)
		if err != nil {
			panic(rt.moduleError("module %q: %v", spec, err))
		}
		return rt.requireFile(pkg, root, filepath.Join(root, filepath.FromSlash(main)), spec)
	}
	if cleanSubpath(sub) == "" {
		panic(rt.moduleError("module %q is not allowed", spec))
	}
	return rt.requireFile(pkg, root, filepath.Join(root, filepath.FromSlash(cleanSubpath(sub))), spec)
}

// packageMain reads the main file of a package from its package.json.
func packageMain(root string) (string, error) {
	b, err := readLimited(filepath.Join(root, "package.json"), 1<<20)
	if errors.Is(err, os.ErrNotExist) {
		return "index.js", nil
	}
	if err != nil {
		return "", errors.New("package.json could not be read")
	}
	var pj struct {
		Main string `json:"main"`
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &pj); err != nil {
		return "", errors.New("package.json is not valid JSON")
	}
	if pj.Type == "module" {
		return "", errors.New("ES modules are not supported; use a CommonJS build")
	}
	if pj.Main == "" {
		return "index.js", nil
	}
	return pj.Main, nil
}

// requireBuiltin returns the exports of a built-in module, loading it once
// per run.
func (rt *jobRuntime) requireBuiltin(name string) goja.Value {
	id := "builtin:" + name
	if m, ok := rt.modules[id]; ok {
		return m.Get("exports")
	}
	var exports goja.Value
	switch name {
	case "buffer":
		o := rt.vm.NewObject()
		_ = o.Set("Buffer", rt.bufferCtor)
		exports = rt.call(rt.helpers.harden, o)
	case "url":
		exports = rt.call(rt.helpers.harden, rt.urlExports)
	default:
		factory, err := rt.vm.RunProgram(jsPrograms.modules[name])
		if err != nil {
			panic(err)
		}
		exports = rt.call(rt.helpers.loadBuiltin, rt.vm.ToValue(name), factory)
	}
	m := rt.vm.NewObject()
	_ = m.Set("exports", exports)
	rt.modules[id] = m
	return exports
}

// requireFile resolves, loads and runs a file of an operator package.
func (rt *jobRuntime) requireFile(pkg, root, file, spec string) goja.Value {
	realPath, err := resolveModuleFile(root, file)
	if err != nil {
		panic(rt.moduleError("module %q: %v", spec, err))
	}
	if m, ok := rt.modules[realPath]; ok {
		return m.Get("exports")
	}
	fi, err := os.Stat(realPath)
	if err != nil {
		panic(rt.moduleError("module %q could not be read", spec))
	}
	if fi.Size() > maxModuleFile || rt.moduleBytes+fi.Size() > maxModuleBytes {
		panic(rt.moduleError("module %q is too large", spec))
	}
	rt.moduleBytes += fi.Size()
	rel, _ := filepath.Rel(root, realPath)
	virt := "/node_modules/" + pkg + "/" + filepath.ToSlash(rel)
	module := rt.vm.NewObject()
	exports := rt.vm.NewObject()
	_ = module.Set("exports", exports)
	_ = module.Set("id", virt)
	_ = module.Set("filename", virt)
	rt.modules[realPath] = module

	if strings.HasSuffix(realPath, ".json") {
		b, err := readLimited(realPath, maxModuleFile)
		if err != nil {
			panic(rt.moduleError("module %q could not be read", spec))
		}
		v := rt.call(rt.helpers.parse, rt.vm.ToValue(string(b)))
		_ = module.Set("exports", v)
		return v
	}
	key := moduleKey{path: realPath, size: fi.Size(), mtime: fi.ModTime()}
	prog, ok := rt.moduleCache.get(key)
	if !ok {
		b, err := readLimited(realPath, maxModuleFile)
		if err != nil {
			panic(rt.moduleError("module %q could not be read", spec))
		}
		// Operator packages are trusted code: only syntax is checked, not
		// the require and regular expression rules of tenant code.
		p, cerr := compileCode(virt, string(b), nil)
		if cerr != nil {
			panic(rt.moduleError("module %q does not compile: %s", spec, cerr.Message))
		}
		prog = p
		rt.moduleCache.put(key, prog)
	}
	wrapper, err := rt.vm.RunProgram(prog)
	if err != nil {
		panic(err)
	}
	fn, _ := goja.AssertFunction(wrapper)
	scope := moduleScope{pkg: pkg, root: root, dir: filepath.Dir(realPath), virtDir: path.Dir(virt)}
	if _, err := fn(exports, exports, rt.makeRequire(scope), module, rt.vm.ToValue(virt), rt.vm.ToValue(scope.virtDir)); err != nil {
		delete(rt.modules, realPath)
		panic(err)
	}
	return module.Get("exports")
}

// resolveModuleFile finds the file Node would load for file (as is, with
// .js, .cjs or .json appended, or its index.js) and returns its realPath
// path, which must lie inside root.
func resolveModuleFile(root, file string) (string, error) {
	candidates := []string{file, file + ".js", file + ".cjs", file + ".json",
		filepath.Join(file, "index.js"), filepath.Join(file, "index.json")}
	for _, c := range candidates {
		fi, err := os.Stat(c)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		realPath, err := filepath.EvalSymlinks(c)
		if err != nil {
			continue
		}
		if realPath != root && !strings.HasPrefix(realPath, root+string(filepath.Separator)) {
			return "", errors.New("resolves outside its package")
		}
		switch filepath.Ext(realPath) {
		case ".js", ".cjs", ".json":
			return realPath, nil
		case ".mjs":
			return "", errors.New("ES modules are not supported; use a CommonJS build")
		default:
			return "", fmt.Errorf("%s files cannot be loaded", filepath.Ext(realPath))
		}
	}
	return "", errors.New("not found")
}

// readLimited reads at most limit bytes of a file.
func readLimited(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errors.New("file too large")
	}
	return b, nil
}

// moduleError builds the error thrown for a refused or broken require;
// the Go side recognises it and reports KindModule.
func (rt *jobRuntime) moduleError(format string, args ...any) goja.Value {
	return rt.call(rt.helpers.moduleError, rt.vm.ToValue(truncate(fmt.Sprintf(format, args...), maxMessage)))
}

package transforms

import (
	"encoding/json"
	"fmt"
	"path"
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
	path  string // package name, "/", file inside the package
	size  int64
	mtime int64 // Unix nanoseconds
}

// resolveTTL is how long a worker trusts what a require name resolved
// to: a run then asks the parent nothing for files it has compiled, and a
// file changed on disk is seen within this long.
const resolveTTL = time.Second

// moduleFileCache is a worker's memory of operator module files, shared
// by its realms: what each require name resolved to (for resolveTTL), and
// by content version the compiled form of each JavaScript file and the
// text of each JSON file.
type moduleFileCache struct {
	resolved *lru[resolveKey, resolution]
	compiled *lru[moduleKey, *goja.Program]
	json     *lru[moduleKey, string]
}

type resolveKey struct{ pkg, rel string }

type resolution struct {
	file moduleFile
	at   time.Time
}

func newModuleFileCache(size int) *moduleFileCache {
	return &moduleFileCache{resolved: newLRU[resolveKey, resolution](size),
		compiled: newLRU[moduleKey, *goja.Program](size), json: newLRU[moduleKey, string](size)}
}

// moduleScope is where a require function resolves from: tenant code
// (pkg == ""), or a file inside an operator package.
type moduleScope struct {
	pkg     string // package name, "" for tenant code
	dir     string // the requiring file's directory inside the package, with slashes ("." at its top)
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
		rel := path.Join(scope.dir, spec)
		switch {
		case rel == ".." || strings.HasPrefix(rel, "../"):
			panic(rt.moduleError("module %q: resolves outside its package", spec))
		case rel == ".": // the package's own directory: its main file, as in Node
			rel = ""
		}
		return rt.requireFile(scope.pkg, rel, spec)
	}
	pkg, sub := splitPackage(spec)
	if !validPackageName(pkg) || !slices.Contains(rt.cfg.allowModules, pkg) {
		panic(rt.moduleError("module %q is not allowed", spec))
	}
	if sub != "" && cleanSubpath(sub) == "" {
		panic(rt.moduleError("module %q is not allowed", spec))
	}
	return rt.requireFile(pkg, cleanSubpath(sub), spec)
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

// requireFile loads and runs a file of an operator package: rel is its
// path inside the package ("" for the package's main file), which the
// parent resolves and reads (module_files.go).
func (rt *jobRuntime) requireFile(pkg, rel, spec string) goja.Value {
	file := rt.resolveModule(pkg, rel, spec)
	id := pkg + "/" + file.File
	if m, ok := rt.modules[id]; ok {
		return m.Get("exports")
	}
	if file.Size > maxModuleFile || rt.moduleBytes+file.Size > maxModuleBytes {
		panic(rt.moduleError("module %q is too large", spec))
	}
	rt.moduleBytes += file.Size
	virt := "/node_modules/" + pkg + "/" + file.File
	module := rt.vm.NewObject()
	exports := rt.vm.NewObject()
	_ = module.Set("exports", exports)
	_ = module.Set("id", virt)
	_ = module.Set("filename", virt)
	rt.modules[id] = module

	key := moduleKey{path: id, size: file.Size, mtime: file.Mtime}
	if strings.HasSuffix(file.File, ".json") {
		source, ok := rt.moduleCache.json.get(key)
		if !ok {
			read := rt.moduleFileCall(moduleRead, pkg, file.File, spec)
			source = read.Source
			rt.moduleCache.json.put(moduleKey{path: id, size: read.Size, mtime: read.Mtime}, source)
		}
		v := rt.call(rt.helpers.parse, rt.vm.ToValue(source))
		_ = module.Set("exports", v)
		return v
	}
	prog, ok := rt.moduleCache.compiled.get(key)
	if !ok {
		read := rt.moduleFileCall(moduleRead, pkg, file.File, spec)
		// Operator packages are trusted code: only syntax is checked, not
		// the require and regular expression rules of tenant code.
		p, cerr := compileCode(virt, read.Source, nil)
		if cerr != nil {
			panic(rt.moduleError("module %q does not compile: %s", spec, cerr.Message))
		}
		prog = p
		// keyed by what was read, which may be newer than what resolve saw
		rt.moduleCache.compiled.put(moduleKey{path: id, size: read.Size, mtime: read.Mtime}, prog)
	}
	wrapper, err := rt.vm.RunProgram(prog)
	if err != nil {
		panic(err)
	}
	fn, _ := goja.AssertFunction(wrapper)
	scope := moduleScope{pkg: pkg, dir: path.Dir(file.File), virtDir: path.Dir(virt)}
	if _, err := fn(exports, exports, rt.makeRequire(scope), module, rt.vm.ToValue(virt), rt.vm.ToValue(scope.virtDir)); err != nil {
		delete(rt.modules, id)
		panic(err)
	}
	return module.Get("exports")
}

// resolveModule returns the file of a package that rel names ("" for its
// main file), as the parent last resolved it within resolveTTL.
func (rt *jobRuntime) resolveModule(pkg, rel, spec string) moduleFile {
	k := resolveKey{pkg, rel}
	if r, ok := rt.moduleCache.resolved.get(k); ok && time.Since(r.at) < resolveTTL {
		return r.file
	}
	f := rt.moduleFileCall(moduleResolve, pkg, rel, spec)
	rt.moduleCache.resolved.put(k, resolution{file: *f, at: time.Now()})
	return *f
}

// moduleFileCall asks the parent to resolve or read a file of an operator
// package and waits for the answer, or throws the module error it gives.
// Replies to the run's svc calls that arrive meanwhile are kept for
// settle. A run stopped meanwhile is interrupted, which the throw leaves
// to the engine.
func (rt *jobRuntime) moduleFileCall(method, pkg, rel, spec string) *moduleFile {
	rt.moduleCalls++
	if rt.moduleCalls > maxModuleFileCalls {
		panic(rt.moduleError("module %q: too many module files in one run", spec))
	}
	params, _ := json.Marshal(moduleFileRequest{Pkg: pkg, Path: rel})
	rt.nextSeq++
	seq := rt.nextSeq
	if err := rt.emit(&frame{T: frameCall, ID: rt.id, Seq: seq, Method: method, Params: params}); err != nil {
		panic(rt.moduleError("module %q could not be read", spec))
	}
	for {
		select {
		case f := <-rt.sig.replies:
			switch {
			case f.ID != rt.id:
			case f.Seq != seq:
				rt.early = append(rt.early, f)
			case f.Err != nil:
				msg := f.Err.Message
				if !strings.HasPrefix(msg, ":") {
					msg = " " + msg
				}
				panic(rt.moduleError("module %q%s", spec, msg))
			default:
				var file moduleFile
				if json.Unmarshal(f.Reply, &file) != nil || file.File == "" || cleanSubpath(file.File) != file.File {
					panic(rt.moduleError("module %q could not be read", spec))
				}
				return &file
			}
		case <-rt.sig.stop:
			panic(rt.moduleError("module %q could not be read: the run was stopped", spec))
		case <-rt.sig.gone:
			panic(rt.moduleError("module %q could not be read: the parent went away", spec))
		}
	}
}

// moduleError builds the error thrown for a refused or broken require;
// the Go side recognises it and reports KindModule.
func (rt *jobRuntime) moduleError(format string, args ...any) goja.Value {
	return rt.call(rt.helpers.moduleError, rt.vm.ToValue(truncate(fmt.Sprintf(format, args...), maxMessage)))
}

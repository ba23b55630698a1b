package transforms

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Operator modules are read by the parent, never by a worker: a worker
// opens no file at all (its system call filter refuses open), so tenant
// code that escaped the engine finds no filesystem to read. A require of
// an operator package costs a worker one round trip to resolve the file
// (and one more to read it when its compiled form is not cached), over
// the call frames that req.svc uses.

// The call methods of module files, which the parent answers itself.
const (
	// moduleResolve finds the file a require names: the package's main
	// file for an empty path, else the path with Node's extensions and
	// index files tried. The reply is a moduleFile without Source.
	moduleResolve = "module.resolve"
	// moduleRead reads a file moduleResolve found. The reply is a
	// moduleFile with Source.
	moduleRead = "module.read"
)

// maxModuleFileCalls bounds the module file calls of one run.
const maxModuleFileCalls = 4096

func isModuleFileCall(method string) bool { return method == moduleResolve || method == moduleRead }

// moduleFileRequest is the parameters of a module file call: a package
// allowed by the pool, and a slash-separated path inside it.
type moduleFileRequest struct {
	Pkg  string `json:"pkg"`
	Path string `json:"path"`
}

// moduleFile is the reply of a module file call. File is the real path of
// the file relative to the real directory of its package, with slashes;
// Size and Mtime (Unix nanoseconds) identify its content for the worker's
// cache of compiled files.
type moduleFile struct {
	File   string `json:"file"`
	Size   int64  `json:"size"`
	Mtime  int64  `json:"mtime"`
	Source string `json:"source,omitempty"`
}

// moduleFileReply answers a module file call of a worker. The worker is
// not trusted: the package must be one the pool allows, and the file must
// resolve inside it. An error's message follows the quoted require name
// in the error the code sees ("module \"x\" is not installed").
func moduleFileReply(o *Options, f *frame) *frame {
	reply := &frame{T: frameReply, ID: f.ID, Seq: f.Seq}
	file, err := serveModuleFile(o, f.Method, f.Params)
	if err != nil {
		reply.Err = &errFrame{Kind: KindModule, Status: 404, Message: err.Error()}
		return reply
	}
	reply.Reply, _ = json.Marshal(file)
	return reply
}

func serveModuleFile(o *Options, method string, params json.RawMessage) (*moduleFile, error) {
	var req moduleFileRequest
	if json.Unmarshal(params, &req) != nil || !validPackageName(req.Pkg) || o.ModulesDir == "" ||
		!slices.Contains(o.AllowModules, req.Pkg) {
		return nil, errors.New("is not allowed")
	}
	root, err := filepath.EvalSymlinks(filepath.Join(o.ModulesDir, filepath.FromSlash(req.Pkg)))
	if err != nil {
		return nil, errors.New("is not installed")
	}
	var file string
	switch {
	case method == moduleResolve && req.Path == "":
		main, err := packageMain(root)
		if err != nil {
			return nil, fmt.Errorf(": %w", err)
		}
		file = filepath.Join(root, filepath.FromSlash(main))
	case cleanSubpath(req.Path) == "":
		return nil, errors.New("is not allowed")
	default:
		file = filepath.Join(root, filepath.FromSlash(cleanSubpath(req.Path)))
	}
	realPath, err := resolveModuleFile(root, file)
	if err != nil {
		return nil, fmt.Errorf(": %w", err)
	}
	if method == moduleRead && realPath != file {
		// read takes what resolve returned, which is already real
		return nil, errors.New("could not be read")
	}
	fi, err := os.Stat(realPath)
	if err != nil {
		return nil, errors.New("could not be read")
	}
	if fi.Size() > maxModuleFile {
		return nil, errors.New("is too large")
	}
	rel, _ := filepath.Rel(root, realPath)
	out := &moduleFile{File: filepath.ToSlash(rel), Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
	if method == moduleRead {
		b, err := readLimited(realPath, maxModuleFile)
		if err != nil {
			return nil, errors.New("could not be read")
		}
		out.Source, out.Size = string(b), int64(len(b))
	}
	return out, nil
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

// resolveModuleFile finds the file Node would load for file (as is, with
// .js, .cjs or .json appended, or its index.js) and returns its real
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

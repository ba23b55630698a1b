package transforms

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModuleFileCalls: the parent answers a worker's module file calls
// only for files inside the allowed packages, whatever the worker asks
// (a worker is not trusted), and never names the modules directory.
func TestModuleFileCalls(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	writeFiles(t, dir, map[string]string{
		"pkg/package.json": `{"main": "lib/main.js"}`,
		"pkg/lib/main.js":  `module.exports = 1`,
		"pkg/data.json":    `{"a": 1}`,
		"pkg/notes.txt":    `text`,
		"secret/index.js":  `module.exports = 'secret'`,
	})
	writeFiles(t, outside, map[string]string{"stolen.js": `module.exports = 'outside'`})
	if err := os.Symlink(filepath.Join(outside, "stolen.js"), filepath.Join(dir, "pkg", "link.js")); err != nil {
		t.Fatal(err)
	}
	o := &Options{ModulesDir: dir, AllowModules: []string{"pkg", "gone"}}
	for _, tc := range []struct {
		name, method, pkg, path string
		file, source, err       string
	}{
		{"main file", moduleResolve, "pkg", "", "lib/main.js", "", ""},
		{"file with an extension tried", moduleResolve, "pkg", "lib/main", "lib/main.js", "", ""},
		{"JSON file", moduleResolve, "pkg", "data", "data.json", "", ""},
		{"read", moduleRead, "pkg", "lib/main.js", "lib/main.js", "module.exports = 1", ""},
		{"package not allowed", moduleResolve, "secret", "index.js", "", "", "is not allowed"},
		{"package name leaving the directory", moduleResolve, "../secret", "index.js", "", "", "is not allowed"},
		{"allowed but not installed", moduleResolve, "gone", "", "", "", "is not installed"},
		{"path leaving the package (kept inside)", moduleResolve, "pkg", "../secret/index.js", "", "", ": not found"},
		{"absolute path", moduleRead, "pkg", "/etc/passwd", "", "", ": not found"},
		{"read leaving the package (kept inside)", moduleRead, "pkg", "../../secret/index.js", "", "", ": not found"},
		{"symbolic link out of the package", moduleResolve, "pkg", "link.js", "", "", ": resolves outside its package"},
		{"read through the link", moduleRead, "pkg", "link.js", "", "", ": resolves outside its package"},
		{"file type not loadable", moduleRead, "pkg", "notes.txt", "", "", ": .txt files cannot be loaded"},
		{"read of an unresolved name", moduleRead, "pkg", "lib/main", "", "", "could not be read"},
		{"read without a path", moduleRead, "pkg", "", "", "", "is not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params, _ := json.Marshal(moduleFileRequest{Pkg: tc.pkg, Path: tc.path})
			reply := moduleFileReply(o, &frame{T: frameCall, ID: 7, Seq: 3, Method: tc.method, Params: params})
			if reply.T != frameReply || reply.ID != 7 || reply.Seq != 3 {
				t.Fatalf("reply %+v does not answer the call", reply)
			}
			if tc.err != "" {
				if reply.Err == nil || reply.Err.Kind != KindModule || reply.Err.Message != tc.err {
					t.Fatalf("error %+v, want a module error %q (reply %s)", reply.Err, tc.err, reply.Reply)
				}
				if strings.Contains(reply.Err.Message, dir) || strings.Contains(reply.Err.Message, outside) {
					t.Errorf("the error names a directory: %s", reply.Err.Message)
				}
				return
			}
			if reply.Err != nil {
				t.Fatalf("error %+v", reply.Err)
			}
			var f moduleFile
			if err := json.Unmarshal(reply.Reply, &f); err != nil {
				t.Fatal(err)
			}
			if f.File != tc.file || f.Source != tc.source || f.Size <= 0 || f.Mtime == 0 {
				t.Errorf("reply %+v, want file %q with source %q", f, tc.file, tc.source)
			}
		})
	}
}

package console

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"io/fs"
	"mime"
	"path"
	"strings"
	"sync"
)

// files are the console's static files; assets/index.html is the page.
//
//go:embed assets
var files embed.FS

// asset is one embedded file as the handler serves it.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// contentTypes are the types of the files the console ships; a file of
// another kind is not served (loadAssets refuses it), so nothing is
// sniffed.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".mjs":  "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".txt":  "text/plain; charset=utf-8",
	".md":   "text/plain; charset=utf-8",
}

// loadAssets returns every embedded file, keyed by its path below
// assets/ ("index.html", "js/app.js"), read and hashed once per process:
// a reload provisions the handler again without redoing it. The map is
// never written after it is built.
var loadAssets = sync.OnceValues(readAssets)

// readAssets reads every embedded file into memory with its type and
// ETag.
func readAssets() (map[string]asset, error) {
	out := map[string]asset{}
	err := fs.WalkDir(files, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		ext := path.Ext(p)
		ct, ok := contentTypes[ext]
		if !ok {
			if ct = mime.TypeByExtension(ext); ct == "" {
				return fmt.Errorf("console asset %s: no content type for %q", p, ext)
			}
		}
		sum := sha256.Sum256(body)
		out[strings.TrimPrefix(p, "assets/")] = asset{
			body:        body,
			contentType: ct,
			etag:        `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`,
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, ok := out["index.html"]; !ok {
		return nil, fmt.Errorf("console assets: index.html is missing")
	}
	return out, nil
}

package console

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(Console{})
}

// DefaultPrefix is where the console is served when no prefix is given.
const DefaultPrefix = "/console"

// Console serves the web console's embedded files under a path prefix and
// passes every other request to the next handler, so that it sits in the
// same site as vault_api: the console calls the API on its own origin.
type Console struct {
	// Prefix is the path the console is served at ("/console" by
	// default): the page at Prefix + "/", its files below it. A request
	// for Prefix itself is redirected to Prefix + "/". With "/" the page
	// is at the site's root and every path that is not one of its files
	// goes on to the next handler (the API).
	Prefix string `json:"prefix,omitempty"`

	assets map[string]asset
}

// CaddyModule returns the Caddy module information.
func (Console) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.vault_console",
		New: func() caddy.Module { return new(Console) },
	}
}

// Provision loads the embedded files (a few dozen kilobytes, already in
// the binary) and sets the default prefix.
func (c *Console) Provision(caddy.Context) error {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	assets, err := loadAssets()
	if err != nil {
		return err
	}
	c.assets = assets
	return nil
}

// Validate checks the prefix: an absolute path without a trailing slash
// (unless it is "/"), without "..", "*", "?" or "#".
func (c *Console) Validate() error {
	return checkPrefix(c.Prefix)
}

func checkPrefix(p string) error {
	switch {
	case p == "" || p == "/":
		return nil
	case !strings.HasPrefix(p, "/"):
		return errors.New("prefix must start with /")
	case strings.HasSuffix(p, "/"):
		return errors.New("prefix must not end with / (the page is served at prefix/)")
	case strings.ContainsAny(p, "*?#%\\ \t"):
		return errors.New("prefix must be a plain path, without *, ?, #, %, \\ or spaces")
	case strings.Contains(p, "//") || strings.Contains(p, "/./") || strings.Contains(p, "/../") ||
		strings.HasSuffix(p, "/..") || strings.HasSuffix(p, "/."):
		return errors.New("prefix must be a clean path")
	}
	return nil
}

// ServeHTTP answers GET and HEAD for the console's files; other paths go
// to next.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	name, redirect, ok := c.route(r.URL.Path)
	if !ok {
		return next.ServeHTTP(w, r)
	}
	a, found := c.assets[name]
	if !found && !redirect && c.Prefix == "/" {
		// at the root, what is not a console file belongs to the API
		return next.ServeHTTP(w, r)
	}
	setSecurityHeaders(w.Header())
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return nil
	}
	if redirect {
		http.Redirect(w, r, c.Prefix+"/", http.StatusPermanentRedirect)
		return nil
	}
	if !found {
		http.Error(w, "not found", http.StatusNotFound)
		return nil
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("ETag", a.etag)
	h.Set("Cache-Control", "no-cache")
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(a.body)
	}
	return nil
}

// route maps a request path to an asset name below assets/. ok is false
// for a path outside the console; redirect is true for the prefix
// without its slash.
func (c *Console) route(p string) (name string, redirect, ok bool) {
	if c.Prefix == "/" {
		rel := strings.TrimPrefix(p, "/")
		if rel == "" {
			rel = "index.html"
		}
		return rel, false, true
	}
	if p == c.Prefix {
		return "", true, true
	}
	rel, found := strings.CutPrefix(p, c.Prefix+"/")
	if !found {
		return "", false, false
	}
	if rel == "" {
		rel = "index.html"
	}
	return rel, false, true
}

// etagMatches reports whether an If-None-Match header names etag.
func etagMatches(header, etag string) bool {
	for _, v := range strings.Split(header, ",") {
		v = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), "W/"))
		if v == etag || v == "*" {
			return true
		}
	}
	return false
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Console)(nil)
	_ caddy.Validator             = (*Console)(nil)
	_ caddyhttp.MiddlewareHandler = (*Console)(nil)
)

package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// nextHandler stands for vault_api: it answers 299 and names itself.
var nextHandler = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
	w.WriteHeader(299)
	_, _ = w.Write([]byte("next"))
	return nil
})

func provisioned(t *testing.T, prefix string) *Console {
	t.Helper()
	c := &Console{Prefix: prefix}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate(%q): %v", prefix, err)
	}
	if err := c.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestServeHTTP(t *testing.T) {
	tests := []struct {
		name, prefix, method, path string
		status                     int
		contentType, location      string
		bodyHas                    string
		console                    bool // the console's headers are set
	}{
		{"page", "", "GET", "/console/", 200, "text/html; charset=utf-8", "", `<script type="module" src="js/app.js">`, true},
		{"page by name", "", "GET", "/console/index.html", 200, "text/html; charset=utf-8", "", "<title>Tokenvault console</title>", true},
		{"prefix without slash", "", "GET", "/console", 308, "", "/console/", "", true},
		{"script", "", "GET", "/console/js/app.js", 200, "text/javascript; charset=utf-8", "", "render(", true},
		{"vendored module", "", "GET", "/console/vendor/preact.mjs", 200, "text/javascript; charset=utf-8", "", "", true},
		{"style", "", "GET", "/console/console.css", 200, "text/css; charset=utf-8", "", ":root", true},
		{"icon", "", "GET", "/console/favicon.svg", 200, "image/svg+xml", "", "<svg", true},
		{"head", "", "HEAD", "/console/js/api.js", 200, "text/javascript; charset=utf-8", "", "", true},
		{"unknown file under the prefix", "", "GET", "/console/nope.js", 404, "text/plain; charset=utf-8", "", "", true},
		{"no directory listing", "", "GET", "/console/js/", 404, "text/plain; charset=utf-8", "", "", true},
		{"post refused", "", "POST", "/console/", 405, "text/plain; charset=utf-8", "", "", true},
		{"the API's path", "", "GET", "/tokens", 299, "", "", "next", false},
		{"a look-alike prefix", "", "GET", "/consoles/", 299, "", "", "next", false},
		{"no file outside the assets", "", "GET", "/console/../console.go", 404, "text/plain; charset=utf-8", "", "", true},
		{"custom prefix", "/admin/ui", "GET", "/admin/ui/", 200, "text/html; charset=utf-8", "", "<title>", true},
		{"custom prefix, old path", "/admin/ui", "GET", "/console/", 299, "", "", "next", false},
		{"root prefix page", "/", "GET", "/", 200, "text/html; charset=utf-8", "", "<title>", true},
		{"root prefix file", "/", "GET", "/js/app.js", 200, "text/javascript; charset=utf-8", "", "", true},
		{"root prefix, API path passes", "/", "GET", "/tokens", 299, "", "", "next", false},
		{"root prefix, API post passes", "/", "POST", "/tokens", 299, "", "", "next", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := provisioned(t, tc.prefix)
			req := httptest.NewRequest(tc.method, tc.path, nil)
			rec := httptest.NewRecorder()
			if err := c.ServeHTTP(rec, req, nextHandler); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d (body %q)", rec.Code, tc.status, rec.Body.String())
			}
			if got := rec.Header().Get("Content-Type"); tc.contentType != "" && got != tc.contentType {
				t.Errorf("Content-Type %q, want %q", got, tc.contentType)
			}
			if got := rec.Header().Get("Location"); got != tc.location {
				t.Errorf("Location %q, want %q", got, tc.location)
			}
			if tc.bodyHas != "" && !strings.Contains(rec.Body.String(), tc.bodyHas) {
				t.Errorf("body does not hold %q", tc.bodyHas)
			}
			if tc.method == "HEAD" && rec.Body.Len() != 0 {
				t.Errorf("HEAD answered a body of %d bytes", rec.Body.Len())
			}
			csp := rec.Header().Get("Content-Security-Policy")
			if tc.console && csp != ContentSecurityPolicy {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			if !tc.console && csp != "" {
				t.Errorf("a request passed on carries the console's CSP")
			}
			if tc.console {
				for _, kv := range securityHeaders {
					if got := rec.Header().Get(kv[0]); got != kv[1] {
						t.Errorf("%s: %q, want %q", kv[0], got, kv[1])
					}
				}
			}
		})
	}
}

func TestETag(t *testing.T) {
	c := provisioned(t, "")
	rec := httptest.NewRecorder()
	_ = c.ServeHTTP(rec, httptest.NewRequest("GET", "/console/js/app.js", nil), nextHandler)
	etag := rec.Header().Get("ETag")
	if etag == "" || rec.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q, Cache-Control %q", etag, rec.Header().Get("Cache-Control"))
	}
	for _, tc := range []struct {
		header string
		status int
	}{{etag, 304}, {"W/" + etag, 304}, {`"other", ` + etag, 304}, {`"other"`, 200}} {
		req := httptest.NewRequest("GET", "/console/js/app.js", nil)
		req.Header.Set("If-None-Match", tc.header)
		rec := httptest.NewRecorder()
		_ = c.ServeHTTP(rec, req, nextHandler)
		if rec.Code != tc.status {
			t.Errorf("If-None-Match %s: %d, want %d", tc.header, rec.Code, tc.status)
		}
		if tc.status == 304 && (rec.Body.Len() != 0 || rec.Header().Get("Content-Security-Policy") == "") {
			t.Errorf("304 with a body or without the CSP")
		}
	}
}

func TestValidatePrefix(t *testing.T) {
	for _, tc := range []struct {
		prefix, err string
	}{
		{"", ""}, {"/", ""}, {"/console", ""}, {"/admin/vault-ui", ""},
		{"console", "must start with /"},
		{"/console/", "must not end with /"},
		{"/con*", "plain path"}, {"/a b", "plain path"}, {"/a%2f", "plain path"},
		{"/a//b", "clean path"}, {"/a/../b", "clean path"}, {"/a/..", "clean path"}, {"/a/.", "clean path"},
	} {
		err := (&Console{Prefix: tc.prefix}).Validate()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("prefix %q: error %v, want %q", tc.prefix, err, tc.err)
		}
	}
}

func TestUnmarshalCaddyfile(t *testing.T) {
	for _, tc := range []struct {
		input, prefix, err string
	}{
		{"vault_console", "", ""},
		{"vault_console {\n}", "", ""},
		{"vault_console {\n prefix /ui\n}", "/ui", ""},
		{"vault_console {\n prefix /\n}", "/", ""},
		{"vault_console extra", "", "wrong argument count"},
		{"vault_console {\n prefix\n}", "", "wrong argument count"},
		{"vault_console {\n prefix /a /b\n}", "", "wrong argument count"},
		{"vault_console {\n prefix /a\n prefix /b\n}", "", "prefix already set"},
		{"vault_console {\n prefix ui\n}", "", "must start with /"},
		{"vault_console {\n prefix /ui/\n}", "", "must not end with /"},
		{"vault_console {\n api_url https://x\n}", "", `unrecognized vault_console option "api_url"`},
	} {
		c := new(Console)
		err := c.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.input, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want %q", tc.input, err, tc.err)
		case tc.err == "" && c.Prefix != tc.prefix:
			t.Errorf("%q: prefix %q, want %q", tc.input, c.Prefix, tc.prefix)
		}
	}
}

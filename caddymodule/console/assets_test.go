package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"path"
	"regexp"
	"sort"
	"strings"
	"testing"
)

func mustAssets(t *testing.T) map[string]asset {
	t.Helper()
	a, err := loadAssets()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestAssetsKeepTheCSP: the files need nothing the Content-Security-Policy
// refuses, so that the browser suite's "no violation" is not luck: no
// inline script, style attribute or event-handler attribute in the page,
// no eval or string-to-code in the scripts, no HTML parsed from strings,
// and no URL of another origin (XML namespaces apart).
func TestAssetsKeepTheCSP(t *testing.T) {
	assets := mustAssets(t)
	page := string(assets["index.html"].body)
	for _, m := range regexp.MustCompile(`(?is)<script([^>]*)>(.*?)</script>`).FindAllStringSubmatch(page, -1) {
		if !strings.Contains(m[1], `src="`) || strings.TrimSpace(m[2]) != "" {
			t.Errorf("index.html has an inline script: %s", m[0])
		}
	}
	if regexp.MustCompile(`(?i)\sstyle\s*=|<style`).MatchString(page) {
		t.Error("index.html has inline style")
	}
	if regexp.MustCompile(`(?i)\son[a-z]+\s*=`).MatchString(page) {
		t.Error("index.html has an event-handler attribute")
	}
	forbidden := []struct {
		re   *regexp.Regexp
		what string
	}{
		{regexp.MustCompile(`\beval\s*\(`), "eval"},
		{regexp.MustCompile(`\bnew\s+Function\b`), "new Function"},
		{regexp.MustCompile(`\bset(Timeout|Interval)\s*\(\s*['"]`), "a timer given a string"},
		{regexp.MustCompile(`\b(innerHTML|outerHTML|insertAdjacentHTML)\b|document\.write`), "HTML parsed from a string"},
		{regexp.MustCompile(`dangerouslySetInnerHTML`), "dangerouslySetInnerHTML"},
		{regexp.MustCompile(`\blocalStorage\s*[.\[]|document\.cookie`), "localStorage or a cookie"},
	}
	namespace := regexp.MustCompile(`^http://www\.w3\.org/(2000/svg|1998/Math/MathML|1999/xhtml|1999/xlink)$`)
	for name, a := range assets {
		if !strings.HasSuffix(name, ".js") && !strings.HasSuffix(name, ".mjs") && !strings.HasSuffix(name, ".css") &&
			!strings.HasSuffix(name, ".html") && !strings.HasSuffix(name, ".svg") {
			continue
		}
		text := string(a.body)
		if strings.HasSuffix(name, "js") && !strings.HasPrefix(name, "vendor/") {
			for _, f := range forbidden {
				if loc := f.re.FindStringIndex(text); loc != nil {
					t.Errorf("%s uses %s: %q", name, f.what, text[loc[0]:loc[1]])
				}
			}
		}
		for _, u := range regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}[^\s"'<>)]*`).FindAllString(text, -1) {
			if !strings.HasPrefix(u, "http") {
				continue // a comment's "//" followed by words, not a URL
			}
			if !namespace.MatchString(u) {
				t.Errorf("%s names another origin: %s", name, u)
			}
		}
	}
	// the vendored code, too, never turns strings into code (Preact sets
	// innerHTML only for dangerouslySetInnerHTML, which the console never
	// uses, and Trusted Types would refuse it)
	for _, name := range []string{"vendor/preact.mjs", "vendor/hooks.mjs", "vendor/htm.mjs"} {
		text := string(assets[name].body)
		for _, f := range forbidden[:3] {
			if f.re.MatchString(text) {
				t.Errorf("%s uses %s", name, f.what)
			}
		}
	}
}

// TestImportsResolve: every module import is a relative path to an
// embedded file, so the page needs no import map and no other server.
func TestImportsResolve(t *testing.T) {
	assets := mustAssets(t)
	importRE := regexp.MustCompile(`(?m)(?:^|;)\s*(?:import|export)\b[^;'"]*?\bfrom\s*["']([^"']+)["']`)
	count := 0
	for name, a := range assets {
		if !strings.HasSuffix(name, ".js") && !strings.HasSuffix(name, ".mjs") {
			continue
		}
		for _, m := range importRE.FindAllStringSubmatch(string(a.body), -1) {
			spec := m[1]
			count++
			if !strings.HasPrefix(spec, "./") && !strings.HasPrefix(spec, "../") {
				t.Errorf("%s imports %q: not a relative path", name, spec)
				continue
			}
			target := path.Join(path.Dir(name), spec)
			if _, ok := assets[target]; !ok {
				t.Errorf("%s imports %q: %s is not embedded", name, spec, target)
			}
		}
	}
	if count < 20 {
		t.Fatalf("found only %d imports: the scan no longer sees them", count)
	}
	if !strings.Contains(string(assets["index.html"].body), `src="js/app.js"`) {
		t.Error("index.html does not load js/app.js")
	}
}

// TestVendoredLibraries: the vendored files are the ones VENDOR.md
// describes (digests of the files as shipped), with their licences.
func TestVendoredLibraries(t *testing.T) {
	assets := mustAssets(t)
	doc := string(assets["vendor/VENDOR.md"].body)
	for _, name := range []string{"preact.mjs", "hooks.mjs", "htm.mjs"} {
		a, ok := assets["vendor/"+name]
		if !ok {
			t.Fatalf("vendor/%s is missing", name)
		}
		sum := sha256.Sum256(a.body)
		row := "| `" + name + "` | `" + hex.EncodeToString(sum[:]) + "` |"
		if !strings.Contains(doc, row) {
			t.Errorf("VENDOR.md does not list %s as shipped (want the row %s)", name, row)
		}
	}
	for _, v := range []string{"| 11.2.0 |", "| 3.1.1 |"} {
		if !strings.Contains(doc, v) {
			t.Errorf("VENDOR.md lost the version %s", v)
		}
	}
	for _, lic := range []string{"vendor/LICENSE-preact.txt", "vendor/LICENSE-htm.txt"} {
		if len(assets[lic].body) < 500 {
			t.Errorf("%s is missing or truncated", lic)
		}
	}
	if !strings.Contains(string(assets["vendor/hooks.mjs"].body), `from"./preact.mjs"`) {
		t.Error(`hooks.mjs no longer imports ./preact.mjs (the edit VENDOR.md describes)`)
	}
}

// consoleBudget bounds what a browser downloads for the console (the
// files the page loads, gzip-compressed as Caddy's encode would send
// them), so that the console stays small.
const consoleBudget = 60 << 10

// TestBundleSize logs the size of the console and keeps it in budget.
func TestBundleSize(t *testing.T) {
	assets := mustAssets(t)
	var names []string
	for name := range assets {
		if strings.HasSuffix(name, ".txt") || strings.HasSuffix(name, ".md") {
			continue // licences and notes: shipped, never loaded by the page
		}
		names = append(names, name)
	}
	sort.Strings(names)
	raw, zipped := 0, 0
	for _, name := range names {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(assets[name].body)
		_ = zw.Close()
		raw += len(assets[name].body)
		zipped += buf.Len()
	}
	t.Logf("console: %d files the page loads, %d bytes, %d bytes gzipped", len(names), raw, zipped)
	if zipped > consoleBudget {
		t.Errorf("the console is %d bytes gzipped, over its budget of %d", zipped, consoleBudget)
	}
}

package tokenvault

import (
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// markdownFiles are the repository's Markdown files, outside installed
// packages (node_modules) and hidden directories.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var (
	// fences are fenced code blocks (``` or ~~~), whose text is no link
	// and no heading.
	fenceLineRE = regexp.MustCompile("^\\s{0,3}(```|~~~)")
	codeSpanRE  = regexp.MustCompile("``[^`]*``|`[^`]*`")
	// inline links and images: [text](target "title"); the text may
	// span lines
	inlineLinkRE = regexp.MustCompile(`\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refDefRE     = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	headingRE    = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
	schemeRE     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	mdLinkTextRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// prose is a Markdown text without its fenced blocks (and, in lines,
// without code spans), and the text of its ATX headings.
func prose(md string) (text string, headings []string) {
	var b strings.Builder
	inFence := false
	for _, line := range strings.Split(md, "\n") {
		if fenceLineRE.MatchString(line) {
			inFence = !inFence
			b.WriteString("\n")
			continue
		}
		if inFence {
			b.WriteString("\n")
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			headings = append(headings, m[1])
		}
		b.WriteString(line)
		b.WriteString("\n")
	}
	return codeSpanRE.ReplaceAllString(b.String(), ""), headings
}

// slug is GitHub's anchor for a heading: its text as rendered, lower
// case, without punctuation but for hyphens and underscores, with each
// space a hyphen.
func slug(heading string) string {
	heading = mdLinkTextRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the heading anchors of a Markdown text, a repeated slug
// numbered as GitHub does (-1, -2, …).
func anchors(md string) map[string]bool {
	_, headings := prose(md)
	seen := map[string]int{}
	out := map[string]bool{}
	for _, h := range headings {
		s := slug(h)
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// TestDocLinks: every relative link of the repository's Markdown files
// (README.md, docs/, CHANGELOG.md, SECURITY.md, …) names a file or
// directory inside the repository, and a #fragment names a heading of
// the Markdown file it points to, as GitHub makes its anchors. Links
// with a scheme (https:, mailto:) are not followed.
func TestDocLinks(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	files := markdownFiles(t)
	if len(files) < 5 {
		t.Fatalf("found only %v", files)
	}
	cache := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := cache[path]; ok {
			return a, nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		cache[path] = anchors(string(raw))
		return cache[path], nil
	}
	links := 0
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text, _ := prose(string(raw))
		var targets []string
		for _, m := range inlineLinkRE.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
		for _, m := range refDefRE.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if target == "" || schemeRE.MatchString(target) || strings.HasPrefix(target, "//") {
				continue
			}
			links++
			pathPart, fragment, _ := strings.Cut(target, "#")
			if p, err := url.PathUnescape(pathPart); err == nil {
				pathPart = p
			}
			dest := file
			if pathPart != "" {
				if strings.HasPrefix(pathPart, "/") {
					t.Errorf("%s: link %q is absolute; link relative to the file", file, target)
					continue
				}
				dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(pathPart))
				abs, err := filepath.Abs(dest)
				if err != nil {
					t.Fatal(err)
				}
				if rel, err := filepath.Rel(root, abs); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
					t.Errorf("%s: link %q leaves the repository", file, target)
					continue
				}
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %q: no such file or directory", file, target)
					continue
				}
			}
			if fragment == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s: link %q has a fragment on a file that is not Markdown", file, target)
				continue
			}
			a, err := anchorsOf(dest)
			if err != nil {
				t.Errorf("%s: link %q: %v", file, target, err)
				continue
			}
			if !a[strings.ToLower(fragment)] {
				t.Errorf("%s: link %q: %s has no heading with the anchor #%s", file, target, dest, fragment)
			}
		}
	}
	if links < 20 {
		t.Errorf("checked only %d relative links: the link scan no longer sees them", links)
	}
}

// TestSDKDocSnippets: every ```js block of docs/sdks.md is, line for line
// (indentation included), a run of lines of one of the files the Node
// SDK suite runs (testdata/clients/*.test.mjs, run by TestNodeSDKs in
// CI), so the snippets the documentation shows are code that runs.
func TestSDKDocSnippets(t *testing.T) {
	raw, err := os.ReadFile("docs/sdks.md")
	if err != nil {
		t.Fatal(err)
	}
	suites, err := filepath.Glob("testdata/clients/*.test.mjs")
	if err != nil || len(suites) == 0 {
		t.Fatalf("no suite files: %v", err)
	}
	var sources []string
	for _, s := range suites {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, "\n"+trimLines(string(b))+"\n")
	}
	blocks := regexp.MustCompile("(?ms)^```js\n(.*?)^```").FindAllStringSubmatch(string(raw), -1)
	if len(blocks) == 0 {
		t.Fatal("docs/sdks.md has no ```js snippet")
	}
	for _, b := range blocks {
		snippet := "\n" + trimLines(strings.TrimRight(b[1], "\n")) + "\n"
		found := false
		for _, src := range sources {
			found = found || strings.Contains(src, snippet)
		}
		if !found {
			t.Errorf("this snippet of docs/sdks.md is not in any of %v:\n%s", suites, b[1])
		}
	}
}

// trimLines drops trailing spaces of every line.
func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	return strings.Join(lines, "\n")
}

package main

// TestNodeSDKs: the official Node SDKs of the interface
// (@basis-theory/node-sdk and @basis-theory/basis-theory-js), unchanged,
// against the vault served with `header_prefix BT`. The suites are
// testdata/clients/*.test.mjs, run with `node --test`; this test builds the
// setting they need (server, tenants, an echo destination for proxies),
// installs the pinned SDKs with `npm ci` when node_modules is missing or
// stale, and fails when node fails. It needs node and npm (and the npm
// registry for the first install), so it runs only with TV_SDK=1:
//
//	TV_SDK=1 go test ./caddymodule/caddy/ -run TestNodeSDKs -count=1 -v

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	npmTimeout  = 5 * time.Minute // npm ci, a cold install from the registry
	nodeTimeout = 3 * time.Minute // one SDK suite; it normally takes seconds
)

// sdkSuites are the test files, by SDK, with the card number each file
// sends through the proxy (testdata/clients/helpers.mjs, cards).
var sdkSuites = []struct {
	name, file, card string
}{
	{"node-sdk", "node-sdk.test.mjs", "4242424242424242"},
	{"basis-theory-js", "basis-theory-js.test.mjs", "5555555555554444"},
}

func TestNodeSDKs(t *testing.T) {
	node, dir := sdkTools(t)
	dest := newEchoDestination(t)
	s := startServer(t, serverOpts{
		HeaderPrefix: "BT",
		// basis-theory-js switches every API host but localhost to https.
		SiteHosts:  []string{"localhost"},
		VaultExtra: egressLoopback + "\n\t\tbin_table " + filepath.Join(dir, "node-sdk-details-intents.bins.csv"),
		RateLimits: false,
	})
	runSDKSuites(t, node, dir, dest, s, fmt.Sprintf("http://localhost:%d", s.apiPort))
	checkSDKAccessLog(t, s.accessLog)
}

// checkSDKAccessLog fails the test when the access log at path is empty
// or holds a credential: its filter names follow the BT prefix.
func checkSDKAccessLog(t *testing.T, path string) {
	t.Helper()
	logRaw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the access log: %v", err)
	}
	if len(logRaw) == 0 {
		t.Errorf("the access log %s is empty", path)
	}
	apiKey := regexp.MustCompile(`key_(test|prod)_[A-Za-z0-9]+`)
	for _, line := range bytes.Split(logRaw, []byte("\n")) {
		if apiKey.Match(line) || bytes.Contains(bytes.ToLower(line), []byte("bt-proxy-key")) {
			t.Errorf("the access log holds a credential (API key, BT-PROXY-KEY header or bt-proxy-key parameter); the entry, keys elided:\n%s",
				apiKey.ReplaceAll(line, []byte("key_…")))
		}
	}
}

// sdkTools skips the test unless TV_SDK=1, finds node and npm, installs
// the suites' packages when needed, and returns node and the suites'
// directory.
func sdkTools(t *testing.T) (node, dir string) {
	t.Helper()
	if os.Getenv("TV_SDK") != "1" {
		t.Skip("the Node SDK suite runs with TV_SDK=1 (it needs node, npm and, for the first install, the npm registry)")
	}
	needBinary(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("TV_SDK=1 but node is not on PATH")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatal("TV_SDK=1 but npm is not on PATH")
	}
	dir, err = filepath.Abs(filepath.Join("..", "..", "testdata", "clients"))
	if err != nil {
		t.Fatal(err)
	}
	ensureNodeModules(t, npm, dir)
	return node, dir
}

// runSDKSuites runs every SDK suite against baseURL (a vault served with
// header_prefix BT, an egress block allowing dest, and localhost among
// its hosts), with tenants created through admin's admin API, and checks
// that the suites' proxy calls reached dest detokenized and without the
// vault's headers.
func runSDKSuites(t *testing.T, node, dir string, dest *echoDestination, admin *server, baseURL string) {
	t.Helper()
	type tenantKeys struct{ main, disposable createdTenant }
	keys := map[string]tenantKeys{}
	for _, suite := range sdkSuites {
		keys[suite.name] = tenantKeys{
			main:       admin.createTenant("sdk " + suite.name),
			disposable: admin.createTenant("sdk " + suite.name + " disposable"),
		}
	}
	// The prefix is in force. (No probe with SVC-API-KEY: the access log
	// filters only the BT names, and the check of it would find that key.)
	probe := keys[sdkSuites[0].name].main.Key
	if r, err := doRequest(admin.client, http.MethodGet, baseURL+"/tenants/self", "", nil, "BT-API-KEY", probe); err != nil || r.Status != http.StatusOK {
		t.Fatalf("GET /tenants/self with BT-API-KEY: %v %d %s", err, r.Status, r.Raw)
	}

	for _, suite := range sdkSuites {
		k := keys[suite.name]
		t.Run(suite.name, func(t *testing.T) {
			runNodeSuite(t, node, dir, suite.file, nodeTimeout, []string{
				"TV_BASE_URL=" + baseURL,
				"TV_MANAGEMENT_KEY=" + k.main.Key,
				"TV_DISPOSABLE_MANAGEMENT_KEY=" + k.disposable.Key,
				"TV_DESTINATION_URL=" + dest.URL,
			})

			// The suite's proxy calls reached the destination with the card
			// number detokenized and without the vault's headers.
			reqs := dest.requests()
			detokenized := 0
			for _, r := range reqs {
				if r.Header.Get("X-Sdk") == suite.name && strings.Contains(r.Body, suite.card) {
					detokenized++
				}
			}
			if detokenized == 0 {
				t.Errorf("no request from the %s suite reached the destination with its card number detokenized (%d requests in all)", suite.name, len(reqs))
			}
		})
	}

	// every other suite (one file per topic) runs with tenants of its own
	files, err := filepath.Glob(filepath.Join(dir, "*.test.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		file := filepath.Base(path)
		if slices.ContainsFunc(sdkSuites, func(s struct{ name, file, card string }) bool { return s.file == file }) {
			continue
		}
		t.Run(strings.TrimSuffix(file, ".test.mjs"), func(t *testing.T) {
			runNodeSuite(t, node, dir, file, nodeTimeout, []string{
				"TV_BASE_URL=" + baseURL,
				"TV_MANAGEMENT_KEY=" + admin.createTenant("sdk "+file).Key,
				"TV_DISPOSABLE_MANAGEMENT_KEY=" + admin.createTenant("sdk "+file+" disposable").Key,
				"TV_DESTINATION_URL=" + dest.URL,
			})
		})
	}

	for _, r := range dest.requests() {
		for name := range r.Header {
			if strings.HasPrefix(strings.ToUpper(name), "BT-") {
				t.Errorf("the destination received the vault header %s on %s %s", name, r.Method, r.Path)
			}
		}
	}
}

// ensureNodeModules runs `npm ci` in dir unless node_modules matches
// package-lock.json (npm's own record of the installed tree,
// node_modules/.package-lock.json, lists the same packages at the same
// versions).
func ensureNodeModules(t *testing.T, npm, dir string) {
	t.Helper()
	want, err := lockedPackages(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatalf("testdata/clients: %v", err)
	}
	if have, err := lockedPackages(filepath.Join(dir, "node_modules", ".package-lock.json")); err == nil && equalPackages(have, want) {
		return
	}
	t.Logf("testdata/clients: node_modules is missing or stale; running npm ci")
	ctx, cancel := context.WithTimeout(context.Background(), npmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	have, err := lockedPackages(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err != nil || !equalPackages(have, want) {
		t.Fatalf("npm ci in %s did not install package-lock.json's tree (%v)", dir, err)
	}
}

// lockedPackages reads the installed packages (path → version) of an npm
// lockfile.
func lockedPackages(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(raw, &lock); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	out := map[string]string{}
	for p, v := range lock.Packages {
		if strings.HasPrefix(p, "node_modules/") {
			out[p] = v.Version
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s lists no packages", path)
	}
	return out, nil
}

func equalPackages(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// runNodeSuite runs `node --test` on one file in dir with env added,
// streaming its output into the test log, and fails the test (without
// stopping it) when node fails or has not finished within limit. The SDK
// suites and the console's browser suite both run through it.
func runNodeSuite(t *testing.T, node, dir, file string, limit time.Duration, env []string) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", file)
	cmd.Dir = dir
	cmd.Env = append(nodeEnv(), env...)
	cmd.WaitDelay = 10 * time.Second
	w := &lineLogger{t: t}
	cmd.Stdout, cmd.Stderr = w, w
	err := cmd.Run()
	w.flush()
	t.Logf("node --test %s took %v", file, time.Since(start).Round(time.Millisecond))
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		t.Errorf("node --test %s did not finish within %v", file, limit)
	case err != nil:
		t.Errorf("node --test %s failed (%v); its output is above", file, err)
	}
}

// nodeEnv is the test's environment without variables that would change
// how node runs the suite.
func nodeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "NODE_OPTIONS", name == "NODE_TEST_CONTEXT", strings.HasPrefix(name, "TV_"):
			continue
		}
		env = append(env, kv)
	}
	return append(env, "NO_COLOR=1", "FORCE_COLOR=0")
}

// lineLogger writes each complete line to the test log.
type lineLogger struct {
	t   *testing.T
	mu  sync.Mutex
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.t.Log(string(bytes.TrimRight(l.buf[:i], "\r")))
		l.buf = l.buf[i+1:]
	}
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.t.Log(string(l.buf))
		l.buf = nil
	}
}

// echoRequest is what the echo destination received.
type echoRequest struct {
	Method string
	Path   string
	Query  string
	Header http.Header
	Body   string
}

// echoDestination answers every request with 200 (or NNN on a path ending
// in /status/NNN) and the JSON {method, path, query, headers, body, json},
// headers by lower-case name, and records the requests.
type echoDestination struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []echoRequest
}

func newEchoDestination(t *testing.T) *echoDestination {
	t.Helper()
	d := &echoDestination{}
	statusPath := regexp.MustCompile(`/status/([1-5][0-9][0-9])$`)
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 2<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		d.mu.Lock()
		d.reqs = append(d.reqs, echoRequest{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), string(body)})
		d.mu.Unlock()
		headers := map[string]string{}
		for name, vals := range r.Header {
			headers[strings.ToLower(name)] = vals[0]
		}
		headers["host"] = r.Host
		var parsed any
		if json.Unmarshal(body, &parsed) != nil {
			parsed = nil
		}
		status := http.StatusOK
		if m := statusPath.FindStringSubmatch(r.URL.Path); m != nil {
			fmt.Sscan(m[1], &status)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"method": r.Method, "path": r.URL.Path, "query": r.URL.RawQuery,
			"headers": headers, "body": string(body), "json": parsed,
		})
	}))
	t.Cleanup(d.Close)
	return d
}

func (d *echoDestination) requests() []echoRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]echoRequest(nil), d.reqs...)
}

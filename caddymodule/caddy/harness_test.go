package main

// The end-to-end harness: TestMain builds the custom Caddy binary once,
// and startServer runs it on loopback ports with a Caddyfile, real Badger
// storage in a temporary directory and the vault's master key from the
// environment or a key file.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// Bounds of the harness: every wait in it ends.
const (
	readyTimeout   = 15 * time.Second // process start until the API port answers
	exitTimeout    = 15 * time.Second // a refused start until the process exits
	stopGrace      = 10 * time.Second // SIGTERM until SIGKILL
	requestTimeout = 10 * time.Second // one HTTP request
	cliTimeout     = 30 * time.Second // one CLI invocation (tenant create, reload)
)

var (
	// binPath is the built Caddy with the vault; empty when skipReason
	// or buildErr is set.
	binPath    string
	skipReason string
	buildErr   error

	// serverSlots bounds the Caddy processes running at once (2-core
	// machine): a process takes a slot when it starts and returns it when
	// it has exited.
	serverSlots = make(chan struct{}, 2)
)

// Fixed test master keys: 32 bytes each, base64.
var (
	masterKeyA = testKey("tokenvault e2e master key A")
	masterKeyB = testKey("tokenvault e2e master key B")
	// shortKey decodes to 16 bytes.
	shortKey = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x5a}, 16))
)

func testKey(seed string) string {
	sum := sha256.Sum256([]byte(seed))
	return base64.StdEncoding.EncodeToString(sum[:])
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "tokenvault-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: creating a temporary directory:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	goTool, err := exec.LookPath("go")
	if err != nil {
		skipReason = "the go tool is not on PATH, so the Caddy binary cannot be built; skipping the end-to-end tests"
		fmt.Fprintln(os.Stderr, "e2e:", skipReason)
		return m.Run()
	}
	bin := filepath.Join(dir, "caddy")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, ".")
	out, err := cmd.CombinedOutput()
	if err != nil {
		buildErr = fmt.Errorf("go build -o %s . failed: %v\n%s", bin, err, out)
		fmt.Fprintln(os.Stderr, "e2e:", buildErr)
	} else {
		binPath = bin
	}
	return m.Run()
}

// needBinary skips or fails the test when the binary is not there.
func needBinary(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

// serverOpts configure one Caddy process.
type serverOpts struct {
	// Storage is the vault's storage directory; default a new temporary
	// directory.
	Storage string
	// MasterKeyFile, when set, gives the key as master_key_file instead of
	// master_key {env.TV_MASTER_KEY}.
	MasterKeyFile string
	// MasterKey is TV_MASTER_KEY; default masterKeyA.
	MasterKey string
	// NoMasterKey leaves TV_MASTER_KEY unset.
	NoMasterKey bool
	// SiteExtra goes into the site block before vault_api.
	SiteExtra string
	// VaultExtra goes into the global vault block, for example an egress
	// block.
	VaultExtra string
	// ExtraSites are more site blocks appended to the Caddyfile.
	ExtraSites string
	// RateLimits turns the rate limits on (the interface's table); tests
	// that send many requests from 127.0.0.1 leave them off.
	RateLimits bool
	// APIOptions are more lines inside the vault_api block.
	APIOptions string
	// Env is extra environment for the process and the CLI, NAME=value;
	// it overrides the harness's own variables.
	Env []string
	// HeaderPrefix, when set, is the vault's header_prefix (default SVC);
	// the access log then filters that prefix's credential headers. The
	// request helpers still send SVC-API-KEY: pass the prefix's header
	// name in their hdr arguments instead.
	HeaderPrefix string
	// SiteHosts are more host names the API site answers on its port,
	// beside 127.0.0.1 (localhost, for clients that send plain http to
	// localhost only).
	SiteHosts []string
}

// server is one Caddy process with the vault.
type server struct {
	t          *testing.T
	opts       serverOpts
	dir        string // config, logs, HOME
	configPath string
	apiPort    int
	adminPort  int
	baseURL    string
	adminAddr  string
	accessLog  string
	stderrPath string
	client     *http.Client

	cmd      *exec.Cmd
	done     chan struct{} // closed when the process has exited
	waitErr  error         // set before done is closed
	stopOnce sync.Once
}

// freePorts returns n distinct free loopback ports.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("finding a free port: %v", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// caddyfile renders the server's configuration.
func (s *server) caddyfile(siteExtra string) string {
	keyLine := "master_key {env.TV_MASTER_KEY}"
	if s.opts.MasterKeyFile != "" {
		keyLine = "master_key_file " + s.opts.MasterKeyFile
	}
	prefix := "SVC"
	if s.opts.HeaderPrefix != "" {
		prefix = s.opts.HeaderPrefix
		keyLine += "\n\t\theader_prefix " + prefix
	}
	// The access log's filter names the headers as Go canonicalizes them
	// (Svc-Api-Key, Bt-Api-Key) and the query parameter in lower case.
	apiKeyHeader := http.CanonicalHeaderKey(prefix + "-API-KEY")
	proxyKeyHeader := http.CanonicalHeaderKey(prefix + "-PROXY-KEY")
	proxyKeyParam := strings.ToLower(prefix) + "-proxy-key"
	site := fmt.Sprintf("http://127.0.0.1:%d", s.apiPort)
	for _, h := range s.opts.SiteHosts {
		site += fmt.Sprintf(", http://%s:%d", h, s.apiPort)
	}
	return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	vault {
		storage %s
		%s
		sync_writes on
%s
	}
}

%s {
	log {
		output file %s
		format filter {
			request>headers>%s delete
			request>headers>%s delete
			request>uri query {
				delete %s
			}
		}
	}
%s
	vault_api {
		%s
		%s
	}
}
%s`, s.adminPort, s.opts.Storage, keyLine, s.opts.VaultExtra, site, s.accessLog, apiKeyHeader, proxyKeyHeader, proxyKeyParam, siteExtra, s.rateLimitsLine(), s.opts.APIOptions, s.opts.ExtraSites)
}

// rateLimitsLine is vault_api's rate_limits option.
func (s *server) rateLimitsLine() string {
	if s.opts.RateLimits {
		return "# rate limits: the interface's table"
	}
	return "rate_limits off"
}

// env is the process environment: the test's own, with HOME and Caddy's
// directories inside the server's directory and TV_MASTER_KEY as opts say.
func (s *server) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "TV_MASTER_KEY", "HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME":
			continue
		}
		env = append(env, kv)
	}
	home := filepath.Join(s.dir, "home")
	env = append(env,
		"HOME="+home,
		"XDG_DATA_HOME="+filepath.Join(home, "data"),
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"),
		"XDG_CACHE_HOME="+filepath.Join(home, "cache"),
	)
	if !s.opts.NoMasterKey {
		env = append(env, "TV_MASTER_KEY="+s.opts.MasterKey)
	}
	return append(env, s.opts.Env...) // os/exec uses the last of duplicates
}

// newServer prepares a server's directory, ports and Caddyfile without
// starting it.
func newServer(t *testing.T, opts serverOpts) *server {
	t.Helper()
	needBinary(t)
	if opts.Storage == "" {
		opts.Storage = filepath.Join(t.TempDir(), "data")
	}
	if opts.MasterKey == "" && !opts.NoMasterKey {
		opts.MasterKey = masterKeyA
	}
	dir := t.TempDir()
	ports := freePorts(t, 2)
	s := &server{
		t:          t,
		opts:       opts,
		dir:        dir,
		configPath: filepath.Join(dir, "Caddyfile"),
		apiPort:    ports[0],
		adminPort:  ports[1],
		accessLog:  filepath.Join(dir, "access.log"),
		stderrPath: filepath.Join(dir, "caddy.stderr"),
		client: &http.Client{
			Timeout: requestTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
	}
	s.baseURL = fmt.Sprintf("http://127.0.0.1:%d", s.apiPort)
	s.adminAddr = fmt.Sprintf("127.0.0.1:%d", s.adminPort)
	if err := os.WriteFile(s.configPath, []byte(s.caddyfile(opts.SiteExtra)), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// launch starts the process; it takes a server slot, returned when the
// process has exited.
func (s *server) launch() {
	t := s.t
	t.Helper()
	serverSlots <- struct{}{}
	stderr, err := os.OpenFile(s.stderrPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		<-serverSlots
		t.Fatal(err)
	}
	s.cmd = exec.Command(binPath, "run", "--config", s.configPath, "--adapter", "caddyfile")
	s.cmd.Dir = s.dir
	s.cmd.Env = s.env()
	s.cmd.Stdout = stderr
	s.cmd.Stderr = stderr
	if err := s.cmd.Start(); err != nil {
		stderr.Close()
		<-serverSlots
		t.Fatalf("starting caddy: %v", err)
	}
	s.done = make(chan struct{})
	go func() {
		s.waitErr = s.cmd.Wait()
		stderr.Close()
		<-serverSlots
		close(s.done)
	}()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("caddy output (%s), last lines:\n%s", s.stderrPath, tail(s.stderr(), 4000))
		}
	})
}

// startServer starts Caddy and waits until its API port answers.
func startServer(t *testing.T, opts serverOpts) *server {
	t.Helper()
	s := newServer(t, opts)
	s.launch()
	if err := s.waitReady(); err != nil {
		t.Fatalf("caddy did not start: %v\noutput:\n%s", err, tail(s.stderr(), 4000))
	}
	return s
}

// waitReady polls the API port until it accepts a connection, the process
// exits, or readyTimeout passes.
func (s *server) waitReady() error {
	deadline := time.Now().Add(readyTimeout)
	addr := fmt.Sprintf("127.0.0.1:%d", s.apiPort)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return fmt.Errorf("caddy exited before serving: %v", s.waitErr)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 250*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("port %d did not answer within %v", s.apiPort, readyTimeout)
}

// runRefused starts Caddy with opts, expects it to exit on its own within
// exitTimeout, and returns its exit code and output. The vault must never
// serve a request: Caddy starts a config's apps in no fixed order, so the
// API port may accept a connection in the instant between the HTTP app's
// start and the vault's refused one, but a request caught then is
// answered 503.
func runRefused(t *testing.T, opts serverOpts) (int, string) {
	t.Helper()
	s := newServer(t, opts)
	s.launch()
	timer := time.NewTimer(exitTimeout)
	defer timer.Stop()
	addr := fmt.Sprintf("127.0.0.1:%d", s.apiPort)
	probe := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		select {
		case <-s.done:
			code := -1
			if s.cmd.ProcessState != nil {
				code = s.cmd.ProcessState.ExitCode()
			}
			return code, s.stderr()
		case <-timer.C:
			t.Fatalf("caddy did not exit within %v; output:\n%s", exitTimeout, tail(s.stderr(), 4000))
		case <-time.After(100 * time.Millisecond):
			if r, err := doRequest(probe, http.MethodGet, "http://"+addr+"/tenants/self", "", nil); err == nil && r.Status != http.StatusServiceUnavailable {
				t.Fatalf("caddy served on %s (%d %s) although it should have refused to start; output:\n%s", addr, r.Status, r.Raw, tail(s.stderr(), 4000))
			}
		}
	}
}

// stop ends the process: SIGTERM, then SIGKILL after stopGrace. It is
// safe to call more than once.
func (s *server) stop() {
	s.stopOnce.Do(func() {
		if s.cmd == nil || s.done == nil {
			return
		}
		select {
		case <-s.done:
			return
		default:
		}
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
			return
		case <-time.After(stopGrace):
		}
		s.t.Errorf("caddy (pid %d) did not stop within %v of SIGTERM; killing it", s.cmd.Process.Pid, stopGrace)
		_ = s.cmd.Process.Kill()
		select {
		case <-s.done:
		case <-time.After(stopGrace):
			s.t.Errorf("caddy (pid %d) did not exit after SIGKILL", s.cmd.Process.Pid)
		}
	})
}

// stopClean stops the server and fails the test unless it exited 0.
func (s *server) stopClean() {
	s.t.Helper()
	s.stop()
	if s.waitErr != nil {
		s.t.Errorf("caddy exited with %v after SIGTERM", s.waitErr)
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *server) kill() {
	s.t.Helper()
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Kill()
		select {
		case <-s.done:
		case <-time.After(stopGrace):
			s.t.Errorf("caddy (pid %d) did not exit after SIGKILL", s.cmd.Process.Pid)
		}
	})
}

// stderr returns everything the process wrote so far.
func (s *server) stderr() string {
	raw, _ := os.ReadFile(s.stderrPath)
	return string(raw)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// runCLI runs the binary with args and the server's environment.
func (s *server) runCLI(args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Dir = s.dir
	cmd.Env = s.env()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// createdTenant is the output of `caddy vault tenant create`.
type createdTenant struct {
	Tenant struct {
		ID   string `json:"id"`
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"tenant"`
	Application struct {
		ID          string   `json:"id"`
		Type        string   `json:"type"`
		Permissions []string `json:"permissions"`
	} `json:"application"`
	Key string `json:"key"`
}

// createTenant runs `caddy vault tenant create` against the server.
func (s *server) createTenant(name string) createdTenant {
	t := s.t
	t.Helper()
	out, errOut, err := s.runCLI("vault", "tenant", "create", "--name", name, "--type", "test", "--address", s.adminAddr)
	if err != nil {
		t.Fatalf("caddy vault tenant create: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	var ct createdTenant
	if err := json.Unmarshal([]byte(out), &ct); err != nil {
		t.Fatalf("caddy vault tenant create printed no JSON (%v): %q", err, out)
	}
	if ct.Tenant.ID == "" || ct.Application.ID == "" || !strings.HasPrefix(ct.Key, "key_test_") {
		t.Fatalf("caddy vault tenant create printed an incomplete tenant: %s", out)
	}
	if ct.Tenant.Name != name {
		t.Fatalf("tenant name = %q, want %q", ct.Tenant.Name, name)
	}
	return ct
}

// reload rewrites the Caddyfile with siteExtra and runs `caddy reload
// --force` against the server.
func (s *server) reload(siteExtra string) error {
	if err := os.WriteFile(s.configPath, []byte(s.caddyfile(siteExtra)), 0o600); err != nil {
		return err
	}
	out, errOut, err := s.runCLI("reload", "--config", s.configPath, "--adapter", "caddyfile", "--address", s.adminAddr, "--force")
	if err != nil {
		return fmt.Errorf("caddy reload: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	return nil
}

// apiResponse is what a client sees of one response.
type apiResponse struct {
	Status int
	Header http.Header
	Raw    []byte
	Body   any // the decoded JSON body, nil if not JSON
}

// request sends one request to the API without failing the test, for use
// from goroutines. body is nil, a string or []byte sent as is, or a value
// sent as JSON. hdr are extra header name/value pairs.
func (s *server) request(method, path, key string, body any, hdr ...string) (apiResponse, error) {
	return doRequest(s.client, method, s.baseURL+path, key, body, hdr...)
}

func doRequest(client *http.Client, method, url, key string, body any, hdr ...string) (apiResponse, error) {
	r, _, err := doRequestTraced(client, method, url, key, body, hdr...)
	return r, err
}

// doRequestTraced is doRequest that also reports whether the request went
// out on a reused keep-alive connection.
func doRequestTraced(client *http.Client, method, url, key string, body any, hdr ...string) (apiResponse, bool, error) {
	var reused atomic.Bool
	r, err := doRequestCtx(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { reused.Store(info.Reused) },
	}), client, method, url, key, body, hdr...)
	return r, reused.Load(), err
}

func doRequestCtx(ctx context.Context, client *http.Client, method, url, key string, body any, hdr ...string) (apiResponse, error) {
	rd, err := testjson.Body(body)
	if err != nil {
		return apiResponse{}, err
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return apiResponse{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("SVC-API-KEY", key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return apiResponse{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return apiResponse{}, fmt.Errorf("%s %s: reading the body: %w", method, url, err)
	}
	r := apiResponse{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	if len(bytes.TrimSpace(raw)) > 0 {
		var v any
		if json.Unmarshal(raw, &v) == nil {
			r.Body = v
		}
	}
	return r, nil
}

// do sends one request and fails the test on a transport error.
func (s *server) do(method, path, key string, body any, hdr ...string) apiResponse {
	s.t.Helper()
	r, err := s.request(method, path, key, body, hdr...)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// expect sends one request and fails the test unless the status is want.
func (s *server) expect(want int, method, path, key string, body any, hdr ...string) apiResponse {
	s.t.Helper()
	r := s.do(method, path, key, body, hdr...)
	if r.Status != want {
		s.t.Fatalf("%s %s: status %d, want %d; body: %s", method, path, r.Status, want, r.Raw)
	}
	return r
}

// adminGet reads a path of the admin API.
func (s *server) adminGet(path string) apiResponse {
	s.t.Helper()
	r, err := doRequest(s.client, http.MethodGet, "http://"+s.adminAddr+path, "", nil)
	if err != nil {
		s.t.Fatalf("admin GET %s: %v", path, err)
	}
	return r
}

// metric is the value of a metric in Caddy's /metrics (see metricValue).
func (s *server) metric(name string) string {
	s.t.Helper()
	return metricValue(string(s.adminGet("/metrics").Raw), name)
}

// metricValue is the value of the metric name, written as /metrics writes
// it (labels included, as in `x_bytes{cache="block"}`), in the /metrics
// text body; "" when it is not there.
func metricValue(body, name string) string {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// createApp creates an application with the management key mgmtKey and
// returns its id, its first key and that key's id.
func (s *server) createApp(mgmtKey string, body any) (id, key, keyID string) {
	s.t.Helper()
	r := s.expect(http.StatusCreated, http.MethodPost, "/applications", mgmtKey, body)
	id, key, keyID = testjson.Str(r.Body, "id"), testjson.Str(r.Body, "key"), testjson.Str(r.Body, "keys", 0, "id")
	if id == "" || !strings.HasPrefix(key, "key_test_") || keyID == "" {
		s.t.Fatalf("POST /applications: incomplete answer: %s", r.Raw)
	}
	return id, key, keyID
}

// isProblem reports whether r is an RFC 7807 body with its content type
// and the status it claims.
func isProblem(r apiResponse) error {
	ct := r.Header.Get("Content-Type")
	if !strings.HasPrefix(ct, "application/problem+json") {
		return fmt.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	m, ok := r.Body.(map[string]any)
	if !ok {
		return fmt.Errorf("body is not a JSON object: %s", r.Raw)
	}
	for _, k := range []string{"type", "title", "status"} {
		if _, ok := m[k]; !ok {
			return fmt.Errorf("problem without %q: %s", k, r.Raw)
		}
	}
	if st, _ := m["status"].(float64); int(st) != r.Status {
		return fmt.Errorf("problem status %v, HTTP status %d", m["status"], r.Status)
	}
	return nil
}

// wantProblem fails the test unless r has status want and is a problem.
func wantProblem(t *testing.T, r apiResponse, want int, what string) {
	t.Helper()
	if r.Status != want {
		t.Errorf("%s: status %d, want %d; body: %s", what, r.Status, want, r.Raw)
		return
	}
	if err := isProblem(r); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// fileDigests returns the SHA-256 of every regular file under dir, by
// path relative to dir.
func fileDigests(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out[rel] = fmt.Sprintf("%x", h.Sum(nil))
		return nil
	})
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	return out
}

// Linux lseek whence values that skip the holes of sparse files (Badger
// preallocates its value log and memtable files).
const (
	seekData = 3
	seekHole = 4
)

// scanTree searches every regular file under dir for each needle and
// returns, by needle name, the files that contain it.
func scanTree(t *testing.T, dir string, needles map[string][]byte) map[string][]string {
	t.Helper()
	found := map[string][]string{}
	files := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		files++
		hits, err := scanFile(path, needles)
		for _, name := range hits {
			found[name] = append(found[name], path)
		}
		return err
	})
	if err != nil {
		t.Fatalf("scanning %s: %v", dir, err)
	}
	if files == 0 {
		t.Fatalf("no files in %s", dir)
	}
	return found
}

// scanFile reports which needles occur in the file, reading only its data
// regions, in chunks that overlap by the longest needle.
func scanFile(path string, needles map[string][]byte) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	longest := 1
	for _, n := range needles {
		longest = max(longest, len(n))
	}
	hit := map[string]bool{}
	check := func(b []byte) {
		for name, n := range needles {
			if len(n) > 0 && !hit[name] && bytes.Contains(b, n) {
				hit[name] = true
			}
		}
	}
	buf := make([]byte, 4<<20)
	size := st.Size()
	for off := int64(0); off < size; {
		start, err := f.Seek(off, seekData)
		if err != nil {
			if off == 0 { // no SEEK_DATA support, or no data at all: read it all
				start = 0
			} else {
				break
			}
		}
		end, err := f.Seek(start, seekHole)
		if err != nil || end <= start {
			end = size
		}
		if _, err := f.Seek(start, io.SeekStart); err != nil {
			return nil, err
		}
		var carry []byte
		for pos := start; pos < end; {
			n, err := f.Read(buf[:min(int64(len(buf)), end-pos)])
			if n > 0 {
				window := append(carry, buf[:n]...)
				check(window)
				carry = append([]byte(nil), window[max(0, len(window)-longest+1):]...)
				pos += int64(n)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, err
			}
		}
		off = end
	}
	var names []string
	for name := range hit {
		names = append(names, name)
	}
	return names, nil
}

package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// hostileScripts are tenant code that would kill or stall a process that
// ran it in-process (security requirements, Appendix B), each run as a
// request transform.
var hostileScripts = map[string]string{
	"huge string":          `'x'.repeat(2 ** 34)`,
	"huge JSON.parse":      `JSON.parse('['.repeat(5e6) + ']'.repeat(5e6))`,
	"backtracking regexp":  `new RegExp('^(a+)+' + String.fromCharCode(92) + '1$').test('a'.repeat(40) + 'b')`,
	"huge array":           `new Array(1e9).fill(0)`,
	"endless loop":         `for (;;) {}`,
	"deep recursion":       `(function f() { return f() + 1 })()`,
	"allocation loop":      `const a = []; for (;;) a.push('x'.repeat(1 << 20) + Math.random())`,
	"never settles":        `return new Promise(() => {})`,
	"prototype pollution":  `Object.prototype.polluted = 'yes'; JSON.stringify = () => 'hacked'; throw new Error('polluted')`,
	"throws a card number": `throw new Error('card 4242424242424242 refused')`,
}

// TestHostileTransforms: each hostile script fails only its own request,
// with a proxy_error, within the deadline; the vault's process stays the
// same and small; another tenant's proxy traffic sees no error; and the
// pollution of one run is invisible to the next.
func TestHostileTransforms(t *testing.T) {
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.Copy(w, r.Body) // echo: the caller sees what its transform sent
	}))
	defer dest.Close()
	s := startServer(t, serverOpts{VaultExtra: egressLoopback + `
		transforms {
			min_workers 2
			max_workers 4
			timeout 3s
			memory_limit 128MiB
		}`})
	pid := s.cmd.Process.Pid
	a, b := s.createTenant("hostile"), s.createTenant("bystander")
	proxyWith := func(mgmt, code string) string {
		r := s.expect(http.StatusCreated, http.MethodPost, "/proxies", mgmt, map[string]any{
			"name": "p", "destination_url": dest.URL, "require_auth": false,
			"request_transform": map[string]any{"code": code},
		})
		return testjson.Str(r.Body, "key")
	}
	call := func(key string) apiResponse {
		r, err := s.request(http.MethodPost, "/proxy", "", map[string]any{"n": 1}, "SVC-PROXY-KEY", key)
		if err != nil {
			return apiResponse{Status: -1, Raw: []byte(err.Error())}
		}
		return r
	}
	clean := proxyWith(b.Key, `module.exports = async (req) => ({
		body: { polluted: ({}).polluted === undefined ? 'no' : 'yes', stringify: JSON.stringify({ a: 1 }) },
		headers: req.args.headers })`)

	// the bystander's steady traffic, bounded in time
	var stop atomic.Bool
	var calls, failures atomic.Int64
	var wg sync.WaitGroup
	var firstFailure atomic.Value
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(3 * time.Minute)
			for !stop.Load() && time.Now().Before(deadline) {
				r := call(clean)
				calls.Add(1)
				if r.Status != http.StatusOK || !strings.Contains(string(r.Raw), `"polluted":"no"`) || !strings.Contains(string(r.Raw), `{\"a\":1}`) {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("%d %s", r.Status, r.Raw))
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}

	for name, script := range hostileScripts {
		code := "module.exports = async function (req) { " + script + "; return { body: req.args.body, headers: req.args.headers } }"
		key := proxyWith(a.Key, code)
		start := time.Now()
		r := call(key)
		took := time.Since(start)
		if r.Status < 400 || testjson.Field(r.Body, "proxy_error") == nil {
			t.Errorf("%s: %d %s, want a proxy_error", name, r.Status, r.Raw)
		}
		if took > 3*time.Second+3*time.Second {
			t.Errorf("%s: answered after %s, past the deadline and its grace", name, took)
		}
		if strings.Contains(string(r.Raw), "4242424242424242") {
			t.Errorf("%s: the answer holds the card number: %s", name, r.Raw)
		}
		t.Logf("%-22s %d in %s: %s", name, r.Status, took.Round(time.Millisecond), r.Raw)
	}
	stop.Store(true)
	wg.Wait()
	if n := failures.Load(); n != 0 {
		t.Errorf("the bystander saw %d failures in %d calls; first: %v", n, calls.Load(), firstFailure.Load())
	}
	if calls.Load() < 10 {
		t.Errorf("the bystander made only %d calls", calls.Load())
	}
	if s.cmd.Process.Pid != pid || !processAlive(pid) {
		t.Fatal("the vault's process is gone")
	}
	if rss := residentKiB(t, pid); rss > 300*1024 {
		t.Errorf("the vault's resident memory is %d KiB after the corpus", rss)
	}
	if strings.Contains(s.stderr(), "4242424242424242") {
		t.Error("the log holds the card number a script threw")
	}
	r := s.adminGet("/vault/health")
	if r.Status != http.StatusOK {
		t.Errorf("health after the corpus: %d %s", r.Status, r.Raw)
	}
	// the workers that replaced the killed ones run under their system
	// call filter too (transforms.TestSyscallFilter shows what it refuses)
	workers := childPIDs(pid)
	if len(workers) < 2 {
		t.Errorf("the vault has %d transform workers, want at least min_workers 2", len(workers))
	}
	for _, w := range workers {
		if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
			break
		}
		// a worker that replaced a killed one may still be starting: it
		// installs the filter before it says it is ready
		var status []byte
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			var err error
			if status, err = os.ReadFile(fmt.Sprintf("/proc/%d/status", w)); err != nil || strings.Contains(string(status), "Seccomp:\t2") {
				break // filtered, or ended since
			}
		}
		if status != nil && !strings.Contains(string(status), "Seccomp:\t2") {
			t.Errorf("worker %d runs without its system call filter:\n%s", w, status)
		}
	}
	if strings.Contains(s.stderr(), "without their system call filter") {
		t.Error("the vault warns that its workers run without their system call filter")
	}
}

// childPIDs lists the processes a process started (its transform
// workers), from every thread's children in /proc.
func childPIDs(pid int) []int {
	var pids []int
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		for _, child := range strings.Fields(string(raw)) {
			if c, err := strconv.Atoi(child); err == nil {
				pids = append(pids, c)
			}
		}
	}
	return pids
}

func processAlive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// residentKiB reads a process's resident set size.
func residentKiB(t *testing.T, pid int) int {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n
		}
	}
	return 0
}

// TestTransformsEndToEnd: request and response transforms, an inbound
// proxy that tokenizes through req.svc, and a reactor, through the built
// binary against a destination on 127.0.0.1.
func TestTransformsEndToEnd(t *testing.T) {
	var mu sync.Mutex
	var received []string
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		received = append(received, r.Header.Get("X-Added")+" "+string(body))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"charged","pan":"4242424242424242"}`)
	}))
	defer dest.Close()
	s := startServer(t, serverOpts{VaultExtra: `
		egress {
			allow_http
			allow_network 127.0.0.0/8
		}`})
	ct := s.createTenant("transforms")
	appID, key, _ := s.createApp(ct.Key, map[string]any{"name": "p", "type": "private", "permissions": []string{
		"token:create", "token:read", "token:use", "reactor:invoke"}})
	card := s.expect(http.StatusCreated, http.MethodPost, "/tokens", key, map[string]any{"type": "card", "data": map[string]any{
		"number": "4242424242424242", "expiration_month": 12, "expiration_year": 2030}})
	cardID := testjson.Str(card.Body, "id")

	r := s.expect(http.StatusCreated, http.MethodPost, "/proxies", ct.Key, map[string]any{
		"name": "t", "destination_url": dest.URL,
		"request_transform": map[string]any{"code": `module.exports = async (req) => ({
			body: { pan: req.args.body.number, merchant: 'm-1' }, headers: { ...req.args.headers, 'X-Added': 'yes' } })`},
		"response_transform": map[string]any{"code": `module.exports = (req) => ({
			body: { status: req.args.body.status, pan: 'XXXX' + req.args.body.pan.slice(-4) }, headers: { 'Content-Type': 'application/json' } })`},
	})
	firstProxyKey := testjson.Str(r.Body, "key")
	r = s.do(http.MethodPost, "/proxy", key, map[string]any{"number": "{{ " + cardID + " | json: '$.number' }}"}, "SVC-PROXY-KEY", firstProxyKey)
	if r.Status != http.StatusOK || testjson.Str(r.Body, "pan") != "XXXX4242" || testjson.Str(r.Body, "status") != "charged" {
		t.Errorf("transformed answer: %d %s", r.Status, r.Raw)
	}
	mu.Lock()
	if len(received) != 1 || received[0] != `yes {"pan":"4242424242424242","merchant":"m-1"}` {
		t.Errorf("destination received %q", received)
	}
	received = nil
	mu.Unlock()

	// inbound: no API key, the transform tokenizes what arrives
	r = s.expect(http.StatusCreated, http.MethodPost, "/proxies", ct.Key, map[string]any{
		"name": "inbound", "destination_url": dest.URL, "require_auth": false, "application": map[string]any{"id": appID},
		"request_transform": map[string]any{"code": `module.exports = async (req) => {
			const t = await req.svc.tokenize({ type: 'card', data: req.args.body.card });
			return { body: { token: t.id }, headers: req.args.headers } }`},
	})
	r = s.do(http.MethodPost, "/proxy", "", map[string]any{"card": map[string]any{"number": "5555555555554444", "expiration_month": 1, "expiration_year": 2031}},
		"SVC-PROXY-KEY", testjson.Str(r.Body, "key"))
	if r.Status != http.StatusOK {
		t.Fatalf("inbound: %d %s", r.Status, r.Raw)
	}
	mu.Lock()
	got := received
	mu.Unlock()
	if len(got) != 1 || strings.Contains(got[0], "5555555555554444") {
		t.Fatalf("inbound destination got %q", got)
	}
	tokenID := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(got[0]), `{"token":"`), `"}`)
	// the key reads with plain permissions, so the number comes back masked
	if r := s.do(http.MethodGet, "/tokens/"+tokenID, key, nil); r.Status != http.StatusOK || testjson.Str(r.Body, "data", "number") != "XXXXXXXXXXXX4444" {
		t.Errorf("reading the inbound token: %d %s", r.Status, r.Raw)
	}

	// a reactor
	r = s.expect(http.StatusCreated, http.MethodPost, "/reactors", ct.Key, map[string]any{
		"name": "r", "configuration": map[string]any{"k": "v"},
		"code": `module.exports = async (req) => ({ raw: { last4: req.args.card.number.slice(-4), k: req.configuration.k } })`,
	})
	r = s.do(http.MethodPost, "/reactors/"+testjson.Str(r.Body, "id")+"/react", key, map[string]any{"args": map[string]any{
		"card": "{{ token: " + cardID + " | json: '$.data' }}"}})
	if r.Status != http.StatusOK || testjson.Str(r.Body, "raw", "last4") != "4242" || testjson.Str(r.Body, "raw", "k") != "v" {
		t.Errorf("react: %d %s", r.Status, r.Raw)
	}

	// the pool's counters: six runs so far (two a proxy call), and a
	// second call of the first proxy finds its realms warm
	warm := func() int {
		n, err := strconv.Atoi(s.metric("tokenvault_transform_warm_runs_total"))
		if err != nil {
			t.Fatalf("tokenvault_transform_warm_runs_total: %v", err)
		}
		return n
	}
	warmBefore := warm()
	if r := s.do(http.MethodPost, "/proxy", key, map[string]any{"number": "{{ " + cardID + " | json: '$.number' }}"}, "SVC-PROXY-KEY", firstProxyKey); r.Status != http.StatusOK {
		t.Fatalf("second call: %d %s", r.Status, r.Raw)
	}
	if got := warm() - warmBefore; got != 2 {
		t.Errorf("the second call found %d of its 2 realms warm", got)
	}
	if runs, err := strconv.Atoi(s.metric("tokenvault_transform_worker_runs_total")); err != nil || runs < 6 {
		t.Errorf("tokenvault_transform_worker_runs_total = %d (%v), want at least 6", runs, err)
	}
	if starts, err := strconv.Atoi(s.metric("tokenvault_transform_worker_starts_total")); err != nil || starts < 1 {
		t.Errorf("tokenvault_transform_worker_starts_total = %d (%v), want at least 1", starts, err)
	}
}

// TestWorkersDieWithTheServer: when the server is killed (SIGKILL, so it
// cleans nothing up), its transform workers die with it at once, the busy
// one in the middle of an endless loop too, long before its run's
// deadline.
func TestWorkersDieWithTheServer(t *testing.T) {
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer dest.Close()
	s := startServer(t, serverOpts{VaultExtra: egressLoopback + `
		transforms {
			min_workers 2
			timeout 60s
		}`})
	ct := s.createTenant("orphans")
	r := s.expect(http.StatusCreated, http.MethodPost, "/proxies", ct.Key, map[string]any{
		"name": "busy", "destination_url": dest.URL, "require_auth": false,
		"request_transform": map[string]any{"code": "module.exports = async () => { for (;;) {} }"},
	})
	key := testjson.Str(r.Body, "key")
	go func() { _, _ = s.request(http.MethodPost, "/proxy", "", map[string]any{"n": 1}, "SVC-PROXY-KEY", key) }()
	var workers []int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if workers = childPIDs(s.cmd.Process.Pid); len(workers) >= 2 {
			break
		}
	}
	if len(workers) < 2 {
		t.Fatalf("the server has %d workers, want 2", len(workers))
	}
	time.Sleep(300 * time.Millisecond) // the endless loop is under way
	s.kill()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		alive := 0
		for _, w := range workers {
			if raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", w)); err == nil && !strings.Contains(string(raw), ") Z ") {
				alive++
			}
		}
		if alive == 0 {
			return
		}
	}
	t.Errorf("workers %v outlived the killed server by 5 s", workers)
}

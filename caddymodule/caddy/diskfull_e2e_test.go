package main

import (
	"crypto/rand"
	"encoding/hex"
	"github.com/tokenvault/tokenvault/internal/testfs"
	"github.com/tokenvault/tokenvault/internal/testjson"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Bounds of the disk-full test: every wait in it ends.
const (
	diskFSSize       = 384 << 20         // the tmpfs: an empty store's margin is about 150 MiB
	diskHeadroom     = 6 << 20           // what the filler leaves beyond the margin
	diskLoadRequests = 6000              // the write load's bound in requests
	diskLoadTime     = 150 * time.Second // and in time
	diskEnough507s   = 20                // refusals that end the load
	diskResumeTime   = 30 * time.Second  // space freed until a write succeeds
)

// TestDiskFullEndToEnd fills the storage's file system under a write load
// through the built binary. Before this test existed the process died of
// SIGBUS inside Badger's memory-mapped logs, clients saw connections
// refused, and a restart on the full disk died again while replaying.
// Now: writes get 507 with Retry-After and a problem body, no request
// ever fails to get an answer, reads go on, /healthz and /vault/health
// report the disk, a metric and one log line tell the operator, and
// writes resume by themselves once space is freed. A start on the full
// disk (after a clean stop, and after kill -9 with logs to replay) is
// refused with one line and no crash, and once space is freed every
// acknowledged token is there.
func TestDiskFullEndToEnd(t *testing.T) {
	needBinary(t)
	fsDir := testfs.MountTmpfs(t, diskFSSize)
	storage := filepath.Join(fsDir, "data")
	opts := serverOpts{Storage: storage, APIOptions: "health_path /healthz"}
	s := startServer(t, opts)
	ct := s.createTenant("disk")
	_, key, _ := s.createApp(ct.Key, map[string]any{"name": "writer", "type": "private",
		"rules": []map[string]any{{"priority": 1, "container": "/", "transform": "reveal", "permissions": []string{"token:create", "token:read"}}}})

	acked := map[string]string{} // token id → its data
	create := func(s *server) (apiResponse, string, error) {
		blob := randomText(4000)
		r, err := s.request(http.MethodPost, "/tokens", key, map[string]any{"type": "token", "data": map[string]any{"blob": blob}})
		return r, blob, err
	}
	r, blob, err := create(s)
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("the first token: %v %d %s", err, r.Status, r.Raw)
	}
	first := testjson.Str(r.Body, "id")
	acked[first] = blob

	// fill the file system to a few MB over the margin the vault reports
	// (a vault without the report got a few MB in all)
	health := s.adminGet("/vault/health")
	margin, _ := testjson.Field(health.Body, "disk", "margin_bytes").(float64)
	t.Logf("before the load: %s", health.Raw)
	filler := testfs.FillTo(t, fsDir, "filler", int64(margin)+diskHeadroom)

	// the write load, until the vault refuses writes
	var (
		mu        sync.Mutex
		sent      int
		refusals  int
		transport []error
		wg        sync.WaitGroup
		deadline  = time.Now().Add(diskLoadTime)
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				over := sent >= diskLoadRequests || refusals >= diskEnough507s || len(transport) > 0 || time.Now().After(deadline)
				sent++
				mu.Unlock()
				if over {
					return
				}
				r, blob, err := create(s)
				mu.Lock()
				switch {
				case err != nil:
					transport = append(transport, err)
				case r.Status == http.StatusCreated:
					acked[testjson.Str(r.Body, "id")] = blob
				case r.Status == http.StatusInsufficientStorage:
					refusals++
					if perr := isProblem(r); perr != nil {
						t.Errorf("507: %v", perr)
					}
					if r.Header.Get("Retry-After") == "" || !strings.Contains(testjson.Str(r.Body, "detail"), "too full") {
						t.Errorf("507 without Retry-After or a clear detail: %v %s", r.Header, r.Raw)
					}
				default:
					t.Errorf("POST /tokens on a filling disk: %d %s", r.Status, r.Raw)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("load: %d requests, %d tokens acknowledged, %d refused with 507", sent, len(acked), refusals)
	select {
	case <-s.done:
		t.Fatalf("the server died under the load: %v\n%s", s.waitErr, tail(s.stderr(), 3000))
	default:
	}
	if len(transport) > 0 {
		t.Fatalf("%d requests got no answer (first: %v); server output:\n%s", len(transport), transport[0], tail(s.stderr(), 3000))
	}
	if refusals == 0 {
		t.Fatalf("no write was refused after %d requests", sent)
	}

	t.Run("reads go on", func(t *testing.T) {
		r := s.expect(http.StatusOK, http.MethodGet, "/tokens/"+first, key, nil)
		if testjson.Str(r.Body, "data", "blob") != acked[first] {
			t.Errorf("the first token reads back different data")
		}
		s.expect(http.StatusOK, http.MethodGet, "/tokens?size=5", key, nil)
	})

	t.Run("health reports the disk", func(t *testing.T) {
		// free space is about at the margin: a write refused just over it
		// did not fit
		for _, h := range []apiResponse{s.do(http.MethodGet, "/healthz", "", nil), s.adminGet("/vault/health")} {
			free, _ := testjson.Field(h.Body, "disk", "free_bytes").(float64)
			m, _ := testjson.Field(h.Body, "disk", "margin_bytes").(float64)
			if h.Status != http.StatusOK || testjson.Str(h.Body, "status") != "degraded" || testjson.Str(h.Body, "checks", "disk") != "low" ||
				testjson.Str(h.Body, "checks", "store") != "ok" || testjson.Field(h.Body, "disk", "writable") != false || m <= 0 || free <= 0 || free >= m+diskHeadroom {
				t.Errorf("health while writes are refused: %d %s", h.Status, h.Raw)
			}
		}
	})

	t.Run("metrics", func(t *testing.T) {
		if v := s.metric("tokenvault_storage_writes_refused"); v != "1" {
			t.Errorf("tokenvault_storage_writes_refused = %q, want 1", v)
		}
		if n, _ := strconv.ParseFloat(s.metric("tokenvault_storage_refused_writes_total"), 64); n < float64(refusals) {
			t.Errorf("tokenvault_storage_refused_writes_total = %v, want at least %d", n, refusals)
		}
		if s.metric("tokenvault_storage_free_bytes") == "" || s.metric("tokenvault_storage_margin_bytes") == "" {
			t.Error("/metrics lacks the free space or the margin")
		}
	})

	if n := strings.Count(s.stderr(), "nearly full"); n != 1 {
		t.Errorf("%d log lines say the disk is nearly full, want 1:\n%s", n, tail(s.stderr(), 3000))
	}
	for _, leak := range []string{acked[first][:32], key} {
		if strings.Contains(s.stderr(), leak) {
			t.Error("the server's log holds token data or a key")
		}
	}

	// space freed: writes resume by themselves
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	resumeBy := time.Now().Add(diskResumeTime)
	for {
		r, blob, err := create(s)
		if err != nil {
			t.Fatalf("after freeing space: %v", err)
		}
		if r.Status == http.StatusCreated {
			acked[testjson.Str(r.Body, "id")] = blob
			break
		}
		if r.Status != http.StatusInsufficientStorage || time.Now().After(resumeBy) {
			t.Fatalf("writes did not resume after space was freed: %d %s", r.Status, r.Raw)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if h := s.do(http.MethodGet, "/healthz", "", nil); h.Status != http.StatusOK || testjson.Str(h.Body, "status") != "ok" || testjson.Field(h.Body, "disk", "writable") != true {
		t.Errorf("health once space was freed: %d %s", h.Status, h.Raw)
	}
	if n := strings.Count(s.stderr(), "has room again"); n != 1 {
		t.Errorf("%d log lines say writes resumed, want 1", n)
	}
	if v := s.metric("tokenvault_storage_writes_refused"); v != "0" {
		t.Errorf("tokenvault_storage_writes_refused once space was freed = %q, want 0", v)
	}

	// a start on a full disk is refused, after a clean stop and after a
	// crash that leaves logs to replay
	s.stopClean()
	refusedStart(t, fsDir, opts)
	s = startServer(t, opts)
	readAllTokens(t, s, key, acked)
	for i := 0; i < 20; i++ {
		r, blob, err := create(s)
		if err != nil || r.Status != http.StatusCreated {
			t.Fatalf("a token before the crash: %v %d %s", err, r.Status, r.Raw)
		}
		acked[testjson.Str(r.Body, "id")] = blob
	}
	s.kill()
	refusedStart(t, fsDir, opts)
	s = startServer(t, opts)
	readAllTokens(t, s, key, acked)
	s.stopClean()
}

// refusedStart fills the file system, checks that the vault refuses to
// start on it with one clear line and no crash, and frees the space.
func refusedStart(t *testing.T, fsDir string, opts serverOpts) {
	t.Helper()
	filler := testfs.FillTo(t, fsDir, "filler", 0)
	code, out := runRefused(t, opts)
	if code == 0 {
		t.Errorf("caddy exited 0 on a full disk")
	}
	if n := strings.Count(out, "free space and start again"); n != 1 {
		t.Errorf("%d lines give the reason, want 1:\n%s", n, tail(out, 3000))
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "free space and start again") {
			t.Logf("refused: %s", line)
		}
	}
	for _, crash := range []string{"SIGBUS", "panic:", "fatal error", "goroutine "} {
		if strings.Contains(out, crash) {
			t.Errorf("the refused start crashed (%q):\n%s", crash, tail(out, 3000))
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
}

// readAllTokens reads back every acknowledged token.
func readAllTokens(t *testing.T, s *server, key string, acked map[string]string) {
	t.Helper()
	bad := 0
	for id, blob := range acked {
		r := s.do(http.MethodGet, "/tokens/"+id, key, nil)
		if r.Status != http.StatusOK || testjson.Str(r.Body, "data", "blob") != blob {
			if bad++; bad <= 3 {
				t.Errorf("acknowledged token %s: %d %.200s", id, r.Status, r.Raw)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d acknowledged tokens are missing or wrong", bad, len(acked))
	}
}

func randomText(n int) string {
	b := make([]byte, (n+1)/2)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)[:n]
}

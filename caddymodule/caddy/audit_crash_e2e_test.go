package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// crashDestination counts, per token id, the proxied requests that
// reached it with that token's card number: data that left the vault.
type crashDestination struct {
	url  string
	pans map[string]string // token id -> its card number

	mu    sync.Mutex
	got   map[string]int
	wrong []string
}

func newCrashDestination(t *testing.T, pans map[string]string) *crashDestination {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &crashDestination{url: "http://" + ln.Addr().String() + "/charge", pans: pans, got: map[string]int{}}
	srv := &http.Server{Handler: d, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return d
}

func (d *crashDestination) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct{ Ref, Number string }
	raw, readErr := io.ReadAll(r.Body)
	d.mu.Lock()
	defer d.mu.Unlock()
	if readErr != nil {
		// The vault was killed while it sent this request: only what
		// arrived left the vault. A cut-short body counts when it holds
		// a card number, against the token whose id it names.
		for id, pan := range d.pans {
			if strings.Contains(string(raw), id) && strings.Contains(string(raw), pan) {
				d.got[id]++
			}
		}
		return
	}
	if err := json.Unmarshal(raw, &body); err != nil || d.pans[body.Ref] == "" || body.Number != d.pans[body.Ref] {
		d.wrong = append(d.wrong, fmt.Sprintf("%q", fmt.Sprintf("%.200s", raw)))
	} else {
		d.got[body.Ref]++
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"ok":true}`)
}

// received returns a copy of the counts so far.
func (d *crashDestination) received() (map[string]int, []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int, len(d.got))
	for k, v := range d.got {
		out[k] = v
	}
	return out, append([]string(nil), d.wrong...)
}

// TestAuditSurvivesKill9 proves the default audit tier's guarantee
// against a crash of the vault process: under load (readers revealing
// cards and callers proxying them to a destination), Caddy is killed
// with SIGKILL; after a restart on the same storage, every read whose
// answer carried a card number has its audit record, and so has every
// request that reached the destination with one. Three rounds, so that
// records committed after earlier restarts are checked too.
func TestAuditSurvivesKill9(t *testing.T) {
	t.Parallel()
	storage := filepath.Join(t.TempDir(), "data")
	const (
		rounds  = 3
		readers = 4
		proxies = 4
		runFor  = 2 * time.Second
		maxPer  = 5000 // requests per worker and round, a bound only
		nTokens = 10
	)
	opts := serverOpts{Storage: storage, VaultExtra: egressLoopback}
	s := startServer(t, opts)
	if cfg := s.caddyfile(""); strings.Contains(cfg, "audit_sync") {
		t.Fatalf("the harness's Caddyfile sets audit_sync: this test is of the default tier\n%s", cfg)
	}
	ct := s.createTenant("Crash Co")
	_, key, _ := s.createApp(ct.Key, map[string]any{"name": "payments", "type": "private", "rules": []map[string]any{
		{"priority": 1, "container": "/", "transform": "reveal", "permissions": []string{"token:create", "token:read", "token:use"}}}})
	pans := map[string]string{}
	var ids []string
	for i := range nTokens {
		pan := loadPANs[i%len(loadPANs)]
		id := createToken(t, s, key, fmt.Sprintf(`{"type":"card","data":{"number":%q,"expiration_month":%d,"expiration_year":2031}}`, pan, 1+i))
		pans[id] = pan
		ids = append(ids, id)
	}
	dest := newCrashDestination(t, pans)
	_, proxyKey := createProxy(t, s, ct.Key, map[string]any{"name": "crash destination", "destination_url": dest.url})

	revealed := map[string]int{} // token id -> reads whose answer carried its number
	var revealedMu sync.Mutex
	for round := 1; round <= rounds; round++ {
		if round > 1 {
			s = startServer(t, opts)
		}
		var (
			killed   atomic.Bool
			failures []string
			failMu   sync.Mutex
			wg       sync.WaitGroup
			requests atomic.Int64
		)
		fail := func(msg string) {
			failMu.Lock()
			defer failMu.Unlock()
			if len(failures) < 10 {
				failures = append(failures, msg)
			}
		}
		for w := range readers + proxies {
			wg.Go(func() {
				for i := 0; i < maxPer && !killed.Load(); i++ {
					id := ids[(w+i)%len(ids)]
					var (
						r   apiResponse
						err error
					)
					if w < readers {
						r, err = s.request(http.MethodGet, "/tokens/"+id, key, nil)
					} else {
						body := map[string]any{"ref": id, "number": cardExpr(id)}
						r, err = s.request(http.MethodPost, "/proxy", key, body, "SVC-PROXY-KEY", proxyKey)
					}
					switch {
					case err != nil:
						if !killed.Load() {
							fail(fmt.Sprintf("before the kill: %v", err))
						}
						return
					case r.Status != http.StatusOK:
						if !killed.Load() {
							fail(fmt.Sprintf("status %d: %.300s", r.Status, r.Raw))
						}
					case w < readers:
						if !strings.Contains(string(r.Raw), pans[id]) {
							fail(fmt.Sprintf("a revealed read without the card number: %.300s", r.Raw))
							continue
						}
						revealedMu.Lock()
						revealed[id]++
						revealedMu.Unlock()
					}
					requests.Add(1)
				}
			})
		}
		time.Sleep(runFor)
		killed.Store(true)
		s.kill()
		wg.Wait()
		if len(failures) > 0 {
			t.Errorf("round %d: requests failed before the kill:\n%s", round, strings.Join(failures, "\n"))
		}
		if requests.Load() == 0 {
			t.Fatalf("round %d: no request was answered before the kill", round)
		}
		t.Logf("round %d: %d requests answered before SIGKILL", round, requests.Load())
	}

	// after the last kill: every answer that carried data has its record
	s = startServer(t, opts)
	defer s.stopClean()
	readRecords := map[string]int{}
	for _, rec := range listAllLogs(t, s, ct.Key, "token") {
		if rec.Operation == "read" {
			readRecords[rec.EntityID]++
		}
	}
	proxyRecords := map[string]int{}
	for _, rec := range listAllLogs(t, s, ct.Key, "proxy") {
		if rec.Operation == "detokenize" {
			for _, id := range rec.TokenIDs {
				proxyRecords[id]++
			}
		}
	}
	forwarded, wrong := dest.received()
	if len(wrong) > 0 {
		t.Errorf("the destination got %d bodies without the referenced card number, e.g. %s", len(wrong), wrong[0])
	}
	var reads, sent int
	for _, id := range ids {
		reads += revealed[id]
		sent += forwarded[id]
		if readRecords[id] < revealed[id] {
			t.Errorf("token %s: %d reads answered with its number, %d read records after kill -9", id, revealed[id], readRecords[id])
		}
		if proxyRecords[id] < forwarded[id] {
			t.Errorf("token %s: the destination got its number %d times, %d proxy records after kill -9", id, forwarded[id], proxyRecords[id])
		}
	}
	if reads == 0 || sent == 0 {
		t.Fatalf("nothing to check: %d revealed reads, %d forwarded calls", reads, sent)
	}
	t.Logf("%d revealed reads and %d forwarded calls over %d kills, each with its audit record", reads, sent, rounds)
}

// crashLogRecord is what TestAuditSurvivesKill9 reads of an audit record.
type crashLogRecord struct {
	EntityID  string   `json:"entity_id"`
	Operation string   `json:"operation"`
	TokenIDs  []string `json:"token_ids"`
}

// listAllLogs pages through the tenant's audit records of entityType.
func listAllLogs(t *testing.T, s *server, key, entityType string) []crashLogRecord {
	t.Helper()
	var out []crashLogRecord
	start := ""
	for range 10000 {
		q := url.Values{"entity_type": {entityType}, "size": {"100"}}
		if start != "" {
			q.Set("start", start)
		}
		r := s.expect(http.StatusOK, http.MethodGet, "/logs?"+q.Encode(), key, nil)
		var page struct {
			Pagination struct {
				Next string `json:"next"`
			} `json:"pagination"`
			Data []crashLogRecord `json:"data"`
		}
		if err := json.Unmarshal(r.Raw, &page); err != nil {
			t.Fatalf("GET /logs: %v: %.300s", err, r.Raw)
		}
		out = append(out, page.Data...)
		if page.Pagination.Next == "" {
			return out
		}
		start = page.Pagination.Next
	}
	t.Fatal("GET /logs: more than 10000 pages")
	return nil
}

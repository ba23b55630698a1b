package main

// The load benchmark: the vault against Caddy floors, side by side in one
// Caddy process, on Badger or on PostgreSQL, with one vault node or two.
//
// Command (from the repository root; about 8 minutes on 2 cores, plus the
// build of the binary):
//
//	TV_LOAD=1 go test ./caddymodule/caddy/ -run TestLoad -v -timeout 30m
//
// TV_LOAD=quick runs a smoke version (16 connections only, 2 rounds of
// 1 s per case, under a minute). TV_LOAD_OUT=<path> also writes the
// environment and the tables to that file. TV_LOAD_CASES=<regexp> runs
// only the cases whose names match it, with their floors.
// TV_LOAD_PROFILE=<dir> writes a CPU profile and an allocation profile of
// the Caddy process (from its admin API's /debug/pprof, the allocations
// made during the run) for every case of the first round at the highest
// concurrency, named after the case (<case>-c64.pprof and
// <case>-c64.allocs.pprof); read one with `go tool pprof -top <file>`
// (-sample_index=alloc_space for allocations); with two nodes the second
// node's are <case>-c64-node2.pprof and so on. Without TV_LOAD the test
// is skipped, so the normal test suite does not run it.
//
// TV_LOAD_AUDIT_SYNC=strict runs the vault with `audit_sync strict` (each
// read's and proxied call's audit record synced before data leaves)
// instead of the default tier, for a run beside the default one.
//
// TV_LOAD_ENGINE=postgres keeps the vault in PostgreSQL instead of Badger:
// a fresh database (pgtest.NewDatabase: on the machine's server, or the
// one TV_POSTGRES_URL names; dropped at the end) in a postgres block of
// the vault block, its connection string handed to Caddy in the
// environment (TV_LOAD_PG_URL) and named by a placeholder. The server
// must run on this machine: the benchmark reads its processes in /proc
// and its log (below). TV_LOAD_NODES=2 (PostgreSQL only) starts a second
// vault process on the same database, without the floors; the load
// generator's connection w goes to node w mod 2, straight to the node's
// port. There is no load balancer in front, so the figures measure the
// vault nodes and nothing else (at 1 connection only the first node
// serves). TV_LOAD_PG_MAX_CONNS=<n> sets each node's max_conns (default:
// the engine's), TV_LOAD_PG_SETTINGS=<name>=<value>,... sets server
// settings for the run's database only (ALTER DATABASE ... SET, for
// example commit_delay=100,commit_siblings=2), and
// TV_LOAD_PG_DSN_PARAMS=<k>=<v>&... adds parameters to the connection
// string (for example default_query_exec_mode=exec).
//
// What runs, all on 127.0.0.1 in one Caddy process built from this tree
// (and a second one for the second node, with the vault only):
//
//   - the vault: a site with vault_api (rate_limits off), real Badger in
//     a temporary directory, sync_writes on (every acknowledged write is
//     on disk), or PostgreSQL (every commit is flushed, as the server's
//     synchronous_commit says), an egress block allowing http and
//     127.0.0.0/8;
//   - floor "respond": a second site whose `respond` routes answer the
//     same methods and paths with static JSON bodies of the size the vault
//     answers for that case;
//   - floor "reverse_proxy": a third site with reverse_proxy to the same
//     destination the vault's proxy points at (a small HTTP server in the
//     test process that reads the body and answers 200 with a small JSON
//     body).
//
// All three sites have the same access log configuration (the harness's
// filtered file log), so a ratio measures the vault's handler, not the
// logging. The vault's rate limits are switched off (`rate_limits off`
// in its vault_api block).
//
// Cases, each run with 1, 16 and 64 connections (one goroutine with its
// own keep-alive client per connection, sending back to back):
//
//	vault case                       request body                   floor
//	POST /tokens (card)              a card, 199 B                  respond POST /tokens
//	POST /tokenize (5)               5 cards, 556 B                 respond POST /tokenize
//	GET /tokens/{id} reveal, mask    -                              respond GET /tokens/{id}
//	GET /tokens?size=20              - (answer: a page of 20)       respond GET /tokens
//	/proxy 1KB, 64KB, 1 or 5 refs    JSON of exactly 1024 or        reverse_proxy with the
//	                                 65536 B, string members and    1-reference body of the
//	                                 {{ <id> | json: '$.number' }}  same size (not detokenized)
//	/proxy 1KB, 1 ref, transform     the 1 KB body, through a proxy  the same call through the
//	                                 whose request transform hands   proxy without a transform
//	                                 the request on unchanged
//
// For each concurrency, R rounds (3; quick: 2) each run every case once
// for a fixed time (3 s; quick: 1 s), in a fixed order with each vault
// case right after its floor; after each run it waits (up to 30 s) for
// Caddy to go idle, so that the flushes and compactions a write case sets
// off are not charged to the next case. Token creates go to a tenant of their own,
// so the reads, the page of 20 and the proxy always see the same 25
// tokens (listing a tenant's tokens scans all of them: see the note at
// the end of the output).
//
// The output is one table per concurrency:
//
//	c=64: 64 connection(s), 3 rounds × 3s per case
//	case                              req/s   p50 ms   p99 ms  CPU µs/req   load µs   idle µs  disk KB/req  floor                     ratio [min-max]       errors
//	respond GET /tokens/{id}          14730     3.87    14.97          80        49         5          0.5  -                         -                          0
//	vault GET /tokens/{id} reveal      7889     7.64    19.32         155        65        26          1.3  respond GET /tokens/{id}  0.535 [0.521-0.639]        0
//
//	req/s       successful (2xx) responses per second: the median over
//	            the rounds
//	p50, p99    latency of successful requests over all rounds, from
//	            sending the request to reading the whole response
//	CPU µs/req  the utime+stime of the Caddy process and its transform
//	            workers (from /proc/<pid>/stat, 100 ticks per second) over
//	            the runs, divided by every response it gave in them; with
//	            two nodes, of both Caddy processes
//	pg µs/req   (PostgreSQL only) the same for the database server's
//	            processes that serve the run: the sessions of the run's
//	            database (the postmaster's children whose process title
//	            names it) and the WAL writer
//	load µs     the same for the test process: the load generator, and
//	            for the proxy cases the destination
//	idle µs     the machine's idle and iowait time (/proc/stat, both
//	            CPUs) divided the same way: time in which nothing had work
//	            to run, for instance while every connection waited on a
//	            sync. The columns add up to about 2 CPUs ÷ req/s, less
//	            what other processes took
//	disk KB/req what the Caddy processes wrote to storage over the runs
//	            (write_bytes of /proc/<pid>/io: Badger and the access
//	            logs), and on PostgreSQL what the run's sessions and the
//	            WAL writer wrote, divided the same way
//	floor       the floor case the vault case is compared with
//	ratio       vault req/s ÷ floor req/s in the same round, the median
//	            over the rounds, with the lowest and highest round in
//	            brackets: 0.05 means the vault serves 5% of the floor's
//	            rate, that is each request costs about 20 times what the
//	            same exchange costs through bare Caddy
//	errors      non-2xx responses and transport errors; a case with errors
//	            is marked "!", its errors are listed under the table, and
//	            the test fails after printing everything
//
// On PostgreSQL each table is followed by a line per vault case of what
// the database did per request:
//
//	pg µs       as in the table: the run's sessions and the WAL writer
//	walw µs     of which the WAL writer
//	other µs    the server's other processes (checkpointer, background
//	            writer, postmaster): they work for every database, on a
//	            shared server other tests' too, so they are not in pg µs
//	trips       data segments the run's sessions received (data_segs_in
//	            of `ss -ti`): about the round trips, as a pipelined batch
//	            arrives in one segment on loopback
//	commits     transactions of the run's database committed and rolled
//	rollbks     back (pg_stat_database): a View ends with ROLLBACK, and
//	            so does a run of an Update that lost a conflict
//	WALsync     WAL flushes, bytes and full-page images of the whole
//	WAL KB, FPI server (pg_stat_wal; a shared server's other work too)
//	disk KB     write_bytes of the run's sessions and the WAL writer
//	other KB    write_bytes of the server's other processes
//	errors      ERROR lines of the run's database in the server log
//	            (/var/log/postgresql/postgresql-15-main.log), listed by
//	            message at the end of the line
//	sessions    the pools' sessions, sampled in pg_stat_activity every
//	            20 ms: how many on average were idle (in the pool, or held
//	            by the vault outside a transaction), in-txn (in a
//	            transaction, waiting for the vault's next statement: the
//	            vault's CPU or a round trip), aborted (after a failed
//	            statement, waiting for the ROLLBACK), cpu (running),
//	            wal-io (writing or syncing the WAL), wal-wait (waiting for
//	            another session's WAL flush: group commit), lock:... and
//	            LWLock:... (waiting on a lock)
//
// The statistics (commits to errors) are read between runs, at least
// 1.1 s after a run ended (a session reports them when idle, at most once
// a second): they also count the warm-up requests, which they divide by
// too, and whatever the vault did in the background meanwhile.
//
// Under each table: the share of the CPUs that other processes on the
// machine used during its runs (user time from /proc/stat, less Caddy's,
// the test process's and the run's PostgreSQL processes'; above 5% the
// table is marked as disturbed: run it again on a quiet machine), with
// the load average, on PostgreSQL the share other databases' sessions
// took, and Caddy's memory after that concurrency. At the end:
// the time of a page of 20 in the read tenant (25 tokens) and in the
// write tenant (every token the create cases made), Caddy's peak RSS,
// the storage's size (on PostgreSQL the database's), and the warnings
// and errors in each node's log.
//
// Figures that travel: after the environment and under each table, the
// disk's sync latency as BenchmarkDurableWriteAlone measures it (a
// 700-byte Badger write, then its sync, timed 200 times on the storage's
// file system: p50, p90, mean), with the load average. A lone durable
// request waits for one such sync, so the c=1 latencies of other machines
// compare only beside it (load_synclat_test.go).
//
// The vault's writes are durable (msync of Badger's memory-mapped files
// on every group commit): on a Linux 6.18 ext4 machine a full run wrote
// about 100 GB to the disk, mostly whole large page-cache folios of
// Badger's active memtable file written back for small writes (see disk
// KB/req). The storage is a temporary directory, removed at the end.
//
// The load generator and the destination run in the test process on the
// same cores as Caddy: at 16 and 64 connections they take a large part of
// the CPU (load µs), and on PostgreSQL so does the database server. CPU
// µs/req counts only the Caddy processes, so it is the better measure of
// the vault's own cost; a ratio is (floor's CPU + load + idle) ÷ (vault's
// CPU + pg + load + idle) per request.

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Load run settings.
const (
	fullRunTime      = 3 * time.Second
	fullRounds       = 3
	quickRunTime     = 1 * time.Second
	quickRounds      = 2
	loadPause        = 200 * time.Millisecond // between two runs
	loadQuietMax     = 30 * time.Second       // the longest wait for Caddy to go idle after a run
	loadReqTimeout   = 30 * time.Second       // one request under load
	perRunOverhead   = 400 * time.Millisecond // warm-up, CPU reads, pause: for the estimate
	clockTicksPerSec = 100                    // sysconf(_SC_CLK_TCK) on Linux
	maxErrorKinds    = 8                      // distinct error messages kept per case
)

// The cards of the read tenant: Luhn-valid, distinct, so the destination
// can count the numbers it got.
var loadPANs = []string{"4242424242424242", "4000056655665556", "5555555555554444", "6011111111111117", "3566002020360505"}

// loadCase is one request shape driven under load.
type loadCase struct {
	name   string
	floor  *loadCase // nil for a floor case
	method string
	urls   []string // worker w's i-th request uses urls[(w+i)%len(urls)]
	// nodeURLs, when set (a vault case with several nodes), are the urls
	// of each node: worker w sends to node w%len(nodeURLs)
	nodeURLs [][]string
	body     []byte
	header   http.Header
}

// workerURLs are the URLs worker w sends to.
func (c *loadCase) workerURLs(w int) []string {
	if len(c.nodeURLs) > 0 {
		return c.nodeURLs[w%len(c.nodeURLs)]
	}
	return c.urls
}

// loadProcs are the processes a run measures: the vault's Caddy
// processes (the first also serves the floors) and, on PostgreSQL, the
// database server's.
type loadProcs struct {
	vault []int
	pg    *pgMonitor // nil on Badger
}

// cpuTicks is the CPU time of the vault processes and their transform
// workers.
func (p *loadProcs) cpuTicks() int64 {
	var n int64
	for _, pid := range p.vault {
		n += procCPUTicks(pid)
	}
	return n
}

// writeBytes is what the vault processes wrote to storage.
func (p *loadProcs) writeBytes() int64 {
	var n int64
	for _, pid := range p.vault {
		n += procWriteBytes(pid)
	}
	return n
}

// runResult is one run of one case at one concurrency.
type runResult struct {
	ok, failed int
	elapsed    time.Duration
	lat        []time.Duration // successful requests
	cpuTicks   int64           // the vault processes'
	diskBytes  int64           // written by the vault processes (write_bytes of /proc/<pid>/io)
	otherTicks int64           // user CPU of every other process on the machine
	idleTicks  int64           // idle and iowait CPU of the machine
	loadTicks  int64           // CPU of this process: the load generator and the destination
	errs       map[string]int
	warm       int // the untimed warm-up requests, one per connection

	// on PostgreSQL
	pg       pgUse      // the server's processes, from /proc
	sessions pgSessions // the sessions' states, sampled
	pgStats  pgStats    // from the run's start to the next run's (see pgStatsSettle)
}

func (r runResult) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.ok) / r.elapsed.Seconds()
}

func TestLoad(t *testing.T) {
	mode := os.Getenv("TV_LOAD")
	if mode == "" {
		t.Skip("the load benchmark runs only with TV_LOAD=1 (or TV_LOAD=quick)")
	}
	var (
		concurrencies []int
		runTime       time.Duration
		rounds        int
	)
	switch mode {
	case "1", "full":
		concurrencies, runTime, rounds = []int{1, 16, 64}, fullRunTime, fullRounds
	case "quick":
		concurrencies, runTime, rounds = []int{16}, quickRunTime, quickRounds
	default:
		t.Fatalf("TV_LOAD=%q: want 1 (full) or quick", mode)
	}
	if v := os.Getenv("TV_LOAD_CONNS"); v != "" {
		concurrencies = parseConns(t, v)
	}
	needBinary(t)
	engine := loadEngineFromEnv(t)
	began := time.Now()

	var report strings.Builder // what TV_LOAD_OUT gets
	out := func(format string, args ...any) {
		s := fmt.Sprintf(format, args...)
		fmt.Print(s)
		report.WriteString(s)
	}
	progress := func(format string, args ...any) { fmt.Printf(format, args...) }

	// The destination both proxies forward to.
	dest := newLoadDestination(t)

	// Ports of the two floor sites, and the configuration. The floor sites
	// start with placeholder bodies; once the vault's answers are measured
	// they are reloaded with bodies of the same sizes.
	ports := freePorts(t, 2)
	respondPort, rpPort := ports[0], ports[1]
	logDir := t.TempDir()
	floorSites := func(sizes map[string]int) string {
		return respondSite(respondPort, filepath.Join(logDir, "respond-access.log"), sizes) +
			reverseProxySite(rpPort, filepath.Join(logDir, "reverse-proxy-access.log"), dest.addr)
	}
	// The vault's configuration. Rate limits are switched off for the
	// run (RateLimits false: the harness writes `rate_limits off` in the
	// vault_api block), so the run measures the vault, not its limiter;
	// checked below in the Caddyfile the harness wrote.
	// On PostgreSQL the vault block gets a postgres block whose
	// connection string is a placeholder of the processes' environment;
	// more nodes are more Caddy processes on the same database, without
	// the floors.
	pgExtra, pgEnv := engine.prepare(t)
	auditSync := os.Getenv("TV_LOAD_AUDIT_SYNC") // "" is the default tier
	if auditSync != "" {
		pgExtra += "\n\t\taudit_sync " + auditSync
	}
	s := startServer(t, serverOpts{VaultExtra: egressLoopback + pgExtra, RateLimits: false, ExtraSites: floorSites(nil), Env: pgEnv})
	nodes := []*server{s}
	for len(nodes) < engine.nodes {
		nodes = append(nodes, startServer(t, serverOpts{VaultExtra: egressLoopback + pgExtra, RateLimits: false, Env: pgEnv}))
	}
	procs := &loadProcs{}
	for _, n := range nodes {
		if cfg, err := os.ReadFile(n.configPath); err != nil || !strings.Contains(string(cfg), "rate_limits off") {
			t.Fatalf("the vault's Caddyfile does not switch rate limits off (%v):\n%s", err, cfg)
		}
		procs.vault = append(procs.vault, n.cmd.Process.Pid)
	}
	if engine.name == "postgres" {
		procs.pg = newPGMonitor(t, engine.dsn)
	}
	pid := s.cmd.Process.Pid
	respondURL := fmt.Sprintf("http://127.0.0.1:%d", respondPort)
	rpURL := fmt.Sprintf("http://127.0.0.1:%d", rpPort)

	// The read tenant: cards to read, list and reference, a proxy.
	rt := s.createTenant("Load Reads")
	rule := func(transform string, perms ...string) map[string]any {
		return map[string]any{"name": transform, "type": "private", "rules": []map[string]any{
			{"priority": 1, "container": "/", "transform": transform, "permissions": perms}}}
	}
	_, revealKey, _ := s.createApp(rt.Key, rule("reveal", "token:create", "token:read", "token:use"))
	_, maskKey, _ := s.createApp(rt.Key, rule("mask", "token:read"))
	var cardIDs []string
	for i := 0; i < 25; i++ {
		pan := loadPANs[i%len(loadPANs)]
		id := createToken(t, s, revealKey, fmt.Sprintf(`{"type":"card","data":{"number":%q,"expiration_month":%d,"expiration_year":2031},"metadata":{"n":"%d"}}`, pan, 1+i%12, i))
		if i < len(loadPANs) {
			cardIDs = append(cardIDs, id)
		}
	}
	proxyID, proxyKey := createProxy(t, s, rt.Key, map[string]any{"name": "load destination", "destination_url": dest.url})
	_, transformProxyKey := createProxy(t, s, rt.Key, map[string]any{"name": "load destination, transformed", "destination_url": dest.url,
		"request_transform": map[string]any{"code": trivialTransform}})

	// The write tenant: POST /tokens and /tokenize create here.
	wt := s.createTenant("Load Writes")
	_, writeKey, _ := s.createApp(wt.Key, rule("reveal", "token:create", "token:read", "token:use"))

	// Request bodies.
	cardBody := []byte(`{"type":"card","data":{"number":"4242424242424242","expiration_month":12,"expiration_year":2030,"cvc":"123"},"metadata":{"customer_id":"cus_0000001234","order_id":"ord_8f3a2c1e9b7d","channel":"web"}}`)
	var tk bytes.Buffer
	tk.WriteString(`{"cards":[`)
	for i, pan := range loadPANs {
		if i > 0 {
			tk.WriteString(",")
		}
		fmt.Fprintf(&tk, `{"type":"card","data":{"number":%q,"expiration_month":%d,"expiration_year":2032,"cvc":"321"}}`, pan, i+1)
	}
	tk.WriteString(`]}`)
	tokenizeBody := tk.Bytes()
	proxy1K1 := proxyBody(t, 1024, cardIDs[:1])
	proxy1K5 := proxyBody(t, 1024, cardIDs)
	proxy64K1 := proxyBody(t, 64<<10, cardIDs[:1])
	proxy64K5 := proxyBody(t, 64<<10, cardIDs)

	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	jsonKey := func(key string) http.Header { return hdr("SVC-API-KEY", key, "Content-Type", "application/json") }
	proxyHdr := func(path string, refs int) http.Header {
		return hdr("SVC-API-KEY", revealKey, "SVC-PROXY-KEY", proxyKey, "Content-Type", "application/json",
			"X-Load-Path", path, "X-Load-Refs", strconv.Itoa(refs))
	}
	transformHdr := proxyHdr("vault", 1)
	transformHdr.Set("SVC-PROXY-KEY", transformProxyKey)
	urls := func(base, path string, ids ...string) []string {
		if len(ids) == 0 {
			return []string{base + path}
		}
		var u []string
		for _, id := range ids {
			u = append(u, base+path+id)
		}
		return u
	}

	// Floors.
	fCreate := &loadCase{name: "respond POST /tokens", method: http.MethodPost, urls: urls(respondURL, "/tokens"), body: cardBody, header: jsonKey(writeKey)}
	fTokenize := &loadCase{name: "respond POST /tokenize", method: http.MethodPost, urls: urls(respondURL, "/tokenize"), body: tokenizeBody, header: jsonKey(writeKey)}
	fGet := &loadCase{name: "respond GET /tokens/{id}", method: http.MethodGet, urls: urls(respondURL, "/tokens/", cardIDs...), header: hdr("SVC-API-KEY", revealKey)}
	fList := &loadCase{name: "respond GET /tokens", method: http.MethodGet, urls: urls(respondURL, "/tokens?size=20"), header: hdr("SVC-API-KEY", revealKey)}
	fProxy1K := &loadCase{name: "reverse_proxy 1KB", method: http.MethodPost, urls: urls(rpURL, "/v1/charges"), body: proxy1K1, header: proxyHdr("floor", 1)}
	fProxy64K := &loadCase{name: "reverse_proxy 64KB", method: http.MethodPost, urls: urls(rpURL, "/v1/charges"), body: proxy64K1, header: proxyHdr("floor", 1)}
	// Vault cases.
	base := s.baseURL
	vCreate := &loadCase{name: "vault POST /tokens (card)", floor: fCreate, method: http.MethodPost, urls: urls(base, "/tokens"), body: cardBody, header: jsonKey(writeKey)}
	vTokenize := &loadCase{name: "vault POST /tokenize (5)", floor: fTokenize, method: http.MethodPost, urls: urls(base, "/tokenize"), body: tokenizeBody, header: jsonKey(writeKey)}
	vReveal := &loadCase{name: "vault GET /tokens/{id} reveal", floor: fGet, method: http.MethodGet, urls: urls(base, "/tokens/", cardIDs...), header: hdr("SVC-API-KEY", revealKey)}
	vMask := &loadCase{name: "vault GET /tokens/{id} mask", floor: fGet, method: http.MethodGet, urls: urls(base, "/tokens/", cardIDs...), header: hdr("SVC-API-KEY", maskKey)}
	vList := &loadCase{name: "vault GET /tokens?size=20", floor: fList, method: http.MethodGet, urls: urls(base, "/tokens?size=20"), header: hdr("SVC-API-KEY", revealKey)}
	vProxy1K1 := &loadCase{name: "vault /proxy 1KB 1 ref", floor: fProxy1K, method: http.MethodPost, urls: urls(base, "/proxy/v1/charges"), body: proxy1K1, header: proxyHdr("vault", 1)}
	vProxyT := &loadCase{name: "vault /proxy 1KB transform", floor: vProxy1K1, method: http.MethodPost, urls: urls(base, "/proxy/v1/charges"), body: proxy1K1, header: transformHdr}
	vProxy1K5 := &loadCase{name: "vault /proxy 1KB 5 refs", floor: fProxy1K, method: http.MethodPost, urls: urls(base, "/proxy/v1/charges"), body: proxy1K5, header: proxyHdr("vault", 5)}
	vProxy64K1 := &loadCase{name: "vault /proxy 64KB 1 ref", floor: fProxy64K, method: http.MethodPost, urls: urls(base, "/proxy/v1/charges"), body: proxy64K1, header: proxyHdr("vault", 1)}
	vProxy64K5 := &loadCase{name: "vault /proxy 64KB 5 refs", floor: fProxy64K, method: http.MethodPost, urls: urls(base, "/proxy/v1/charges"), body: proxy64K5, header: proxyHdr("vault", 5)}
	cases := selectCases(t, os.Getenv("TV_LOAD_CASES"), []*loadCase{
		fCreate, vCreate,
		fTokenize, vTokenize,
		fGet, vReveal, vMask,
		fList, vList,
		fProxy1K, vProxy1K1, vProxyT, vProxy1K5,
		fProxy64K, vProxy64K1, vProxy64K5,
	})
	profileDir := os.Getenv("TV_LOAD_PROFILE")
	if len(nodes) > 1 {
		// the load generator's worker w sends to node w%len(nodes)
		for _, c := range cases {
			if c.floor == nil {
				continue
			}
			for _, n := range nodes {
				var u []string
				for _, x := range c.urls {
					u = append(u, n.baseURL+strings.TrimPrefix(x, base))
				}
				c.nodeURLs = append(c.nodeURLs, u)
			}
		}
	}

	// Check every vault case once, and measure its answer for the floors.
	setupClient := &http.Client{Timeout: requestTimeout}
	sizes := map[string]int{}
	for _, c := range cases {
		if c.floor == nil {
			continue
		}
		status, body, err := loadOnce(setupClient, c, 0)
		if err != nil || status/100 != 2 {
			t.Fatalf("%s: status %d, error %v; body: %s", c.name, status, err, body)
		}
		switch c {
		case vCreate:
			sizes["create"] = len(body)
		case vTokenize:
			sizes["tokenize"] = len(body)
		case vReveal:
			sizes["get"] = len(body)
			if !bytes.Contains(body, []byte(loadPANs[0])) {
				t.Fatalf("%s: the revealed read does not carry the card number: %s", c.name, body)
			}
		case vMask:
			if bytes.Contains(body, []byte(loadPANs[0])) {
				t.Fatalf("%s: the masked read carries the card number: %s", c.name, body)
			}
		case vList:
			sizes["list"] = len(body)
			var page struct {
				Data []json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal(body, &page); err != nil || len(page.Data) != 20 {
				t.Fatalf("%s: want a page of 20 tokens (%v): %.300s", c.name, err, body)
			}
		}
	}
	for _, c := range cases { // the other nodes answer too
		for i := 1; i < len(c.nodeURLs); i++ {
			if status, body, err := loadOnceAt(setupClient, c, c.nodeURLs[i], 0); err != nil || status/100 != 2 {
				t.Fatalf("%s on node %d: status %d, error %v; body: %.300s", c.name, i+1, status, err, body)
			}
		}
	}
	s.opts.ExtraSites = floorSites(sizes)
	if err := s.reload(""); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if c.floor != nil {
			continue
		}
		status, body, err := loadOnce(setupClient, c, 0)
		if err != nil || status/100 != 2 {
			t.Fatalf("%s: status %d, error %v; body: %.300s", c.name, status, err, body)
		}
	}
	if got := s.cmd.Process.Pid; got != pid {
		t.Fatalf("the Caddy pid changed across the reload: %d, then %d", pid, got)
	}

	// The environment.
	overhead := perRunOverhead
	if procs.pg != nil {
		overhead += pgStatsSettle - loadPause
	}
	est := time.Duration(len(concurrencies)*rounds*len(cases)) * (runTime + overhead)
	out("Tokenvault load benchmark (TV_LOAD=%s)\n", mode)
	out("%s\n", loadEnvironment())
	if engine.name == "postgres" {
		out("vault: %s, caddy pids %v (the first also serves the floors), database %s; proxy %s -> %s\n", engine.describe(), procs.vault, procs.pg.db, proxyID, dest.url)
		if len(nodes) > 1 {
			out("nodes: the load generator's connection w goes to node w mod %d, straight to its port (no load balancer)\n", len(nodes))
		}
	} else {
		out("caddy pid %d, vault storage %s (sync_writes on), proxy %s -> %s\n", pid, s.opts.Storage, proxyID, dest.url)
	}
	out("audit_sync %s (the audit records of reads and proxied calls: see docs/security.md#audit-durability)\n", cmp.Or(auditSync, "deferred (the default)"))
	out("load average at the start: %s\n", loadAverage())
	// the disk's sync latency, measured beside every table too: the
	// figures depend on it more than on anything else of the machine's
	syncDir := filepath.Dir(s.opts.Storage)
	out("%s\n", measureSyncLatency(syncDir))
	out("bodies: POST /tokens %d B, POST /tokenize %d B (5 cards), /proxy %d B and %d B\n",
		len(cardBody), len(tokenizeBody), len(proxy1K1), len(proxy64K1))
	out("vault answers (floor bodies sized to match): POST /tokens %d B, POST /tokenize %d B, GET /tokens/{id} %d B, GET /tokens?size=20 %d B\n",
		sizes["create"], sizes["tokenize"], sizes["get"], sizes["list"])
	out("plan: connections %v, %d rounds × %d cases × %v per run; estimated %v of load (setup took %v)\n",
		concurrencies, rounds, len(cases), runTime, est.Round(time.Second), time.Since(began).Round(time.Second))
	out("note: the load generator and the destination share the %d CPUs with Caddy\n\n", runtime.NumCPU())

	// The runs.
	type agg struct{ runs []runResult }
	var failedCases []string
	loadStart := time.Now()
	// PostgreSQL's statistics of a run are read at the next run's start
	// (or after the last run), at least pgStatsSettle after it ended.
	var (
		pgPrev    pgStats
		pgFill    func(pgStats)
		lastEnded time.Time
	)
	pgStatsNow := func() {
		if procs.pg == nil {
			return
		}
		time.Sleep(time.Until(lastEnded.Add(pgStatsSettle)))
		now := procs.pg.stats(&pgPrev)
		if pgFill != nil {
			pgFill(now.sub(pgPrev))
			pgFill = nil
		}
		pgPrev = now
	}
	if procs.pg != nil {
		pgPrev = procs.pg.stats(nil)
	}
	for _, conc := range concurrencies {
		results := map[*loadCase]*agg{}
		for _, c := range cases {
			results[c] = &agg{}
		}
		for r := 1; r <= rounds; r++ {
			for _, c := range cases {
				pgStatsNow()
				var profiled []func()
				if profileDir != "" && r == 1 && conc == concurrencies[len(concurrencies)-1] {
					for i, n := range nodes {
						name := profileName(c.name, conc)
						if i > 0 {
							name += fmt.Sprintf("-node%d", i+1)
						}
						profiled = append(profiled, n.profile(t, filepath.Join(profileDir, name), runTime))
					}
				}
				res := runLoadOn(c, conc, runTime, procs)
				lastEnded = time.Now()
				for _, wait := range profiled {
					wait()
				}
				results[c].runs = append(results[c].runs, res)
				if procs.pg != nil {
					a, i := results[c], len(results[c].runs)-1
					pgFill = func(st pgStats) { a.runs[i].pgStats = st }
				}
				p50, p99 := percentiles(res.lat)
				flag := ""
				if res.failed > 0 {
					flag = fmt.Sprintf("  ! %d errors", res.failed)
				}
				n := res.ok + res.failed
				pgNote := ""
				if procs.pg != nil {
					pgNote = fmt.Sprintf("  pg %4.0f µs/req, %4.1f round trips/req, disk %5.1f KB/req; sessions: %s",
						perRequest(res.pg.ticks, n), float64(res.pg.roundTrips)/float64(max(1, n)),
						float64(res.pg.disk)/1024/float64(max(1, n)), res.sessions.summary())
				}
				progress("  c=%-2d round %d/%d  %-30s %8.0f req/s  p50 %7.2f ms  p99 %7.2f ms  disk %7.1f KB/req  CPU %4.0f load %4.0f idle %4.0f µs/req%s%s\n",
					conc, r, rounds, c.name, res.rate(), ms(p50), ms(p99), float64(res.diskBytes)/1024/float64(max(1, n)),
					perRequest(res.cpuTicks, n), perRequest(res.loadTicks, n), perRequest(res.idleTicks, n), flag, pgNote)
				time.Sleep(loadPause)
				waitQuiet(procs.vault)
			}
		}
		pgStatsNow()

		// The table.
		out("c=%d: %d connection(s), %d rounds × %v per case\n", conc, conc, rounds, runTime)
		pgHead := ""
		if procs.pg != nil {
			pgHead = fmt.Sprintf(" %10s", "pg µs/req")
		}
		out("%-30s %8s %8s %8s %11s%s %9s %9s %12s  %-25s %-20s %7s\n", "case", "req/s", "p50 ms", "p99 ms", "CPU µs/req", pgHead, "load µs", "idle µs", "disk KB/req", "floor", "ratio [min-max]", "errors")
		var errorNotes, pgLines []string
		var otherTicks, pgOtherTicks int64
		var wall time.Duration
		for _, c := range cases {
			for _, res := range results[c].runs {
				otherTicks += res.otherTicks
				pgOtherTicks += res.pg.otherTicks
				wall += res.elapsed
			}
		}
		for _, c := range cases {
			a := results[c]
			var rates []float64
			var lat []time.Duration
			var ticks, loadTicks, idle, disk int64
			var ok, failed int
			var pg pgUse
			var sessions pgSessions
			var pgst pgStats
			warm := 0
			errs := map[string]int{}
			for _, res := range a.runs {
				warm += res.warm
				pg.add(res.pg)
				sessions.add(res.sessions)
				pgst.add(res.pgStats)
				rates = append(rates, res.rate())
				lat = append(lat, res.lat...)
				ticks += res.cpuTicks
				loadTicks += res.loadTicks
				idle += res.idleTicks
				disk += res.diskBytes + res.pg.disk
				ok += res.ok
				failed += res.failed
				for k, v := range res.errs {
					errs[k] += v
				}
			}
			p50, p99 := percentiles(lat)
			cpu, load, idleCol, diskPerReq, pgCol := "-", "-", "-", "-", ""
			if procs.pg != nil {
				pgCol = fmt.Sprintf(" %10s", "-")
			}
			if ok+failed > 0 {
				if procs.pg != nil {
					pgCol = fmt.Sprintf(" %10.0f", perRequest(pg.ticks, ok+failed))
					if c.floor != nil {
						pgLines = append(pgLines, pgTableLine(c.name, ok+failed, ok+failed+warm, pg, pgst, sessions))
					}
				}
				cpu = fmt.Sprintf("%.0f", perRequest(ticks, ok+failed))
				load = fmt.Sprintf("%.0f", perRequest(loadTicks, ok+failed))
				idleCol = fmt.Sprintf("%.0f", perRequest(idle, ok+failed))
				diskPerReq = fmt.Sprintf("%.1f", float64(disk)/1024/float64(ok+failed))
			}
			floorName, ratio := "-", "-"
			if c.floor != nil {
				floorName = c.floor.name
				var ratios []float64
				for i, res := range a.runs {
					if fr := results[c.floor].runs[i].rate(); fr > 0 {
						ratios = append(ratios, res.rate()/fr)
					}
				}
				if len(ratios) > 0 {
					ratio = fmt.Sprintf("%.3f [%.3f-%.3f]", median(ratios), slices.Min(ratios), slices.Max(ratios))
				}
			}
			errCol := strconv.Itoa(failed)
			if failed > 0 {
				errCol += " !"
				errorNotes = append(errorNotes, fmt.Sprintf("  %s: %d errors of %d requests", c.name, failed, ok+failed))
				failedCases = append(failedCases, fmt.Sprintf("%s at c=%d", c.name, conc))
				for _, k := range sortedKeys(errs) {
					errorNotes = append(errorNotes, fmt.Sprintf("    %6d × %s", errs[k], k))
				}
			}
			out("%-30s %8.0f %8.2f %8.2f %11s%s %9s %9s %12s  %-25s %-20s %7s\n", c.name, median(rates), ms(p50), ms(p99), cpu, pgCol, load, idleCol, diskPerReq, floorName, ratio, errCol)
		}
		if len(errorNotes) > 0 {
			out("errors (! in the table):\n%s\n", strings.Join(errorNotes, "\n"))
		}
		if len(pgLines) > 0 {
			out("PostgreSQL per request of the vault cases (see the header of load_test.go):\n%s\n%s\n", pgTableHeader(), strings.Join(pgLines, "\n"))
		}
		other := 100 * float64(otherTicks) / clockTicksPerSec / wall.Seconds() / float64(runtime.NumCPU())
		warn := ""
		if other > 5 {
			warn = " — other work on the machine disturbed these numbers"
		}
		out("other processes used %.1f%% of the %d CPUs (user time) during these runs%s; load average %s\n", max(0, other), runtime.NumCPU(), warn, loadAverage())
		out("%s\n", measureSyncLatency(syncDir))
		if procs.pg != nil {
			out("of which other databases' sessions on the PostgreSQL server: %.1f%% (user and system time)\n",
				100*float64(pgOtherTicks)/clockTicksPerSec/wall.Seconds()/float64(runtime.NumCPU()))
		}
		for i, n := range nodes {
			p := n.cmd.Process.Pid
			out("caddy memory (node %d) after c=%d: anonymous %s, file-backed %s (Badger's memory-mapped files)\n", i+1, conc, procStatus(p, "RssAnon"), procStatus(p, "RssFile"))
		}
		out("\n")
	}
	loadTime := time.Since(loadStart)

	// After the load: the listing's cost with the tokens the create
	// cases left, the server's log, memory and storage.
	listed := listProbe(t, setupClient, base, writeKey)
	readList := listProbe(t, setupClient, base, revealKey)
	out("GET /tokens?size=20, 20 sequential calls: %d tokens in the tenant p50 %.2f ms; %d tokens p50 %.2f ms (the total comes from the kept counts)\n",
		readList.total, ms(readList.p50), listed.total, ms(listed.p50))
	storage := dirSize(s.opts.Storage)
	if procs.pg != nil {
		storage = "(database) " + procs.pg.databaseSize()
	}
	out("caddy peak RSS %s (anonymous and file-backed), storage %s after the run\n", procStatus(pid, "VmHWM"), storage)
	for i, n := range nodes {
		if i > 0 {
			out("node %d: peak RSS %s\n", i+1, procStatus(n.cmd.Process.Pid, "VmHWM"))
		}
		out("caddy log (node %d): %s\n", i+1, summarizeLog(n.stderr()))
		out("transform workers (node %d): %s\n", i+1, transformStats(n))
	}
	if dest.failed() > 0 {
		out("the destination refused %d requests whose bodies were not as expected\n", dest.failed())
	}
	out("load time %v, total %v\n", loadTime.Round(time.Second), time.Since(began).Round(time.Second))

	for _, n := range nodes {
		n.stopClean()
	}
	if path := os.Getenv("TV_LOAD_OUT"); path != "" {
		if err := os.WriteFile(path, []byte(report.String()), 0o644); err != nil {
			t.Errorf("writing TV_LOAD_OUT: %v", err)
		}
	}
	if len(failedCases) > 0 {
		t.Errorf("requests failed under load (see the tables): %s", strings.Join(failedCases, "; "))
	}
}

// runLoad drives one case with conc connections for d: each worker warms
// its connection with one request, then all send back to back until d
// has passed. The Caddy process's CPU time is read around the timed part.
func runLoad(c *loadCase, conc int, d time.Duration, pid int) runResult {
	return runLoadOn(c, conc, d, &loadProcs{vault: []int{pid}})
}

// runLoadOn is runLoad measuring procs: the vault processes and, on
// PostgreSQL, the database server.
func runLoadOn(c *loadCase, conc int, d time.Duration, procs *loadProcs) runResult {
	type worker struct {
		ok, failed int
		lat        []time.Duration
		errs       map[string]int
	}
	workers := make([]worker, conc)
	var warm, done sync.WaitGroup
	start := make(chan time.Time)
	for w := 0; w < conc; w++ {
		warm.Add(1)
		done.Add(1)
		go func(w int) {
			defer done.Done()
			tr := &http.Transport{
				Proxy:               nil,
				DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
				MaxIdleConns:        conc,
				MaxIdleConnsPerHost: conc,
				IdleConnTimeout:     30 * time.Second,
				DisableCompression:  true,
			}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: loadReqTimeout}
			wk := &workers[w]
			wk.lat = make([]time.Duration, 0, 4096)
			wk.errs = map[string]int{}
			record := func(status int, body []byte, err error) bool {
				if err == nil && status/100 == 2 {
					wk.ok++
					return true
				}
				wk.failed++
				msg := ""
				if err != nil {
					msg = "transport: " + err.Error()
				} else {
					msg = fmt.Sprintf("status %d: %.200s", status, bytes.TrimSpace(body))
				}
				if _, seen := wk.errs[msg]; seen || len(wk.errs) < maxErrorKinds {
					wk.errs[msg]++
				} else {
					wk.errs["(other errors)"]++
				}
				return false
			}
			urls := c.workerURLs(w)
			status, body, err := loadOnceAt(client, c, urls, w)
			record(status, body, err)
			warm.Done()
			end := (<-start).Add(d)
			for i := w + 1; time.Now().Before(end); i++ {
				t0 := time.Now()
				status, body, err := loadOnceAt(client, c, urls, i)
				lat := time.Since(t0)
				if record(status, body, err) {
					wk.lat = append(wk.lat, lat)
				}
			}
		}(w)
	}
	warm.Wait()
	var pg0 map[int]pgProc
	var sampled chan pgSessions
	stopSampling := make(chan struct{})
	if procs.pg != nil {
		pg0 = procs.pg.snapshot()
		sampled = make(chan pgSessions, 1)
		go func() { sampled <- procs.pg.sample(stopSampling) }()
	}
	cpu0, disk0, others0 := procs.cpuTicks(), procs.writeBytes(), othersUserTicks(procs.vault)
	idle0, self0 := idleTicks(), selfTicks()
	t0 := time.Now()
	for w := 0; w < conc; w++ {
		start <- t0
	}
	done.Wait()
	res := runResult{elapsed: time.Since(t0), errs: map[string]int{}, warm: conc}
	res.cpuTicks = procs.cpuTicks() - cpu0
	res.diskBytes = procs.writeBytes() - disk0
	res.otherTicks = othersUserTicks(procs.vault) - others0
	res.idleTicks = idleTicks() - idle0
	res.loadTicks = selfTicks() - self0
	if procs.pg != nil {
		res.pg = pgDelta(pg0, procs.pg.snapshot())
		res.otherTicks -= res.pg.userTicks // the run's database's server is not other work
		close(stopSampling)
		res.sessions = <-sampled
	}
	for _, wk := range workers {
		// the warm-up requests are not timed: their successes are not
		// counted (ok is the timed successes), their errors are
		res.failed += wk.failed
		res.lat = append(res.lat, wk.lat...)
		for k, v := range wk.errs {
			res.errs[k] += v
		}
	}
	res.ok = len(res.lat)
	return res
}

// loadOnce sends one request of case c; i picks the URL. It reads the
// whole answer.
func loadOnce(client *http.Client, c *loadCase, i int) (int, []byte, error) {
	return loadOnceAt(client, c, c.urls, i)
}

// loadOnceAt sends one request of case c to urls[i%len(urls)].
func loadOnceAt(client *http.Client, c *loadCase, urls []string, i int) (int, []byte, error) {
	var rd io.Reader
	if c.body != nil {
		rd = bytes.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, urls[i%len(urls)], rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header = c.header.Clone()
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// procCPUTicks is the CPU time of a process and its transform workers in
// clock ticks, all threads.
func procCPUTicks(pid int) int64 {
	u, s := treeTimes(pid)
	return u + s
}

// treeTimes is the utime and stime of a process and its children — the
// transform workers, live (their own counters) or ended (the parent's
// cutime and cstime) — in clock ticks.
func treeTimes(pid int) (utime, stime int64) {
	f := procStat(pid)
	if len(f) < 15 {
		return 0, 0
	}
	for _, i := range []int{11, 13} { // fields 14 and 16: utime, cutime
		n, _ := strconv.ParseInt(f[i], 10, 64)
		utime += n
	}
	for _, i := range []int{12, 14} { // fields 15 and 17: stime, cstime
		n, _ := strconv.ParseInt(f[i], 10, 64)
		stime += n
	}
	for _, c := range childPIDs(pid) {
		u, s := procTimes(c)
		utime, stime = utime+u, stime+s
	}
	return utime, stime
}

// procTimes is a process's utime and stime in clock ticks, all threads.
func procTimes(pid int) (utime, stime int64) {
	f := procStat(pid)
	if len(f) < 13 {
		return 0, 0
	}
	utime, _ = strconv.ParseInt(f[11], 10, 64) // field 14
	stime, _ = strconv.ParseInt(f[12], 10, 64) // field 15
	return utime, stime
}

// procStat is /proc/<pid>/stat from its fourth field (state is f[0]).
func procStat(pid int) []string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	// the command name is in parentheses and may hold spaces
	return strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
}

// perRequest is ticks of CPU time in microseconds per request.
func perRequest(ticks int64, n int) float64 {
	return float64(ticks) * 1e6 / clockTicksPerSec / float64(max(1, n))
}

// selfTicks is the CPU time of this process (the load generator and the
// proxies' destination) in clock ticks, all threads.
func selfTicks() int64 {
	u, s := procTimes(os.Getpid())
	return u + s
}

// idleTicks is the machine's idle and iowait time, all CPUs, in clock
// ticks: the time no process had work to run.
func idleTicks() int64 {
	f := cpuLine()
	if len(f) < 6 {
		return 0
	}
	idle, _ := strconv.ParseInt(f[4], 10, 64)
	iowait, _ := strconv.ParseInt(f[5], 10, 64)
	return idle + iowait
}

// cpuLine is the fields of /proc/stat's "cpu" line (all CPUs), nil when
// it cannot be read.
func cpuLine() []string {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != "cpu" {
		return nil
	}
	return f
}

// othersUserTicks is the user CPU time of every process but Caddy and
// the test process, in clock ticks: the machine's (user and nice, from
// /proc/stat) less theirs. Kernel time is left out: the kernel's work for
// this run (loopback networking, writeback) is not another workload.
func othersUserTicks(caddyPids []int) int64 {
	f := cpuLine()
	if len(f) < 3 {
		return 0
	}
	user, _ := strconv.ParseInt(f[1], 10, 64)
	nice, _ := strconv.ParseInt(f[2], 10, 64)
	var cu int64
	for _, pid := range caddyPids {
		u, _ := treeTimes(pid)
		cu += u
	}
	su, _ := procTimes(os.Getpid())
	return user + nice - cu - su
}

// procWriteBytes is what a process caused to be written to storage
// (write_bytes of /proc/<pid>/io: pages dirtied, counted once until
// written back), all threads; 0 when not readable.
func procWriteBytes(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// loadAverage is the machine's load average over 1, 5 and 15 minutes.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// procStatus is one line's value of /proc/<pid>/status.
func procStatus(pid int, name string) string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == name {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// dirSize is the space the files under dir take on disk.
func dirSize(dir string) string {
	out, err := exec.Command("du", "-sh", dir).Output()
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

type listResult struct {
	total int
	p50   time.Duration
}

// listProbe times 20 sequential GET /tokens?size=20 with key.
func listProbe(t *testing.T, client *http.Client, base, key string) listResult {
	t.Helper()
	c := &loadCase{method: http.MethodGet, urls: []string{base + "/tokens?size=20"}, header: http.Header{"Svc-Api-Key": {key}}}
	var lat []time.Duration
	var res listResult
	for i := 0; i < 20; i++ {
		t0 := time.Now()
		status, body, err := loadOnce(client, c, 0)
		lat = append(lat, time.Since(t0))
		if err != nil || status != http.StatusOK {
			t.Errorf("GET /tokens?size=20: status %d, error %v: %.300s", status, err, body)
			return res
		}
		var page struct {
			Pagination struct {
				TotalItems int `json:"total_items"`
			} `json:"pagination"`
		}
		_ = json.Unmarshal(body, &page)
		res.total = page.Pagination.TotalItems
	}
	res.p50, _ = percentiles(lat)
	return res
}

// summarizeLog counts the warnings and errors in Caddy's JSON log, by
// message.
func summarizeLog(log string) string {
	counts := map[string]int{}
	for _, line := range strings.Split(log, "\n") {
		var e struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
			Err   string `json:"error"`
		}
		if json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		if strings.Contains(e.Msg, "because it requires TLS") || strings.HasPrefix(e.Msg, "exiting;") ||
			strings.HasPrefix(e.Msg, "Caddyfile input is not formatted") {
			continue // start-up and shut-down notices, not about the load
		}
		if e.Level == "warn" || e.Level == "error" || e.Level == "fatal" || e.Level == "panic" {
			k := e.Level + ": " + e.Msg
			if e.Err != "" {
				k += ": " + tail(e.Err, 160)
			}
			counts[k]++
		}
	}
	if len(counts) == 0 {
		return "no warnings or errors"
	}
	var b strings.Builder
	for i, k := range sortedKeys(counts) {
		if i == 10 {
			fmt.Fprintf(&b, "\n  …%d more kinds", len(counts)-10)
			break
		}
		fmt.Fprintf(&b, "\n  %6d × %s", counts[k], k)
	}
	return b.String()
}

// sortedKeys are m's keys, most frequent first.
func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	return keys
}

// percentiles returns the 50th and 99th percentile (nearest rank); it
// sorts lat.
func percentiles(lat []time.Duration) (p50, p99 time.Duration) {
	if len(lat) == 0 {
		return 0, 0
	}
	slices.Sort(lat)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(lat))+0.999999) - 1
		return lat[max(0, min(i, len(lat)-1))]
	}
	return rank(0.50), rank(0.99)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// loadEnvironment describes the machine, the toolchain and the tree.
func loadEnvironment() string {
	cpu := "?"
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	commit := "unknown"
	if raw, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(raw))
		if st, err := exec.Command("git", "status", "--porcelain").Output(); err == nil {
			if n := len(strings.FieldsFunc(string(st), func(r rune) bool { return r == '\n' })); n > 0 {
				commit += fmt.Sprintf(" (working tree: %d paths changed or untracked)", n)
			}
		}
	}
	caddyVersion := "?"
	if raw, err := exec.Command(binPath, "version").Output(); err == nil {
		caddyVersion = strings.TrimSpace(string(raw))
	}
	return fmt.Sprintf("cpu: %s × %d, GOMAXPROCS %d (test process; Caddy's default is the same), %s %s/%s\ncommit %s, caddy %s",
		cpu, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH, commit, caddyVersion)
}

// proxyBody is a JSON object of exactly size bytes: filler string members
// with one member per token id holding a card number reference, spread
// through the object.
func proxyBody(t *testing.T, size int, ids []string) []byte {
	t.Helper()
	const filler = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	ref := func(k int) string {
		return fmt.Sprintf(`,"card_%d":{"number":"{{ %s | json: '$.number' }}","exp":"12/31"}`, k, ids[k])
	}
	head := `{"amount":1000,"currency":"usd","description":"load test charge"`
	fixed := len(head) + len(`,"pad":""}`) + 16
	for k := range ids {
		fixed += len(ref(k))
	}
	member := len(`,"f0000":""`) + len(filler)
	members := max(1, (size-fixed)/member)
	var b bytes.Buffer
	b.WriteString(head)
	next := 0
	for m := 0; m < members; m++ {
		if next < len(ids) && m >= next*members/len(ids) {
			b.WriteString(ref(next))
			next++
		}
		fmt.Fprintf(&b, `,"f%04d":%q`, m, filler)
	}
	for ; next < len(ids); next++ {
		b.WriteString(ref(next))
	}
	pad := size - b.Len() - len(`,"pad":""}`)
	if pad < 0 {
		t.Fatalf("proxy body of %d bytes with %d references does not fit", size, len(ids))
	}
	fmt.Fprintf(&b, `,"pad":"%s"}`, strings.Repeat("x", pad))
	if b.Len() != size || !json.Valid(b.Bytes()) {
		t.Fatalf("proxy body: %d bytes, valid %v", b.Len(), json.Valid(b.Bytes()))
	}
	return b.Bytes()
}

// accessLogBlock is the harness's access log configuration, to path.
func accessLogBlock(path string) string {
	return fmt.Sprintf(`	log {
		output file %s
		format filter {
			request>headers>Svc-Api-Key delete
			request>headers>Svc-Proxy-Key delete
			request>uri query {
				delete svc-proxy-key
			}
		}
	}
`, path)
}

// jsonFiller is a JSON object of about n bytes (at least 12) with one
// string member and a single pair of braces, so Caddy's placeholder
// replacement in `respond` leaves it as it is.
func jsonFiller(n int) string {
	return `{"pad":"` + strings.Repeat("x", max(1, n-10)) + `"}`
}

// respondSite is the respond floor: the vault's methods and paths with
// static JSON bodies of the sizes the vault answers (sizes by "create",
// "tokenize", "get", "list"; placeholders when nil).
func respondSite(port int, logPath string, sizes map[string]int) string {
	size := func(k string) int {
		if n := sizes[k]; n > 0 {
			return n
		}
		return 16
	}
	return fmt.Sprintf(`
http://127.0.0.1:%d {
%s	header Content-Type application/json
	@create {
		method POST
		path /tokens
	}
	respond @create `+"`%s`"+` 201
	@tokenize {
		method POST
		path /tokenize
	}
	respond @tokenize `+"`%s`"+` 200
	@list {
		method GET
		path /tokens
	}
	respond @list `+"`%s`"+` 200
	@get {
		method GET
		path /tokens/*
	}
	respond @get `+"`%s`"+` 200
	respond 404
}
`, port, accessLogBlock(logPath), jsonFiller(size("create")), jsonFiller(size("tokenize")), jsonFiller(size("list")), jsonFiller(size("get")))
}

// reverseProxySite is the reverse_proxy floor, to the destination, with
// an idle pool as large as the vault's egress transport keeps.
func reverseProxySite(port int, logPath, destAddr string) string {
	return fmt.Sprintf(`
http://127.0.0.1:%d {
%s	reverse_proxy %s {
		transport http {
			keepalive_idle_conns_per_host 256
		}
	}
}
`, port, accessLogBlock(logPath), destAddr)
}

// trivialTransform is the request transform of the transform case: it
// hands the request on unchanged, so the case measures the cost of a run.
const trivialTransform = `module.exports = async (req) => ({ body: req.args.body, headers: req.args.headers })`

// loadDestination is the proxies' destination: it reads the body and
// answers 200 with a small JSON body. A request marked X-Load-Path and
// X-Load-Refs is checked: through the vault its body must carry that many
// card numbers and no expression, through reverse_proxy that many
// expressions; otherwise it answers 500, so the case shows errors.
type loadDestination struct {
	srv  *http.Server
	addr string // host:port
	url  string
	mu   sync.Mutex
	bad  int
}

var loadDestBody = []byte(`{"id":"ch_1Nv0load","status":"succeeded","amount":1000,"currency":"usd"}`)

func newLoadDestination(t *testing.T) *loadDestination {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &loadDestination{addr: ln.Addr().String()}
	d.url = "http://" + d.addr
	d.srv = &http.Server{Handler: d, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go d.srv.Serve(ln)
	t.Cleanup(func() { d.srv.Close() })
	return d
}

func (d *loadDestination) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		http.Error(w, "destination: reading the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if want := r.Header.Get("X-Load-Refs"); want != "" {
		n, _ := strconv.Atoi(want)
		pans := 0
		for _, pan := range loadPANs {
			pans += bytes.Count(body, []byte(pan))
		}
		exprs := bytes.Count(body, []byte("{{"))
		var problem string
		switch r.Header.Get("X-Load-Path") {
		case "vault":
			if exprs != 0 || pans != n {
				problem = fmt.Sprintf("through the vault: %d expressions left, %d card numbers, want 0 and %d", exprs, pans, n)
			}
		case "floor":
			if exprs != n {
				problem = fmt.Sprintf("through reverse_proxy: %d expressions, want %d", exprs, n)
			}
		}
		if problem != "" {
			d.mu.Lock()
			d.bad++
			d.mu.Unlock()
			http.Error(w, "destination: "+problem, http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(loadDestBody)
}

func (d *loadDestination) failed() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.bad
}

// waitQuiet waits, at most loadQuietMax, until the vault's Caddy
// processes have been idle for a while: under 5% of a CPU together and
// no thread waiting on the disk. The
// write cases leave Badger flushing and compacting tables for seconds
// after they stop; without the wait that work lands in whatever case runs
// next, floors included.
func waitQuiet(pids []int) {
	began := time.Now()
	for time.Since(began) < loadQuietMax {
		cpu := func() int64 {
			var n int64
			for _, pid := range pids {
				n += procCPUTicks(pid)
			}
			return n
		}
		cpu0, t0 := cpu(), time.Now()
		diskWait := false
		for time.Since(t0) < 300*time.Millisecond {
			time.Sleep(50 * time.Millisecond)
			for _, pid := range pids {
				diskWait = diskWait || waitingOnDisk(pid)
			}
		}
		busy := float64(cpu()-cpu0) / clockTicksPerSec / time.Since(t0).Seconds()
		if busy < 0.05 && !diskWait {
			return
		}
	}
}

// parseConns reads TV_LOAD_CONNS, a comma-separated list of connection
// counts, for example "64" or "1,64".
func parseConns(t *testing.T, v string) []int {
	var conns []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1024 {
			t.Fatalf("TV_LOAD_CONNS=%q: want connection counts from 1 to 1024, comma-separated", v)
		}
		conns = append(conns, n)
	}
	return conns
}

// selectCases keeps the cases whose names match pattern, and the floors
// they are compared with; an empty pattern keeps them all.
func selectCases(t *testing.T, pattern string, all []*loadCase) []*loadCase {
	if pattern == "" {
		return all
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		t.Fatalf("TV_LOAD_CASES: %v", err)
	}
	keep := map[*loadCase]bool{}
	for _, c := range all {
		if re.MatchString(c.name) {
			for f := c; f != nil; f = f.floor { // a floor may have its own
				keep[f] = true
			}
		}
	}
	var out []*loadCase
	for _, c := range all {
		if keep[c] {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		t.Fatalf("TV_LOAD_CASES=%q matches no case", pattern)
	}
	return out
}

// profileName turns a case name into a file name.
func profileName(caseName string, conc int) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, caseName)
	return fmt.Sprintf("%s-c%d", name, conc)
}

// profile starts a CPU profile and an allocation profile of the Caddy
// process, both lasting about d, and returns a function that waits for
// them and writes them to base+".pprof" and base+".allocs.pprof".
func (s *server) profile(t *testing.T, base string, d time.Duration) func() {
	secs := max(1, int(d/time.Second))
	var wg sync.WaitGroup
	for kind, path := range map[string]string{"profile": base + ".pprof", "allocs": base + ".allocs.pprof"} {
		wg.Go(func() {
			if err := s.saveProfile(kind, secs, path); err != nil {
				t.Errorf("%s profile: %v", kind, err)
			}
		})
	}
	return wg.Wait
}

// saveProfile fetches a profile of kind over secs seconds from Caddy's
// /debug/pprof (for allocations, those made in that time) into path.
func (s *server) saveProfile(kind string, secs int, path string) error {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", s.adminAddr, kind, secs))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %.200s", resp.StatusCode, data)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// transformStats summarizes the transform pool's counters from Caddy's
// metrics: runs, how many found their realm warm, workers started.
func transformStats(s *server) string {
	body := string(s.adminGet("/metrics").Raw)
	return fmt.Sprintf("%s runs, %s of them on a warm realm, %s workers started",
		metricValue(body, "tokenvault_transform_worker_runs_total"), metricValue(body, "tokenvault_transform_warm_runs_total"),
		metricValue(body, "tokenvault_transform_worker_starts_total"))
}

package main

// The load benchmark on PostgreSQL (TV_LOAD_ENGINE=postgres): the
// database it runs on, and what it measures of the PostgreSQL server
// beside the vault — the CPU and disk writes of the server's processes
// that serve this run, what their sessions wait on, the transactions,
// WAL flushes and errors per request. See the header of load_test.go.

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tokenvault/tokenvault/vaultstore/kv/postgres/pgtest"
)

// PostgreSQL settings of the load benchmark.
const (
	// pgSampleEvery is how often pg_stat_activity is sampled during a run.
	pgSampleEvery = 20 * time.Millisecond
	// pgStatsSettle is the least time between a run's end and the next
	// snapshot of PostgreSQL's cumulative statistics: a backend reports
	// its counts at most once a second, when it goes idle.
	pgStatsSettle = 1100 * time.Millisecond
	// pgLogPath is the machine's PostgreSQL server log (Debian's
	// pg_ctlcluster), read for the errors of the run's database.
	pgLogPath = "/var/log/postgresql/postgresql-15-main.log"
)

// loadEngine is how the vault is stored in a load run.
type loadEngine struct {
	name     string // "badger" or "postgres"
	nodes    int    // vault processes; more than one needs postgres
	maxConns int    // each node's max_conns; 0: the engine's default
	dsn      string // the database's DSN, with dsnParams; postgres only
	settings string // TV_LOAD_PG_SETTINGS, applied to the database
	params   string // TV_LOAD_PG_DSN_PARAMS, appended to the DSN
}

// loadEngineFromEnv reads TV_LOAD_ENGINE, TV_LOAD_NODES,
// TV_LOAD_PG_MAX_CONNS, TV_LOAD_PG_SETTINGS and TV_LOAD_PG_DSN_PARAMS.
func loadEngineFromEnv(t *testing.T) loadEngine {
	t.Helper()
	e := loadEngine{name: os.Getenv("TV_LOAD_ENGINE"), nodes: 1}
	if e.name == "" {
		e.name = "badger"
	}
	if e.name != "badger" && e.name != "postgres" {
		t.Fatalf("TV_LOAD_ENGINE=%q: want badger or postgres", e.name)
	}
	if v := os.Getenv("TV_LOAD_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		// two at most: the harness runs two Caddy processes at once
		if err != nil || n < 1 || n > cap(serverSlots) {
			t.Fatalf("TV_LOAD_NODES=%q: want 1 to %d", v, cap(serverSlots))
		}
		e.nodes = n
	}
	if e.nodes > 1 && e.name != "postgres" {
		t.Fatalf("TV_LOAD_NODES=%d needs TV_LOAD_ENGINE=postgres: a Badger directory belongs to one process", e.nodes)
	}
	if v := os.Getenv("TV_LOAD_PG_MAX_CONNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64 {
			t.Fatalf("TV_LOAD_PG_MAX_CONNS=%q: want 1 to 64", v)
		}
		e.maxConns = n
	}
	e.settings = os.Getenv("TV_LOAD_PG_SETTINGS")
	e.params = os.Getenv("TV_LOAD_PG_DSN_PARAMS")
	if e.name != "postgres" && (e.maxConns != 0 || e.settings != "" || e.params != "") {
		t.Fatal("TV_LOAD_PG_* settings need TV_LOAD_ENGINE=postgres")
	}
	return e
}

// loadPGEnv names the environment variable that carries the DSN to the
// Caddy processes: the Caddyfile holds only its placeholder.
const loadPGEnv = "TV_LOAD_PG_URL"

// prepare creates the database (postgres only), applies the settings,
// and returns the vault block's extra lines and the processes'
// environment.
func (e *loadEngine) prepare(t *testing.T) (vaultExtra string, env []string) {
	t.Helper()
	if e.name != "postgres" {
		return "", nil
	}
	e.dsn = pgtest.NewDatabase(t)
	if e.settings != "" {
		e.applySettings(t)
	}
	if e.params != "" {
		u, err := url.Parse(e.dsn)
		if err != nil {
			t.Fatalf("the test database's DSN: %v", err)
		}
		q := u.Query()
		extra, err := url.ParseQuery(e.params)
		if err != nil {
			t.Fatalf("TV_LOAD_PG_DSN_PARAMS=%q: %v", e.params, err)
		}
		for k, v := range extra {
			q[k] = v
		}
		u.RawQuery = q.Encode()
		e.dsn = u.String()
	}
	block := "\n\t\tpostgres {\n\t\t\tconnection_string {env." + loadPGEnv + "}\n"
	if e.maxConns > 0 {
		block += fmt.Sprintf("\t\t\tmax_conns %d\n", e.maxConns)
	}
	block += "\t\t}"
	return block, []string{loadPGEnv + "=" + e.dsn}
}

// applySettings sets TV_LOAD_PG_SETTINGS ("name=value,name=value") on
// the run's database: ALTER DATABASE … SET, so they apply to the vault's
// sessions only, not to the rest of the (shared) server.
func (e *loadEngine) applySettings(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	for _, kv := range strings.Split(e.settings, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || !pgSettingName.MatchString(name) {
			t.Fatalf("TV_LOAD_PG_SETTINGS=%q: want name=value,name=value", e.settings)
		}
		q := fmt.Sprintf("ALTER DATABASE %s SET %s = %s", pgx.Identifier{db}.Sanitize(), name, quoteLiteral(value))
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// pgSettingName is what TV_LOAD_PG_SETTINGS accepts as a setting's name.
var pgSettingName = regexp.MustCompile(`^[a-z_][a-z0-9_.]*$`)

// quoteLiteral quotes a setting's value as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// describe is the engine's line in the report.
func (e *loadEngine) describe() string {
	if e.name != "postgres" {
		return "Badger (sync_writes on)"
	}
	conns := "the engine's default"
	if e.maxConns > 0 {
		conns = strconv.Itoa(e.maxConns)
	}
	s := fmt.Sprintf("PostgreSQL (the machine's server, a fresh database), %d node(s), max_conns %s", e.nodes, conns)
	if e.settings != "" {
		s += ", database settings " + e.settings
	}
	if e.params != "" {
		s += ", DSN parameters " + e.params
	}
	return s
}

// pgMonitor watches the PostgreSQL server's processes that serve the
// run's database.
type pgMonitor struct {
	db         string // the run's database
	port       uint16 // the server's
	postmaster int
	admin      *pgx.Conn // on the admin database, for statistics and samples
	adminMu    sync.Mutex
}

// newPGMonitor finds the server's postmaster (the parent of a backend of
// the run's database) and opens a session on the admin database.
func newPGMonitor(t *testing.T, dsn string) *pgMonitor {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	m := &pgMonitor{port: conn.Config().Port}
	var backend int
	err = conn.QueryRow(ctx, "SELECT current_database(), pg_backend_pid()").Scan(&m.db, &backend)
	conn.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if f := procStat(backend); len(f) > 1 {
		m.postmaster, _ = strconv.Atoi(f[1]) // field 4: ppid
	}
	if m.postmaster <= 1 || procComm(m.postmaster) != "postgres" {
		t.Fatalf("cannot find the PostgreSQL server's processes: backend %d's parent is %d (%q); the server must run on this machine",
			backend, m.postmaster, procComm(m.postmaster))
	}
	if m.admin, err = pgx.Connect(ctx, pgtest.AdminURL()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.admin.Close(context.Background()) })
	return m
}

// procComm is a process's command name.
func procComm(pid int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(raw))
}

// pgProcKind sorts the server's processes.
type pgProcKind int

const (
	pgOurs      pgProcKind = iota // a session (or autovacuum worker) of the run's database
	pgWALWriter                   // the WAL writer: flushes the WAL of every database
	pgServer                      // the postmaster and the server's other processes: checkpointer, background writer
	pgOther                       // a session of another database
)

// pgProc is one process's counters.
type pgProc struct {
	kind         pgProcKind
	utime, stime int64 // clock ticks
	writeBytes   int64 // write_bytes of /proc/<pid>/io
	segsIn       int64 // a session's: data segments it received from its client (ss), about one per round trip
}

// snapshot reads the counters of the postmaster and its children.
func (m *pgMonitor) snapshot() map[int]pgProc {
	procs := map[int]pgProc{}
	var segs map[int]int64
	for _, pid := range append([]int{m.postmaster}, childPIDs(m.postmaster)...) {
		u, s := procTimes(pid)
		kind, clientPort := m.classify(pid)
		p := pgProc{kind: kind, utime: u, stime: s, writeBytes: procWriteBytes(pid)}
		if kind == pgOurs && clientPort > 0 {
			if segs == nil {
				segs = segmentsIn(m.port)
			}
			p.segsIn = segs[clientPort]
		}
		procs[pid] = p
	}
	return procs
}

// classify sorts a server process by its title (the process title
// PostgreSQL sets: "postgres: 15/main: <user> <database> <host>(<port>)
// <state>" for a session, "postgres: 15/main: walwriter" for the
// server's own); for a session over TCP, it returns the client's port.
func (m *pgMonitor) classify(pid int) (kind pgProcKind, clientPort int) {
	if pid == m.postmaster {
		return pgServer, 0
	}
	raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	title := strings.TrimRight(strings.ReplaceAll(string(raw), "\x00", " "), " ")
	fields := strings.Fields(title)
	for _, f := range fields {
		if i := strings.IndexByte(f, '('); i > 0 && strings.HasSuffix(f, ")") {
			clientPort, _ = strconv.Atoi(f[i+1 : len(f)-1]) // host(port): a session
		}
	}
	switch {
	case slices.Contains(fields, m.db):
		return pgOurs, clientPort
	case clientPort > 0 || strings.Contains(title, "[local]") || strings.Contains(title, "autovacuum worker") || strings.Contains(title, "parallel worker"):
		return pgOther, 0
	case strings.HasSuffix(title, "walwriter"):
		return pgWALWriter, 0
	}
	return pgServer, 0
}

// segmentsIn is data_segs_in of the server's established TCP
// connections on port (ss -ti), by the client's port: the data segments
// each session received. A client's message, or a pipelined batch of
// them, arrives in one segment on loopback, so the count is about the
// round trips.
func segmentsIn(port uint16) map[int]int64 {
	out, err := exec.Command("ss", "-tinH", "state", "established", fmt.Sprintf("( sport = :%d )", port)).Output()
	if err != nil {
		return nil
	}
	segs := map[int]int64{}
	peer := 0
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, " ") {
			// Recv-Q Send-Q Local:Port Peer:Port
			f := strings.Fields(line)
			peer = 0
			if len(f) >= 4 {
				if i := strings.LastIndexByte(f[3], ':'); i >= 0 {
					peer, _ = strconv.Atoi(f[3][i+1:])
				}
			}
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "data_segs_in:"); ok && peer > 0 {
				segs[peer], _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return segs
}

// pgUse is what the server's processes used over a run: the run's
// database's sessions with the WAL writer, which is what the run's
// commits need; the server's other processes (the checkpointer and the
// background writer write back every database's pages, on a shared
// server other tests' too), and the other databases' sessions apart.
type pgUse struct {
	ticks, userTicks int64 // the sessions' and the WAL writer's
	walWriterTicks   int64 // of ticks
	roundTrips       int64 // data segments the sessions received: about one per round trip
	disk             int64 // write_bytes: the sessions' and the WAL writer's
	serverTicks      int64 // the server's other processes
	serverDisk       int64
	otherTicks       int64 // other databases' sessions
}

// pgDelta is the use between two snapshots. A process that ended between
// them is not counted (the pool's sessions live through a run).
func pgDelta(before, after map[int]pgProc) pgUse {
	var u pgUse
	for pid, a := range after {
		b := before[pid] // zero for a process started during the run
		ticks := a.utime + a.stime - b.utime - b.stime
		switch a.kind {
		case pgOther:
			u.otherTicks += ticks
			continue
		case pgServer:
			u.serverTicks += ticks
			u.serverDisk += a.writeBytes - b.writeBytes
			continue
		case pgWALWriter:
			u.walWriterTicks += ticks
		case pgOurs:
			u.roundTrips += a.segsIn - b.segsIn
		}
		u.ticks += ticks
		u.userTicks += a.utime - b.utime
		u.disk += a.writeBytes - b.writeBytes
	}
	return u
}

func (u *pgUse) add(v pgUse) {
	u.ticks += v.ticks
	u.userTicks += v.userTicks
	u.walWriterTicks += v.walWriterTicks
	u.roundTrips += v.roundTrips
	u.disk += v.disk
	u.serverTicks += v.serverTicks
	u.serverDisk += v.serverDisk
	u.otherTicks += v.otherTicks
}

// pgStats are PostgreSQL's cumulative statistics: the run's database's
// transactions, and the server's WAL (shared with other databases).
type pgStats struct {
	commits, rollbacks   int64 // pg_stat_database: the run's database
	sessions             int64 // sessions established in it: new connections
	walRecords, walBytes int64 // pg_stat_wal: the whole server
	walFPI               int64 // full-page images: first changes of pages after a checkpoint
	walWrites, walSyncs  int64
	logOffset            int64          // the server log's size
	errors               map[string]int // the run's database's ERROR lines in the server log, by message
}

// stats reads the statistics now; errors are those logged since prev's
// offset (nil prev: none).
func (m *pgMonitor) stats(prev *pgStats) pgStats {
	m.adminMu.Lock()
	defer m.adminMu.Unlock()
	var s pgStats
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = m.admin.QueryRow(ctx, `SELECT xact_commit, xact_rollback, sessions FROM pg_stat_database WHERE datname = $1`, m.db).Scan(&s.commits, &s.rollbacks, &s.sessions)
	_ = m.admin.QueryRow(ctx, `SELECT wal_records, wal_fpi, wal_bytes::bigint, wal_write, wal_sync FROM pg_stat_wal`).Scan(&s.walRecords, &s.walFPI, &s.walBytes, &s.walWrites, &s.walSyncs)
	if fi, err := os.Stat(pgLogPath); err == nil {
		s.logOffset = fi.Size()
	}
	if prev != nil {
		s.errors = m.logErrors(prev.logOffset, s.logOffset)
	}
	return s
}

// logErrors counts the ERROR lines of the run's database in the server
// log between two offsets, by message.
func (m *pgMonitor) logErrors(from, to int64) map[string]int {
	if to <= from {
		return nil
	}
	f, err := os.Open(pgLogPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	raw, err := io.ReadAll(io.NewSectionReader(f, from, to-from))
	if err != nil {
		return nil
	}
	marker := "@" + m.db + " ERROR:  "
	counts := map[string]int{}
	for _, line := range strings.Split(string(raw), "\n") {
		if _, msg, ok := strings.Cut(line, marker); ok {
			if i := strings.Index(msg, " due to"); i > 0 {
				msg = msg[:i] // "could not serialize access due to read/write dependencies among transactions"
			}
			counts[tail(msg, 80)]++
		}
	}
	return counts
}

// sub is s less before, the errors being s's own.
func (s pgStats) sub(before pgStats) pgStats {
	return pgStats{
		commits: s.commits - before.commits, rollbacks: s.rollbacks - before.rollbacks, sessions: s.sessions - before.sessions,
		walRecords: s.walRecords - before.walRecords, walBytes: s.walBytes - before.walBytes, walFPI: s.walFPI - before.walFPI,
		walWrites: s.walWrites - before.walWrites, walSyncs: s.walSyncs - before.walSyncs,
		errors: s.errors,
	}
}

func (s *pgStats) add(v pgStats) {
	s.commits += v.commits
	s.rollbacks += v.rollbacks
	s.sessions += v.sessions
	s.walRecords += v.walRecords
	s.walBytes += v.walBytes
	s.walFPI += v.walFPI
	s.walWrites += v.walWrites
	s.walSyncs += v.walSyncs
	for k, n := range v.errors {
		if s.errors == nil {
			s.errors = map[string]int{}
		}
		s.errors[k] += n
	}
}

// pgSessions counts, over samples of pg_stat_activity, the states of the
// run's database's sessions (the pools' connections; not the listeners).
type pgSessions struct {
	samples int
	counts  map[string]int // by state; divided by samples: sessions on average
}

func (p *pgSessions) add(v pgSessions) {
	p.samples += v.samples
	for k, n := range v.counts {
		if p.counts == nil {
			p.counts = map[string]int{}
		}
		p.counts[k] += n
	}
}

// sessionState names what a session was doing in a sample.
func sessionState(state, waitType, wait string) string {
	switch {
	case state == "idle":
		return "idle" // in the pool, or held by the vault between transactions
	case state == "idle in transaction":
		return "in-txn" // waiting for the vault's next statement
	case state == "idle in transaction (aborted)":
		return "aborted" // a statement failed: waiting for the vault's ROLLBACK
	case state != "active":
		return state
	case waitType == "":
		return "cpu"
	case waitType == "IO" && (wait == "WALSync" || wait == "WALWrite"):
		return "wal-io" // writing or syncing the WAL itself
	case waitType == "LWLock" && wait == "WALWrite":
		return "wal-wait" // waiting for another session's WAL flush (group commit)
	case waitType == "Lock":
		return "lock:" + wait
	case waitType == "Client":
		return "client:" + wait
	default:
		return waitType + ":" + wait
	}
}

// sample samples pg_stat_activity every pgSampleEvery until stop is
// closed.
func (m *pgMonitor) sample(stop <-chan struct{}) pgSessions {
	m.adminMu.Lock()
	defer m.adminMu.Unlock()
	out := pgSessions{counts: map[string]int{}}
	tick := time.NewTicker(pgSampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return out
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		rows, err := m.admin.Query(ctx, `SELECT coalesce(state, ''), coalesce(wait_event_type, ''), coalesce(wait_event, '')
FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' AND query NOT LIKE 'LISTEN %'`, m.db)
		if err == nil {
			out.samples++
			for rows.Next() {
				var state, waitType, wait string
				if rows.Scan(&state, &waitType, &wait) == nil {
					out.counts[sessionState(state, waitType, wait)]++
				}
			}
			rows.Close()
		}
		cancel()
	}
}

// summary is the sessions' states on average, busiest first.
func (p pgSessions) summary() string {
	if p.samples == 0 {
		return "no samples"
	}
	var parts []string
	for _, k := range sortedKeys(p.counts) {
		avg := float64(p.counts[k]) / float64(p.samples)
		if avg < 0.05 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.1f", k, avg))
	}
	return strings.Join(parts, ", ")
}

// databaseSize is the run's database's size and the vault table's.
func (m *pgMonitor) databaseSize() string {
	m.adminMu.Lock()
	defer m.adminMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var db string
	if err := m.admin.QueryRow(ctx, `SELECT pg_size_pretty(pg_database_size($1))`, m.db).Scan(&db); err != nil {
		return "?"
	}
	return db
}

// pgTableHeader heads the PostgreSQL lines under a table.
func pgTableHeader() string {
	return fmt.Sprintf("  %-30s %7s %7s %7s %7s %7s %7s %7s %7s %7s %7s %7s %7s  %s", "case", "pg µs", "walw µs", "other µs", "trips", "commits", "rollbks",
		"WALsync", "WAL KB", "FPI", "disk KB", "other KB", "errors", "sessions on average (sampled)")
}

// pgTableLine is a vault case's PostgreSQL figures per request: n
// requests timed (for the /proc figures, read around the timed part) and
// all requests sent (for the statistics, which also count the warm-up).
func pgTableLine(name string, n, all int, pg pgUse, st pgStats, sessions pgSessions) string {
	per := func(v int64, d int) float64 { return float64(v) / float64(max(1, d)) }
	errs := 0
	for _, k := range sortedKeys(st.errors) {
		errs += st.errors[k]
	}
	sum := sessions.summary()
	if st.sessions > 0 {
		sum += fmt.Sprintf("; %d new connections", st.sessions)
	}
	if errs > 0 {
		sum += "; errors: " + strings.Join(func() []string {
			var l []string
			for _, k := range sortedKeys(st.errors) {
				l = append(l, fmt.Sprintf("%d × %s", st.errors[k], k))
			}
			return l
		}(), "; ")
	}
	return fmt.Sprintf("  %-30s %7.0f %7.0f %7.0f %7.1f %7.2f %7.2f %7.2f %7.2f %7.2f %7.1f %7.1f %7.3f  %s", name,
		perRequest(pg.ticks, n), perRequest(pg.walWriterTicks, n), perRequest(pg.serverTicks, n), per(pg.roundTrips, n),
		per(st.commits, all), per(st.rollbacks, all), per(st.walSyncs, all), per(st.walBytes, all)/1024, per(st.walFPI, all),
		per(pg.disk, n)/1024, per(pg.serverDisk, n)/1024, per(int64(errs), all), sum)
}

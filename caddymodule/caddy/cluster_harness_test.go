package main

// The cluster harness: several vault nodes (processes of the built Caddy
// binary) on one PostgreSQL database, optionally sharing their rate limits
// through Redis, behind a load balancer that is one more Caddy process
// with reverse_proxy, round robin and active health checks. Everything
// listens on 127.0.0.1 only. Beside it, a private PostgreSQL server that a
// test may stop and start without touching the machine's shared one.
//
// A cluster is heavy for a 2-core machine: one runs at a time (clusterMu),
// it takes one of the harness's server slots for its whole life, and its
// own processes (servers of the harness with a configuration of the
// cluster's) are started by launchIn, which takes their slots from a pool
// of the cluster's own.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tokenvault/tokenvault/vaultstore/kv/postgres/pgtest"
)

// Settings and bounds of the cluster harness.
const (
	// The load balancer's active health checks: a node that stops
	// answering /healthz is out of the rotation within about one interval.
	lbHealthInterval = 500 * time.Millisecond
	lbHealthTimeout  = 3 * time.Second
	// How long the load balancer tries other nodes for a request whose
	// connection to its node could not be made, and how long it waits
	// between tries. Caddy retries only requests it could not send (a
	// failed dial), and, once a request went out, only GETs (the default
	// lb_retry_match): a POST that may have reached a node is never sent
	// twice.
	lbTryDuration = 5 * time.Second
	lbTryInterval = 100 * time.Millisecond

	clusterHealthTimeout = 30 * time.Second // a started node until its /healthz answers 200
	defaultNodeMaxConns  = 6                // each node's connection pool: clusters share the machine's PostgreSQL
	clusterSlots         = 8                // the cluster's processes at most

	pgReadyTimeout = 60 * time.Second // a private PostgreSQL until it accepts connections
	pgStopTimeout  = 30 * time.Second // a fast shutdown until the server has exited
)

// clusterMu lets one cluster run at a time.
var clusterMu sync.Mutex

// clusterOpts configure a cluster.
type clusterOpts struct {
	// Nodes is the number of vault nodes; default 2.
	Nodes int
	// DSN is the database the nodes share; default a new database of the
	// machine's PostgreSQL (pgtest.NewDatabase), dropped when the test ends.
	DSN string
	// RedisURL, when set, is every node's rate_limit_redis, with
	// RedisKeyPrefix (default a prefix of the cluster's own).
	RedisURL       string
	RedisKeyPrefix string
	// MaxConns is each node's max_conns; default defaultNodeMaxConns.
	MaxConns int
	// RateLimits turns the vault's rate limits on (the interface's table,
	// changed by a rate_limits block in APIOptions); default off.
	RateLimits bool
	// APIOptions are more lines in vault_api (health_path /healthz is
	// always there); VaultExtra more lines in the vault block.
	APIOptions string
	VaultExtra string
	// HeaderPrefix is the vault's header_prefix; default SVC.
	HeaderPrefix string
	// SiteHosts are more host names the nodes and the load balancer
	// answer on, beside 127.0.0.1.
	SiteHosts []string
	// NoBalancer starts no load balancer, for tests that address the
	// nodes one by one.
	NoBalancer bool
}

// cluster is a running cluster.
type cluster struct {
	t     *testing.T
	opts  clusterOpts
	slots chan struct{}
	// DSN is the database the nodes share.
	DSN string
	// RedisKeyPrefix is the nodes' key_prefix in Redis, when they use it.
	RedisKeyPrefix string
	// Nodes are the vault nodes; Nodes[0] is the one tests create tenants
	// through. Their reload method does not apply (it writes a
	// single-node configuration).
	Nodes []*server
	// LB is the load balancer; nil with NoBalancer. Its request helpers
	// (do, expect, request) go through it.
	LB *server
}

// startCluster starts opts.Nodes vault nodes on one database, waits until
// each answers /healthz with 200, then starts the load balancer in front
// of them. Everything stops when the test ends.
func startCluster(t *testing.T, opts clusterOpts) *cluster {
	t.Helper()
	needBinary(t)
	if opts.Nodes == 0 {
		opts.Nodes = 2
	}
	if opts.MaxConns == 0 {
		opts.MaxConns = defaultNodeMaxConns
	}
	// registered first, so it runs last: after every process has stopped
	clusterMu.Lock()
	serverSlots <- struct{}{}
	t.Cleanup(func() {
		<-serverSlots
		clusterMu.Unlock()
	})
	c := &cluster{t: t, opts: opts, slots: make(chan struct{}, clusterSlots), DSN: opts.DSN}
	if c.DSN == "" {
		c.DSN = pgtest.NewDatabase(t)
	}
	if opts.RedisURL != "" {
		c.RedisKeyPrefix = opts.RedisKeyPrefix
		if c.RedisKeyPrefix == "" {
			c.RedisKeyPrefix = "tv-e2e-" + randomHex(8) + ":"
		}
	}
	for i := 0; i < opts.Nodes; i++ {
		c.Nodes = append(c.Nodes, c.newNode())
	}
	// together: the first ones race to create the table, as real nodes do
	for _, n := range c.Nodes {
		launchIn(n, c.slots)
	}
	for i, n := range c.Nodes {
		if err := n.waitReady(); err != nil {
			t.Fatalf("node %d did not start: %v\noutput:\n%s", i, err, tail(n.stderr(), 4000))
		}
	}
	for i, n := range c.Nodes {
		if err := waitHealthy(n.client, n.baseURL+"/healthz", clusterHealthTimeout); err != nil {
			t.Fatalf("node %d: %v\noutput:\n%s", i, err, tail(n.stderr(), 4000))
		}
	}
	if !opts.NoBalancer {
		c.startBalancer()
	}
	return c
}

// newNode prepares a vault node: a server of the harness whose Caddyfile
// is the cluster's.
func (c *cluster) newNode() *server {
	env := []string{"TV_CLUSTER_PG_URL=" + c.DSN}
	if c.opts.RedisURL != "" {
		env = append(env, "TV_CLUSTER_REDIS_URL="+c.opts.RedisURL)
	}
	s := newServer(c.t, serverOpts{
		HeaderPrefix: c.opts.HeaderPrefix,
		SiteHosts:    c.opts.SiteHosts,
		RateLimits:   c.opts.RateLimits,
		APIOptions:   c.opts.APIOptions,
		VaultExtra:   c.opts.VaultExtra,
		Env:          env,
	})
	if err := os.WriteFile(s.configPath, []byte(c.nodeConfig(s)), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return s
}

// nodeConfig renders a node's Caddyfile: the vault on the cluster's
// database (and Redis), the API with /healthz for the load balancer, and
// the harness's access log, which filters credentials.
func (c *cluster) nodeConfig(s *server) string {
	var vault strings.Builder
	fmt.Fprintf(&vault, "\t\tpostgres {\n\t\t\tconnection_string {env.TV_CLUSTER_PG_URL}\n\t\t\tmax_conns %d\n\t\t}\n", c.opts.MaxConns)
	vault.WriteString("\t\tmaster_key {env.TV_MASTER_KEY}\n")
	prefix := "SVC"
	if c.opts.HeaderPrefix != "" {
		prefix = c.opts.HeaderPrefix
		fmt.Fprintf(&vault, "\t\theader_prefix %s\n", prefix)
	}
	if c.opts.RedisURL != "" {
		// the longest call timeout the setting allows: on a busy machine a
		// Redis answer can take longer than the 100 ms default, and a node
		// whose call times out limits on its own for a while, which is
		// the fallback's behaviour, not what these tests look at
		fmt.Fprintf(&vault, "\t\trate_limit_redis {\n\t\t\turl {env.TV_CLUSTER_REDIS_URL}\n\t\t\tkey_prefix %s\n\t\t\ttimeout 5s\n\t\t}\n", c.RedisKeyPrefix)
	}
	vault.WriteString(c.opts.VaultExtra)
	return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	default_bind 127.0.0.1
	vault {
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
	vault_api {
		health_path /healthz
		%s
		%s
	}
}
`, s.adminPort, vault.String(), siteAddresses(s.apiPort, c.opts.SiteHosts), s.accessLog,
		http.CanonicalHeaderKey(prefix+"-API-KEY"), http.CanonicalHeaderKey(prefix+"-PROXY-KEY"), strings.ToLower(prefix)+"-proxy-key",
		s.rateLimitsLine(), c.opts.APIOptions)
}

// siteAddresses is a site block's addresses: plain http on port, for
// 127.0.0.1 and hosts.
func siteAddresses(port int, hosts []string) string {
	addrs := fmt.Sprintf("http://127.0.0.1:%d", port)
	for _, h := range hosts {
		addrs += fmt.Sprintf(", http://%s:%d", h, port)
	}
	return addrs
}

// startBalancer starts the load balancer in front of every node and waits
// until a request through it reaches a node.
func (c *cluster) startBalancer() {
	t := c.t
	t.Helper()
	lb := newServer(t, serverOpts{NoMasterKey: true})
	var upstreams []string
	for _, n := range c.Nodes {
		upstreams = append(upstreams, fmt.Sprintf("127.0.0.1:%d", n.apiPort))
	}
	config := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	default_bind 127.0.0.1
}

%s {
	reverse_proxy %s {
		lb_policy round_robin
		lb_try_duration %s
		lb_try_interval %s
		health_uri /healthz
		health_interval %s
		health_timeout %s
	}
}
`, lb.adminPort, siteAddresses(lb.apiPort, c.opts.SiteHosts), strings.Join(upstreams, " "),
		lbTryDuration, lbTryInterval, lbHealthInterval, lbHealthTimeout)
	if err := os.WriteFile(lb.configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	launchIn(lb, c.slots)
	if err := lb.waitReady(); err != nil {
		t.Fatalf("the load balancer did not start: %v\noutput:\n%s", err, tail(lb.stderr(), 4000))
	}
	if err := waitHealthy(lb.client, lb.baseURL+"/healthz", clusterHealthTimeout); err != nil {
		t.Fatalf("through the load balancer: %v\noutput:\n%s", err, tail(lb.stderr(), 4000))
	}
	c.LB = lb
}

// launchIn starts s's process as server.launch does, but takes its slot
// from slots (a cluster's) rather than the harness's serverSlots, and
// returns it when the process has exited. The process stops when the test
// ends; its output is logged if the test failed.
func launchIn(s *server, slots chan struct{}) {
	t := s.t
	t.Helper()
	slots <- struct{}{}
	stderr, err := os.OpenFile(s.stderrPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		<-slots
		t.Fatal(err)
	}
	s.cmd = exec.Command(binPath, "run", "--config", s.configPath, "--adapter", "caddyfile")
	s.cmd.Dir = s.dir
	s.cmd.Env = s.env()
	s.cmd.Stdout, s.cmd.Stderr = stderr, stderr
	if err := s.cmd.Start(); err != nil {
		stderr.Close()
		<-slots
		t.Fatalf("starting caddy: %v", err)
	}
	done := make(chan struct{})
	s.done = done
	go func() {
		s.waitErr = s.cmd.Wait()
		stderr.Close()
		<-slots
		close(done)
	}()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("caddy output (%s), last lines:\n%s", s.stderrPath, tail(s.stderr(), 4000))
		}
	})
}

// waitHealthy polls a health URL until it answers 200, or fails after
// timeout with the last answer.
func waitHealthy(client *http.Client, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		r, err := doRequest(client, http.MethodGet, url, "", nil)
		switch {
		case err != nil:
			last = err.Error()
		case r.Status == http.StatusOK:
			return nil
		default:
			last = fmt.Sprintf("%d %s", r.Status, r.Raw)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer 200 within %v; last: %s", url, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createTenant creates a tenant through the first node's admin API.
func (c *cluster) createTenant(name string) createdTenant {
	c.t.Helper()
	return c.Nodes[0].createTenant(name)
}

// nodeAddr is the address the load balancer knows a node by.
func nodeAddr(n *server) string { return fmt.Sprintf("127.0.0.1:%d", n.apiPort) }

// balancerMarkedDown returns when the load balancer's active health check
// first failed for node at or after since, from the load balancer's log
// ("HTTP request failed" for the node's address: one failure marks a node
// down); ok is false while there is none.
func (c *cluster) balancerMarkedDown(node *server, since time.Time) (at time.Time, ok bool) {
	f, err := os.Open(c.LB.stderrPath)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var entry struct {
			TS   float64 `json:"ts"`
			Msg  string  `json:"msg"`
			Host string  `json:"host"`
		}
		if json.Unmarshal(sc.Bytes(), &entry) != nil || entry.Msg != "HTTP request failed" || entry.Host != nodeAddr(node) {
			continue
		}
		ts := time.Unix(0, int64(entry.TS*float64(time.Second)))
		if !ts.Before(since) {
			return ts, true
		}
	}
	return time.Time{}, false
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// privatePostgres is a PostgreSQL server of one test's own, in a
// temporary directory owned by the postgres user, listening on a free
// port of 127.0.0.1 and on a socket in its directory: a test may stop and
// start it while the machine's shared server serves other tests.
type privatePostgres struct {
	t       *testing.T
	binDir  string
	dir     string // owned by postgres: data/, sock/, postgres.log
	port    int
	cred    *syscall.Credential
	logPath string

	cmd  *exec.Cmd
	done chan struct{} // closed when the running server has exited
}

// startPrivatePostgres creates a cluster with initdb and starts it; it
// skips the test when initdb or the postgres user is missing, or the
// test does not run as root (PostgreSQL refuses to run as root, and only
// root can run it as another user). The server stops and its directory
// goes when the test ends.
func startPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Skip("initdb is not installed (/usr/lib/postgresql/*/bin/initdb): no private PostgreSQL server for this test")
	}
	if os.Geteuid() != 0 {
		t.Skip("a private PostgreSQL server is started as the postgres user, which needs root")
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Skip("no postgres user to run a private PostgreSQL server as")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	p := &privatePostgres{
		t:      t,
		binDir: filepath.Dir(bins[len(bins)-1]), // the highest version
		port:   freePorts(t, 1)[0],
		cred:   &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
	}
	// under /tmp (not t.TempDir, whose parents are root's 0700)
	if p.dir, err = os.MkdirTemp("", "tv-private-pg-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(p.dir) })
	p.logPath = filepath.Join(p.dir, "postgres.log")
	for _, d := range []string{p.dir, filepath.Join(p.dir, "sock")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	initdb := exec.CommandContext(ctx, filepath.Join(p.binDir, "initdb"), "-D", filepath.Join(p.dir, "data"),
		"-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	initdb.Dir = p.dir
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if p.running() {
			p.stop()
		}
		if t.Failed() {
			raw, _ := os.ReadFile(p.logPath)
			t.Logf("private PostgreSQL log, last lines:\n%s", tail(string(raw), 3000))
		}
	})
	p.start()
	return p
}

// start starts the server and waits until it accepts connections.
func (p *privatePostgres) start() {
	t := p.t
	t.Helper()
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(filepath.Join(p.binDir, "postgres"), "-D", filepath.Join(p.dir, "data"),
		"-p", strconv.Itoa(p.port), "-k", filepath.Join(p.dir, "sock"),
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=60")
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	p.cmd.Dir = p.dir
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("starting postgres: %v", err)
	}
	done := make(chan struct{})
	p.done = done
	go func(cmd *exec.Cmd) {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}(p.cmd)
	if err := p.waitReady(); err != nil {
		raw, _ := os.ReadFile(p.logPath)
		t.Fatalf("the private PostgreSQL server: %v\nlog:\n%s", err, tail(string(raw), 3000))
	}
}

// waitReady polls the server until a connection runs a query.
func (p *privatePostgres) waitReady() error {
	deadline := time.Now().Add(pgReadyTimeout)
	for {
		select {
		case <-p.done:
			return errors.New("postgres exited before accepting connections")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, p.url("postgres"))
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT 1")
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no connection within %v: %v", pgReadyTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// running reports whether the server process is up.
func (p *privatePostgres) running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop shuts the server down the fast way (SIGINT: sessions are ended,
// open transactions roll back) and waits until it has exited; after
// pgStopTimeout it is shut down immediately (SIGQUIT).
func (p *privatePostgres) stop() {
	p.t.Helper()
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
		return
	case <-time.After(pgStopTimeout):
	}
	p.t.Errorf("postgres (pid %d) did not stop within %v of SIGINT; sending SIGQUIT", p.cmd.Process.Pid, pgStopTimeout)
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(pgStopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// url is the DSN of database db on the server.
func (p *privatePostgres) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

// createDatabase creates a database and returns its DSN.
func (p *privatePostgres) createDatabase(name string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.url("postgres"))
	if err != nil {
		p.t.Fatalf("connecting to the private PostgreSQL server: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		p.t.Fatalf("creating database %s: %v", name, err)
	}
	return p.url(name)
}

// dialable reports whether something accepts connections on addr.
func dialable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

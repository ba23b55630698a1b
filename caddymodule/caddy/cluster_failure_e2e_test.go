package main

// Failure tests of a cluster (issue 21): a node killed with SIGKILL behind
// the load balancer during a mixed load, and the database restarted
// during a write load. Each logs its figures in one line.

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// loadRecord is one request of a load: when it ran and what came back.
type loadRecord struct {
	worker     int
	node       int    // the node addressed; -1 through the load balancer
	op         string // "create" or "read"
	start, end time.Time
	status     int // 0: no response (err)
	err        error
	id         string // the token created or read
	data       string // the token's data, sent or expected
	retryAfter string
	problemErr error // why the answer is not a problem, for non-2xx answers
}

// ok reports a 2xx answer.
func (r loadRecord) ok() bool { return r.err == nil && r.status >= 200 && r.status < 300 }

// refusedByVault reports the vault's own 503: a problem with Retry-After
// (storage away, or too busy with conflicting transactions), after which
// nothing was written. A load balancer's 502 or 503 is not a problem.
func (r loadRecord) refusedByVault() bool {
	return r.err == nil && r.status == http.StatusServiceUnavailable && r.retryAfter != "" && r.problemErr == nil
}

// outcome names the record's result: its status, or "error".
func (r loadRecord) outcome() string {
	if r.err != nil {
		return "error"
	}
	return fmt.Sprint(r.status)
}

// loadLog collects what the workers of a load saw.
type loadLog struct {
	mu    sync.Mutex
	recs  []loadRecord
	acked []loadRecord // acknowledged creates
}

// add records one request.
func (l *loadLog) add(r loadRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r)
	if r.op == "create" && r.ok() {
		l.acked = append(l.acked, r)
	}
}

// randomAcked returns an acknowledged create, if any.
func (l *loadLog) randomAcked() (loadRecord, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.acked) == 0 {
		return loadRecord{}, false
	}
	return l.acked[rand.IntN(len(l.acked))], true
}

// firstOKAfter returns the end of the first 2xx answer that ended at or
// after t.
func (l *loadLog) firstOKAfter(t time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first time.Time
	for _, r := range l.recs {
		if r.ok() && !r.end.Before(t) && (first.IsZero() || r.end.Before(first)) {
			first = r.end
		}
	}
	return first, !first.IsZero()
}

// snapshot returns the records and the acknowledged creates.
func (l *loadLog) snapshot() (recs, acked []loadRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]loadRecord(nil), l.recs...), append([]loadRecord(nil), l.acked...)
}

// countOutcomes counts records by outcome, as "201×12 503×4".
func countOutcomes(recs []loadRecord) string {
	n := map[string]int{}
	for _, r := range recs {
		n[r.outcome()]++
	}
	var parts []string
	for k, v := range n {
		parts = append(parts, fmt.Sprintf("%s×%d", k, v))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// createRecord sends one create of a token whose data is data and
// records it.
func createRecord(client *http.Client, baseURL, key string, worker, node int, data string) loadRecord {
	rec := loadRecord{worker: worker, node: node, op: "create", data: data, start: time.Now()}
	r, err := doRequest(client, http.MethodPost, baseURL+"/tokens", key, map[string]any{"type": "token", "data": data})
	rec.end = time.Now()
	rec.answer(r, err)
	if err == nil {
		rec.id = testjson.Str(r.Body, "id")
	}
	return rec
}

// answer records the response r (or the transport error err).
func (rec *loadRecord) answer(r apiResponse, err error) {
	rec.err, rec.status = err, r.Status
	if err == nil && !rec.ok() {
		rec.retryAfter, rec.problemErr = r.Header.Get("Retry-After"), isProblem(r)
	}
}

// revealingApp is the body of a private application that creates tokens
// and reads them revealed.
func revealingApp(name string) map[string]any {
	return map[string]any{"name": name, "type": "private", "rules": []map[string]any{
		{"priority": 1, "container": "/", "transform": "reveal", "permissions": []string{"token:create", "token:read"}},
	}}
}

// readBack reads every acknowledged create through n and returns the
// ones that are missing or hold other data.
func readBack(t *testing.T, n *server, key string, acked []loadRecord) (lost []string) {
	t.Helper()
	for _, a := range acked {
		r, err := n.request(http.MethodGet, "/tokens/"+a.id, key, nil)
		if err != nil || r.Status != http.StatusOK || testjson.Field(r.Body, "data") != a.data {
			lost = append(lost, fmt.Sprintf("%s (%v %d %s)", a.id, err, r.Status, r.Raw))
		}
	}
	return lost
}

// TestClusterNodeKilled: 8 workers create and read tokens through the load
// balancer in front of two nodes for 10 s; after 3 s one node is killed
// with SIGKILL. The load goes on through the other node. Only requests in
// flight at the kill fail (at most as many as were in flight; no read,
// which the load balancer retries; none that started after the load
// balancer's health check marked the node down), and every acknowledged
// create is readable afterwards through the surviving node. A create the
// vault itself refuses as busy (503 problem with Retry-After, nothing
// written: its transaction kept losing serialization conflicts) is
// counted apart: it is not the kill's doing.
func TestClusterNodeKilled(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{Nodes: 2, MaxConns: 8})
	survivor, victim := c.Nodes[0], c.Nodes[1]
	ct := c.createTenant("Kill Co")
	_, key, _ := survivor.createApp(ct.Key, revealingApp("load"))

	const (
		workers      = 8
		loadTime     = 10 * time.Second
		killAfter    = 3 * time.Second
		maxPerWorker = 2000
	)
	client := &http.Client{Timeout: requestTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer client.CloseIdleConnections()
	var (
		log  loadLog
		stop = make(chan struct{})
		wg   sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range maxPerWorker {
				select {
				case <-stop:
					return
				default:
				}
				if prev, ok := log.randomAcked(); ok && i%2 == 1 {
					rec := loadRecord{worker: w, node: -1, op: "read", id: prev.id, data: prev.data, start: time.Now()}
					r, err := doRequest(client, http.MethodGet, c.LB.baseURL+"/tokens/"+prev.id, key, nil)
					rec.end = time.Now()
					rec.answer(r, err)
					if err == nil && rec.ok() && testjson.Field(r.Body, "data") != prev.data {
						rec.err = fmt.Errorf("token %s read back other data", prev.id)
					}
					log.add(rec)
					continue
				}
				log.add(createRecord(client, c.LB.baseURL, key, w, -1, fmt.Sprintf("kill-%d-%d", w, i)))
			}
		}()
	}
	time.Sleep(killAfter)
	killAt := time.Now()
	victim.kill()
	time.Sleep(loadTime - killAfter)
	close(stop)
	wg.Wait()

	// the load balancer's health check failed for the node, which marks it down
	var markedDown time.Time
	for deadline := time.Now().Add(10 * time.Second); ; {
		if at, ok := c.balancerMarkedDown(victim, killAt); ok {
			markedDown = at
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the load balancer's log shows no failed health check of the killed node:\n%s", tail(c.LB.stderr(), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}

	recs, acked := log.snapshot()
	var failed, busy []loadRecord
	inFlight, afterDown, failedReads := 0, 0, 0
	for _, r := range recs {
		if r.start.Before(killAt) && r.end.After(killAt) {
			inFlight++
		}
		if !r.start.Before(markedDown) {
			afterDown++
		}
		if r.ok() {
			continue
		}
		if r.refusedByVault() {
			// the surviving node's own answer, retryable with nothing
			// written: transactions that kept conflicting, not the kill
			busy = append(busy, r)
			continue
		}
		failed = append(failed, r)
		if r.op == "read" {
			failedReads++
		}
		if !r.start.Before(markedDown) {
			t.Errorf("a %s started %v after the load balancer marked the node down failed: %s %v",
				r.op, r.start.Sub(markedDown).Round(time.Millisecond), r.outcome(), r.err)
		}
	}
	if len(failed) > inFlight {
		t.Errorf("%d requests failed, more than the %d in flight at the kill: %s", len(failed), inFlight, countOutcomes(failed))
	}
	if failedReads > 0 {
		t.Errorf("%d reads failed: the load balancer retries a GET on the other node", failedReads)
	}
	if served := apiRequestsLogged(t, victim.accessLog); served == 0 {
		t.Error("the killed node served no request before the kill: the load balancer did not spread the load")
	}
	if err := waitHealthy(c.LB.client, c.LB.baseURL+"/healthz", clusterHealthTimeout); err != nil {
		t.Errorf("through the load balancer after the kill: %v", err)
	}
	lost := readBack(t, survivor, key, acked)
	for _, l := range lost {
		t.Errorf("acknowledged create lost: %s", l)
	}
	t.Logf("kill -9 of one of two nodes under load: sent %d, acknowledged %d (creates %d), failed %d (%s; reads %d), in flight at the kill %d, lost %d; "+
		"refused by the vault as busy (503, Retry-After, nothing written) %d; the load balancer marked the node down %v after the kill; %d requests after that",
		len(recs), len(recs)-len(failed)-len(busy), len(acked), len(failed), countOutcomes(failed), failedReads, inFlight, len(lost),
		len(busy), markedDown.Sub(killAt).Round(time.Millisecond), afterDown)
}

// TestClusterPostgresRestart: 4 workers create tokens on two nodes (each
// worker alternating between them) while the database (a private
// PostgreSQL server) is stopped for 4 s and started again. While it is
// away the vault answers 503 with Retry-After as a problem, never 2xx;
// it reconnects by itself (writes are acknowledged again, and a key
// revoked through one node stops working on the other); every
// acknowledged write is there afterwards.
func TestClusterPostgresRestart(t *testing.T) {
	t.Parallel()
	pg := startPrivatePostgres(t)
	dsn := pg.createDatabase("tv_restart")
	c := startCluster(t, clusterOpts{Nodes: 2, DSN: dsn, NoBalancer: true})
	ct := c.createTenant("Restart Co")
	appID, key, _ := c.Nodes[0].createApp(ct.Key, revealingApp("load"))
	for _, n := range c.Nodes {
		n.expect(http.StatusOK, http.MethodGet, "/applications/key", key, nil)
	}

	const (
		workers         = 4
		warmup          = 2 * time.Second
		outage          = 4 * time.Second
		settle          = 2 * time.Second  // load after the first write acknowledged again
		recoverDeadline = 30 * time.Second // from the database's return
		maxPerWorker    = 3000
		pause           = 20 * time.Millisecond // after a refused write, as a client would
	)
	var (
		log  loadLog
		stop = make(chan struct{})
		wg   sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range maxPerWorker {
				select {
				case <-stop:
					return
				default:
				}
				node := (w + i) % len(c.Nodes)
				n := c.Nodes[node]
				rec := createRecord(n.client, n.baseURL, key, w, node, fmt.Sprintf("restart-%d-%d", w, i))
				log.add(rec)
				if !rec.ok() {
					time.Sleep(pause)
				}
			}
		}()
	}
	time.Sleep(warmup)
	pg.stop()
	stopped := time.Now()
	time.Sleep(outage)
	restarting := time.Now()
	pg.start()
	back := time.Now()
	recovered, ok := time.Time{}, false
	for deadline := back.Add(recoverDeadline); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if recovered, ok = log.firstOKAfter(back); ok {
			break
		}
	}
	if ok {
		time.Sleep(settle)
	}
	close(stop)
	wg.Wait()

	recs, acked := log.snapshot()
	var during, unexpected []loadRecord
	for _, r := range recs {
		if !r.start.Before(stopped) && !r.end.After(restarting) {
			during = append(during, r)
			if !r.refusedByVault() {
				t.Errorf("a write while the database was away: %s %v, Retry-After %q, problem: %v", r.outcome(), r.err, r.retryAfter, r.problemErr)
			}
		}
		if r.ok() && r.end.After(stopped) && r.end.Before(restarting) {
			t.Errorf("a write was acknowledged (%d) while the database was away", r.status)
		}
		if !r.ok() && !r.refusedByVault() {
			unexpected = append(unexpected, r)
		}
	}
	if len(unexpected) > 0 {
		t.Errorf("%d refused writes were not 503 problems with Retry-After: %s; first: %v %s", len(unexpected), countOutcomes(unexpected), unexpected[0].err, unexpected[0].problemErr)
	}
	if len(during) == 0 {
		t.Error("no write was sent while the database was away")
	}
	if !ok {
		t.Fatalf("no write acknowledged within %v of the database's return; since the stop: %s", recoverDeadline, countOutcomes(recs))
	}
	lost := 0
	for i, n := range c.Nodes { // each node reads half of them back
		var mine []loadRecord
		for j, a := range acked {
			if j%len(c.Nodes) == i {
				mine = append(mine, a)
			}
		}
		for _, l := range readBack(t, n, key, mine) {
			lost++
			t.Errorf("acknowledged write lost: %s", l)
		}
	}
	// change notices flow again: a key revoked through node 0 stops
	// working on node 1, whose cache knew it
	r := c.Nodes[0].expect(http.StatusCreated, http.MethodPost, "/applications/"+appID+"/keys", ct.Key, nil)
	extraKey, extraID := testjson.Str(r.Body, "key"), testjson.Str(r.Body, "id")
	c.Nodes[1].expect(http.StatusOK, http.MethodGet, "/applications/key", extraKey, nil)
	c.Nodes[0].expect(http.StatusNoContent, http.MethodDelete, "/applications/"+appID+"/keys/"+extraID, ct.Key, nil)
	delay, err := awaitState(c.Nodes[1], time.Now(), func(n *server) (apiResponse, error) {
		return n.request(http.MethodGet, "/applications/key", extraKey, nil)
	}, func(r apiResponse) bool { return r.Status == http.StatusUnauthorized })
	if err != nil {
		t.Errorf("after the restart, a key revoked through node 0, on node 1: %v", err)
	}
	t.Logf("postgres restart under write load: sent %d, acknowledged %d, lost %d, 503 while away %d (all answers while away: %s; refused in all: %s), "+
		"outage %v, time to recover %v (database accepting connections again → first acknowledged write; %v from the server's start); "+
		"a revoked key stopped working on the other node after %v",
		len(recs), len(acked), lost, len(during), countOutcomes(during), countOutcomes(failedOnly(recs)),
		restarting.Sub(stopped).Round(time.Millisecond), recovered.Sub(back).Round(time.Millisecond), recovered.Sub(restarting).Round(time.Millisecond),
		delay.Round(100*time.Microsecond))
}

// failedOnly returns the records without a 2xx answer.
func failedOnly(recs []loadRecord) []loadRecord {
	var out []loadRecord
	for _, r := range recs {
		if !r.ok() {
			out = append(out, r)
		}
	}
	return out
}

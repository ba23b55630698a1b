package main

// Work handed between nodes under a lease, end to end: two nodes on one
// PostgreSQL database (cluster_harness_test.go), the node doing the work
// killed with SIGKILL, and the other taking it over once the dead node's
// lease has lapsed. Webhook delivery runs on one node at a time under the
// "webhooks" lease (vaultstore/cluster.go, two minutes, renewed every
// 30 s; a node without it tries again every 10 s); an asynchronous
// reaction is claimed by one node under a lease of its own
// (vaultstore.AsyncLease, two minutes). Neither is configurable, so the
// tests of a kill wait for the real lease to lapse (each takes two to
// four minutes); a holder stopped cleanly gives the webhooks lease up, and
// the other node takes it at its next try. -short skips them all.
//
//	go test -race -count=1 -run 'TestClusterLease' ./caddymodule/caddy/ -v

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tokenvault/tokenvault/internal/testjson"
	"github.com/tokenvault/tokenvault/vaultstore"
)

// Bounds of the lease tests.
const (
	// webhookJobLease is the lease of the webhook worker
	// (vaultstore.jobLeaseTTL): a dead holder's work waits this long.
	webhookJobLease = 2 * time.Minute
	// leaseTakeoverDeadline bounds a takeover after the kill: the lease
	// (two minutes from its last renewal), the other node's next try (10 s)
	// and a busy machine's margin.
	leaseTakeoverDeadline = 5 * time.Minute
	// leaseStepDeadline bounds every wait that involves no lease.
	leaseStepDeadline = 90 * time.Second
	// leasePoll is how often the tests look again.
	leasePoll = 100 * time.Millisecond
)

// pollFor calls cond every leasePoll until it reports true, and fails the
// test after within with what and cond's last account of the state.
func pollFor(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; %s", what, within, state)
		}
		time.Sleep(leasePoll)
	}
}

// receiverMode is how the lease receiver answers.
type receiverMode int

const (
	answerFail   receiverMode = iota // 500
	answerHold                       // nothing, until the sender goes away
	answerAccept                     // 200
)

// leaseHook is one request as the lease receiver got it.
type leaseHook struct {
	hookRequest
	at time.Time
	// held: the receiver answered nothing and held the request until its
	// sender went away (Status is 0).
	held bool
}

// event names the change a delivery reports: its type and entity id.
func (h leaseHook) event() string { return h.EventType + " " + h.EntityID }

// leaseReceiver is a webhook receiver on 127.0.0.1 whose answer the test
// switches: failing, holding requests open, accepting.
type leaseReceiver struct {
	url     string
	release chan struct{} // closed when the test ends: held requests answer 503
	mu      sync.Mutex
	mode    receiverMode
	reqs    []leaseHook
}

func newLeaseReceiver(t *testing.T) *leaseReceiver {
	t.Helper()
	h := &leaseReceiver{release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := leaseHook{hookRequest: parseHookRequest(r.Header, body), at: time.Now()}
		h.mu.Lock()
		mode := h.mode
		switch mode {
		case answerFail:
			req.Status = http.StatusInternalServerError
		case answerAccept:
			req.Status = http.StatusOK
		case answerHold:
			req.held = true
		}
		h.reqs = append(h.reqs, req)
		h.mu.Unlock()
		if mode == answerHold {
			select {
			case <-r.Context().Done(): // the sender went away (killed)
			case <-h.release:
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			return
		}
		w.WriteHeader(req.Status)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(h.release) }) // before srv.Close, which waits for held requests
	h.url = srv.URL + "/hooks/in"
	return h
}

func (h *leaseReceiver) setMode(m receiverMode) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mode = m
}

// of returns the requests for one webhook, split by what they were
// answered.
func (h *leaseReceiver) of(webhookID string) (failed, held, accepted []leaseHook) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.reqs {
		if r.Header.Get("Svc-Webhook-Id") != webhookID {
			continue
		}
		switch {
		case r.held:
			held = append(held, r)
		case r.Status == http.StatusOK:
			accepted = append(accepted, r)
		default:
			failed = append(failed, r)
		}
	}
	return failed, held, accepted
}

// total is the number of requests received.
func (h *leaseReceiver) total() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.reqs)
}

// jobLease reads the lease entry of a job in the cluster's database:
// the store id of its holder and when it lapses.
func jobLease(t *testing.T, db *pgx.Conn, job string) (holder string, until time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var raw []byte
	err := db.QueryRow(ctx, `SELECT value FROM tokenvault_kv WHERE key = $1 AND (expires_at IS NULL OR expires_at > now())`,
		[]byte("tokenvault/lease/"+job)).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", time.Time{}
	}
	if err != nil {
		t.Fatalf("reading the %s lease: %v", job, err)
	}
	var l struct {
		Holder string    `json:"holder"`
		Until  time.Time `json:"until"`
	}
	if err := json.Unmarshal(raw, &l); err != nil || l.Holder == "" || l.Until.IsZero() {
		t.Fatalf("the %s lease entry does not name a holder and a time (%v): %q", job, err, raw)
	}
	return l.Holder, l.Until
}

// webhookHandover is the world of the webhook handover tests: two nodes,
// a receiver, two webhooks and ten events, the node holding the webhooks
// lease (holder) in the middle of an attempt at each webhook, held open by
// the receiver, which now accepts whatever comes next.
type webhookHandover struct {
	c      *cluster
	db     *pgx.Conn
	recv   *leaseReceiver
	ct     createdTenant
	hooks  []string
	want   map[string][]string // per webhook, the events in the order of the changes
	events int
	// holder holds the lease; survivor is the other node
	holder, survivor int
}

// startWebhookHandover makes the world: the webhooks, then ten events
// through both nodes. The receiver fails every attempt, so the holder
// retries each webhook's first event (and only that one: a failed event
// blocks the later ones), then holds the next attempts open.
func startWebhookHandover(t *testing.T) *webhookHandover {
	t.Helper()
	w := &webhookHandover{c: startCluster(t, clusterOpts{Nodes: 2, NoBalancer: true,
		// quick retries; an attempt's timeout far beyond the test's hold,
		// so the holder never gives up the held attempt on its own
		VaultExtra: egressLoopback + "\n\t\twebhooks {\n\t\t\tretry_base 200ms\n\t\t\tretry_max 1s\n\t\t\ttimeout 3m\n\t\t}\n"})}
	c := w.c
	w.db = connectDB(t, c.DSN)
	names := storeNodeIDs(t, c, w.db)
	w.recv = newLeaseReceiver(t)
	w.ct = c.createTenant("Handover Co")

	hookOf := func(n *server, name string, events ...string) string {
		r := n.expect(http.StatusCreated, http.MethodPost, "/webhooks", w.ct.Key, map[string]any{"name": name, "url": w.recv.url, "events": events})
		return testjson.Str(r.Body, "id")
	}
	tokensHook := hookOf(c.Nodes[0], "tokens", "token.created", "token.deleted")
	appsHook := hookOf(c.Nodes[1], "apps", "application.created", "token.created")
	w.hooks = []string{tokensHook, appsHook}
	appID, appKey, _ := c.Nodes[0].createApp(w.ct.Key, map[string]any{"name": "backend", "type": "private",
		"permissions": []string{"token:create", "token:delete"}})
	w.want = map[string][]string{appsHook: {"application.created " + appID}}
	var tokens []string
	for i := range 4 {
		r := c.Nodes[i%2].expect(http.StatusCreated, http.MethodPost, "/tokens", appKey, map[string]any{"type": "token", "data": fmt.Sprintf("handover-%d", i)})
		id := testjson.Str(r.Body, "id")
		tokens = append(tokens, id)
		w.want[tokensHook] = append(w.want[tokensHook], "token.created "+id)
		w.want[appsHook] = append(w.want[appsHook], "token.created "+id)
	}
	c.Nodes[1].expect(http.StatusNoContent, http.MethodDelete, "/tokens/"+tokens[0], appKey, nil)
	w.want[tokensHook] = append(w.want[tokensHook], "token.deleted "+tokens[0])
	w.events = len(w.want[tokensHook]) + len(w.want[appsHook])

	// the holder retries each webhook's first event
	pollFor(t, leaseStepDeadline, "two failed attempts at each webhook", func() (bool, string) {
		var state []string
		ok := true
		for _, h := range w.hooks {
			failed, _, _ := w.recv.of(h)
			ok = ok && len(failed) >= 2
			state = append(state, fmt.Sprintf("webhook %s: %d failed", h, len(failed)))
		}
		return ok, strings.Join(state, ", ")
	})
	holderID, _ := jobLease(t, w.db, "webhooks")
	w.holder, w.survivor = -1, -1
	for i := range c.Nodes {
		if names[holderID] == fmt.Sprintf("node %d", i) {
			w.holder, w.survivor = i, 1-i
		}
	}
	if w.holder < 0 {
		t.Fatalf("the webhooks lease names %q, which is neither node (%v)", holderID, names)
	}
	for i, n := range c.Nodes {
		failed := metricInt(n.metric(`tokenvault_webhook_deliveries_total{result="failed"}`))
		delivered := metricInt(n.metric(`tokenvault_webhook_deliveries_total{result="delivered"}`))
		if (i == w.holder) != (failed > 0) || delivered != 0 {
			t.Fatalf("node %d (the lease holder is node %d) counts %d failed and %d delivered attempts: one node delivers, the holder", i, w.holder, failed, delivered)
		}
	}

	// the next attempts are held open
	w.recv.setMode(answerHold)
	pollFor(t, leaseStepDeadline, "an attempt held open at each webhook", func() (bool, string) {
		var state []string
		ok := true
		for _, h := range w.hooks {
			_, held, _ := w.recv.of(h)
			ok = ok && len(held) > 0
			state = append(state, fmt.Sprintf("webhook %s: %d held", h, len(held)))
		}
		return ok, strings.Join(state, ", ")
	})
	// the holder sends nothing more while its attempts are held (a
	// webhook's attempts go one at a time): what comes next is the
	// survivor's, and is accepted
	w.recv.setMode(answerAccept)
	return w
}

// delivered waits, at most within from since (when the holder stopped),
// until the survivor has delivered every event, and checks them: each
// once, in order, signed, the attempt the holder's end cut short resent
// with its id and number, every delivery in the survivor's audit log and
// metrics. It returns the first delivery's time and the attempts the
// receiver held.
func (w *webhookHandover) delivered(t *testing.T, since time.Time, within time.Duration) (first time.Time, held int) {
	t.Helper()
	n := w.c.Nodes[w.survivor]
	pollFor(t, within, fmt.Sprintf("the surviving node %d delivering all %d events", w.survivor, w.events), func() (bool, string) {
		var state []string
		got := 0
		for _, h := range w.hooks {
			_, _, accepted := w.recv.of(h)
			got += len(accepted)
			state = append(state, fmt.Sprintf("webhook %s: %d of %d accepted", h, len(accepted), len(w.want[h])))
		}
		return got >= w.events, strings.Join(state, ", ")
	})
	// every attempt recorded by the survivor: the outbox is empty, and
	// nothing will be sent again
	pollFor(t, leaseStepDeadline, "the survivor's audit records of the deliveries", func() (bool, string) {
		msgs := strings.Join(auditMessages(t, n, w.ct.Key), "\n")
		return strings.Count(msgs, " delivered, attempt ") == w.events, msgs
	})
	if got := metricInt(n.metric(`tokenvault_webhook_deliveries_total{result="delivered"}`)); got != w.events {
		t.Errorf("the survivor counts %d delivered attempts, want %d", got, w.events)
	}
	if got := metricInt(n.metric(`tokenvault_webhook_deliveries_total{result="failed"}`)); got != 0 {
		t.Errorf("the survivor counts %d failed attempts, want none: the receiver accepted everything once it had the lease", got)
	}

	keyID, pub := signingKey(t, n, w.ct.Key)
	for _, h := range w.hooks {
		failed, heldHere, accepted := w.recv.of(h)
		held += len(heldHere)
		head := w.want[h][0]
		for _, r := range append(append([]leaseHook(nil), failed...), heldHere...) {
			if r.event() != head {
				t.Errorf("webhook %s: while its first event (%s) failed, the holder sent a later one: %s", h, head, r.event())
			}
			if r.at.After(since) {
				t.Errorf("webhook %s: an attempt answered %d came %v after the holder's end", h, r.Status, r.at.Sub(since))
			}
		}
		var got []string
		seen := map[string]bool{}
		for _, r := range accepted {
			got = append(got, r.event())
			if seen[r.EventID] {
				t.Errorf("webhook %s: event %s (%s) delivered twice", h, r.EventID, r.event())
			}
			seen[r.EventID] = true
			if r.Header.Get("Svc-Event-Id") != r.EventID || r.Header.Get("Svc-Event-Type") != r.EventType {
				t.Errorf("webhook %s: headers %v for event %s", h, r.Header, r.Body)
			}
			if r.at.Before(since) {
				t.Errorf("webhook %s: %s accepted %v before the holder's end", h, r.event(), since.Sub(r.at))
			}
			if first.IsZero() || r.at.Before(first) {
				first = r.at
			}
			verifyHook(t, pub, keyID, r.hookRequest)
		}
		if strings.Join(got, "\n") != strings.Join(w.want[h], "\n") {
			t.Errorf("webhook %s: delivered\n  %s\nwant, in the order of the changes,\n  %s", h, strings.Join(got, "\n  "), strings.Join(w.want[h], "\n  "))
			continue
		}
		// the attempt cut short was never recorded: the same event, with
		// the same id, and the same attempt number again
		last := heldHere[len(heldHere)-1]
		if accepted[0].EventID != last.EventID {
			t.Errorf("webhook %s: the held attempt was event %s, the survivor's first delivery event %s", h, last.EventID, accepted[0].EventID)
		}
		heldAttempt, _ := strconv.Atoi(last.Header.Get("Svc-Delivery-Attempt"))
		if a := accepted[0].Header.Get("Svc-Delivery-Attempt"); a != strconv.Itoa(heldAttempt) || heldAttempt != len(failed)+1 {
			t.Errorf("webhook %s: %d failed attempts, the held one was attempt %d, the survivor's was %s; want %d for both", h, len(failed), heldAttempt, a, len(failed)+1)
		}
		for i, r := range accepted[1:] {
			if a := r.Header.Get("Svc-Delivery-Attempt"); a != "1" {
				t.Errorf("webhook %s: event %d (%s) delivered at attempt %s, want 1", h, i+1, r.event(), a)
			}
		}
	}
	return first, held
}

// TestClusterLeaseWebhookTakeover: the node holding the webhooks lease is
// killed with SIGKILL in the middle of an attempt at each webhook (see
// startWebhookHandover). The other node takes the lease over once it has
// lapsed, never before, and delivers every event: each exactly once (the
// receiver accepted none before the kill), in the order of the changes per
// webhook, signed with the tenant's key; the attempt the kill cut short
// counts for nothing, so the survivor sends the first event with the same
// id and attempt number again.
func TestClusterLeaseWebhookTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a dead node's two-minute webhooks lease to lapse")
	}
	t.Parallel()
	w := startWebhookHandover(t)
	_, until := jobLease(t, w.db, "webhooks") // the holder's latest renewal is no earlier
	killAt := time.Now()
	w.c.Nodes[w.holder].kill()
	if until.After(killAt.Add(webhookJobLease)) {
		t.Errorf("the webhooks lease runs until %v after the kill, beyond its %v", until.Sub(killAt), webhookJobLease)
	}
	t.Logf("node %d held the webhooks lease until %s (%v after the kill) and was killed with SIGKILL", w.holder, until.Format(time.RFC3339Nano), until.Sub(killAt).Round(time.Millisecond))
	first, held := w.delivered(t, killAt, leaseTakeoverDeadline)
	if first.Before(until) {
		t.Errorf("the survivor delivered %v before the dead holder's lease lapsed", until.Sub(first))
	}
	t.Logf("webhooks lease takeover: %d events on %d webhooks, %d requests in all; node %d killed while holding %d attempts open; "+
		"node %d delivered the first event %v after the kill (%v after the lease lapsed), each event once, in order",
		w.events, len(w.hooks), w.recv.total(), w.holder, held, w.survivor, first.Sub(killAt).Round(time.Millisecond), first.Sub(until).Round(time.Millisecond))
}

// TestClusterLeaseWebhookHandoverOnStop: the node holding the webhooks
// lease is stopped cleanly (SIGTERM) in the middle of an attempt at each
// webhook. Stopping, it abandons the attempts (they count for nothing)
// and gives the lease up, so the other node takes delivery over at its
// next try (every 10 s), long before the lease would have lapsed, and
// delivers every event as after a kill. It takes about a minute.
func TestClusterLeaseWebhookHandoverOnStop(t *testing.T) {
	if testing.Short() {
		t.Skip("a two-node cluster for a minute")
	}
	t.Parallel()
	w := startWebhookHandover(t)
	_, until := jobLease(t, w.db, "webhooks")
	stopAt := time.Now()
	w.c.Nodes[w.holder].stopClean()
	stopped := time.Since(stopAt)
	first, held := w.delivered(t, stopAt, leaseStepDeadline)
	if !first.Before(until) {
		t.Errorf("the survivor delivered only %v after the stopped holder's lease lapsed: the lease was not given up", first.Sub(until))
	}
	t.Logf("webhooks lease handover on SIGTERM: %d events on %d webhooks, %d requests in all; node %d stopped in %v while holding %d attempts open; "+
		"node %d delivered the first event %v after the stop (%v before the lease would have lapsed), each event once, in order",
		w.events, len(w.hooks), w.recv.total(), w.holder, stopped.Round(time.Millisecond), held, w.survivor,
		first.Sub(stopAt).Round(time.Millisecond), until.Sub(first).Round(time.Millisecond))
}

// TestClusterLeaseAsyncReactionTakeover: two nodes that each run one
// asynchronous reaction at a time; four reactions accepted by node 0. The
// first two spin for 25 s (one on each node: each runs one at a time);
// the last two wait in the queue. Node 0 is killed with SIGKILL. Through
// node 1, as docs/api.md says: the queued reactions run there and their
// results are read; node 1's own spinning reaction completes; the one
// node 0 was running is never run again and stays running until its
// two-minute lease has passed, then reads failed with a 500 problem
// saying so.
func TestClusterLeaseAsyncReactionTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a dead node's two-minute reaction lease to lapse")
	}
	t.Parallel()
	c := startCluster(t, clusterOpts{Nodes: 2, NoBalancer: true,
		VaultExtra: "\t\tasync_reactions {\n\t\t\tconcurrency 1\n\t\t}\n\t\ttransforms {\n\t\t\ttimeout 30s\n\t\t}\n"})
	a, b := c.Nodes[0], c.Nodes[1]
	ct := c.createTenant("Async Handover Co")
	_, invoker, _ := a.createApp(ct.Key, map[string]any{"name": "invoker", "type": "private", "permissions": []string{"reactor:invoke"}})
	reactor := testjson.Str(a.expect(http.StatusCreated, http.MethodPost, "/reactors", ct.Key, map[string]any{"name": "spin", "code": `module.exports = async function (req) {
	const end = Date.now() + (req.args.spin || 0);
	while (Date.now() < end) {}
	return { raw: { n: req.args.n } };
}`}).Body, "id")
	result := func(n *server, id string) apiResponse {
		t.Helper()
		return n.expect(http.StatusOK, http.MethodGet, "/reactors/"+reactor+"/results/"+id, invoker, nil)
	}
	status := func(n *server, id string) string { t.Helper(); return testjson.Str(result(n, id).Body, "status") }
	final := func(n *server, id string, within time.Duration) apiResponse {
		t.Helper()
		var r apiResponse
		pollFor(t, within, "reaction "+id+" completed or failed", func() (bool, string) {
			r = result(n, id)
			st := testjson.Str(r.Body, "status")
			return st == "completed" || st == "failed", string(r.Raw)
		})
		return r
	}
	enqueue := func(args map[string]any) string {
		t.Helper()
		return testjson.Str(a.expect(http.StatusAccepted, http.MethodPost, "/reactors/"+reactor+"/react-async", invoker, map[string]any{"args": args}).Body, "asyncReactorRequestId")
	}
	at := func(r apiResponse, field string) time.Time {
		t.Helper()
		ts, err := time.Parse(time.RFC3339Nano, testjson.Str(r.Body, field))
		if err != nil {
			t.Fatalf("%s of %s: %v", field, r.Raw, err)
		}
		return ts
	}

	spinners := []string{enqueue(map[string]any{"n": 1, "spin": 25000}), enqueue(map[string]any{"n": 2, "spin": 25000})}
	pollFor(t, leaseStepDeadline, "both spinning reactions running, one on each node", func() (bool, string) {
		s0, s1 := status(a, spinners[0]), status(a, spinners[1])
		return s0 == "running" && s1 == "running", s0 + ", " + s1
	})
	queued := []string{enqueue(map[string]any{"n": 3}), enqueue(map[string]any{"n": 4})}
	for _, id := range queued {
		if st := status(a, id); st != "pending" {
			t.Fatalf("reaction %s is %s with both nodes busy, want pending", id, st)
		}
	}
	killAt := time.Now()
	a.kill()

	// the dead node's reaction is still under its lease: running (node
	// 1's may have completed already on a slow machine; neither failed)
	running := 0
	for _, id := range spinners {
		r := result(b, id)
		switch testjson.Str(r.Body, "status") {
		case "running":
			running++
		case "completed":
		default:
			t.Fatalf("through node 1 right after the kill, a spinning reaction: %s, want running", r.Raw)
		}
	}
	if running == 0 {
		t.Fatal("through node 1 right after the kill, neither spinning reaction is running: the killed node's should be, under its lease")
	}
	// the queued ones run on node 1, oldest first
	var queuedStarts []time.Time
	for i, id := range queued {
		r := final(b, id, leaseStepDeadline+30*time.Second)
		if testjson.Str(r.Body, "status") != "completed" || fmt.Sprint(testjson.Field(r.Body, "raw", "n")) != strconv.Itoa(i+3) {
			t.Fatalf("a reaction queued at the kill, through node 1: %s", r.Raw)
		}
		if started := at(r, "started_at"); started.Before(killAt) {
			t.Errorf("reaction %s, pending at the kill, started %v before it", id, killAt.Sub(started))
		} else {
			queuedStarts = append(queuedStarts, started)
		}
	}
	if len(queuedStarts) == 2 && queuedStarts[1].Before(queuedStarts[0]) {
		t.Errorf("the later queued reaction started %v before the earlier one", queuedStarts[0].Sub(queuedStarts[1]))
	}
	// of the spinning ones, node 1's completes and node 0's fails once its
	// lease has passed
	var completed, failed []apiResponse
	for _, id := range spinners {
		r := final(b, id, time.Until(killAt.Add(leaseTakeoverDeadline)))
		if testjson.Str(r.Body, "status") == "completed" {
			completed = append(completed, r)
		} else {
			failed = append(failed, r)
		}
	}
	if len(completed) != 1 || len(failed) != 1 {
		t.Fatalf("of the two reactions running at the kill (one on each node), %d completed and %d failed, want one each: %v %v", len(completed), len(failed), completed, failed)
	}
	f := failed[0]
	if fmt.Sprint(testjson.Field(f.Body, "error_status")) != "500" || fmt.Sprint(testjson.Field(f.Body, "error", "status")) != "500" ||
		!strings.Contains(testjson.Str(f.Body, "error", "detail"), "not run again") {
		t.Errorf("the reaction running on the killed node: %s, want failed with a 500 problem saying it was not run again", f.Raw)
	}
	if testjson.Has(f.Body, "raw") {
		t.Errorf("the reaction running on the killed node has a result, so it ran again: %s", f.Raw)
	}
	started, ended := at(f, "started_at"), at(f, "completed_at")
	if ended.Sub(started) < vaultstore.AsyncLease {
		t.Errorf("the killed node's reaction was failed %v after it was claimed, before its %v lease passed", ended.Sub(started), vaultstore.AsyncLease)
	}
	firstQueued := time.Duration(0)
	if len(queuedStarts) > 0 {
		firstQueued = queuedStarts[0].Sub(killAt)
	}
	t.Logf("react-async handover: node 0 killed with SIGKILL %v after it claimed a reaction; node 1 ran the 2 queued ones (from %v after the kill) and failed node 0's %v after the kill (%v after its claim)",
		killAt.Sub(started).Round(time.Millisecond), firstQueued.Round(time.Millisecond), ended.Sub(killAt).Round(time.Millisecond), ended.Sub(started).Round(time.Millisecond))
}

package vaultstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testclock"
	"github.com/tokenvault/tokenvault/vaultstore/kv/postgres"
	"github.com/tokenvault/tokenvault/vaultstore/kv/postgres/pgtest"
)

// These tests run two stores, as two vault nodes would, on one PostgreSQL
// database, whatever TV_ENGINE says.

// clusterNodes opens n stores on one new database with one clock.
func clusterNodes(t *testing.T, n int, clock *testclock.Clock) []*Store {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	nodes := make([]*Store, n)
	for i := range nodes {
		nodes[i] = openTestStore(t, Options{Postgres: &postgres.Options{DSN: dsn}, Now: clock.Now})
	}
	return nodes
}

// eventually polls cond until it holds or a generous deadline passes, and
// returns how long it took.
func eventually(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for deadline := start.Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return time.Since(start)
		}
	}
	t.Fatalf("%s: not within 20 s", what)
	return 0
}

// A key deleted through one node stops authenticating on the other, whose
// cache had resolved it, as soon as the change notice arrives.
func TestClusterCredentialCacheFollowsOtherNodes(t *testing.T) {
	nodes := clusterNodes(t, 2, newFakeClock())
	a, b := nodes[0], nodes[1]
	ctx := context.Background()
	ct := mustCreateTenant(t, a, "Cluster", TenantTest)
	app, key := mustCreateApp(t, a, ct.Tenant.ID, ApplicationInput{Name: "r", Type: AppPrivate, Permissions: []string{"token:read"}})
	for range 2 { // the second resolution comes from b's cache
		if _, err := b.Authenticate(ctx, key.Key); err != nil {
			t.Fatalf("Authenticate on b before the delete: %v", err)
		}
	}
	if err := a.DeleteKey(ctx, ct.Tenant.ID, app.ID, key.ID, "actor"); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, "the deleted key still authenticates on the other node", func() bool {
		_, err := b.Authenticate(ctx, key.Key)
		return errors.Is(err, ErrUnauthenticated)
	})
	t.Logf("the other node refused the deleted key after %v", took)

	// a tenant deleted through b is gone on a
	other := mustCreateTenant(t, a, "Doomed", TenantTest)
	if _, err := a.Authenticate(ctx, other.Key); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteTenant(ctx, other.Tenant.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted tenant's key still authenticates on the other node", func() bool {
		_, err := a.Authenticate(ctx, other.Key)
		return errors.Is(err, ErrUnauthenticated)
	})
}

// A job runs in one node at a time; another takes it over once the
// holder's lease has lapsed.
func TestClusterLeaseRunsOnce(t *testing.T) {
	nodes := clusterNodes(t, 2, newFakeClock())
	a, b := nodes[0], nodes[1]
	ctx := context.Background()

	running, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		ran, err := a.exclusively(ctx, "test-job", func(context.Context) error {
			close(running)
			<-release
			return nil
		})
		if err == nil && !ran {
			err = errors.New("the first node did not run the job")
		}
		done <- err
	}()
	<-running
	ranOnB := false
	if ran, err := b.exclusively(ctx, "test-job", func(context.Context) error { ranOnB = true; return nil }); err != nil || ran || ranOnB {
		t.Fatalf("while a runs the job, b ran it too: ran %v, %v", ran, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ran, err := b.exclusively(ctx, "test-job", func(context.Context) error { return nil }); err != nil || !ran {
		t.Fatalf("after a released the lease, b did not run the job: %v, %v", ran, err)
	}

	// a holder that died: its lease lapses, and the other node takes over
	if err := a.takeLease(ctx, "orphan", time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.takeLease(ctx, "orphan", time.Minute); !errors.Is(err, errLeaseHeld) {
		t.Fatalf("b took a live lease: %v", err)
	}
	eventually(t, "b never took over the lapsed lease", func() bool {
		return b.takeLease(ctx, "orphan", time.Minute) == nil
	})
	if err := a.takeLease(ctx, "orphan", time.Minute); !errors.Is(err, errLeaseHeld) {
		t.Fatalf("a took back the lease b holds: %v", err)
	}
}

// One idempotency key sent to two nodes at once: exactly one request
// holds it.
func TestClusterIdempotencyKeyHeldOnce(t *testing.T) {
	nodes := clusterNodes(t, 2, newFakeClock())
	ct := mustCreateTenant(t, nodes[0], "Cluster", TenantTest)
	for round := range 10 {
		key := fmt.Sprint("key-", round)
		errs := make([]error, len(nodes))
		var wg sync.WaitGroup
		for i, s := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.BeginIdempotent(context.Background(), ct.Tenant.ID, key, "hash")
			}()
		}
		wg.Wait()
		held := 0
		for _, err := range errs {
			switch {
			case err == nil:
				held++
			case !errors.Is(err, ErrIdempotencyInFlight):
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if held != 1 {
			t.Fatalf("round %d: %d nodes hold the key, want 1 (%v)", round, held, errs)
		}
	}
}

// Tokens created on two nodes at once are counted exactly, on both.
func TestClusterTokenCountsExact(t *testing.T) {
	clock := newFakeClock()
	nodes := clusterNodes(t, 2, clock)
	w := newTokenWorldOn(t, nodes[0], clock, "", nil)
	req := w.req("admin")
	const perWriter, writersPerNode int64 = 15, 3
	var wg sync.WaitGroup
	errs := make(chan error, int64(len(nodes))*writersPerNode*perWriter)
	for _, s := range nodes {
		for range int(writersPerNode) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range int(perWriter) {
					if _, err := s.CreateToken(context.Background(), req, TokenInput{Type: "token", Data: fmt.Sprint(i)}); err != nil {
						errs <- err
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("CreateToken: %v", err)
	}
	want := int64(len(nodes)) * writersPerNode * perWriter
	for i, s := range nodes {
		rep, err := s.Usage(context.Background(), w.tenant)
		if err != nil {
			t.Fatal(err)
		}
		if rep.TokenReport.TotalTokens != want {
			t.Errorf("node %d counts %d tokens, want %d", i, rep.TokenReport.TotalTokens, want)
		}
	}
}

// A CVC sealed on one node opens on the other; after its retention a
// sweep on either node deletes its key from the database, and each node's
// own sweep drops the key from its memory.
func TestClusterCVCKeysShared(t *testing.T) {
	clock := newFakeClock()
	nodes := clusterNodes(t, 2, clock)
	a, b := nodes[0], nodes[1]
	w := newTokenWorldOn(t, a, clock, "", nil)
	tok := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, testCVC)})
	onB := w.at(t)
	onB.s = b
	if got := cvcOf(onB.mustGet("admin", tok.ID)); got != testCVC {
		t.Fatalf("the other node reads cvc %v, want the one sealed on the first", got)
	}
	epoch, until := w.cvcState(tok.ID)
	end := time.Unix(0, epoch*int64(cvcEpoch))
	if end.Before(until) {
		end = until
	}
	clock.Advance(end.Add(time.Second).Sub(clock.Peek()))
	if err := b.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	left := kvKeys(t, a, string(cvcKeysPrefix))
	if len(left) != 0 {
		t.Errorf("cvc keys left in the database after the sweep: %v", left)
	}
	// each node drops the keys it holds in memory at its own sweep, which
	// runs every minute on every node
	if err := a.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*Store{"a": a, "b": b} {
		rec, err := w.record(tok.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.cvc.open(context.Background(), rec.CVC, recordAAD("cvc", w.tenant.ID, tok.ID)); !errors.Is(err, errCVCShredded) {
			t.Errorf("node %s opens the cvc after the sweep: %v", name, err)
		}
	}
}

// A node started with another master key is refused, and changes nothing
// in the database.
func TestClusterWrongMasterKeyChangesNothing(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	s := openTestStore(t, Options{Postgres: &postgres.Options{DSN: dsn}})
	mustCreateTenant(t, s, "Kept", TenantTest)
	before := dumpStorage(t, s)
	other := bytes.Repeat([]byte{0x17}, MasterKeySize)
	if _, err := Open(Options{Postgres: &postgres.Options{DSN: dsn}, MasterKey: other}); !errors.Is(err, ErrWrongMasterKey) {
		t.Fatalf("Open with another master key: %v, want ErrWrongMasterKey", err)
	}
	after := dumpStorage(t, s)
	if len(after) != len(before) {
		t.Fatalf("%d entries after the refused open, %d before", len(after), len(before))
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("entry %s changed", k)
		}
	}
}

// A restore refuses a database that holds a vault's entries, and leaves
// them alone.
func TestRestoreRefusesNonEmptyDatabase(t *testing.T) {
	src, _ := newTestStore(t)
	mustCreateTenant(t, src, "Source", TenantTest)
	data := backupBytes(t, src)
	dsn := pgtest.NewDatabase(t)
	s := openTestStore(t, Options{Postgres: &postgres.Options{DSN: dsn}})
	mustCreateTenant(t, s, "Kept", TenantTest)
	before := dumpStorage(t, s)
	_, err := Restore(bytes.NewReader(data), RestoreOptions{Postgres: &postgres.Options{DSN: dsn}, MasterKey: testMasterKey})
	if !errors.Is(err, ErrRestoreTargetNotEmpty) {
		t.Fatalf("restore into a database in use: %v, want ErrRestoreTargetNotEmpty", err)
	}
	if after := dumpStorage(t, s); len(after) != len(before) {
		t.Errorf("%d entries after the refused restore, %d before", len(after), len(before))
	}
}

// The sweep stays with the node that took it, from one interval to the
// next, so a cluster sweeps once a minute, not once per node.
func TestClusterSweepStaysWithOneNode(t *testing.T) {
	nodes := clusterNodes(t, 2, newFakeClock())
	a, b := nodes[0], nodes[1]
	ctx := context.Background()
	a.backgroundWork(ctx)
	b.backgroundWork(ctx)
	if err := b.takeLease(ctx, "sweep", time.Minute); !errors.Is(err, errLeaseHeld) {
		t.Fatalf("after both nodes' sweep tick, b could take the sweep lease: %v", err)
	}
	if err := a.takeLease(ctx, "sweep", sweepLeaseTTL); err != nil {
		t.Fatalf("a no longer holds the sweep: %v", err)
	}
}

package vaultstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testclock"
)

type asyncWorld struct {
	s       *Store
	clock   *testclock.Clock
	dir     string
	tenant  *CreatedTenant
	caller  *Principal
	reactor *Reactor
}

func newAsyncWorld(t *testing.T) *asyncWorld {
	t.Helper()
	w := &asyncWorld{clock: testclock.New(time.Now().UTC().Truncate(time.Second)), dir: t.TempDir()}
	w.s = openTestStore(t, Options{Dir: w.dir, Now: w.clock.Now})
	w.setup(t)
	return w
}

func (w *asyncWorld) setup(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	w.tenant = mustCreateTenant(t, w.s, "T", TenantTest)
	_, key := mustCreateApp(t, w.s, w.tenant.Tenant.ID, ApplicationInput{Name: "caller", Type: AppPrivate, Permissions: []string{"reactor:invoke", "token:use"}})
	var err error
	if w.caller, err = w.s.Authenticate(ctx, key.Key); err != nil {
		t.Fatal(err)
	}
	if w.reactor, err = w.s.CreateReactor(ctx, w.tenant.Tenant.ID, "actor", ReactorInput{Name: "r", Code: "module.exports = async () => ({raw: 1})"}, nil); err != nil {
		t.Fatal(err)
	}
}

func (w *asyncWorld) enqueue(t *testing.T, args string, limit int) (*AsyncReaction, error) {
	t.Helper()
	return w.s.EnqueueAsyncReaction(context.Background(), w.tenant.Tenant.ID, w.reactor.ID, w.caller.Application, []byte(args), limit, 0)
}

func (w *asyncWorld) status(t *testing.T, id string) *AsyncReaction {
	t.Helper()
	a, err := w.s.GetAsyncReaction(context.Background(), w.tenant.Tenant.ID, w.reactor.ID, id, w.caller.Application)
	if err != nil {
		t.Fatalf("GetAsyncReaction(%s): %v", id, err)
	}
	return a
}

func (w *asyncWorld) claim(t *testing.T, max int) []*AsyncJob {
	t.Helper()
	jobs, err := w.s.ClaimAsyncReactions(context.Background(), max)
	if err != nil {
		t.Fatalf("ClaimAsyncReactions: %v", err)
	}
	return jobs
}

func TestAsyncReactionLifecycle(t *testing.T) {
	ctx := context.Background()
	w := newAsyncWorld(t)
	a, err := w.enqueue(t, `{"card":"async-secret-4111"}`, 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != AsyncPending || a.ExpiresAt.Sub(a.CreatedAt.Time) != DefaultAsyncResultTTL {
		t.Fatalf("queued reaction = %+v", a)
	}
	if got := w.status(t, a.ID); got.Status != AsyncPending {
		t.Fatalf("status %s, want pending", got.Status)
	}
	jobs := w.claim(t, 10)
	if len(jobs) != 1 || jobs[0].ID != a.ID || string(jobs[0].Args) != `{"card":"async-secret-4111"}` || jobs[0].CallerID != w.caller.Application.ID {
		t.Fatalf("claimed %+v", jobs)
	}
	if got := w.status(t, a.ID); got.Status != AsyncRunning || got.StartedAt == nil {
		t.Fatalf("claimed reaction = %+v, want running", got)
	}
	if again := w.claim(t, 10); len(again) != 0 {
		t.Fatalf("a running reaction was claimed twice: %+v", again)
	}
	if err := w.s.FinishAsyncReaction(ctx, jobs[0], 200, json.RawMessage(`{"tokens":null,"raw":1}`)); err != nil {
		t.Fatal(err)
	}
	got := w.status(t, a.ID)
	if got.Status != AsyncCompleted || got.ResultStatus != 200 || string(got.Result) != `{"tokens":null,"raw":1}` || got.CompletedAt == nil {
		t.Fatalf("finished reaction = %+v", got)
	}
	if keys := append(kvKeys(t, w.s, keyVersion+"areactq/"), kvKeys(t, w.s, keyVersion+"areactr/")...); len(keys) != 0 {
		t.Fatalf("finished reaction still queued or running: %v", keys)
	}

	// a failure keeps the synchronous call's status and body
	b, _ := w.enqueue(t, `{}`, 0)
	jobs = w.claim(t, 10)
	if err := w.s.FinishAsyncReaction(ctx, jobs[0], 422, json.RawMessage(`{"status":422}`)); err != nil {
		t.Fatal(err)
	}
	if got := w.status(t, b.ID); got.Status != AsyncFailed || got.ResultStatus != 422 {
		t.Fatalf("failed reaction = %+v", got)
	}

	// arguments and results are sealed
	err = w.s.kv.View(ctx, func(r Reader) error {
		return r.Scan([]byte(keyVersion), nil, func(k, v []byte) error {
			if bytes.Contains(v, []byte("async-secret-4111")) || bytes.Contains(v, []byte(`"raw":1`)) {
				t.Errorf("entry %q holds arguments or a result in the clear", k)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}

	// results expire after a day, and are nobody else's: not another
	// tenant's, nor another application's of the same tenant
	other := mustCreateTenant(t, w.s, "O", TenantTest)
	if _, err := w.s.GetAsyncReaction(ctx, other.Tenant.ID, w.reactor.ID, a.ID, w.caller.Application); !errors.Is(err, ErrNotFound) {
		t.Errorf("another tenant reads the result: %v", err)
	}
	if _, err := w.s.GetAsyncReaction(ctx, w.tenant.Tenant.ID, "00000000-0000-4000-8000-000000000000", a.ID, w.caller.Application); !errors.Is(err, ErrNotFound) {
		t.Errorf("the result under another reactor id: %v", err)
	}
	_, otherKey := mustCreateApp(t, w.s, w.tenant.Tenant.ID, ApplicationInput{Name: "other caller", Type: AppPrivate, Permissions: []string{"reactor:invoke"}})
	otherCaller, err := w.s.Authenticate(ctx, otherKey.Key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.s.GetAsyncReaction(ctx, w.tenant.Tenant.ID, w.reactor.ID, a.ID, otherCaller.Application); !errors.Is(err, ErrNotFound) {
		t.Errorf("another application of the tenant, which may invoke the reactor, reads the result: %v", err)
	}
	if _, err := w.s.GetAsyncReaction(ctx, w.tenant.Tenant.ID, w.reactor.ID, a.ID, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("no caller reads the result: %v", err)
	}
	w.clock.Advance(DefaultAsyncResultTTL)
	if _, err := w.s.GetAsyncReaction(ctx, w.tenant.Tenant.ID, w.reactor.ID, a.ID, w.caller.Application); !errors.Is(err, ErrNotFound) {
		t.Errorf("result after 24 hours: %v, want ErrNotFound", err)
	}
	if _, err := w.s.EnqueueAsyncReaction(ctx, w.tenant.Tenant.ID, "00000000-0000-4000-8000-000000000000", w.caller.Application, nil, 0, 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("queue for an unknown reactor: %v", err)
	}
}

func TestAsyncReactionQueueIsBoundedPerTenant(t *testing.T) {
	ctx := context.Background()
	w := newAsyncWorld(t)
	for i := range 3 {
		if _, err := w.enqueue(t, `{}`, 3); err != nil {
			t.Fatalf("enqueue %d: %v", i, err)
		}
	}
	if _, err := w.enqueue(t, `{}`, 3); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("enqueue beyond the bound: %v, want ErrQueueFull", err)
	}
	// running reactions count too; a finished one frees its place
	jobs := w.claim(t, 1)
	if _, err := w.enqueue(t, `{}`, 3); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("enqueue with one running: %v, want ErrQueueFull", err)
	}
	if err := w.s.FinishAsyncReaction(ctx, jobs[0], 200, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.enqueue(t, `{}`, 3); err != nil {
		t.Fatalf("enqueue after one finished: %v", err)
	}
	// another tenant has its own queue
	o := newAsyncWorld(t)
	if _, err := o.enqueue(t, `{}`, 3); err != nil {
		t.Fatalf("another tenant: %v", err)
	}
}

func TestAsyncReactionReleaseRequeues(t *testing.T) {
	w := newAsyncWorld(t)
	a, _ := w.enqueue(t, `{}`, 0)
	jobs := w.claim(t, 1)
	if err := w.s.ReleaseAsyncReaction(context.Background(), jobs[0]); err != nil {
		t.Fatal(err)
	}
	if got := w.status(t, a.ID); got.Status != AsyncPending {
		t.Fatalf("released reaction is %s", got.Status)
	}
	if again := w.claim(t, 1); len(again) != 1 || again[0].ID != a.ID {
		t.Fatalf("released reaction not claimed again: %+v", again)
	}
}

// A reaction queued when the process dies runs after the restart; one
// that was running is failed, never run twice.
func TestAsyncReactionsAcrossRestart(t *testing.T) {
	ctx := context.Background()
	w := newAsyncWorld(t)
	running, _ := w.enqueue(t, `{"n":1}`, 0)
	w.clock.Advance(time.Millisecond)
	queued, _ := w.enqueue(t, `{"n":2}`, 0)
	if jobs := w.claim(t, 1); len(jobs) != 1 || jobs[0].ID != running.ID {
		t.Fatalf("claimed %+v, want the oldest", jobs)
	}
	closeTestStore(t, w.s)

	w.s = openTestStore(t, Options{Dir: w.dir, Now: w.clock.Now})
	n, err := w.s.RecoverAsyncReactions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w.s.shared {
		// another node may be running it: only its lease running out fails it
		if n != 0 || w.status(t, running.ID).Status != AsyncRunning {
			t.Fatalf("shared store: recovered %d, status %s", n, w.status(t, running.ID).Status)
		}
		w.clock.Advance(AsyncLease)
	} else if n != 1 {
		t.Fatalf("recovered %d running reactions, want 1", n)
	}
	jobs := w.claim(t, 10)
	if len(jobs) != 1 || jobs[0].ID != queued.ID || string(jobs[0].Args) != `{"n":2}` {
		t.Fatalf("after restart claimed %+v, want the queued reaction", jobs)
	}
	got := w.status(t, running.ID)
	if got.Status != AsyncFailed || got.ResultStatus != 500 || !bytes.Contains(got.Result, []byte("not run again")) {
		t.Fatalf("interrupted reaction = %+v %s", got, got.Result)
	}
}

// Reactions running elsewhere never hide the queued ones behind them: a
// node claims the oldest queued reaction however many others are running.
func TestAsyncReactionClaimsPastRunningOnes(t *testing.T) {
	w := newAsyncWorld(t)
	var ids []string
	for range 30 {
		a, err := w.enqueue(t, `{}`, 0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
		w.clock.Advance(time.Millisecond)
	}
	for i, id := range ids {
		jobs := w.claim(t, 1)
		if len(jobs) != 1 || jobs[0].ID != id {
			t.Fatalf("claim %d: %+v, want %s", i, jobs, id)
		}
	}
	if keys := kvKeys(t, w.s, keyVersion+"areactr/"); len(keys) != len(ids) {
		t.Fatalf("%d running entries, want %d", len(keys), len(ids))
	}
}

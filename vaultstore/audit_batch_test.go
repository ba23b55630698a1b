package vaultstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/kv/badgerkv"
)

// countingKV counts write transactions and can fail them; after, when
// set, runs once each has returned.
type countingKV struct {
	KV
	updates atomic.Int64
	fail    atomic.Bool
	// after, when set, runs after each write transaction; an atomic, as
	// a store sharing its engine takes leases in the background
	after atomic.Pointer[func()]
}

func (c *countingKV) Update(ctx context.Context, fn func(Writer) error) error {
	c.updates.Add(1)
	if c.fail.Load() {
		return errors.New("injected: storage unavailable")
	}
	err := c.KV.Update(ctx, fn)
	if after := c.after.Load(); after != nil {
		(*after)()
	}
	return err
}

func (c *countingKV) Unwrap() KV { return c.KV }

func newBatchWorld(t *testing.T) (*tokenWorld, *countingKV, string) {
	t.Helper()
	kv := &countingKV{}
	clock := newFakeClock()
	dir := t.TempDir()
	s := openTestStore(t, Options{Dir: dir, Now: clock.Now, SyncWrites: true, WrapKV: func(inner KV) KV { kv.KV = inner; return kv }})
	w := newTokenWorldOn(t, s, clock, dir, nil)
	tok := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, testCVC)})
	// the first read also marks the token active this month; the reads
	// below write only their audit records
	if _, err := w.s.GetToken(w.ctx, w.req("admin"), tok.ID); err != nil {
		t.Fatal(err)
	}
	return w, kv, tok.ID
}

// Concurrent reads each get their own durable audit record, written in
// fewer transactions than there are reads.
func TestConcurrentReadsShareAuditTransactions(t *testing.T) {
	w, kv, id := newBatchWorld(t)
	before := len(allAuditRecords(t, w.s, w.tenant.ID))
	updatesBefore := kv.updates.Load()
	const readers, reads = 32, 20
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range readers {
		wg.Go(func() {
			for range reads {
				if _, err := w.s.GetToken(w.ctx, w.req("admin"), id); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d reads failed", failed.Load())
	}
	if got := len(allAuditRecords(t, w.s, w.tenant.ID)) - before; got != readers*reads {
		t.Errorf("%d new audit records, want one per read (%d)", got, readers*reads)
	}
	txns := kv.updates.Load() - updatesBefore
	if txns >= readers*reads {
		t.Errorf("%d write transactions for %d reads: the audit records were not batched", txns, readers*reads)
	}
	t.Logf("%d reads, %d write transactions", readers*reads, txns)
}

// When the batch's transaction fails, every read in it fails with
// ErrAuditUnavailable and returns no token.
func TestFailedAuditBatchFailsEveryRead(t *testing.T) {
	w, kv, id := newBatchWorld(t)
	kv.fail.Store(true)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range 16 {
		wg.Go(func() {
			tok, err := w.s.GetToken(w.ctx, w.req("admin"), id)
			if tok != nil {
				t.Error("a read returned a token although its audit record was not written")
			}
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil {
			t.Error("a read succeeded without its audit record")
		}
	}
	kv.fail.Store(false)
	if _, err := w.s.GetToken(w.ctx, w.req("admin"), id); err != nil {
		t.Errorf("a read after the storage recovered: %v", err)
	}
}

// A read that arrives as the store closes gets an error, never a hang.
func TestAuditBatcherAnswersAfterClose(t *testing.T) {
	w, _, id := newBatchWorld(t)
	req := w.req("admin")
	if err := w.s.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() {
		_, err := w.s.GetToken(context.Background(), req, id)
		done <- err
	}()
	go func() { // straight to the batcher, past the closed engine's reads
		done <- w.s.audits.write(context.Background(), nil, []*pendingPut{{key: auditKey(w.tenant.ID, "x"), value: []byte("v")}})
	}()
	for range 2 {
		select {
		case err := <-done:
			if err == nil {
				t.Error("an audited read on a closed store succeeded")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("an audited read on a closed store did not return")
		}
	}
}

// newLingeringBatcher runs a batcher over a fresh engine that lingers an
// hour for announced reads, so a test hangs (and fails) where it would
// wait for the linger instead of the reads.
func newLingeringBatcher(t *testing.T) (*auditBatcher, *countingKV) {
	t.Helper()
	engine, err := badgerkv.Open(badgerkv.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	kv := &countingKV{KV: engine}
	stop := make(chan struct{})
	b := newAuditBatcher(kv, stop, time.Hour)
	ran := make(chan struct{})
	go func() { defer close(ran); b.run() }()
	t.Cleanup(func() { close(stop); <-ran; engine.Close() })
	return b, kv
}

// queuedAll waits until the batcher has taken everything queued.
func queuedAll(b *auditBatcher) {
	for len(b.reqs) > 0 {
		time.Sleep(time.Millisecond)
	}
}

// A batch waits for reads announced before it was written, so they share
// its transaction, and stops waiting when the last of them queues its
// record or ends without one.
func TestAuditBatchLingersForAnnouncedReads(t *testing.T) {
	b, kv := newLingeringBatcher(t)
	put := func(k string) []*pendingPut { return []*pendingPut{{key: []byte("audit/" + k), value: []byte("v")}} }
	write := func(exp *auditExpectation, k string) chan error {
		done := make(chan error, 1)
		go func() { done <- b.write(t.Context(), exp, put(k)) }()
		return done
	}

	// a lone read is written at once
	lone := b.expect()
	returnsWithin(t, "a lone read's record", func() {
		if err := <-write(lone, "lone"); err != nil {
			t.Error(err)
		}
	})
	lone.done()
	if n := kv.updates.Load(); n != 1 {
		t.Fatalf("a lone read took %d transactions, want 1", n)
	}

	// two reads announced: the first record waits for the second
	first, second := b.expect(), b.expect()
	firstDone := write(first, "first")
	queuedAll(b)
	select {
	case err := <-firstDone:
		t.Fatalf("the first record was answered (%v) while an announced read had not queued", err)
	case <-time.After(20 * time.Millisecond):
	}
	returnsWithin(t, "both records", func() {
		if err := <-write(second, "second"); err != nil {
			t.Error(err)
		}
		if err := <-firstDone; err != nil {
			t.Error(err)
		}
	})
	first.done()
	second.done()
	if n := kv.updates.Load(); n != 2 {
		t.Fatalf("two announced reads took %d transactions, want one shared", n-1)
	}

	// an announced read that fails before its record releases the batch
	ok, failed := b.expect(), b.expect()
	okDone := write(ok, "ok")
	queuedAll(b)
	failed.done()
	returnsWithin(t, "a record whose sibling read failed", func() {
		if err := <-okDone; err != nil {
			t.Error(err)
		}
	})
	ok.done()
	if got := b.expected.Load(); got != 0 {
		t.Fatalf("%d reads still announced after every read ended", got)
	}
}

// A read whose audit batch failed leaves its token unmarked: the next
// successful read marks it, so the month's active count stays exact.
func TestFailedAuditBatchMarksNothingActive(t *testing.T) {
	w, kv, id := newBatchWorld(t)
	now := w.clock.Peek()
	w.clock.Advance(time.Date(now.Year(), now.Month()+1, 1, 0, 0, 1, 0, time.UTC).Sub(now))
	mat := func() int64 { t.Helper(); return w.usage().TokenReport.MonthlyActiveTokens }
	if n := mat(); n != 0 {
		t.Fatalf("first of the next month: %d active, want 0", n)
	}
	kv.fail.Store(true)
	if _, err := w.s.GetToken(w.ctx, w.req("admin"), id); err == nil {
		t.Fatal("a read succeeded without its audit record")
	}
	kv.fail.Store(false)
	if n := mat(); n != 0 {
		t.Fatalf("after a failed read: %d active, want 0", n)
	}
	for range 2 {
		if _, err := w.s.GetToken(w.ctx, w.req("admin"), id); err != nil {
			t.Fatal(err)
		}
	}
	if n := mat(); n != 1 {
		t.Errorf("after two reads once the storage recovered: %d active, want 1", n)
	}
}

// A marker written as the month turns is remembered for the month it was
// written in, not the next, where the token would otherwise count as
// active without a marker.
func TestActivityMarkerRememberedForItsMonth(t *testing.T) {
	w, kv, _ := newBatchWorld(t)
	written := w.clock.Peek()
	nextMonth := time.Date(written.Year(), written.Month()+1, 1, 0, 0, 1, 0, time.UTC)
	turn := func() {
		if d := nextMonth.Sub(w.clock.Peek()); d > 0 {
			w.clock.Advance(d)
		}
	}
	kv.after.Store(&turn)
	if err := w.s.markActiveIDs(w.ctx, w.tenant.ID, []string{"tok_turn"}); err != nil {
		t.Fatal(err)
	}
	kv.after.Store(nil)
	if !w.s.active.known(activeTokenKey(w.tenant.ID, written, "tok_turn")) {
		t.Error("the marker written is not remembered")
	}
	if w.s.active.known(activeTokenKey(w.tenant.ID, nextMonth, "tok_turn")) {
		t.Error("a marker for the next month is remembered, which was never written")
	}
}

// returnsWithin runs fn and fails the test if it has not returned within
// a generous bound: a batch that lingers an hour would hang the test.
func returnsWithin(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return", what)
	}
}

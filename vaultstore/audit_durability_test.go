package vaultstore

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// tierKV records, for each write transaction, whether it was marked for
// a deferred sync.
type tierKV struct {
	KV
	mu       sync.Mutex
	deferred []bool
}

// Update records the deferred-sync mark of each committed transaction
// that wrote an audit record; the store's background work (folds, the
// sweep) may commit other transactions meanwhile, which do not count.
func (k *tierKV) Update(ctx context.Context, fn func(Writer) error) error {
	var audited bool
	err := k.KV.Update(ctx, func(w Writer) error {
		audited = false
		return fn(auditSpy{Writer: w, audited: &audited})
	})
	if err == nil && audited {
		k.mu.Lock()
		k.deferred = append(k.deferred, kv.DeferredSync(ctx))
		k.mu.Unlock()
	}
	return err
}

// auditSpy notes whether a transaction puts an audit record.
type auditSpy struct {
	Writer
	audited *bool
}

func (a auditSpy) Put(key, value []byte, ttl time.Duration) error {
	if strings.Contains(string(key), "/log/") {
		*a.audited = true
	}
	return a.Writer.Put(key, value, ttl)
}

func (k *tierKV) Unwrap() KV { return k.KV }

// take returns the marks recorded since the last take.
func (k *tierKV) take() []bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := k.deferred
	k.deferred = nil
	return out
}

// TestAuditDurabilityTiers: in the default tier a read's audit record is
// written in a transaction marked for a deferred sync, and a token write
// never is; with StrictAuditSync (or SetStrictAuditSync at run time) the
// read's record is synced before the read returns, as writes are. Either
// way the read's record is stored by the time the read returns.
func TestAuditDurabilityTiers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strict   bool
		switchTo *bool // SetStrictAuditSync after opening
	}{
		{name: "default"},
		{name: "strict", strict: true},
		{name: "default, then strict at run time", switchTo: ptrTo(true)},
		{name: "strict, then default at run time", strict: true, switchTo: ptrTo(false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk := &tierKV{}
			clock := newFakeClock()
			dir := t.TempDir()
			s := openTestStore(t, Options{Dir: dir, Now: clock.Now, SyncWrites: true, StrictAuditSync: tc.strict,
				WrapKV: func(inner KV) KV { tk.KV = inner; return tk }})
			strict := tc.strict
			if tc.switchTo != nil {
				s.SetStrictAuditSync(*tc.switchTo)
				strict = *tc.switchTo
			}
			if got := s.StrictAuditSync(); got != strict {
				t.Fatalf("StrictAuditSync() = %v, want %v", got, strict)
			}
			w := newTokenWorldOn(t, s, clock, dir, nil)
			tk.take()
			tok := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, testCVC)})
			for i, d := range tk.take() {
				if d {
					t.Errorf("write transaction %d of a token create was marked for a deferred sync", i)
				}
			}
			before := len(allAuditRecords(t, s, w.tenant.ID))
			if _, err := s.GetToken(w.ctx, w.req("admin"), tok.ID); err != nil {
				t.Fatal(err)
			}
			marks := tk.take()
			if len(marks) != 1 {
				t.Fatalf("the read ran %d write transactions, want 1 (its audit record with its activity marker)", len(marks))
			}
			if marks[0] == strict {
				t.Errorf("the read's audit transaction: deferred sync %v, want %v", marks[0], !strict)
			}
			if got := len(allAuditRecords(t, s, w.tenant.ID)) - before; got != 1 {
				t.Errorf("%d audit records after the read returned, want 1", got)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

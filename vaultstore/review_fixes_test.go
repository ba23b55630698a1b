package vaultstore

import (
	"context"
	"strings"
	"testing"
	"time"
)

// An expiry beyond the bound is refused: its Unix nanoseconds would
// overflow the expiry queue's key and stall the purge for every tenant.
func TestExpiresAtUpperBound(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	for _, in := range []string{"3000-01-01T00:00:00Z", "1/1/2300"} {
		if _, err := ParseExpiresAt(in, now); err == nil {
			t.Errorf("ParseExpiresAt(%q) accepted a date past %d years", in, MaxExpiresAtYears)
		}
	}
	if _, err := ParseExpiresAt("2100-01-01T00:00:00Z", now); err != nil {
		t.Errorf("a date within the bound: %v", err)
	}
}

// An unreadable entry in the expiry queue does not stop the purge.
func TestSweepSkipsUnreadableExpiryEntry(t *testing.T) {
	w := newTWWorld(t, nil)
	if err := w.s.kv.Update(w.ctx, func(wr Writer) error {
		return wr.Put(append(expiryPrefix(), []byte("-garbage/x/y")...), []byte("token"), 0)
	}); err != nil {
		t.Fatal(err)
	}
	tok := w.mustCreate("admin", TokenInput{Type: "token", Data: "short-lived", ExpiresAt: w.expiresIn(time.Minute)})
	twAdvance(w.clock, 2*time.Minute)
	if err := w.s.Sweep(w.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w.record(tok.ID); err == nil {
		t.Fatal("the expired token survived a sweep behind an unreadable queue entry")
	}
}

// A mask never shows the CVC, and a mask that fails on a token's data
// hides that token's data instead of failing the read.
func TestMaskNeverSeesCVC(t *testing.T) {
	w := newTWWorld(t, nil)
	showsCVC := w.mustCreate("admin", TokenInput{Type: "card", Data: twCard(twVisa, "9173"),
		Mask: map[string]any{"c": "{{ data.cvc }}", "n": "{{ data.number | last4 }}"}})
	got := w.mustGet("masker", showsCVC.ID)
	if raw := twJSON(t, got.Data); strings.Contains(raw, "9173") {
		t.Fatalf("a masked read shows the cvc: %s", raw)
	}
	failing := w.mustCreate("admin", TokenInput{Type: "token", Data: map[string]any{"a": "x", "b": "y"},
		Mask: "{{ data | json: '$.*' }}"})
	got, err := w.get("masker", failing.ID)
	if err != nil {
		t.Fatalf("a failing mask failed the read: %v", err)
	}
	if got.Data != nil {
		t.Fatalf("a failing mask returned data: %v", got.Data)
	}
	if _, n := w.mustList("masker", TokenFilter{}, 0, 100); n != 2 {
		t.Fatalf("list total %d, want 2", n)
	}
}

// An update answer shows data only to a caller who may read the token.
func TestUpdateAnswerNeedsRead(t *testing.T) {
	w := newTWWorld(t, nil)
	w.apps["updater"], _ = mustCreateApp(t, w.s, w.tenant.ID, ApplicationInput{Name: "updater", Type: AppPrivate,
		Rules: []AccessRule{twRule(1, "/", TransformReveal, "token:update")}})
	tok := w.mustCreate("admin", TokenInput{Type: "card", Data: twCard(twVisa, ""), Metadata: map[string]string{"k": "v"}})
	got, err := w.update("updater", tok.ID, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data != nil || got.Metadata != nil || got.Mask != nil {
		t.Fatalf("an update answer to a caller without token:read shows %s", twJSON(t, got))
	}
	if got.ID != tok.ID {
		t.Fatalf("answer id %q", got.ID)
	}
}

// A tenant delete interrupted after its keys were destroyed (a crash
// before the bulk delete finished) is finished on the next open.
func TestResumeInterruptedTenantDelete(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, Options{Dir: dir})
	ct := mustCreateTenant(t, s, "Interrupted", TenantTest)
	mustCreateApp(t, s, ct.Tenant.ID, ApplicationInput{Name: "left behind", Type: AppPrivate, Permissions: []string{"token:read"}})
	// what DeleteTenant commits before its bulk delete
	if err := s.kv.Update(context.Background(), func(w Writer) error {
		if err := w.Put(tenantDeletionKey(ct.Tenant.ID), nil, 0); err != nil {
			return err
		}
		return w.Delete(tenantKey(ct.Tenant.ID))
	}); err != nil {
		t.Fatal(err)
	}
	closeTestStore(t, s)

	s = openTestStore(t, Options{Dir: dir})
	if err := s.resumeTenantDeletions(context.Background()); err != nil {
		t.Fatal(err)
	}
	var left []string
	if err := s.kv.View(context.Background(), func(r Reader) error {
		for _, p := range [][]byte{tenantDataPrefix(ct.Tenant.ID), tenantDeletionPrefix()} {
			if err := r.Scan(p, nil, func(k, _ []byte) error { left = append(left, string(k)); return nil }); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("records of the deleted tenant remain: %v", left)
	}
}

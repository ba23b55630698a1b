package vaultstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestListTotalFromCounts: a list whose filter the kept counts can answer
// (none, type, container) gives the same total and page as the scan of
// every record, for applications that see different containers, through
// creates, deletes, updates that move a token to another container,
// expiries before and after the sweep, a token id reused after its
// expiry, and folds of the counts. Every token carries the metadata
// all=yes, so the same filter with that metadata takes the scan.
func TestListTotalFromCounts(t *testing.T) {
	w := newTokenWorld(t, nil)
	rng := rand.New(rand.NewPCG(7, 11))
	containers := []string{"/", "/pci/", "/pci/high/", "/general/", "/bank/"}
	apps := []string{"admin", "pci", "pcihigh", "mixed", "writer"}
	filters := []TokenFilter{{}, {Type: "token"}, {Type: "bank"}, {Container: "/pci/"}, {Type: "token", Container: "/general/"}}
	var live []string
	expiring := 0
	check := func(step string) {
		t.Helper()
		for _, app := range apps {
			for _, f := range filters {
				for _, page := range [][2]int{{0, 3}, {2, 5}, {0, 100}} {
					got, gotTotal := w.mustList(app, f, page[0], page[1])
					slow := f
					slow.Metadata = map[string]string{"all": "yes"}
					want, wantTotal := w.mustList(app, slow, page[0], page[1])
					if gotTotal != wantTotal || !slices.Equal(tokenIDs(got), tokenIDs(want)) {
						t.Fatalf("%s: %s lists %+v [%d:+%d]: total %d ids %v, the scan says %d ids %v",
							step, app, f, page[0], page[1], gotTotal, tokenIDs(got), wantTotal, tokenIDs(want))
					}
				}
			}
		}
	}
	for i := range 120 {
		var step string
		switch op := rng.IntN(10); {
		case op < 5 || len(live) == 0:
			in := TokenInput{Type: "token", Data: fmt.Sprintf("v%d", i), Containers: []string{containers[rng.IntN(len(containers))]},
				Metadata: map[string]string{"all": "yes"}}
			if rng.IntN(6) == 0 {
				in = TokenInput{Type: "bank", Data: bankData(testRouting, asSecret(luhnNumber("7", 300+i, 12))), Metadata: map[string]string{"all": "yes"}}
			}
			if rng.IntN(4) == 0 {
				in.ExpiresAt = w.expiresIn(time.Duration(1+rng.IntN(3)) * time.Minute)
				expiring++
			}
			if rng.IntN(8) == 0 && len(live) > 0 {
				in.ID = "reused-" + fmt.Sprint(rng.IntN(3)) // a conflict unless the holder expired
			}
			tok, err := w.create("admin", in)
			if err != nil {
				step = fmt.Sprintf("create %s: refused (%v)", in.ID, err)
				break
			}
			live = append(live, tok.ID)
			step = "create " + tok.ID
		case op < 7:
			k := rng.IntN(len(live))
			id := live[k]
			live = slices.Delete(live, k, k+1)
			if err := w.del("admin", id); err != nil {
				step = "delete of an expired token " + id
				break
			}
			step = "delete " + id
		case op < 9:
			id := live[rng.IntN(len(live))]
			to := containers[rng.IntN(len(containers))]
			if _, err := w.update("admin", id, map[string]any{"containers": []any{to}}); err != nil {
				step = "update of an expired or bank token " + id
				break
			}
			step = "move " + id + " to " + to
		default:
			w.clock.Advance(time.Duration(rng.IntN(90)) * time.Second)
			step = "clock forward"
			if rng.IntN(2) == 0 {
				if err := w.s.Sweep(w.ctx); err != nil {
					t.Fatal(err)
				}
				step = "clock forward and sweep"
			}
		}
		if i%40 == 39 {
			if err := w.s.foldUsage(w.ctx, w.tenant.ID); err != nil {
				t.Fatal(err)
			}
		}
		check(step)
	}
	if expiring == 0 {
		t.Fatal("the sequence expired no token")
	}
	// once the sweep has purged every expired token, the usage report
	// sums the same counts
	w.clock.Advance(time.Hour)
	if err := w.s.Sweep(w.ctx); err != nil {
		t.Fatal(err)
	}
	rep := w.usage()
	_, listed := w.mustList("admin", TokenFilter{}, 0, 1)
	if rep.TotalTokens != int64(listed) {
		t.Errorf("after the sweep, usage counts %d tokens, the list %d", rep.TotalTokens, listed)
	}
}

// TestListFoldsCounts: count changes are folded in the background once
// foldThreshold of them are written, or, after a restart forgot how many
// were, once a list sums that many; a change an interrupted fold left in a
// folded epoch counts no more (and later folds do not visit it).
func TestListFoldsCounts(t *testing.T) {
	w := newTokenWorld(t, nil)
	tid := w.tenant.ID
	create := func(n int) {
		for i := range n {
			w.mustCreate("admin", TokenInput{Type: "token", Data: fmt.Sprint(i), Containers: []string{[]string{"/a/", "/b/"}[i%2]}})
		}
	}
	create(foldThreshold)
	waitForFolds(t, w.s)
	if n := len(kvKeys(t, w.s, string(usageTotalPrefix(tid)))); n != 2 {
		t.Errorf("%d count totals after %d creates, want one for each of 2 containers", n, foldThreshold)
	}
	if n := foldedChangesLeft(t, w.s, tid); n != 0 {
		t.Errorf("%d changes left in folded epochs", n)
	}

	// as after a restart: the store no longer knows how many changes wait
	// (forgotten twice, so that no create reaches the threshold)
	forget := func() {
		w.s.folds.mu.Lock()
		w.s.folds.changes = nil
		w.s.folds.mu.Unlock()
	}
	forget()
	create(foldThreshold - 1)
	forget()
	create(1)
	// the list starts a fold; on a busy machine a fold may lose to a
	// concurrent one or fail and leave its changes for the next, which the
	// next list starts: poll, listing again, with a generous deadline
	for deadline := time.Now().Add(time.Minute); ; {
		if _, total := w.mustList("admin", TokenFilter{}, 0, 1); total != 2*foldThreshold {
			t.Fatalf("total %d, want %d", total, 2*foldThreshold)
		}
		waitForFolds(t, w.s)
		_, deltas, err := sumUsageIn(w)
		if err == nil && deltas == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lists left %d changes unfolded for a minute (%v)", deltas, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	var folded uint64
	if err := w.s.kv.View(w.ctx, func(r Reader) (err error) { _, folded, err = usageEpochs(r, tid); return err }); err != nil {
		t.Fatal(err)
	}
	stale := usageDeltaKey(tid, folded, "token", "/b/", w.clock.Peek(), 1)
	if err := w.s.kv.Update(w.ctx, func(wr Writer) error { return wr.Put(stale, []byte(`{"count":1000}`), 0) }); err != nil {
		t.Fatal(err)
	}
	// /b/ holds half of the first creates and half of the next but one
	if _, total := w.mustList("admin", TokenFilter{Container: "/b/"}, 0, 1); total != foldThreshold-1 {
		t.Errorf("/b/ total %d with a folded change left, want %d", total, foldThreshold-1)
	}
	if err := w.s.foldUsage(w.ctx, tid); err != nil {
		t.Fatal(err)
	}
	if n := foldedChangesLeft(t, w.s, tid); n != 1 {
		t.Errorf("%d changes left in folded epochs after the next fold, want the stale one", n)
	}
	if _, total := w.mustList("admin", TokenFilter{Container: "/b/"}, 0, 1); total != foldThreshold-1 {
		t.Errorf("/b/ total %d after the next fold, want %d", total, foldThreshold-1)
	}
	create(1) // into /a/, which held the rest
	if _, total := w.mustList("admin", TokenFilter{Container: "/a/"}, 0, 1); total != foldThreshold+2 {
		t.Errorf("/a/ total %d after one more create, want %d", total, foldThreshold+2)
	}
}

// waitForFolds waits for the store's background folds to end.
func waitForFolds(tb testing.TB, s *Store) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s.folds.mu.Lock()
		n := len(s.folds.running)
		s.folds.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatal("a background fold did not end")
		}
		time.Sleep(time.Millisecond)
	}
}

// foldedChangesLeft counts the count changes kept in epochs already folded.
func foldedChangesLeft(tb testing.TB, s *Store, tenantID string) int {
	tb.Helper()
	var folded uint64
	if err := s.kv.View(context.Background(), func(r Reader) (err error) { _, folded, err = usageEpochs(r, tenantID); return err }); err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, k := range kvKeys(tb, s, string(usageChangesPrefix(tenantID))) {
		if k < string(usageEpochPrefix(tenantID, folded+1)) {
			n++
		}
	}
	return n
}

// sumUsageIn sums the counts of w's tenant.
func sumUsageIn(w *tokenWorld) (map[usageCell]TypeMetrics, int, error) {
	var (
		cells  map[usageCell]TypeMetrics
		deltas int
	)
	err := w.s.kv.View(w.ctx, func(r Reader) (err error) {
		cells, deltas, err = sumUsage(r, w.tenant.ID)
		return err
	})
	return cells, deltas, err
}

// TestMigrateCountsByContainer: a format 2 store's counts by type become
// counts by type and container; the totals match the tokens, and a type's
// last creation survives although its tokens are gone.
func TestMigrateCountsByContainer(t *testing.T) {
	w := newTokenWorld(t, nil)
	a := w.mustCreate("admin", TokenInput{Type: "token", Data: "a", Containers: []string{"/x/"}})
	w.mustCreate("admin", TokenInput{Type: "token", Data: "b", Containers: []string{"/y/"}})
	w.mustCreate("admin", TokenInput{Type: "token", Data: "c", Containers: []string{"/y/"}})
	gone := w.mustCreate("admin", TokenInput{Type: "bank", Data: bankData(testRouting, testAccount)})
	if err := w.del("admin", gone.ID); err != nil {
		t.Fatal(err)
	}
	before := w.usage()

	// rewrite the counts as format 2 kept them: by type only
	ctx, tid := w.ctx, w.tenant.ID
	err := w.s.kv.Update(ctx, func(wr Writer) error {
		cells, _, err := sumUsage(wr, tid)
		if err != nil {
			return err
		}
		for _, k := range kvKeys(t, w.s, string(usagePrefix(tid))) {
			if err := wr.Delete([]byte(k)); err != nil {
				return err
			}
		}
		byType := map[string]TypeMetrics{}
		for c, m := range cells {
			bt := byType[c.tokenType]
			bt.add(m)
			byType[c.tokenType] = bt
		}
		for typ, m := range byType {
			raw, _ := json.Marshal(usageDelta{Count: m.Count, LastCreatedAt: m.LastCreatedAt})
			if err := wr.Put([]byte(keyVersion+"t/"+tid+"/usage/"+typ+"/total"), raw, 0); err != nil {
				return err
			}
		}
		// and one change not yet folded, as format 2 wrote it
		raw, _ := json.Marshal(usageDelta{Count: 0})
		return wr.Put(fmt.Appendf(nil, "%st/%s/usage/token/%016x%016x", keyVersion, tid, 1, 2), raw, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.s.migrateCountsByContainer(ctx); err != nil {
		t.Fatal(err)
	}
	// a second run (an interrupted upgrade starting again) changes nothing
	if err := w.s.migrateCountsByContainer(ctx); err != nil {
		t.Fatal(err)
	}
	after := w.usage()
	if fmt.Sprint(after.TokenReport) != fmt.Sprint(before.TokenReport) {
		t.Errorf("usage after the migration:\n%+v\nbefore:\n%+v", after.TokenReport, before.TokenReport)
	}
	if bank := after.TokenReport.MetricsByType["bank"]; bank.Count != 0 || bank.LastCreatedAt == nil || !bank.LastCreatedAt.Equal(gone.CreatedAt.Time) {
		t.Errorf("bank after the migration: %+v, want count 0 created %v", bank, gone.CreatedAt)
	}
	for _, tc := range []struct {
		container string
		want      int
	}{{"", 3}, {"/x/", 1}, {"/y/", 2}, {"/z/", 0}} {
		if _, total := w.mustList("admin", TokenFilter{Container: tc.container}, 0, 1); total != tc.want {
			t.Errorf("container %q: total %d, want %d", tc.container, total, tc.want)
		}
	}
	if err := w.del("admin", a.ID); err != nil {
		t.Fatal(err)
	}
	if _, total := w.mustList("admin", TokenFilter{Container: "/x/"}, 0, 1); total != 0 {
		t.Errorf("after deleting the migrated /x/ token: total %d", total)
	}
}

func tokenIDs(toks []*Token) []string {
	ids := make([]string, len(toks))
	for i, tok := range toks {
		ids[i] = tok.ID
	}
	return ids
}

// TestQuietFold: changes that stop short of foldThreshold are folded once
// no new one has come for foldQuietAfter, so reads stop summing them; a
// read that finds changes written before a restart arranges the same; and
// a fold that comes after the tenant's deletion writes nothing under it.
func TestQuietFold(t *testing.T) {
	w := newTokenWorld(t, nil)
	tid := w.tenant.ID
	deltas := func() int {
		t.Helper()
		_, n, err := sumUsageIn(w)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFolded := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * foldQuietAfter)
		for deltas() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d changes still unfolded after %v", what, deltas(), 10*foldQuietAfter)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for i := range 5 {
		w.mustCreate("admin", TokenInput{Type: "token", Data: fmt.Sprint(i)})
	}
	if n := deltas(); n != 5 {
		t.Fatalf("%d changes right after 5 creates, want 5 (folded too early)", n)
	}
	waitFolded("after 5 creates")
	if _, total := w.mustList("admin", TokenFilter{}, 0, 1); total != 5 {
		t.Errorf("total %d after the fold, want 5", total)
	}

	// as after a restart: a change the store was never told about, which
	// a read finds
	err := w.s.kv.Update(w.ctx, func(wr Writer) error {
		epoch, err := readUsageEpoch(wr, usageCurrentEpochKey(tid), 1)
		if err != nil {
			return err
		}
		raw, _ := json.Marshal(usageDelta{Count: 1})
		return wr.Put(usageDeltaKey(tid, epoch, "token", "/general/high/", time.Now(), 1), raw, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, total := w.mustList("admin", TokenFilter{}, 0, 1); total != 6 {
		t.Errorf("total %d with the unannounced change, want 6", total)
	}
	waitFolded("after a read found a change")
	if _, total := w.mustList("admin", TokenFilter{}, 0, 1); total != 6 {
		t.Errorf("total %d after folding it, want 6", total)
	}

	// the tenant goes within foldQuietAfter of its last change
	w.mustCreate("admin", TokenInput{Type: "token", Data: "last"})
	if err := w.s.DeleteTenant(w.ctx, tid); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * foldQuietAfter)
	waitForFolds(t, w.s)
	if keys := kvKeys(t, w.s, keyVersion+"t/"+tid+"/"); len(keys) != 0 {
		t.Errorf("after the tenant's deletion a fold wrote %q", keys)
	}
}

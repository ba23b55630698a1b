package vaultstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testclock"
)

// expiresIn returns an expires_at d after the fake clock's next reading,
// in whole seconds.
func (w *tokenWorld) expiresIn(d time.Duration) string {
	return w.clock.Peek().Add(d).Truncate(time.Second).Format(time.RFC3339)
}

func TestCreateTokenExpiresAt(t *testing.T) {
	w := newTokenWorld(t, nil)
	now := w.clock.Peek()
	for _, tc := range []struct {
		name, in, want string // want "" means a ValidationError on expires_at
	}{
		{"in the past", now.Add(-time.Hour).Format(time.RFC3339), ""},
		{"a second ago", now.Add(-time.Second).Format(time.RFC3339Nano), ""},
		{"yesterday as a date", now.AddDate(0, 0, -1).Format("2006-01-02"), ""},
		{"not a date", "next week", ""},
		{"with an offset", "2030-04-23T17:24:28-04:00", `"2030-04-23T17:24:28-04:00"`},
		{"UTC", "2030-04-23T13:24:28Z", `"2030-04-23T13:24:28+00:00"`},
		{"US style with offset", "8/26/2030 7:23:57 PM -07:00", `"2030-08-26T19:23:57-07:00"`},
		{"date only", "2030-04-23", `"2030-04-23T00:00:00+00:00"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := w.at(t)
			tok, err := w.create("admin", TokenInput{Type: "token", Data: "x", ExpiresAt: tc.in})
			if tc.want == "" {
				wantFieldErrors(t, err, "expires_at")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, got := range []*Token{tok, w.mustGet("admin", tok.ID)} {
				if got.ExpiresAt == nil || encodeJSON(t, got.ExpiresAt) != tc.want {
					t.Errorf("expires_at = %s, want %s", encodeJSON(t, got.ExpiresAt), tc.want)
				}
			}
		})
	}
}

// An expired token is gone to every reader at once, before any sweep.
func TestExpiredTokenIsGone(t *testing.T) {
	w := newTokenWorld(t, nil)
	meta := map[string]string{"group": "g"}
	keep1 := w.mustCreate("admin", TokenInput{Type: "token", Data: "keep1", Metadata: meta})
	keep2 := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa2, ""), Metadata: meta, ExpiresAt: w.expiresIn(48 * time.Hour)})
	gone := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, testCVC), Metadata: meta, ExpiresAt: w.expiresIn(time.Hour)})
	if _, err := w.get("admin", gone.ID); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	w.clock.Advance(time.Hour + time.Second)

	t.Run("get", func(t *testing.T) {
		for _, app := range []string{"admin", "masker", "redactor"} {
			_, err := w.at(t).get(app, gone.ID)
			wantErrorIs(t, err, ErrNotFound)
		}
	})
	want := []string{keep1.ID, keep2.ID}
	for _, tc := range []struct {
		name          string
		f             TokenFilter
		offset, limit int
		want          []string
	}{
		{"list all", TokenFilter{}, 0, 100, want},
		{"first page", TokenFilter{}, 0, 1, want[:1]},
		{"past the end", TokenFilter{}, 10, 10, nil},
		{"by ids", TokenFilter{IDs: []string{gone.ID, keep1.ID}}, 0, 10, []string{keep1.ID}},
		{"by metadata", TokenFilter{Metadata: meta}, 0, 10, want},
		{"by metadata, first page", TokenFilter{Metadata: meta}, 0, 1, want[:1]},
	} {
		t.Run("list/"+tc.name, func(t *testing.T) {
			toks, total := w.at(t).mustList("admin", tc.f, tc.offset, tc.limit)
			wantTotal := 2
			if len(tc.f.IDs) > 0 {
				wantTotal = 1
			}
			if !slices.Equal(idsOf(toks), tc.want) || total != wantTotal {
				t.Errorf("list = %v total %d, want %v total %d", idsOf(toks), total, tc.want, wantTotal)
			}
		})
	}
	t.Run("update", func(t *testing.T) {
		_, err := w.at(t).update("admin", gone.ID, map[string]any{"metadata": map[string]any{"a": "b"}})
		wantErrorIs(t, err, ErrNotFound)
		_, err = w.at(t).update("admin", gone.ID, map[string]any{"expires_at": nil})
		wantErrorIs(t, err, ErrNotFound)
	})
	t.Run("delete", func(t *testing.T) {
		wantErrorIs(t, w.at(t).del("admin", gone.ID), ErrNotFound)
	})
	t.Run("tokens that have not expired yet", func(t *testing.T) {
		if _, err := w.at(t).get("admin", keep2.ID); err != nil {
			t.Error(err)
		}
	})
}

// An expired token is no dedupe target, and dedupe goes on working for
// the token created in its place.
func TestExpiredTokenIsNoDedupeTarget(t *testing.T) {
	w := newTokenWorld(t, nil)
	in := TokenInput{Type: "card", Data: cardData(testVisa, testCVC), DeduplicateToken: boolPtr(true)}
	old := in
	old.ExpiresAt = w.expiresIn(time.Hour)
	first := w.mustCreate("admin", old)
	w.clock.Advance(2 * time.Hour)

	second := w.mustCreate("admin", in)
	if second.ID == first.ID || second.Extras != nil {
		t.Fatalf("deduplicated against an expired token: %+v", second)
	}
	third := w.mustCreate("admin", in)
	if third.ID != second.ID || third.Extras == nil || !third.Extras.Deduplicated {
		t.Errorf("third create = %s (extras %+v), want a duplicate of %s", third.ID, third.Extras, second.ID)
	}
	if err := w.s.Sweep(w.ctx); err != nil {
		t.Fatal(err)
	}
	fourth := w.mustCreate("admin", in)
	if fourth.ID != second.ID {
		t.Errorf("after the sweep, create = %s, want a duplicate of %s", fourth.ID, second.ID)
	}
}

// A caller id freed by expiry can be used again, and the type counts stay
// right.
func TestExpiredTokenIDReusable(t *testing.T) {
	w := newTokenWorld(t, nil)
	w.mustCreate("admin", TokenInput{ID: "reuse-me", Type: "card", Data: cardData(testVisa, ""), ExpiresAt: w.expiresIn(time.Hour)})
	if _, err := w.create("admin", TokenInput{ID: "reuse-me", Type: "card", Data: cardData(testVisa, "")}); !errors.Is(err, ErrConflict) {
		t.Fatalf("live id reused: %v", err)
	}
	w.clock.Advance(2 * time.Hour)
	tok := w.mustCreate("admin", TokenInput{ID: "reuse-me", Type: "card", Data: cardData(testVisa2, "")})
	if got := w.mustGet("admin", tok.ID); got.Data.(map[string]any)["number"] != testVisa2 || got.ExpiresAt != nil {
		t.Errorf("reused id reads %+v", got)
	}
	if n := w.usage().TokenReport.MetricsByType["card"].Count; n != 1 {
		t.Errorf("card count = %d, want 1", n)
	}
	if err := w.s.Sweep(w.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w.get("admin", tok.ID); err != nil {
		t.Errorf("the sweep removed the new token: %v", err)
	}
	if n := w.usage().TokenReport.MetricsByType["card"].Count; n != 1 {
		t.Errorf("card count after sweep = %d, want 1", n)
	}
}

func TestSweepPurgesExpiredTokens(t *testing.T) {
	w := newTokenWorld(t, map[string]string{"fingerprint_tokens": "true"})
	soon := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, testCVC), ExpiresAt: w.expiresIn(time.Hour),
		SearchIndexes: []string{"{{ data.number | last4 }}"}, DeduplicateToken: boolPtr(true)})
	later := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa2, ""), ExpiresAt: w.expiresIn(3 * time.Hour),
		SearchIndexes: []string{"{{ data.number | last4 }}"}})
	never := w.mustCreate("admin", TokenInput{Type: "bank", Data: bankData(testRouting, testAccount)})
	moved := w.mustCreate("admin", TokenInput{Type: "token", Data: "moved", ExpiresAt: w.expiresIn(time.Hour)})
	w.mustUpdate("admin", moved.ID, map[string]any{"expires_at": w.expiresIn(5 * time.Hour)})
	full := []string{"exp", "fpc", "fpx", "six", "tok", "tokc"}

	if err := w.s.Sweep(w.ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.indexEntries(soon.ID); !slices.Equal(got, full) {
		t.Fatalf("a sweep before expiry changed entries: %v", got)
	}

	w.clock.Advance(2 * time.Hour)
	if err := w.s.Sweep(w.ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.indexEntries(soon.ID); len(got) != 0 {
		t.Errorf("entries of the expired token after the sweep: %v", got)
	}
	if _, err := w.record(soon.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("record after the sweep: %v", err)
	}
	if got := w.indexEntries(later.ID); !slices.Equal(got, full) {
		t.Errorf("entries of a live token after the sweep: %v", got)
	}
	if _, err := w.get("admin", moved.ID); err != nil {
		t.Errorf("a token whose expiry was moved later was purged: %v", err)
	}
	rep := w.usage().TokenReport
	if rep.MetricsByType["card"].Count != 1 || rep.MetricsByType["bank"].Count != 1 || rep.MetricsByType["token"].Count != 1 || rep.TotalTokens != 3 {
		t.Errorf("usage after the sweep = %+v", rep.MetricsByType)
	}

	w.clock.Advance(4 * time.Hour)
	if err := w.s.Sweep(w.ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{later.ID, moved.ID} {
		if got := w.indexEntries(id); len(got) != 0 {
			t.Errorf("entries of %s after the second sweep: %v", id, got)
		}
	}
	if got := w.indexEntries(never.ID); !slices.Equal(got, []string{"fpc", "fpx", "tok", "tokc"}) {
		t.Errorf("entries of a token without expiry: %v", got)
	}
	rep = w.usage().TokenReport
	if rep.MetricsByType["card"].Count != 0 || rep.MetricsByType["token"].Count != 0 || rep.TotalTokens != 1 {
		t.Errorf("usage after the second sweep = %+v", rep.MetricsByType)
	}
	if left := kvKeys(t, w.s, string(expiryPrefix())); len(left) != 0 {
		t.Errorf("expiry queue after both sweeps: %v", left)
	}
}

// expires_at may carry nanoseconds; the token is still purged once expired.
func TestSweepPurgesExpiryWithNanoseconds(t *testing.T) {
	w := newTokenWorld(t, nil)
	at := w.clock.Peek().Add(time.Hour).Truncate(time.Second).Add(123456789)
	tok := w.mustCreate("admin", TokenInput{Type: "token", Data: "x", ExpiresAt: at.Format(time.RFC3339Nano)})
	w.clock.Advance(2 * time.Hour)
	if _, err := w.get("admin", tok.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("expired token: %v", err)
	}
	if err := w.s.Sweep(w.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w.record(tok.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("record of an expired token after the sweep: %v", err)
	}
	if n := w.usage().TokenReport.MetricsByType["token"].Count; n != 0 {
		t.Errorf("token count after the sweep = %d, want 0", n)
	}
	if got := w.indexEntries(tok.ID); len(got) != 0 {
		t.Errorf("entries after the sweep: %v", got)
	}
}

// cvcSlot returns the cvc-keys slot of the epoch a card's CVC is sealed
// under, read from the file.
func cvcSlot(tb testing.TB, dir string, epoch int64) []byte {
	tb.Helper()
	f, err := os.Open(filepath.Join(dir, cvcFileName))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, cvcSlotSize)
	if _, err := f.ReadAt(buf, (epoch%cvcSlots)*cvcSlotSize); err != nil {
		tb.Fatalf("reading slot of epoch %d: %v", epoch, err)
	}
	return buf
}

// cvcState returns a card's CVC epoch and retention end as stored.
func (w *tokenWorld) cvcState(id string) (int64, time.Time) {
	w.tb.Helper()
	rec, err := w.record(id)
	if err != nil {
		w.tb.Fatal(err)
	}
	if len(rec.CVC) < cvcKeyHeader || rec.CVCExpiresAt == nil {
		w.tb.Fatalf("card %s has no sealed cvc", id)
	}
	return int64(binary.BigEndian.Uint64(rec.CVC[:cvcKeyHeader])), rec.CVCExpiresAt.Time
}

func cvcOf(tok *Token) any {
	m, _ := tok.Data.(map[string]any)
	return m["cvc"]
}

// A card's CVC is revealed until the tenant's CVC retention (default one
// hour) passes, then no longer; the card stays.
func TestCVCRetention(t *testing.T) {
	w := newTokenWorld(t, nil)
	created := w.clock.Peek()
	tok := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, testCVC)})
	_, until := w.cvcState(tok.ID)
	if d := until.Sub(created); d < time.Hour || d > time.Hour+time.Second {
		t.Fatalf("cvc retained for %v, want the default hour", d)
	}
	w.clock.Advance(until.Add(-time.Second).Sub(w.clock.Peek()))
	if got := cvcOf(w.mustGet("admin", tok.ID)); got != testCVC {
		t.Errorf("cvc a second before retention ends = %v", got)
	}
	w.clock.Advance(2 * time.Second)
	got := w.mustGet("admin", tok.ID)
	if c := cvcOf(got); c != nil {
		t.Errorf("cvc after retention = %v", c)
	}
	if !jsonEqual(t, got.Data, `{"number":"4242424242424242","expiration_month":12,"expiration_year":2030}`) {
		t.Errorf("card after retention = %s", encodeJSON(t, got.Data))
	}
	toks, _ := w.mustList("admin", TokenFilter{}, 0, 10)
	if c := cvcOf(toks[0]); c != nil {
		t.Errorf("listed cvc after retention = %v", c)
	}
	// a new cvc is retained anew
	w.mustUpdate("admin", tok.ID, patchBody(t, `{"data":{"cvc":"4821"}}`))
	if c := cvcOf(w.mustGet("admin", tok.ID)); c != testCVC2 {
		t.Errorf("cvc set after retention = %v", c)
	}
}

// The first sweep after a CVC's retention destroys its key.
func TestCVCKeyShreddedBySweepAfterRetention(t *testing.T) {
	badgerOnly(t)
	w := newTokenWorld(t, nil)
	tok := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, testCVC)})
	epoch, until := w.cvcState(tok.ID)
	// the sweep runs every sweepInterval: the first run after the end of
	// retention is at most that long after it
	w.clock.Advance(until.Add(sweepInterval).Sub(w.clock.Peek()))
	if err := w.s.Sweep(w.ctx); err != nil {
		t.Fatal(err)
	}
	if slot := cvcSlot(t, w.dir, epoch); !bytes.Equal(slot, make([]byte, cvcSlotSize)) {
		t.Errorf("the cvc key of a card %v past its retention survives a sweep (its epoch ends %v)",
			sweepInterval, time.Unix(0, epoch*int64(cvcEpoch)).Sub(until))
	}
}

// After the sweep past the retention, the CVC cannot be recovered from the
// data directory: it is nowhere in clear, its key's slot is zeros, and a
// store reopened with the master key and a clock set back cannot open it.
func TestCVCUnrecoverableAfterSweep(t *testing.T) {
	badgerOnly(t)
	clock := newFakeClock()
	dir := t.TempDir()
	s := openTestStore(t, Options{Dir: dir, Now: clock.Now, SyncWrites: true})
	w := newTokenWorldOn(t, s, clock, dir, nil)
	created := clock.Peek()
	tok := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa, testCVC)})
	epoch, until := w.cvcState(tok.ID)
	if slot := cvcSlot(t, dir, epoch); bytes.Equal(slot, make([]byte, cvcSlotSize)) {
		t.Fatal("the cvc key is not in its slot before the sweep")
	}
	// a card whose retention ends in a later epoch keeps its cvc
	clock.Advance(30 * time.Minute)
	other := w.mustCreate("admin", TokenInput{Type: "card", Data: cardData(testVisa2, testCVC2)})
	otherEpoch, otherUntil := w.cvcState(other.ID)

	// past both the retention and the end of the key's epoch
	end := time.Unix(0, epoch*int64(cvcEpoch))
	if end.Before(until) {
		end = until
	}
	clock.Advance(end.Add(time.Second).Sub(clock.Peek()))
	if !clock.Peek().After(until) || !clock.Peek().Before(otherUntil) || otherEpoch == epoch {
		t.Fatalf("setup: now %v, first until %v, second until %v", clock.Peek(), until, otherUntil)
	}
	if err := s.Sweep(w.ctx); err != nil {
		t.Fatal(err)
	}
	if got := cvcOf(w.mustGet("admin", other.ID)); got != testCVC2 {
		t.Errorf("the sweep took the cvc of a card still in retention: %v", got)
	}
	if got := cvcOf(w.mustGet("admin", tok.ID)); got != nil {
		t.Errorf("cvc after the sweep = %v", got)
	}
	rec, err := w.record(tok.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.cvc.open(w.ctx, rec.CVC, recordAAD("cvc", w.tenant.ID, tok.ID)); !errors.Is(err, errCVCShredded) {
		t.Errorf("opening the sealed cvc after the sweep: %v, want errCVCShredded", err)
	}
	closeTestStore(t, s)

	if slot := cvcSlot(t, dir, epoch); !bytes.Equal(slot, make([]byte, cvcSlotSize)) {
		t.Errorf("cvc-keys slot %d of epoch %d is not zeros after the sweep", epoch%cvcSlots, epoch)
	}
	if slot := cvcSlot(t, dir, otherEpoch); bytes.Equal(slot, make([]byte, cvcSlotSize)) {
		t.Errorf("the key of a later epoch was shredded")
	}

	// nothing in clear in any file
	var files [][]byte
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files = append(files, b)
		if strings.HasSuffix(path, ".sst") {
			files = append(files, sstableContents(t, path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	found := func(s string) bool {
		for _, b := range files {
			if bytes.Contains(b, []byte(s)) {
				return true
			}
		}
		return false
	}
	if !found(tok.ID) {
		t.Fatal("the token id is in no file: the scan reads nothing")
	}
	// the cvc as it would stand in a JSON record, or after its field name
	for _, clear := range []string{`"` + testCVC + `"`, `cvc":"` + testCVC, `cvc": "` + testCVC, testVisa} {
		if found(clear) {
			t.Errorf("%q found in clear in the data directory", strings.ReplaceAll(clear, testCVC, "<CVC>"))
		}
	}

	// the master key and a clock set back do not bring it back
	back := testclock.NewStepping(created.Add(time.Minute), time.Millisecond)
	s2 := openTestStore(t, Options{Dir: dir, Now: back.Now})
	w2 := &tokenWorld{tb: t, ctx: w.ctx, s: s2, clock: back, dir: dir, tenant: w.tenant, apps: w.apps}
	if got := cvcOf(w2.mustGet("admin", tok.ID)); got != nil {
		t.Errorf("reopened store with the clock set back reveals cvc %v", got)
	}
	if got := cvcOf(w2.mustGet("admin", other.ID)); got != testCVC2 {
		t.Errorf("reopened store lost the cvc of a card in retention: %v", got)
	}
}

// Nothing derived from a CVC outlives its retention: an id, fingerprint
// or search index computed over the CVC would let anyone holding the
// data directory and the master key recover it (there are only 10,000
// CVCs to try). The vault may refuse such expressions or evaluate them
// without the CVC; it may not store their value.
func TestCVCNotKeptInDerivedValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   TokenInput
	}{
		{"id expression", TokenInput{ID: "card-{{ data.cvc }}"}},
		{"fingerprint expression", TokenInput{FingerprintExpression: "{{ data.cvc }}"}},
		{"fingerprint over all the data", TokenInput{FingerprintExpression: "{{ data | stringify }}"}},
		{"search index", TokenInput{SearchIndexes: []string{"{{ data.cvc }}"}}},
		{"search index over all the data", TokenInput{SearchIndexes: []string{"{{ data | json: '$' | stringify }}"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newTokenWorld(t, nil)
			in := tc.in
			in.Type, in.Data = "card", cardData(testVisa, testCVC)
			tok, err := w.create("admin", in)
			if err != nil {
				var v *ValidationError
				if !errors.As(err, &v) {
					t.Fatalf("CreateToken: %v", err)
				}
				return // refused: fine
			}
			_, until := w.cvcState(tok.ID)
			w.clock.Advance(until.Add(cvcEpoch + time.Minute).Sub(w.clock.Peek()))
			if err := w.s.Sweep(w.ctx); err != nil {
				t.Fatal(err)
			}
			if cvcOf(w.mustGet("admin", tok.ID)) != nil {
				t.Fatal("cvc still revealed")
			}
			tk := w.keys()
			full := cardData(testVisa, testCVC)
			derived := map[string]bool{testCVC: true}
			if s, err := evaluateString("{{ data | stringify }}", map[string]any{"data": full}); err == nil {
				derived[s] = true
			}
			if s, err := evaluateString("{{ data | json: '$' | stringify }}", map[string]any{"data": full}); err == nil {
				derived[s] = true
			}
			if strings.Contains(tok.ID, testCVC) {
				t.Errorf("the token id holds the cvc in clear")
			}
			rec, err := w.record(tok.ID)
			if err != nil {
				t.Fatal(err)
			}
			six := kvKeys(t, w.s, string(tenantDataPrefix(w.tenant.ID))+"six/")
			for value := range derived {
				if rec.Fingerprint != "" && rec.Fingerprint == tk.fingerprintOf("card", value) {
					t.Errorf("the fingerprint is a keyed hash of a value holding the cvc")
				}
				if slices.Contains(six, string(searchIndexKey(w.tenant.ID, tk.searchHashOf(strings.ToLower(value)), tok.ID))) {
					t.Errorf("a search index entry is a keyed hash of a value holding the cvc")
				}
			}
		})
	}
}

// holdsCVC reports whether a token's JSON holds the test CVC as a value
// of its own: a random id or time may hold its four digits by chance.
func holdsCVC(raw string) bool { return strings.Contains(raw, `"`+testCVC+`"`) }

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

package vaultstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// auditText is the data of the text token; like the card number and CVC it
// must never reach an audit record.
const auditText = "hello-secret-text"

// auditWorld is a token world with a card token and a text token whose ids
// sort the other way round from the order the bodies name them in.
type auditWorld struct {
	*tokenWorld
	card, text string
}

// newAuditWorld is a token world whose tenant audits detokenizations.
func newAuditWorld(tb testing.TB) *auditWorld {
	tb.Helper()
	w := &auditWorld{tokenWorld: newTokenWorld(tb, nil)}
	w.card = w.mustCreate("admin", TokenInput{ID: "zz-card", Type: "card", Data: cardData(testVisa, testCVC)}).ID
	w.text = w.mustCreate("admin", TokenInput{ID: "aa-text", Type: "token", Data: asSecret(auditText)}).ID
	return w
}

// auditRecordFor is the record the tests pass as DetokenizeOptions.Audit.
func auditRecordFor(entityID string) *AuditRecord {
	return &AuditRecord{
		ActorID: "proxy-actor-1", ActorType: ActorProxy,
		EntityType: "proxy", EntityID: entityID,
		Operation: "detokenize", Message: "POST /charges",
		Destination: "api.example.com",
	}
}

// allAuditRecords returns every audit record of a tenant, newest first.
func allAuditRecords(tb testing.TB, s *Store, tenantID string) []*AuditRecord {
	tb.Helper()
	recs, next, err := s.ListAudit(context.Background(), tenantID, AuditFilter{}, "", 100000)
	if err != nil {
		tb.Fatalf("ListAudit: %v", err)
	}
	if next != "" {
		tb.Fatalf("ListAudit with a large limit returned a next cursor")
	}
	return recs
}

// detokenizeRecords keeps the records of detokenizations.
func detokenizeRecords(recs []*AuditRecord) []*AuditRecord {
	var out []*AuditRecord
	for _, r := range recs {
		if r.Operation == "detokenize" {
			out = append(out, r)
		}
	}
	return out
}

// records returns the detokenization records of the world's tenant,
// newest first.
func (w *auditWorld) records(tb testing.TB) []*AuditRecord {
	tb.Helper()
	return detokenizeRecords(allAuditRecords(tb, w.s, w.tenant.ID))
}

// all returns every audit record of the world's tenant, newest first.
func (w *auditWorld) all(tb testing.TB) []*AuditRecord {
	tb.Helper()
	return allAuditRecords(tb, w.s, w.tenant.ID)
}

// detokenizeAudited detokenizes body as app, as a proxy would, recording rec.
func (w *auditWorld) detokenizeAudited(tb testing.TB, app, body string, rec *AuditRecord) (any, error) {
	tb.Helper()
	out, _, err := w.s.Detokenize(w.ctx, w.req(app), DetokenizeOptions{Permission: "token:use", Limit: 10, Audit: rec}, decodeJSON(tb, body))
	return out, noSecretIn(tb, err)
}

// last4Pattern finds testVisa's last four digits where a mask would leave them.
var last4Pattern = regexp.MustCompile(`(^|[^0-9a-fA-F])4242([^0-9a-fA-F]|$)`)

// checkAuditHoldsNoData fails when any marshalled record, or any stored audit
// entry, holds token data, an expression or (stored) anything in clear.
func checkAuditHoldsNoData(tb testing.TB, w *auditWorld, recs []*AuditRecord) {
	tb.Helper()
	if len(recs) == 0 {
		tb.Fatal("no audit record to check") // else the scans below pass on nothing
	}
	raw, err := json.Marshal(recs)
	if err != nil {
		tb.Fatal(err)
	}
	for _, s := range []string{testVisa, testCVC, auditText, "expiration", "{{", "json:"} {
		if bytes.Contains(raw, []byte(s)) {
			tb.Errorf("an audit record holds %q", s)
		}
	}
	// the last four digits, standing alone or after a mask, and not inside
	// a random id or a timestamp's nanoseconds
	if last4Pattern.Match(raw) {
		tb.Errorf("an audit record holds the card's last four digits")
	}
	stored := 0
	err = w.s.kv.View(w.ctx, func(r Reader) error {
		return r.Scan(auditPrefix(w.tenant.ID), nil, func(k, v []byte) error {
			stored++
			for _, s := range []string{testVisa, testCVC, auditText, w.card, w.text, "api.example.com", "proxy-actor-1"} {
				if bytes.Contains(k, []byte(s)) || bytes.Contains(v, []byte(s)) {
					tb.Errorf("the stored audit entry %s holds %q in clear", k, s)
				}
			}
			return nil
		})
	})
	if err != nil {
		tb.Fatal(err)
	}
	if stored < len(recs) {
		tb.Fatalf("%d stored audit entries scanned, fewer than the %d records", stored, len(recs))
	}
}

func TestDetokenizeWritesOneAuditRecord(t *testing.T) {
	w := newAuditWorld(t)
	const body = `{"pan": "{{ zz-card | json: '$.number' }}", "cvc": "{{ zz-card | json: '$.cvc' }}", "note": "{{ aa-text }}", "again": "{{ zz-card }}"}`
	const text = "pan={{ zz-card | json: '$.number' }}&note={{ aa-text }}&cvc={{zz-card|json:'$.cvc'}}"
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, opts DetokenizeOptions) (string, []string, error)
	}{
		{"Detokenize", func(t *testing.T, opts DetokenizeOptions) (string, []string, error) {
			out, res, err := w.s.Detokenize(w.ctx, w.req("admin"), opts, decodeJSON(t, body))
			if err != nil {
				return "", nil, noSecretIn(t, err)
			}
			return encodeJSON(t, out), res.TokenIDs, nil
		}},
		{"DetokenizeString", func(t *testing.T, opts DetokenizeOptions) (string, []string, error) {
			out, res, err := w.s.DetokenizeString(w.ctx, w.req("admin"), opts, text)
			if err != nil {
				return "", nil, noSecretIn(t, err)
			}
			return out, res.TokenIDs, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, beforeAll := len(w.records(t)), len(w.all(t))
			given := auditRecordFor("proxy-" + tc.name)
			givenCopy := *given
			start := w.clock.Peek()
			out, ids, err := tc.run(t, DetokenizeOptions{Permission: "token:use", Limit: 10, Audit: given})
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			end := w.clock.Peek()
			if !bytes.Contains([]byte(out), []byte(testVisa)) || !bytes.Contains([]byte(out), []byte(auditText)) {
				t.Errorf("the output lacks the detokenized data")
			}
			wantIDs := []string{w.text, w.card} // sorted: "aa-text" < "zz-card"
			if !slices.Equal(ids, wantIDs) {
				t.Errorf("TokenIDs = %q, want %q", ids, wantIDs)
			}
			recs := w.records(t)
			if len(recs) != before+1 {
				t.Fatalf("%d detokenization records written, want 1", len(recs)-before)
			}
			if n := len(w.all(t)); n != beforeAll+1 {
				t.Errorf("%d audit records written in all, want 1", n-beforeAll)
			}
			rec := recs[0]
			if !slices.Equal(rec.TokenIDs, wantIDs) {
				t.Errorf("record token ids = %q, want %q", rec.TokenIDs, wantIDs)
			}
			if rec.ActorID != given.ActorID || rec.ActorType != ActorProxy || rec.EntityType != "proxy" || rec.EntityID != given.EntityID ||
				rec.Operation != "detokenize" || rec.Message != "POST /charges" || rec.Destination != "api.example.com" {
				t.Errorf("record = %s, want the fields of %s", encodeJSON(t, rec), encodeJSON(t, given))
			}
			if rec.TenantID != w.tenant.ID || !isID(rec.ID) {
				t.Errorf("record tenant %q id %q", rec.TenantID, rec.ID)
			}
			if rec.CreatedAt == nil || rec.CreatedAt.Before(start) || rec.CreatedAt.After(end) {
				t.Errorf("created_at = %v, want between %v and %v", rec.CreatedAt, start, end)
			}
			if !sameJSON(t, given, &givenCopy) {
				t.Errorf("opts.Audit was modified: %s", encodeJSON(t, given))
			}
			checkAuditHoldsNoData(t, w, w.all(t))
		})
	}
}

func TestDetokenizeWithoutAuditWritesNone(t *testing.T) {
	w := newAuditWorld(t)
	if _, _, err := w.detokenize("admin", "token:use", decodeJSON(t, `"{{ zz-card }}"`), 0); err != nil {
		t.Fatal(err)
	}
	if recs := w.records(t); len(recs) != 0 {
		t.Errorf("%d audit records without opts.Audit", len(recs))
	}
}

func TestDetokenizeAuditNotWrittenOnFailure(t *testing.T) {
	w := newAuditWorld(t)
	for _, app := range []string{"admin", "plain", "writer"} {
		w.app(app) // creating an application is audited; do it before counting
	}
	for _, tc := range []struct {
		name    string
		run     func(t *testing.T, opts DetokenizeOptions) error
		wantErr func(t *testing.T, err error) // nil: must succeed
	}{
		{"unknown token", func(t *testing.T, opts DetokenizeOptions) error {
			_, _, err := w.s.Detokenize(w.ctx, w.req("admin"), opts, decodeJSON(t, `{"a": "{{ zz-card }}", "b": "{{ no-such-token }}"}`))
			return err
		}, func(t *testing.T, err error) { wantFieldErrors(t, err, "b") }},
		{"unknown token in a string", func(t *testing.T, opts DetokenizeOptions) error {
			_, _, err := w.s.DetokenizeString(w.ctx, w.req("admin"), opts, "x={{ aa-text }}&y={{ no-such-token }}")
			return err
		}, func(t *testing.T, err error) { wantFieldErrors(t, err, "body") }},
		{"forbidden", func(t *testing.T, opts DetokenizeOptions) error {
			_, _, err := w.s.Detokenize(w.ctx, w.req("plain"), opts, decodeJSON(t, `{"a": "{{ zz-card }}"}`))
			return err
		}, func(t *testing.T, err error) { wantErrorIs(t, err, ErrForbidden) }},
		{"forbidden in a string", func(t *testing.T, opts DetokenizeOptions) error {
			_, _, err := w.s.DetokenizeString(w.ctx, w.req("writer"), opts, "{{ aa-text }}")
			return err
		}, func(t *testing.T, err error) { wantErrorIs(t, err, ErrForbidden) }},
		{"over the limit", func(t *testing.T, opts DetokenizeOptions) error {
			opts.Limit = 1
			_, _, err := w.s.Detokenize(w.ctx, w.req("admin"), opts, decodeJSON(t, `["{{ zz-card }}", "{{ aa-text }}"]`))
			return err
		}, func(t *testing.T, err error) { wantFieldErrors(t, err, "body") }},
		{"malformed expression", func(t *testing.T, opts DetokenizeOptions) error {
			_, _, err := w.s.DetokenizeString(w.ctx, w.req("admin"), opts, "{{ aa-text ")
			return err
		}, func(t *testing.T, err error) {
			if err == nil {
				t.Fatal("no error")
			}
		}},
		{"no expressions", func(t *testing.T, opts DetokenizeOptions) error {
			_, _, err := w.s.Detokenize(w.ctx, w.req("admin"), opts, decodeJSON(t, `{"a": "plain", "b": [1, true, null, "}}"]}`))
			return err
		}, nil},
		{"expression only in a member name", func(t *testing.T, opts DetokenizeOptions) error {
			_, _, err := w.s.Detokenize(w.ctx, w.req("admin"), opts, decodeJSON(t, `{"{{ zz-card }}": "plain"}`))
			return err
		}, nil},
		{"no expressions in a string", func(t *testing.T, opts DetokenizeOptions) error {
			_, _, err := w.s.DetokenizeString(w.ctx, w.req("admin"), opts, "a=b&c=} }")
			return err
		}, nil},
		{"empty string", func(t *testing.T, opts DetokenizeOptions) error {
			_, _, err := w.s.DetokenizeString(w.ctx, w.req("admin"), opts, "")
			return err
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(w.all(t))
			err := noSecretIn(t, tc.run(t, DetokenizeOptions{Permission: "token:use", Limit: 10, Audit: auditRecordFor("p")}))
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
			} else {
				tc.wantErr(t, err)
			}
			if n := len(w.all(t)); n != before {
				t.Errorf("%d audit records written, want none", n-before)
			}
		})
	}
}

// auditPage is one ListAudit call.
func auditPage(tb testing.TB, s *Store, tenantID string, f AuditFilter, cursor string, limit int) ([]*AuditRecord, string) {
	tb.Helper()
	recs, next, err := s.ListAudit(context.Background(), tenantID, f, cursor, limit)
	if err != nil {
		tb.Fatalf("ListAudit(cursor %q, limit %d): %v", cursor, limit, err)
	}
	return recs, next
}

// auditPages pages through a listing by limit and returns the page sizes
// and the records in order. The listing ends at a page without a next
// cursor; a next cursor leading to an empty page is an error.
func auditPages(tb testing.TB, s *Store, tenantID string, f AuditFilter, limit int) ([]int, []*AuditRecord) {
	tb.Helper()
	var sizes []int
	var all []*AuditRecord
	cursor := ""
	for i := 0; ; i++ {
		if i > 1000 {
			tb.Fatal("the listing does not end")
		}
		page, next := auditPage(tb, s, tenantID, f, cursor, limit)
		if len(page) > limit {
			tb.Fatalf("page %d has %d records, over the limit %d", i, len(page), limit)
		}
		if len(page) == 0 && i > 0 {
			tb.Errorf("the next cursor of page %d leads to an empty page", i-1)
		}
		sizes = append(sizes, len(page))
		all = append(all, page...)
		if next == "" {
			return sizes, all
		}
		if len(page) == 0 {
			tb.Fatalf("page %d is empty but has a next cursor", i)
		}
		cursor = next
	}
}

// entityIDs lists the records' entity ids in order.
func entityIDs(recs []*AuditRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.EntityID)
	}
	return out
}

func TestListAuditNewestFirstAndPaginates(t *testing.T) {
	w := newAuditWorld(t)
	var want []string // entity ids, newest first
	for i := range 5 {
		id := "proxy-" + string(rune('a'+i))
		if _, err := w.detokenizeAudited(t, "admin", `"{{ aa-text }}"`, auditRecordFor(id)); err != nil {
			t.Fatal(err)
		}
		want = append([]string{id}, want...)
	}

	all := w.all(t)
	for i := 1; i < len(all); i++ {
		if all[i].CreatedAt.After(all[i-1].CreatedAt.Time) {
			t.Errorf("record %d (%v) is newer than record %d (%v)", i, all[i].CreatedAt, i-1, all[i-1].CreatedAt)
		}
	}
	if len(all) < 5 {
		t.Fatalf("%d records", len(all))
	}
	if got := entityIDs(all[:5]); !slices.Equal(got, want) {
		t.Fatalf("newest records = %v, want newest first %v", got, want)
	}

	// Only the five detokenizations name entity type "proxy" here: pages
	// of 2, 2 and 1, then the end.
	sizes, paged := auditPages(t, w.s, w.tenant.ID, AuditFilter{EntityType: "proxy"}, 2)
	if !slices.Equal(sizes, []int{2, 2, 1}) {
		t.Errorf("page sizes = %v, want [2 2 1]", sizes)
	}
	if got := entityIDs(paged); !slices.Equal(got, want) {
		t.Errorf("paged = %v, want %v", got, want)
	}

	// Every record, by pages of 2 and of 3: the same records in the same
	// order as one listing, none twice, every page full but the last.
	for _, limit := range []int{1, 2, 3} {
		sizes, paged := auditPages(t, w.s, w.tenant.ID, AuditFilter{}, limit)
		seen := map[string]bool{}
		for _, r := range paged {
			if seen[r.ID] {
				t.Errorf("limit %d: record %s listed twice", limit, r.ID)
			}
			seen[r.ID] = true
		}
		if !sameJSON(t, paged, all) {
			t.Errorf("limit %d: paged listing differs from the full listing", limit)
		}
		for i, n := range sizes[:len(sizes)-1] {
			if n != limit {
				t.Errorf("limit %d: page %d has %d records (sizes %v)", limit, i, n, sizes)
			}
		}
	}

	// A newer record does not shift a listing already under way.
	_, next := auditPage(t, w.s, w.tenant.ID, AuditFilter{EntityType: "proxy"}, "", 3)
	if _, err := w.detokenizeAudited(t, "admin", `"{{ zz-card }}"`, auditRecordFor("proxy-new")); err != nil {
		t.Fatal(err)
	}
	rest2, _ := auditPage(t, w.s, w.tenant.ID, AuditFilter{EntityType: "proxy"}, next, 100)
	if got := entityIDs(rest2); !slices.Equal(got, want[3:]) {
		t.Errorf("after a new record, the rest = %v, want %v", got, want[3:])
	}
	if recs := w.records(t); len(recs) != 6 || recs[0].EntityID != "proxy-new" {
		t.Errorf("the new record is not listed first")
	}
}

// ListAudit documents its cursor as "" when there is no more. With a
// filter, a page that takes the last matching record and is exactly full
// must not hand out a cursor to an empty page just because older,
// non-matching records follow.
func TestListAuditFilteredFullLastPageHasNoNext(t *testing.T) {
	w := newAuditWorld(t)
	for i := range 4 {
		if _, err := w.detokenizeAudited(t, "admin", `"{{ aa-text }}"`, auditRecordFor("proxy-"+string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	if len(w.all(t)) <= 4 {
		t.Fatal("want older records of other entity types after the detokenizations")
	}
	f := AuditFilter{EntityType: "proxy"}
	first, next := auditPage(t, w.s, w.tenant.ID, f, "", 2)
	if len(first) != 2 || next == "" {
		t.Fatalf("first page = %d records, next %q; want 2 and a next cursor", len(first), next)
	}
	rest, end := auditPage(t, w.s, w.tenant.ID, f, next, 2)
	if got := entityIDs(rest); !slices.Equal(got, []string{"proxy-b", "proxy-a"}) {
		t.Fatalf("second page = %v, want [proxy-b proxy-a]", got)
	}
	if end != "" {
		page, _ := auditPage(t, w.s, w.tenant.ID, f, end, 2)
		t.Errorf("the last matching page returned next %q, which leads to a page of %d records; want no next", end, len(page))
	}
	// the same holds for the whole-listing limit
	all, next := auditPage(t, w.s, w.tenant.ID, f, "", 4)
	if len(all) != 4 || next != "" {
		t.Errorf("a page of exactly the 4 matching records returned next %q; want none", next)
	}
}

func TestListAuditMalformedCursor(t *testing.T) {
	w := newAuditWorld(t)
	for _, cursor := range []string{"x", "../../tenant", strings.Repeat("g", 32), strings.Repeat("0", 31), strings.Repeat("0", 33)} {
		recs, next, err := w.s.ListAudit(w.ctx, w.tenant.ID, AuditFilter{}, cursor, 10)
		var v *ValidationError
		if !errors.As(err, &v) || recs != nil || next != "" {
			t.Errorf("ListAudit(cursor %q) = %d records, %q, %v; want a ValidationError", cursor, len(recs), next, err)
		}
	}
}

func TestListAuditTenantIsolation(t *testing.T) {
	w := newAuditWorld(t)
	for range 3 {
		if _, err := w.detokenizeAudited(t, "admin", `"{{ aa-text }}"`, auditRecordFor("proxy-a")); err != nil {
			t.Fatal(err)
		}
	}
	b := newTokenWorldOn(t, w.s, w.clock, w.dir, nil)
	if recsB := detokenizeRecords(allAuditRecords(t, w.s, b.tenant.ID)); len(recsB) != 0 {
		t.Fatalf("ListAudit(B) before B detokenized = %d detokenizations; want none", len(recsB))
	}
	tokB := b.mustCreate("admin", TokenInput{ID: "b-token", Type: "token", Data: "b-data"})
	if _, _, err := w.s.Detokenize(w.ctx, b.req("admin"), DetokenizeOptions{Permission: "token:use", Audit: auditRecordFor("proxy-b")}, "{{ b-token }}"); err != nil {
		t.Fatal(err)
	}
	// B cannot use A's tokens: A's ids are unknown to B, and nothing is recorded.
	if _, _, err := w.s.Detokenize(w.ctx, b.req("admin"), DetokenizeOptions{Permission: "token:use", Audit: auditRecordFor("proxy-b")}, "{{ aa-text }}"); err == nil {
		t.Error("tenant B detokenized a token of tenant A")
	}

	allA := w.all(t)
	idsA := map[string]bool{}
	for _, r := range allA {
		idsA[r.ID] = true
		if r.TenantID != w.tenant.ID {
			t.Errorf("ListAudit(A) holds a record of tenant %s", r.TenantID)
		}
	}
	if recsA := detokenizeRecords(allA); len(recsA) != 3 {
		t.Errorf("ListAudit(A) = %d detokenizations, want 3", len(recsA))
	}
	_, cursorA := auditPage(t, w.s, w.tenant.ID, AuditFilter{}, "", 1)
	if cursorA == "" {
		t.Fatal("no cursor")
	}
	for name, cursor := range map[string]string{"no cursor": "", "A's cursor": cursorA} {
		recsB, _ := auditPage(t, w.s, b.tenant.ID, AuditFilter{}, cursor, 1000)
		for _, r := range recsB {
			if r.TenantID != b.tenant.ID || idsA[r.ID] {
				t.Errorf("ListAudit(B, %s) holds %s", name, encodeJSON(t, r))
			}
		}
		if name != "no cursor" {
			continue
		}
		dets := detokenizeRecords(recsB)
		if len(dets) != 1 || dets[0].EntityID != "proxy-b" || !slices.Equal(dets[0].TokenIDs, []string{tokB.ID}) {
			t.Errorf("ListAudit(B) detokenizations = %s, want the one of proxy-b", encodeJSON(t, dets))
		}
	}
	for _, f := range []AuditFilter{{EntityType: "proxy"}, {EntityID: "proxy-a"}} {
		if recs, _ := auditPage(t, w.s, b.tenant.ID, f, "", 100); len(recs) > 1 || (len(recs) == 1 && recs[0].EntityID != "proxy-b") {
			t.Errorf("ListAudit(B, %+v) = %s", f, encodeJSON(t, recs))
		}
	}

	// A deleted tenant's records are gone with it.
	if err := w.s.DeleteTenant(w.ctx, w.tenant.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.s.ListAudit(w.ctx, w.tenant.ID, AuditFilter{}, "", 100); !errors.Is(err, ErrNotFound) {
		t.Errorf("ListAudit of a deleted tenant error = %v, want ErrNotFound", err)
	}
	if left := kvKeys(t, w.s, string(auditPrefix(w.tenant.ID))); len(left) != 0 {
		t.Errorf("%d audit entries left after DeleteTenant", len(left))
	}
	if dets := detokenizeRecords(allAuditRecords(t, w.s, b.tenant.ID)); len(dets) != 1 {
		t.Errorf("ListAudit(B) after A was deleted = %d detokenizations, want 1", len(dets))
	}
	if _, _, err := w.s.ListAudit(w.ctx, "not-a-tenant", AuditFilter{}, "", 10); !errors.Is(err, ErrNotFound) {
		t.Errorf("ListAudit of an unknown tenant error = %v, want ErrNotFound", err)
	}
}

// setLogRetention sets a tenant's log retention quota in its record.
func setLogRetention(tb testing.TB, s *Store, tenantID string, seconds int64) {
	tb.Helper()
	err := s.kv.Update(context.Background(), func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		t.Quotas.LogRetentionSeconds = seconds
		return putSealed(w, tk, "tenant", tenantID, tenantID, tenantKey(tenantID), t)
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// Audit records have no time to live: the sweep removes them once the
// tenant's log retention has passed (audit_chain_purge.go), by the store's
// clock, so a quota change applies to every record at the next sweep.
func TestAuditRecordsExpireWithLogRetention(t *testing.T) {
	if DefaultQuotas.LogRetentionSeconds <= 0 {
		t.Fatalf("default log retention %d", DefaultQuotas.LogRetentionSeconds)
	}
	for _, tc := range []struct {
		name    string
		set     bool
		seconds int64
		want    int64
	}{
		{"default quota", false, 0, DefaultQuotas.LogRetentionSeconds},
		{"one hour", true, 3600, 3600},
		{"thirty days", true, 30 * 24 * 3600, 30 * 24 * 3600},
		{"zero falls back to the default", true, 0, DefaultQuotas.LogRetentionSeconds},
		{"negative falls back to the default", true, -5, DefaultQuotas.LogRetentionSeconds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newAuditWorld(t)
			if tc.set {
				setLogRetention(t, w.s, w.tenant.ID, tc.seconds)
			}
			if _, err := w.detokenizeAudited(t, "admin", `"{{ zz-card | json: '$.number' }}"`, auditRecordFor(tc.name)); err != nil {
				t.Fatal(err)
			}
			n := len(w.all(t))
			for _, step := range []struct {
				by   time.Duration
				left int
			}{{time.Duration(tc.want)*time.Second - time.Minute, n}, {2 * time.Minute, 0}} {
				w.clock.Advance(step.by)
				if err := w.s.Sweep(w.ctx); err != nil {
					t.Fatal(err)
				}
				if left := len(w.all(t)); left != step.left {
					t.Fatalf("%d of %d records left %s later, want %d", left, n, step.by, step.left)
				}
			}
			if rep := verifyAuditChain(t, w.s, w.tenant.ID, AuditSince{}); !rep.OK || rep.CheckpointSeq != uint64(n) {
				t.Errorf("after the purge: %+v", rep)
			}
		})
	}
}

// An audit record encodes itself exactly as json.Marshal does, whatever
// its strings hold and whichever optional members are empty.
func TestAuditRecordEncodesAsJSONMarshal(t *testing.T) {
	ts := Timestamp{time.Date(2026, 11, 23, 1, 2, 3, 456789000, time.UTC)}
	strs := []string{"", "a", "proxy request detokenized for api.example.com", `<&>"\`, "ñandú", "\u2028x\u2029",
		"bad \xff utf-8", "tab\tnew\nline\x00", "tok_" + strings.Repeat("9", 40)}
	tables := []*AuditRecord{
		nil,
		{},
		{ID: "r1", TenantID: "t1", EntityType: "token", Operation: "read", CreatedAt: &ts},
		{ID: "r2", TenantID: "t1", ActorID: "app", ActorType: ActorApplication, EntityType: "proxy", EntityID: "p1",
			Operation: "detokenize", Message: "m", CreatedAt: &ts, TokenIDs: []string{"a", "b"}, Destination: "api.example.com"},
		{ID: "r3", TokenIDs: []string{}},
	}
	for i := 0; i < 2000; i++ {
		rec := &AuditRecord{ID: strs[(i*7)%len(strs)], TenantID: strs[i%len(strs)], ActorID: strs[(i/3)%len(strs)], ActorType: strs[(i/5)%len(strs)],
			EntityType: strs[(i/7)%len(strs)], EntityID: strs[(i/11)%len(strs)], Operation: strs[(i/13)%len(strs)],
			Message: strs[(i/17)%len(strs)], Destination: strs[(i/19)%len(strs)]}
		if i%2 == 0 {
			rec.CreatedAt = &ts
		}
		if i%3 > 0 {
			rec.TokenIDs = strs[:i%len(strs)]
		}
		tables = append(tables, rec)
	}
	for _, rec := range tables {
		want, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := rec.appendRecord([]byte("prefix"))
		if err != nil || string(got) != "prefix"+string(want) {
			t.Fatalf("appendRecord(%+v) = %s, %v; json.Marshal gives %s", rec, got, err, want)
		}
	}
}

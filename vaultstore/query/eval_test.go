package query

import (
	"slices"
	"testing"
	"time"
)

// fakeToken is a token with the attributes a test gives it.
type fakeToken struct {
	id, typ, fp, container, createdBy, modifiedBy string
	meta                                          map[string]string
	hashes                                        []string
	created, modified                             time.Time
	bin, last4, brand                             string
}

func (t *fakeToken) ID() string          { return t.id }
func (t *fakeToken) Type() string        { return t.typ }
func (t *fakeToken) Fingerprint() string { return t.fp }
func (t *fakeToken) Container() string   { return t.container }
func (t *fakeToken) CreatedBy() string   { return t.createdBy }
func (t *fakeToken) ModifiedBy() string  { return t.modifiedBy }
func (t *fakeToken) Metadata(k string) (string, bool) {
	v, ok := t.meta[k]
	return v, ok
}
func (t *fakeToken) HasSearchHash(h string) bool { return slices.Contains(t.hashes, h) }
func (t *fakeToken) CreatedAt() (time.Time, bool) {
	return t.created, !t.created.IsZero()
}
func (t *fakeToken) ModifiedAt() (time.Time, bool) {
	return t.modified, !t.modified.IsZero()
}
func (t *fakeToken) Card() (string, string, string, bool) {
	return t.bin, t.last4, t.brand, t.bin != ""
}

func mustParse(t *testing.T, q string) *Expr {
	t.Helper()
	e, err := Parse(q, testDomain{})
	if err != nil {
		t.Fatalf("parse %q: %v", q, err)
	}
	return e
}

func TestMatch(t *testing.T) {
	day := time.Date(2024, 5, 6, 10, 0, 0, 0, time.UTC)
	card := &fakeToken{
		id: "tok-1", typ: "card", fp: "FP1", container: "/pci/high/", createdBy: "app-1", modifiedBy: "app-2",
		meta: map[string]string{"customer": "Acme"}, hashes: []string{"h(4242)"},
		created: day, modified: day.Add(48 * time.Hour), bin: "424242", last4: "4242", brand: "visa",
	}
	bare := &fakeToken{id: "tok-2", typ: "token", container: "/general/high/"}
	for _, tc := range []struct {
		q          string
		card, bare bool
	}{
		{`id:tok-1`, true, false},
		{`type:card`, true, false},
		{`fingerprint:FP1`, true, false},
		{`container:/pci/high/`, true, false},
		{`container:/pci/*`, true, false},
		{`container:*`, true, true},
		{`container:/pc*`, true, false},
		{`metadata.customer:ACME`, true, false}, // any case
		{`metadata.other:Acme`, false, false},
		{`data:4242`, true, false},
		{`data:4243`, false, false},
		{`created_at:2024-05-06`, true, false},
		{`created_at:{2024-05-06T10:00:00Z TO *]`, false, false},
		{`modified_at:2024-05-08`, true, false},
		{`created_by:app-1`, true, false},
		{`modified_by:app-2`, true, false},
		{`card.bin:424242`, true, false},
		{`card.last4:4242`, true, false},
		{`card.brand:VISA`, true, false}, // through NormalizeBrand
		{`card.brand:mastercard`, false, false},
		{`NOT type:card`, false, true},
		{`type:card OR type:token`, true, true},
		{`type:card AND NOT data:4242`, false, false},
	} {
		e := mustParse(t, tc.q)
		e.SetHashes(func(v string) string { return "h(" + v + ")" })
		if got := e.Match(card); got != tc.card {
			t.Errorf("%s on the card: %v, want %v", tc.q, got, tc.card)
		}
		if got := e.Match(bare); got != tc.bare {
			t.Errorf("%s on the bare token: %v, want %v", tc.q, got, tc.bare)
		}
	}
}

func TestPartial(t *testing.T) {
	created := time.Date(2024, 5, 6, 10, 0, 0, 0, time.UTC)
	full := &Entry{ID: "tok-1", Container: "/pci/high/", Type: "card", Created: created, HasCreated: true}
	old := &Entry{ID: "tok-1", Container: "/pci/high/"} // no type, no time: an entry of store format 1
	for _, tc := range []struct {
		q         string
		full, old Tri
	}{
		{`id:tok-1`, True, True},
		{`id:tok-2`, False, False},
		{`container:/pci/*`, True, True},
		{`type:card`, True, Unknown},
		{`type:bank`, False, Unknown},
		{`created_at:2024-05-06`, True, Unknown},
		{`created_at:2024-05-07`, False, Unknown},
		{`data:x`, Unknown, Unknown},
		{`NOT data:x`, Unknown, Unknown},
		{`NOT id:tok-1`, False, False},
		{`id:tok-1 AND data:x`, Unknown, Unknown},
		{`id:tok-2 AND data:x`, False, False},
		{`id:tok-1 OR data:x`, True, True},
		{`id:tok-2 OR data:x`, Unknown, Unknown},
		{`type:bank OR id:tok-2`, False, Unknown},
	} {
		e := mustParse(t, tc.q)
		if got := e.Partial(full); got != tc.full {
			t.Errorf("%s on a full entry: %v, want %v", tc.q, got, tc.full)
		}
		if got := e.Partial(old); got != tc.old {
			t.Errorf("%s on an old entry: %v, want %v", tc.q, got, tc.old)
		}
	}
}

func TestCandidates(t *testing.T) {
	index := map[string][]string{
		"id:a": {"a"}, "id:b": {"b"}, "fingerprint:F": {"a", "c"},
		"data:x": {"a", "b", "c"}, "data:y": {"c", "d"}, "data:z": nil,
	}
	for _, tc := range []struct {
		q       string
		want    []string
		indexed bool
		lookups int
	}{
		{`id:a`, []string{"a"}, true, 1},
		{`data:x AND data:y`, []string{"c"}, true, 2},
		{`data:x AND type:card`, []string{"a", "b", "c"}, true, 1},
		{`data:x OR fingerprint:F OR id:b`, []string{"a", "b", "c"}, true, 3},
		{`data:z AND data:x AND data:y`, nil, true, 1}, // nothing left to intersect after z
		{`data:x OR type:card`, nil, false, 0},
		{`NOT data:x`, nil, false, 0},
		{`type:card`, nil, false, 0},
		{`(data:x OR data:y) AND NOT id:a`, []string{"a", "b", "c", "d"}, true, 2},
	} {
		e := mustParse(t, tc.q)
		lookups := 0
		got, indexed, err := e.Candidates(func(term *Term) ([]string, error) {
			lookups++
			name := map[Field]string{FieldID: "id", FieldFingerprint: "fingerprint", FieldData: "data"}[term.Field]
			if name == "" {
				t.Fatalf("%s: looked up field %d, which has no index", tc.q, term.Field)
			}
			return index[name+":"+term.Value], nil
		})
		if err != nil || indexed != tc.indexed || !slices.Equal(got, tc.want) || lookups != tc.lookups {
			t.Errorf("%s: %v %v %v after %d lookups, want %v %v after %d", tc.q, got, indexed, err, lookups, tc.want, tc.indexed, tc.lookups)
		}
		if indexed != e.Indexable() {
			t.Errorf("%s: Indexable %v, Candidates indexed %v", tc.q, e.Indexable(), indexed)
		}
	}
}

func TestTerms(t *testing.T) {
	e := mustParse(t, `data:a AND (id:b OR NOT metadata.k:c)`)
	var got []string
	for term := range e.Terms() {
		got = append(got, term.Value)
	}
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("terms %v", got)
	}
}

package vaultstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// searchKV counts what searches read: the prefixes they scan and the token
// records they open.
type searchKV struct {
	KV
	mu    sync.Mutex
	on    bool
	scans []string
	opens int
}

func (k *searchKV) View(ctx context.Context, fn func(Reader) error) error {
	return k.KV.View(ctx, func(r Reader) error { return fn(searchReader{r, k}) })
}

func (k *searchKV) start() {
	k.mu.Lock()
	k.on, k.scans, k.opens = true, nil, 0
	k.mu.Unlock()
}

func (k *searchKV) stop() ([]string, int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.on = false
	return k.scans, k.opens
}

type searchReader struct {
	Reader
	k *searchKV
}

func (r searchReader) Get(key []byte) ([]byte, error) {
	r.k.mu.Lock()
	if r.k.on && strings.Contains(string(key), "/tok/") {
		r.k.opens++
	}
	r.k.mu.Unlock()
	return r.Reader.Get(key)
}

func (r searchReader) Scan(prefix, after []byte, fn func(key, value []byte) error) error {
	r.k.mu.Lock()
	if r.k.on {
		kind := ""
		if parts := strings.Split(string(prefix), "/"); len(parts) > 3 {
			kind = parts[3] // v1/t/{tenant}/{kind}/...
		}
		r.k.scans = append(r.k.scans, kind)
	}
	r.k.mu.Unlock()
	return r.Reader.Scan(prefix, after, fn)
}

// searchWorld is a tenant holding the tokens the search tests query, a
// second tenant, and applications with various search access.
type searchWorld struct {
	*tokenWorld
	kv    *searchKV
	other *tokenWorld
	tok   map[string]*Token // as created, by id
}

// searchApps are the search tests' own applications.
var searchApps = map[string]ApplicationInput{
	"s-mask":    {Rules: []AccessRule{testRule(1, "/", TransformMask, "token:search")}},
	"s-general": {Rules: []AccessRule{testRule(1, "/general/", TransformReveal, "token:search", "token:read")}},
	"s-mixed": {Rules: []AccessRule{
		testRule(1, "/pci/", TransformMask, "token:search"),
		testRule(2, "/general/", TransformReveal, "token:search"),
		testRule(3, "/bank/", TransformRedact, "token:search"),
		testRule(4, "/customer-123/", TransformReveal, "token:read"), // read, not search
	}},
	"s-plain": {Permissions: []string{"token:search"}},
}

func (w *searchWorld) addApp(name string) {
	w.tb.Helper()
	in := searchApps[name]
	in.Name, in.Type = name, AppPrivate
	a, _ := mustCreateApp(w.tb, w.s, w.tenant.ID, in)
	w.apps[name] = a
}

// The search tests' tokens, oldest first; token i is created on day
// 2024-05-06 + i.
var liveTokenIDs = []string{"gen-1", "gen-2", "cust-1", "cust-2", "cust-3", "card-1", "card-2", "card-3", "bank-1"}

const oneDay = 24 * time.Hour

func newSearchWorld(t *testing.T) *searchWorld {
	t.Helper()
	clock := newFakeClock()
	dir := t.TempDir()
	kv := &searchKV{}
	s := openTestStore(t, Options{Dir: dir, Now: clock.Now, WrapKV: func(inner KV) KV { kv.KV = inner; return kv }})
	w := &searchWorld{tokenWorld: newTokenWorldOn(t, s, clock, dir, nil), kv: kv, tok: map[string]*Token{}}
	for name := range searchApps {
		w.addApp(name)
	}
	last4 := []string{"{{ data.number | last4 }}"}
	for _, in := range []TokenInput{
		{ID: "gen-1", Type: "token", Data: "alice@example.com", Containers: []string{"/general/"},
			Metadata: map[string]string{"customer": "Acme", "tier": "gold"}, SearchIndexes: []string{"{{ data }}"}},
		{ID: "gen-2", Type: "token", Data: "bob@example.com", Containers: []string{"/general/high/"},
			Metadata: map[string]string{"customer": "acme"}, SearchIndexes: []string{"{{ data }}", "{{ data | split: '@' | last }}"}},
		{ID: "cust-1", Type: "token", Data: "carol", Containers: []string{"/customer-123/"}, Metadata: map[string]string{"customer": "Other"}},
		{ID: "cust-2", Type: "token", Data: "dave", Containers: []string{"/customer-123/pii/"}},
		{ID: "cust-3", Type: "token", Data: "erin", Containers: []string{"/customer-1234/"}},
		{ID: "card-1", Type: "card", Data: cardData(testVisa, testCVC), SearchIndexes: last4,
			FingerprintExpression: "{{ data.number }}", Metadata: map[string]string{"customer": "ACME"}},
		{ID: "card-2", Type: "card", Data: cardData(testMastercard, ""), SearchIndexes: last4, FingerprintExpression: "{{ data.number }}"},
		{ID: "card-3", Type: "card", Data: cardData(testVisa, ""), SearchIndexes: last4, FingerprintExpression: "{{ data.number }}"},
		{ID: "bank-1", Type: "bank", Data: bankData(testRouting, testAccount), SearchIndexes: []string{"{{ data.account_number | last4 }}"},
			Metadata: map[string]string{"customer": "Acme"}},
	} {
		w.tok[in.ID] = w.mustCreate("admin", in)
		clock.Advance(oneDay)
	}
	// expires 36 hours after it is made, the tests run after that
	w.tok["gone-1"] = w.mustCreate("admin", TokenInput{ID: "gone-1", Type: "token", Data: "alice@example.com",
		Containers: []string{"/general/"}, Metadata: map[string]string{"customer": "acme"}, SearchIndexes: []string{"{{ data }}"},
		ExpiresAt: clock.Peek().Add(36 * time.Hour).Format(time.RFC3339)})
	clock.Advance(2 * oneDay)
	if _, err := w.update("admin", "gen-2", map[string]any{"metadata": map[string]any{"note": "x"}}); err != nil {
		t.Fatalf("UpdateToken: %v", err)
	}

	w.other = newTokenWorldOn(t, s, clock, dir, nil)
	w.other.mustCreate("admin", TokenInput{ID: "other-1", Type: "token", Data: "alice@example.com", Containers: []string{"/general/"},
		Metadata: map[string]string{"customer": "Acme"}, SearchIndexes: []string{"{{ data }}"}})
	w.other.mustCreate("admin", TokenInput{ID: "other-card", Type: "card", Data: cardData(testVisa, ""), SearchIndexes: last4,
		FingerprintExpression: "{{ data.number }}"})
	return w
}

func (w *searchWorld) search(app, q string, offset, limit int) ([]*Token, int, error) {
	w.tb.Helper()
	toks, total, err := w.s.SearchTokens(w.ctx, w.req(app), q, offset, limit)
	return toks, total, noSecretIn(w.tb, err)
}

// expect checks a search's page and total, in order.
func (w *searchWorld) expect(app, q string, offset, limit int, want []string, total int) []*Token {
	w.tb.Helper()
	toks, n, err := w.search(app, q, offset, limit)
	if err != nil {
		w.tb.Errorf("%s: search %q: %v", app, q, err)
		return nil
	}
	if got := idsOf(toks); !slices.Equal(got, want) || n != total {
		w.tb.Errorf("%s: search %q [%d:+%d]\n got %v (total %d)\nwant %v (total %d)", app, q, offset, limit, got, n, want, total)
	}
	return toks
}

// liveExcept returns the live tokens other than those named.
func liveExcept(ids ...string) []string {
	return slices.DeleteFunc(slices.Clone(liveTokenIDs), func(id string) bool { return slices.Contains(ids, id) })
}

// searchTime renders a token's creation time with an offset.
func searchTime(tok *Token, zone *time.Location) string {
	return tok.CreatedAt.In(zone).Format(time.RFC3339Nano)
}

func TestSearchTokens(t *testing.T) {
	w := newSearchWorld(t)
	fp1, fp2 := w.tok["card-1"].Fingerprint, w.tok["card-2"].Fingerprint
	if fp1 == "" || fp1 != w.tok["card-3"].Fingerprint || fp1 == fp2 {
		t.Fatalf("fingerprints: %q %q %q", fp1, fp2, w.tok["card-3"].Fingerprint)
	}
	admin := w.app("admin").ID
	plus2 := time.FixedZone("", 2*3600)
	for _, tc := range []struct {
		q    string
		want []string
	}{
		// id
		{`id:gen-1`, []string{"gen-1"}},
		{`id:"card-2"`, []string{"card-2"}},
		{`id:gone-1`, nil}, // expired
		{`id:nope`, nil},
		{`id:other-1`, nil}, // another tenant's
		// type
		{`type:card`, []string{"card-1", "card-2", "card-3"}},
		{`type:token`, []string{"gen-1", "gen-2", "cust-1", "cust-2", "cust-3"}},
		{`type:bank`, []string{"bank-1"}},
		// fingerprint
		{`fingerprint:` + fp1, []string{"card-1", "card-3"}},
		{`fingerprint:"` + fp2 + `"`, []string{"card-2"}},
		{`fingerprint:AAAA`, nil},
		{`fingerprint:a/b`, nil},
		// container: exact, wildcard, sub-containers
		{`container:/general/`, []string{"gen-1"}},
		{`container:"/general/*"`, []string{"gen-1", "gen-2"}},
		{`container:/customer-123/`, []string{"cust-1"}},
		{`container:"/customer-123/*"`, []string{"cust-1", "cust-2"}},
		{`container:/customer-123*`, []string{"cust-1", "cust-2", "cust-3"}},
		{`container:/CUSTOMER-123/PII/`, []string{"cust-2"}},
		{`container:"/pci/*"`, []string{"card-1", "card-2", "card-3"}},
		{`container:/pci/`, nil},
		{`container:*`, liveTokenIDs},
		// metadata: value case-insensitive, key exact
		{`metadata.customer:acme`, []string{"gen-1", "gen-2", "card-1", "bank-1"}},
		{`metadata.customer:ACME`, []string{"gen-1", "gen-2", "card-1", "bank-1"}},
		{`metadata.customer:"other"`, []string{"cust-1"}},
		{`metadata.Customer:acme`, nil},
		{`metadata.tier:gold`, []string{"gen-1"}},
		{`metadata.tier:gol`, nil},
		{`metadata.note:X`, []string{"gen-2"}},
		// data: exact, case-insensitive, search indexes only
		{`data:alice@example.com`, []string{"gen-1"}},
		{`data:ALICE@Example.COM`, []string{"gen-1"}},
		{`data:"bob@example.com"`, []string{"gen-2"}},
		{`data:example.com`, []string{"gen-2"}},
		{`data:4242`, []string{"card-1", "card-3"}},
		{`data:4444`, []string{"card-2"}},
		{`data:1234`, []string{"bank-1"}},
		{`data:` + testVisa, nil},    // the number itself is not indexed
		{`data:carol`, nil},          // no search index
		{`data:alice`, nil},          // exact only
		{`data:` + testCVC, nil},     // nothing derived from a CVC
		{`data:` + testRouting, nil}, // nor from what is not indexed
		// boolean operators
		{`type:card AND data:4242`, []string{"card-1", "card-3"}},
		{`type:card data:4242`, []string{"card-1", "card-3"}},
		{`data:4242 AND NOT id:card-1`, []string{"card-3"}},
		{`data:4242 -id:card-1`, []string{"card-3"}},
		{`data:4242 !id:card-1`, []string{"card-3"}},
		{`data:4242 OR data:4444`, []string{"card-1", "card-2", "card-3"}},
		{`data:4242 OR type:bank`, []string{"card-1", "card-3", "bank-1"}},
		{`type:card OR type:bank`, []string{"card-1", "card-2", "card-3", "bank-1"}},
		{`NOT type:card`, liveExcept("card-1", "card-2", "card-3")},
		{`!type:card`, liveExcept("card-1", "card-2", "card-3")},
		{`-type:card`, liveExcept("card-1", "card-2", "card-3")},
		{`NOT data:4242`, liveExcept("card-1", "card-3")},
		{`NOT NOT type:bank`, []string{"bank-1"}},
		{`type:token -container:"/customer-123/*"`, []string{"gen-1", "gen-2", "cust-3"}},
		{`type:token container:"/general/*"`, []string{"gen-1", "gen-2"}},
		// precedence: NOT > AND > OR
		{`type:bank OR type:card AND data:4444`, []string{"card-2", "bank-1"}},
		{`type:card AND data:4444 OR type:bank`, []string{"card-2", "bank-1"}},
		{`(type:bank OR type:card) AND data:4444`, []string{"card-2"}},
		{`NOT type:card AND NOT type:token`, []string{"bank-1"}},
		{`NOT (type:card OR type:token)`, []string{"bank-1"}},
		{`NOT type:card OR data:4242`, liveExcept("card-2")},
		{`metadata.customer:acme AND (type:card OR type:bank)`, []string{"card-1", "bank-1"}},
		{`((id:gen-1 OR id:gen-2) AND (metadata.tier:gold OR id:gen-2)) AND NOT id:gen-2`, []string{"gen-1"}},
		{`id:gen-1 OR id:gone-1 OR id:card-2`, []string{"gen-1", "card-2"}},
		// created_at: whole days, inclusive, exclusive, open
		{`created_at:2024-05-08`, []string{"cust-1"}},
		{`created_at:5/8/2024`, []string{"cust-1"}}, // expires_at's M/D/YYYY, through searchDomain
		{`created_at:[2024-05-07 TO 2024-05-09]`, []string{"gen-2", "cust-1", "cust-2"}},
		{`created_at:{2024-05-07 TO 2024-05-09}`, []string{"cust-1"}},
		{`created_at:[2024-05-07 TO 2024-05-09}`, []string{"gen-2", "cust-1"}},
		{`created_at:{2024-05-07 TO 2024-05-09]`, []string{"cust-1", "cust-2"}},
		{`created_at:{2024-05-12 TO *]`, []string{"card-3", "bank-1"}},
		{`created_at:[* TO 2024-05-06]`, []string{"gen-1"}},
		{`created_at:[* TO *]`, liveTokenIDs},
		{`created_at:[` + searchTime(w.tok["gen-2"], time.UTC) + ` TO ` + searchTime(w.tok["cust-1"], plus2) + `]`, []string{"gen-2", "cust-1"}},
		{`created_at:{` + searchTime(w.tok["gen-2"], time.UTC) + ` TO ` + searchTime(w.tok["cust-1"], plus2) + `}`, nil},
		{`created_at:{` + searchTime(w.tok["gen-2"], plus2) + ` TO ` + searchTime(w.tok["cust-2"], time.UTC) + `}`, []string{"cust-1"}},
		{`created_at:"` + searchTime(w.tok["card-2"], plus2) + `"`, []string{"card-2"}},
		{`created_at:[2024-05-07 TO 2024-05-09] AND type:card`, nil},
		{`created_at:[2024-05-10 TO *] AND data:4242`, []string{"card-1", "card-3"}},
		// modified_at: only a modified token has one
		{`modified_at:[2024-05-17 TO *]`, []string{"gen-2"}},
		{`modified_at:[* TO *]`, []string{"gen-2"}},
		{`modified_at:[* TO 2024-05-16]`, nil},
		{`NOT modified_at:[* TO *]`, liveExcept("gen-2")},
		// created_by, modified_by
		{`created_by:` + admin, liveTokenIDs},
		{`modified_by:` + admin, []string{"gen-2"}},
		{`created_by:someone-else`, nil},
	} {
		w.expect("admin", tc.q, 0, 100, tc.want, len(tc.want))
	}
}

// TestSearchTokensOtherTenant: a tenant's search never sees another's
// tokens, though they hold the same data, fingerprinted and indexed.
func TestSearchTokensOtherTenant(t *testing.T) {
	w := newSearchWorld(t)
	o := &searchWorld{tokenWorld: w.other.at(t)}
	o.expect("admin", `data:alice@example.com`, 0, 10, []string{"other-1"}, 1)
	o.expect("admin", `data:4242`, 0, 10, []string{"other-card"}, 1)
	o.expect("admin", `container:*`, 0, 10, []string{"other-1", "other-card"}, 2)
	o.expect("admin", `id:gen-1 OR id:card-1`, 0, 10, nil, 0)
	o.expect("admin", `fingerprint:`+w.tok["card-1"].Fingerprint, 0, 10, nil, 0)
	w.expect("admin", `data:4242`, 0, 10, []string{"card-1", "card-3"}, 2)
	w.expect("admin", `metadata.customer:acme AND container:/general/`, 0, 10, []string{"gen-1"}, 1)
}

// TestSearchTokensAccess: a caller sees, and counts, only tokens in
// containers it may search, shaped by its rule there.
func TestSearchTokensAccess(t *testing.T) {
	w := newSearchWorld(t)
	fp1 := w.tok["card-1"].Fingerprint

	// /general/ only
	w.expect("s-general", `type:token`, 0, 10, []string{"gen-1", "gen-2"}, 2)
	w.expect("s-general", `NOT type:card`, 0, 10, []string{"gen-1", "gen-2"}, 2)
	w.expect("s-general", `container:*`, 0, 10, []string{"gen-1", "gen-2"}, 2)
	w.expect("s-general", `container:*`, 1, 10, []string{"gen-2"}, 2)
	w.expect("s-general", `container:*`, 0, 1, []string{"gen-1"}, 2)
	w.expect("s-general", `created_at:[* TO *]`, 0, 0, nil, 2)
	w.expect("s-general", `data:4242`, 0, 10, nil, 0)
	w.expect("s-general", `data:4242 OR data:alice@example.com`, 0, 10, []string{"gen-1"}, 1)
	w.expect("s-general", `fingerprint:`+fp1, 0, 10, nil, 0)
	w.expect("s-general", `id:card-1`, 0, 10, nil, 0)
	w.expect("s-general", `container:"/pci/*"`, 0, 10, nil, 0)
	w.expect("s-general", `metadata.customer:acme`, 0, 10, []string{"gen-1", "gen-2"}, 2)

	// several rules; read access alone (on /customer-123/) does not let
	// a caller search
	w.expect("s-mixed", `container:*`, 0, 10, []string{"gen-1", "gen-2", "card-1", "card-2", "card-3", "bank-1"}, 6)
	w.expect("s-mixed", `type:token`, 0, 10, []string{"gen-1", "gen-2"}, 2)

	// shaping: reveal, mask, redact per rule; plain permission masks
	card := func(app string) any {
		t.Helper()
		toks := w.expect(app, `id:card-1`, 0, 1, []string{"card-1"}, 1)
		if len(toks) != 1 {
			return nil
		}
		m, _ := toks[0].Data.(map[string]any)
		return m["number"]
	}
	if got := card("admin"); got != testVisa {
		t.Errorf("admin sees number %v, want it revealed", got != nil)
	}
	for _, app := range []string{"s-mask", "s-mixed", "s-plain"} {
		if got := card(app); got != "XXXXXXXXXXXX4242" {
			t.Errorf("%s sees number %v, want it masked", app, got)
		}
	}
	one := func(app, q string) *Token {
		t.Helper()
		toks, _, err := w.search(app, q, 0, 1)
		if err != nil || len(toks) != 1 {
			t.Fatalf("%s: search %q = %d tokens, %v", app, q, len(toks), err)
		}
		return toks[0]
	}
	if got := one("s-mixed", `id:gen-1`).Data; got != "alice@example.com" {
		t.Errorf("s-mixed sees gen-1 data %v, want it revealed", got)
	}
	if got := one("s-mixed", `id:bank-1`); got.Data != nil || got.Type != "bank" || got.Metadata["customer"] != "Acme" {
		t.Errorf("s-mixed sees bank-1 as %+v, want its data redacted", got)
	}
	if got := one("s-mask", `id:gen-1`).Data; got != nil {
		t.Errorf("s-mask sees gen-1 data %v; a token without a mask is redacted", got)
	}
	if got := one("s-general", `id:gen-1`); got.Data != "alice@example.com" || got.Fingerprint != "" || got.CreatedAt == nil {
		t.Errorf("s-general sees gen-1 as %+v", got)
	}

	// no token:search at all
	for _, app := range []string{"masker", "plain"} {
		if _, _, err := w.search(app, `type:card`, 0, 10); !errors.Is(err, ErrForbidden) {
			t.Errorf("%s: err = %v, want ErrForbidden", app, err)
		}
	}
}

func TestSearchTokensPagination(t *testing.T) {
	w := newSearchWorld(t)
	for _, tc := range []struct {
		q             string
		offset, limit int
		want          []string
		total         int
	}{
		// scan, opening records
		{`type:token`, 0, 2, []string{"gen-1", "gen-2"}, 5},
		{`type:token`, 2, 2, []string{"cust-1", "cust-2"}, 5},
		{`type:token`, 4, 2, []string{"cust-3"}, 5},
		{`type:token`, 5, 2, nil, 5},
		{`type:token`, 50, 2, nil, 5},
		{`type:token`, 0, 0, nil, 5},
		{`type:token`, -3, 1, []string{"gen-1"}, 5},
		{`metadata.customer:acme`, 1, 2, []string{"gen-2", "card-1"}, 4},
		// scan, decided from the order index
		{`container:*`, 7, 5, []string{"card-3", "bank-1"}, 9},
		{`container:*`, 3, 2, []string{"cust-2", "cust-3"}, 9},
		{`created_at:[2024-05-07 TO 2024-05-12]`, 1, 3, []string{"cust-1", "cust-2", "cust-3"}, 6},
		// index
		{`data:4242 OR data:4444`, 1, 1, []string{"card-2"}, 3},
		{`data:4242 OR data:4444`, 0, 2, []string{"card-1", "card-2"}, 3},
		{`data:4242 OR data:4444`, 3, 2, nil, 3},
		{`data:4242 OR data:4444`, 0, 0, nil, 3},
	} {
		w.expect("admin", tc.q, tc.offset, tc.limit, tc.want, tc.total)
	}
}

// TestSearchTokensPlan: a query ANDing an indexed term is answered from
// the index without scanning the tenant; others scan the order index,
// and open records only when a term needs them.
func TestSearchTokensPlan(t *testing.T) {
	w := newSearchWorld(t)
	fp1 := w.tok["card-1"].Fingerprint
	for _, tc := range []struct {
		q     string
		limit int
		scans []string // kinds of prefix scanned
		opens int      // token records opened
	}{
		{`data:4242`, 10, []string{"six"}, 4},               // two candidates, opened to check, then the page
		{`data:4242 AND type:card`, 10, []string{"six"}, 4}, // one lookup, the rest checked on the records
		{`type:card data:4242 -id:card-1`, 10, []string{"six"}, 3},
		{`data:4242 AND data:4444`, 10, []string{"six", "six"}, 0}, // disjoint: nothing to open
		{`fingerprint:` + fp1 + ` OR id:gen-1`, 10, []string{"fpx"}, 6},
		{`id:gen-1`, 10, nil, 2},
		{`id:gen-1 AND NOT type:card`, 10, nil, 2},
		{`(id:gen-1 OR data:4444) AND (type:card OR metadata.x:y)`, 10, []string{"six"}, 3},
		{`NOT data:4242`, 10, []string{"tokc"}, 9},
		{`data:4242 OR type:bank`, 10, []string{"tokc"}, 9},
		// type is in the order entries too (store format 2)
		{`type:card`, 10, []string{"tokc"}, 3},
		{`NOT type:card`, 10, []string{"tokc"}, 6},
		// decided from the order entries: only the page is opened
		{`container:*`, 2, []string{"tokc"}, 2},
		{`container:"/customer-123/*" OR id:card-2`, 10, []string{"tokc"}, 3},
		{`created_at:[2024-05-07 TO 2024-05-09]`, 10, []string{"tokc"}, 3},
		{`NOT container:"/pci/*"`, 0, []string{"tokc"}, 0},
		// partly decided: container prunes before opening
		{`container:"/pci/*" AND metadata.customer:acme`, 10, []string{"tokc"}, 3},
	} {
		w.kv.start()
		if _, _, err := w.search("admin", tc.q, 0, tc.limit); err != nil {
			t.Errorf("search %q: %v", tc.q, err)
		}
		scans, opens := w.kv.stop()
		// the tenant's keys are read first; only the tenant's token
		// prefixes count here
		scans = slices.DeleteFunc(scans, func(k string) bool { return k != "six" && k != "fpx" && k != "tokc" })
		if !slices.Equal(scans, tc.scans) || opens != tc.opens {
			t.Errorf("search %q: scanned %v, opened %d; want %v, %d", tc.q, scans, opens, tc.scans, tc.opens)
		}
	}
}

// TestSearchTokensFollowsWrites: search indexes follow updates and
// deletes.
func TestSearchTokensFollowsWrites(t *testing.T) {
	w := newSearchWorld(t)
	w.expect("admin", `data:erin`, 0, 10, nil, 0)
	if _, err := w.update("admin", "cust-3", map[string]any{"search_indexes": []any{"{{ data }}"}}); err != nil {
		t.Fatal(err)
	}
	w.expect("admin", `data:erin`, 0, 10, []string{"cust-3"}, 1)
	if _, err := w.update("admin", "cust-3", map[string]any{"data": "frank"}); err != nil {
		t.Fatal(err)
	}
	w.expect("admin", `data:erin`, 0, 10, nil, 0)
	w.expect("admin", `data:frank`, 0, 10, []string{"cust-3"}, 1)
	if err := w.del("admin", "cust-3"); err != nil {
		t.Fatal(err)
	}
	w.expect("admin", `data:frank`, 0, 10, nil, 0)
	w.expect("admin", `id:cust-3`, 0, 10, nil, 0)
}

func TestSearchTokensInvalidQuery(t *testing.T) {
	w := newSearchWorld(t)
	for _, tc := range []struct{ q, want string }{
		{`data:` + testVisa + ` AND (`, "position 28: expected a term after '('"},
		{`(type:card`, "position 1: this '(' is not closed"},
		{`type:card AND`, "position 14: expected a term after AND"},
		{`colour:red`, "position 1: unknown field; fields are id, type, fingerprint, container, metadata.<key>, data, card.bin, card.last4, card.brand, created_at, modified_at, created_by, modified_by"},
		{`created_at:[2024-01-01 TO`, "position 12: this range is not closed"},
		{``, "position 1: the query is empty"},
		{`data:` + testVisa + `*`, "position 6: a wildcard (*) applies only to container; write \\* for a literal *"},
		// the vault's rules, which the language asks of searchDomain
		{`type:cards`, "position 6: unknown token type; types are bank, card, token"},
		{`container:/PCI`, "position 11: a container starts and ends with / and uses only a-z, 0-9, _ and -, or ends with * to match every container under a path"},
		{`created_at:[13/1/2024 TO *]`, "position 13: expected an ISO 8601 date (2024-01-31) or date-time (2024-01-31T13:24:28Z, 2024-01-31T13:24:28+02:00)"},
		{`created_at:[* TO 2024-01-01T00:00:00+15:00]`, "position 18: a date-time offset must be between -14:00 and +14:00"},
	} {
		_, _, err := w.search("admin", tc.q, 0, 10)
		var v *ValidationError
		if !errors.As(err, &v) || len(v.Fields) != 1 {
			t.Errorf("search %q: err = %v, want a ValidationError", strings.ReplaceAll(tc.q, testVisa, "<DATA>"), err)
			continue
		}
		if got := strings.Join(v.Fields["query"], "; "); got != tc.want {
			t.Errorf("search %q: %s, want %s", strings.ReplaceAll(tc.q, testVisa, "<DATA>"), got, tc.want)
		}
	}
}

// batchCreate creates tokens many to a transaction, as a tokenize
// does, advancing the clock a millisecond between tokens.
func batchCreate(tb testing.TB, w *tokenWorld, n, batch int, input func(i int) TokenInput) {
	tb.Helper()
	for start := 0; start < n; start += batch {
		end := min(n, start+batch)
		err := w.s.kv.Update(w.ctx, func(wr Writer) error {
			tk, t, err := w.s.tenantForWrite(wr, w.tenant.ID)
			if err != nil {
				return err
			}
			for i := start; i < end; i++ {
				rec, dedupe, err := w.s.buildToken(t, tk, "bench", input(i))
				if err != nil {
					return err
				}
				if _, _, err := w.s.insertToken(wr, tk, rec, dedupe, input(i).ID == ""); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatalf("creating tokens %d to %d: %v", start, end, err)
		}
	}
}

// BenchmarkSearchTokens searches a tenant of 100,000 tokens: nine in ten
// cards (fingerprinted, their last four digits indexed, in /pci/high/),
// one in ten generic tokens in /general/, each with metadata batch = i % 100.
func BenchmarkSearchTokens(b *testing.B) {
	if testing.Short() {
		b.Skip("creates 100,000 tokens")
	}
	const n = 100_000
	w := newTokenBenchWorld(b, false)
	started := time.Now()
	batchCreate(b, w, n, 500, func(i int) TokenInput {
		meta := map[string]string{"batch": fmt.Sprint(i % 100)}
		if i%10 == 0 {
			return TokenInput{ID: fmt.Sprintf("gen-%06d", i), Type: "token", Data: fmt.Sprintf("value-%d", i),
				Containers: []string{"/general/"}, Metadata: meta, SearchIndexes: []string{"{{ data }}"}}
		}
		return TokenInput{ID: fmt.Sprintf("card-%06d", i), Type: "card", Data: benchCard(i), Metadata: meta,
			SearchIndexes: []string{"{{ data.number | last4 }}"}, FingerprintExpression: "{{ data.number }}"}
	})
	b.Logf("created %d tokens in %v", n, time.Since(started).Round(time.Millisecond))
	admin := w.req("admin")
	fp := ""
	if toks, _, err := w.s.SearchTokens(w.ctx, admin, "id:card-012345", 0, 1); err != nil || len(toks) != 1 {
		b.Fatalf("id search: %d, %v", len(toks), err)
	} else {
		fp = toks[0].Fingerprint
	}
	last4 := luhnNumber("4", 12345, 16)[12:]
	for _, tc := range []struct {
		name  string
		q     string
		total int // -1: at least one
	}{
		{"index/id", `id:card-012345`, 1},
		{"index/fingerprint", `fingerprint:` + fp, 1},
		{"index/data", `data:value-50000`, 1},
		{"index/data-and-type", `data:` + last4 + ` AND type:card`, -1},
		{"scan/container-wildcard", `container:"/general/*"`, n / 10},
		{"scan/created-at-range", `created_at:[* TO *]`, n},
		{"scan/not-type", `NOT type:card`, n / 10},
		{"scan/metadata", `metadata.batch:7`, n / 100},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				toks, total, err := w.s.SearchTokens(w.ctx, admin, tc.q, 0, 20)
				if err != nil || len(toks) == 0 || (tc.total >= 0 && total != tc.total) {
					b.Fatalf("search %q = %d tokens, total %d, %v", tc.q, len(toks), total, err)
				}
			}
		})
	}
}

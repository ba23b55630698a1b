package vaultstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SearchTokens returns one page of the tokens matching a query (see
// search_query.go for the language), oldest first, shaped with the
// transform of the caller's token:search permission on each token's
// container, and how many match in all. Tokens whose container the
// caller may not search, and expired tokens, neither match nor count.
// A malformed query is a *ValidationError on "query"; a caller without
// token:search anywhere gets a *PermissionError.
//
// A query that ANDs a data, fingerprint or id term (or ORs only such
// terms) is answered from those indexes: data terms look up the keyed
// hash of the value under the token's search index entries, never the
// data itself. Any other query scans the tenant's tokens in creation
// order, deciding container, id, type and created_at terms from the order
// index and opening a token only when another term needs it.
func (s *Store) SearchTokens(ctx context.Context, req TokenRequest, query string, offset, limit int) ([]*Token, int, error) {
	if !req.Application.Can("token:search") {
		return nil, 0, &PermissionError{Permission: "token:search"}
	}
	q, err := parseSearchQuery(query)
	if err != nil {
		return nil, 0, err
	}
	offset, limit = max(offset, 0), max(limit, 0)
	var (
		page  []*tokenRecord
		total int
	)
	err = s.kv.View(ctx, func(r Reader) error {
		tk, err := s.tenantKeysFor(r, req.Tenant.ID)
		if err != nil {
			return err
		}
		e := &searchExec{s: s, r: r, tk: tk, req: req, now: s.now()}
		e.plan(q)
		ids, indexed, err := e.candidates(q)
		if err != nil {
			return err
		}
		if indexed {
			page, total, err = e.fromCandidates(ctx, q, ids, offset, limit)
		} else {
			page, total, err = e.scan(ctx, q, offset, limit)
		}
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	out := make([]*Token, 0, len(page))
	ids := make([]string, 0, len(page))
	for _, rec := range page {
		transform, ok := req.Application.grant("token:search", rec.container())
		if !ok {
			continue // not reached: the page holds only searchable tokens
		}
		tok, err := s.shape(rec, transform)
		if err != nil {
			return nil, 0, err
		}
		out, ids = append(out, tok), append(ids, rec.ID)
	}
	audit := byApp(req.Application, "token", "", "search", fmt.Sprintf("%d of %d matching tokens returned", len(ids), total))
	audit.TokenIDs = ids
	if err := s.recordAccess(ctx, nil, req.Tenant, nil, audit); err != nil {
		return nil, 0, err
	}
	return out, total, nil
}

// searchExec evaluates one query in one snapshot.
type searchExec struct {
	s   *Store
	r   Reader
	tk  *tenantKeys
	req TokenRequest
	now time.Time
}

// plan computes what terms need from the tenant's keys: the keyed hash
// of every data value, exactly as derive computes a search index's.
func (e *searchExec) plan(q *searchExpr) {
	if q.op == searchTermOp {
		if q.term.field == fieldData {
			q.term.hash = e.tk.searchHashOf(strings.ToLower(q.term.value))
		}
		return
	}
	for _, k := range q.kids {
		e.plan(k)
	}
}

// indexable reports whether index lookups alone find every token that
// may match q: q is a data, fingerprint or id term, an AND with such a
// kid, or an OR of such kids. A NOT never is.
func indexable(q *searchExpr) bool {
	switch q.op {
	case searchTermOp:
		switch q.term.field {
		case fieldID, fieldFingerprint, fieldData:
			return true
		}
	case searchAndOp:
		return slices.ContainsFunc(q.kids, indexable)
	case searchOrOp:
		return !slices.ContainsFunc(q.kids, func(k *searchExpr) bool { return !indexable(k) })
	}
	return false
}

// candidates returns the ids the index lookups of an indexable q find,
// sorted and without duplicates, or indexed false when q needs a scan.
// An AND looks up its indexable kids only; its other kids are checked
// on the loaded tokens.
func (e *searchExec) candidates(q *searchExpr) ([]string, bool, error) {
	if !indexable(q) {
		return nil, false, nil
	}
	switch q.op {
	case searchTermOp:
		return e.lookup(q.term)
	case searchAndOp:
		var (
			set   []string
			found bool
		)
		for _, k := range q.kids {
			if !indexable(k) {
				continue
			}
			if found && len(set) == 0 {
				break // nothing left to intersect
			}
			ids, _, err := e.candidates(k)
			if err != nil {
				return nil, false, err
			}
			if !found {
				set, found = ids, true
			} else {
				set = intersectSorted(set, ids)
			}
		}
		return set, true, nil
	}
	// an OR
	var set []string
	for _, k := range q.kids {
		ids, _, err := e.candidates(k)
		if err != nil {
			return nil, false, err
		}
		set = append(set, ids...)
	}
	slices.Sort(set)
	return slices.Compact(set), true, nil
}

// lookup answers an indexed term from its index.
func (e *searchExec) lookup(t *searchTerm) ([]string, bool, error) {
	tid := e.req.Tenant.ID
	var prefix []byte
	switch t.field {
	case fieldID:
		if !validLookupID(t.value) {
			return nil, true, nil
		}
		return []string{t.value}, true, nil
	case fieldFingerprint:
		if !isHashText(t.value) {
			return nil, true, nil // no fingerprint is written so
		}
		prefix = fingerprintIndexPrefix(tid, t.value)
	case fieldData:
		prefix = searchIndexPrefix(tid, t.hash)
	default:
		return nil, false, nil // not reached: only indexable terms are looked up
	}
	var ids []string
	err := e.r.Scan(prefix, nil, func(key, _ []byte) error {
		ids = append(ids, lastSegment(key))
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	slices.Sort(ids)
	return ids, true, nil
}

// validLookupID reports whether id could name a token key of its own.
func validLookupID(id string) bool {
	return id != "" && !strings.Contains(id, "/")
}

// isHashText reports whether s is unpadded base64url, the text of every
// fingerprint and search hash.
func isHashText(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func intersectSorted(a, b []string) []string {
	var out []string
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch c := strings.Compare(a[i], b[j]); {
		case c < 0:
			i++
		case c > 0:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// searchHit is a match kept by its place in creation order.
type searchHit struct {
	created int64
	id      string
}

// fromCandidates loads the candidates an index found, keeps those the
// caller may search that match the whole query, and returns the page.
func (e *searchExec) fromCandidates(ctx context.Context, q *searchExpr, ids []string, offset, limit int) ([]*tokenRecord, int, error) {
	var hits []searchHit
	for i, id := range ids {
		if i%256 == 255 {
			if err := ctx.Err(); err != nil {
				return nil, 0, err
			}
		}
		rec, err := e.s.loadToken(e.r, e.tk, e.req.Tenant.ID, id)
		if errors.Is(err, ErrNotFound) {
			continue
		} else if err != nil {
			return nil, 0, err
		}
		if !e.searchable(rec.container()) || !e.match(q, rec) {
			continue
		}
		hits = append(hits, searchHit{rec.CreatedAt.UnixNano(), rec.ID})
	}
	// the order of the list order index: created time, then id
	slices.SortFunc(hits, func(a, b searchHit) int {
		if a.created != b.created {
			if a.created < b.created {
				return -1
			}
			return 1
		}
		return strings.Compare(a.id, b.id)
	})
	total := len(hits)
	if offset >= total {
		return nil, total, nil
	}
	hits = hits[offset:min(total, offset+limit)]
	page := make([]*tokenRecord, 0, len(hits))
	for _, h := range hits {
		// loaded again rather than kept: a wide match would otherwise
		// hold every matching record in memory
		rec, err := e.s.loadToken(e.r, e.tk, e.req.Tenant.ID, h.id)
		if err != nil {
			return nil, 0, err // the snapshot had it a moment ago
		}
		page = append(page, rec)
	}
	return page, total, nil
}

// scan walks the tenant's tokens in creation order.
func (e *searchExec) scan(ctx context.Context, q *searchExpr, offset, limit int) ([]*tokenRecord, int, error) {
	var (
		page  []*tokenRecord
		total int
		seen  int
	)
	prefix := tokenOrderPrefix(e.req.Tenant.ID)
	err := e.r.Scan(prefix, nil, func(key, value []byte) error {
		if seen++; seen%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		o := parseOrderValue(value)
		if !o.expires.IsZero() && !e.now.Before(o.expires) {
			return nil
		}
		if !e.searchable(o.container) {
			return nil
		}
		entry := orderEntry{id: lastSegment(key), container: o.container, tokenType: o.tokenType}
		if created, ok := orderCreated(key[len(prefix):]); ok {
			entry.created, entry.hasCreated = created, true
		}
		m := e.partial(q, &entry)
		if m == triFalse {
			return nil
		}
		if m == triTrue && (total < offset || len(page) >= limit) {
			total++ // counted without opening the record
			return nil
		}
		rec, err := e.s.loadToken(e.r, e.tk, e.req.Tenant.ID, entry.id)
		if errors.Is(err, ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		if m == triUnknown && !e.match(q, rec) {
			return nil
		}
		if total >= offset && len(page) < limit {
			page = append(page, rec)
		}
		total++
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return page, total, nil
}

// orderCreated reads the creation time from the rest of an order key
// after its prefix: "{created ns hex}/{token}".
func orderCreated(rest []byte) (time.Time, bool) {
	hexNS, _, ok := strings.Cut(string(rest), "/")
	if !ok {
		return time.Time{}, false
	}
	ns, err := strconv.ParseUint(hexNS, 16, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, int64(ns)), true
}

func (e *searchExec) searchable(container string) bool {
	_, ok := e.req.Application.grant("token:search", container)
	return ok
}

// match evaluates the query on a token.
func (e *searchExec) match(q *searchExpr, rec *tokenRecord) bool {
	switch q.op {
	case searchAndOp:
		for _, k := range q.kids {
			if !e.match(k, rec) {
				return false
			}
		}
		return true
	case searchOrOp:
		for _, k := range q.kids {
			if e.match(k, rec) {
				return true
			}
		}
		return false
	case searchNotOp:
		return !e.match(q.kids[0], rec)
	}
	t := q.term
	switch t.field {
	case fieldID:
		return rec.ID == t.value
	case fieldType:
		return rec.Type == t.value
	case fieldFingerprint:
		return rec.Fingerprint != "" && rec.Fingerprint == t.value
	case fieldContainer:
		return containerMatches(t, rec.container())
	case fieldMetadata:
		got, ok := rec.Metadata[t.key]
		return ok && strings.EqualFold(got, t.value)
	case fieldData:
		_, found := slices.BinarySearch(rec.IndexHashes, t.hash)
		return found
	case fieldCreatedAt:
		return rec.CreatedAt != nil && t.rng.contains(rec.CreatedAt.Time)
	case fieldModifiedAt:
		return rec.ModifiedAt != nil && t.rng.contains(rec.ModifiedAt.Time)
	case fieldCreatedBy:
		return rec.CreatedBy == t.value
	case fieldModifiedBy:
		return rec.ModifiedBy == t.value
	case fieldCardBIN, fieldCardLast4, fieldCardBrand:
		return cardDetailMatches(t, rec)
	}
	return false
}

// cardDetailMatches evaluates a card.bin, card.last4 or card.brand term
// on a token's card details (derived now for a record written before
// they were stored): the BIN and last four exactly, the brand in any
// case.
func cardDetailMatches(t *searchTerm, rec *tokenRecord) bool {
	card := rec.Card
	if card == nil && rec.Bank == nil {
		card, _ = deriveDetails(rec.Type, rec.Data)
	}
	if card == nil {
		return false
	}
	switch t.field {
	case fieldCardBIN:
		return card.BIN == t.value
	case fieldCardLast4:
		return card.Last4 == t.value
	}
	return card.Brand != "" && card.Brand == normalizeBrand(t.value)
}

func containerMatches(t *searchTerm, container string) bool {
	if t.prefix {
		return strings.HasPrefix(container, t.value)
	}
	return container == t.value
}

// orderEntry is what a list order entry tells about a token without
// opening it.
type orderEntry struct {
	id         string
	container  string
	tokenType  string // "" when the entry predates store format 2
	created    time.Time
	hasCreated bool
}

// tri is a three-valued truth: a term the order entry cannot decide is
// unknown.
type tri uint8

const (
	triFalse tri = iota
	triTrue
	triUnknown
)

// partial evaluates the query on an order entry, in Kleene's logic.
func (e *searchExec) partial(q *searchExpr, o *orderEntry) tri {
	switch q.op {
	case searchAndOp:
		out := triTrue
		for _, k := range q.kids {
			switch e.partial(k, o) {
			case triFalse:
				return triFalse
			case triUnknown:
				out = triUnknown
			}
		}
		return out
	case searchOrOp:
		out := triFalse
		for _, k := range q.kids {
			switch e.partial(k, o) {
			case triTrue:
				return triTrue
			case triUnknown:
				out = triUnknown
			}
		}
		return out
	case searchNotOp:
		switch e.partial(q.kids[0], o) {
		case triTrue:
			return triFalse
		case triFalse:
			return triTrue
		}
		return triUnknown
	}
	t := q.term
	switch t.field {
	case fieldID:
		return triOf(o.id == t.value)
	case fieldContainer:
		return triOf(containerMatches(t, o.container))
	case fieldType:
		if o.tokenType != "" {
			return triOf(o.tokenType == t.value)
		}
	case fieldCreatedAt:
		if o.hasCreated {
			return triOf(t.rng.contains(o.created))
		}
	}
	return triUnknown
}

func triOf(b bool) tri {
	if b {
		return triTrue
	}
	return triFalse
}

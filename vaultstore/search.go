package vaultstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/query"
)

// The token search: the HTTP-independent entry point of
// POST /tokens/search. The language (parsing, evaluation, which queries
// indexes answer) is package query; this file gives it the vault's rules
// (searchDomain), a token's attributes (searchedToken) and the indexes,
// and keeps permissions, expiry, paging and the audit record.

// SearchTokens returns one page of the tokens matching a query (see
// package query for the language), oldest first, shaped with the
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
func (s *Store) SearchTokens(ctx context.Context, req TokenRequest, queryText string, offset, limit int) ([]*Token, int, error) {
	if !req.Application.Can("token:search") {
		return nil, 0, &PermissionError{Permission: "token:search"}
	}
	q, err := parseSearchQuery(queryText)
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
		ids, indexed, err := q.Candidates(e.lookup)
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
func (e *searchExec) plan(q *query.Expr) {
	q.SetHashes(func(v string) string { return e.tk.searchHashOf(strings.ToLower(v)) })
}

// lookup answers an indexed term from its index, with sorted ids.
func (e *searchExec) lookup(t *query.Term) ([]string, error) {
	tid := e.req.Tenant.ID
	var prefix []byte
	switch t.Field {
	case query.FieldID:
		if !validLookupID(t.Value) {
			return nil, nil
		}
		return []string{t.Value}, nil
	case query.FieldFingerprint:
		if !isHashText(t.Value) {
			return nil, nil // no fingerprint is written so
		}
		prefix = fingerprintIndexPrefix(tid, t.Value)
	case query.FieldData:
		prefix = searchIndexPrefix(tid, t.Hash)
	default:
		return nil, errors.New("search: looking up a term the indexes do not hold") // not reached: Candidates looks up indexable terms only
	}
	var ids []string
	err := e.r.Scan(prefix, nil, func(key, _ []byte) error {
		ids = append(ids, lastSegment(key))
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return ids, nil
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

// searchHit is a match kept by its place in creation order.
type searchHit struct {
	created int64
	id      string
}

// fromCandidates loads the candidates an index found, keeps those the
// caller may search that match the whole query, and returns the page.
func (e *searchExec) fromCandidates(ctx context.Context, q *query.Expr, ids []string, offset, limit int) ([]*tokenRecord, int, error) {
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
		if !e.searchable(rec.container()) || !q.Match(searchedToken{rec}) {
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
func (e *searchExec) scan(ctx context.Context, q *query.Expr, offset, limit int) ([]*tokenRecord, int, error) {
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
		entry := query.Entry{ID: lastSegment(key), Container: o.container, Type: o.tokenType}
		if created, ok := orderCreated(key[len(prefix):]); ok {
			entry.Created, entry.HasCreated = created, true
		}
		m := q.Partial(&entry)
		if m == query.False {
			return nil
		}
		if m == query.True && (total < offset || len(page) >= limit) {
			total++ // counted without opening the record
			return nil
		}
		rec, err := e.s.loadToken(e.r, e.tk, e.req.Tenant.ID, entry.ID)
		if errors.Is(err, ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		if m == query.Unknown && !q.Match(searchedToken{rec}) {
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

// parseSearchQuery parses a query with the vault's rules, or returns a
// *ValidationError on "query" whose message is the parser's
// ("position N: ...", never quoting the query).
func parseSearchQuery(text string) (*query.Expr, error) {
	q, err := query.Parse(text, searchDomain{})
	if err != nil {
		return nil, invalid("query", err.Error())
	}
	return q, nil
}

// searchDomain gives the query language the vault's rules.
type searchDomain struct{}

var _ query.Domain = searchDomain{}

// IsTokenType reports whether name is a token type.
func (searchDomain) IsTokenType(name string) bool {
	_, ok := LookupTokenType(name)
	return ok
}

// NormalizeContainer is the package's NormalizeContainer.
func (searchDomain) NormalizeContainer(c string) (string, bool) { return NormalizeContainer(c) }

// ParseDateTime reads the forms expires_at takes.
func (searchDomain) ParseDateTime(s string) (time.Time, bool, query.DateProblem) {
	t, dateOnly, problem := parseDateTime(s)
	switch problem {
	case dateTimeBadForm:
		return time.Time{}, false, query.DateBadForm
	case dateTimeBadOffset:
		return time.Time{}, false, query.DateBadOffset
	}
	return t, dateOnly, query.DateOK
}

// NormalizeBrand is the form card details store a brand in.
func (searchDomain) NormalizeBrand(b string) string { return normalizeBrand(b) }

// searchedToken is a token record as a query sees it. One pointer wide,
// it goes into the query.Token interface without an allocation.
type searchedToken struct{ rec *tokenRecord }

var _ query.Token = searchedToken{}

func (t searchedToken) ID() string          { return t.rec.ID }
func (t searchedToken) Type() string        { return t.rec.Type }
func (t searchedToken) Fingerprint() string { return t.rec.Fingerprint }
func (t searchedToken) Container() string   { return t.rec.container() }
func (t searchedToken) CreatedBy() string   { return t.rec.CreatedBy }
func (t searchedToken) ModifiedBy() string  { return t.rec.ModifiedBy }

func (t searchedToken) Metadata(key string) (string, bool) {
	v, ok := t.rec.Metadata[key]
	return v, ok
}

// HasSearchHash looks the hash up in the record's sorted index hashes.
func (t searchedToken) HasSearchHash(hash string) bool {
	_, found := slices.BinarySearch(t.rec.IndexHashes, hash)
	return found
}

func (t searchedToken) CreatedAt() (time.Time, bool) {
	if t.rec.CreatedAt == nil {
		return time.Time{}, false
	}
	return t.rec.CreatedAt.Time, true
}

func (t searchedToken) ModifiedAt() (time.Time, bool) {
	if t.rec.ModifiedAt == nil {
		return time.Time{}, false
	}
	return t.rec.ModifiedAt.Time, true
}

// Card gives the token's card details, derived now for a record written
// before they were stored.
func (t searchedToken) Card() (bin, last4, brand string, ok bool) {
	card := t.rec.Card
	if card == nil && t.rec.Bank == nil {
		card, _ = deriveDetails(t.rec.Type, t.rec.Data)
	}
	if card == nil {
		return "", "", "", false
	}
	return card.BIN, card.Last4, card.Brand, true
}

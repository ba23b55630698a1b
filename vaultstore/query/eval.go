package query

import (
	"iter"
	"slices"
	"strings"
	"time"
)

// Token is what a query is matched on: one token's searchable
// attributes, given by the vault.
type Token interface {
	// ID is the token's id.
	ID() string
	// Type is the token's type name.
	Type() string
	// Fingerprint is the token's fingerprint, "" when it has none.
	Fingerprint() string
	// Container is the token's container.
	Container() string
	// Metadata returns the value of a metadata key.
	Metadata(key string) (string, bool)
	// HasSearchHash reports whether the token's data has a search index
	// entry with this keyed hash.
	HasSearchHash(hash string) bool
	// CreatedAt and ModifiedAt are the token's times, when it has them.
	CreatedAt() (time.Time, bool)
	// ModifiedAt is the token's last modification, when it has one.
	ModifiedAt() (time.Time, bool)
	// CreatedBy is the application that created the token.
	CreatedBy() string
	// ModifiedBy is the application that last modified the token.
	ModifiedBy() string
	// Card returns a card token's details (brand as NormalizeBrand
	// gives it); ok is false for a token without them.
	Card() (bin, last4, brand string, ok bool)
}

// Terms yields the query's terms, left to right.
func (e *Expr) Terms() iter.Seq[*Term] {
	return func(yield func(*Term) bool) { e.terms(yield) }
}

func (e *Expr) terms(yield func(*Term) bool) bool {
	if e.Op == TermOp {
		return yield(e.Term)
	}
	for _, k := range e.Kids {
		if !k.terms(yield) {
			return false
		}
	}
	return true
}

// SetHashes sets each data term's Hash to hash(its value), as the vault
// computes a search index entry's, before evaluating.
func (e *Expr) SetHashes(hash func(value string) string) {
	for t := range e.Terms() {
		if t.Field == FieldData {
			t.Hash = hash(t.Value)
		}
	}
}

// Match evaluates the query on a token.
func (e *Expr) Match(tok Token) bool {
	switch e.Op {
	case AndOp:
		for _, k := range e.Kids {
			if !k.Match(tok) {
				return false
			}
		}
		return true
	case OrOp:
		for _, k := range e.Kids {
			if k.Match(tok) {
				return true
			}
		}
		return false
	case NotOp:
		return !e.Kids[0].Match(tok)
	}
	return e.Term.match(tok)
}

// match evaluates one term on a token: the BIN and last four exactly,
// metadata values and the card brand in any case.
func (t *Term) match(tok Token) bool {
	switch t.Field {
	case FieldID:
		return tok.ID() == t.Value
	case FieldType:
		return tok.Type() == t.Value
	case FieldFingerprint:
		fp := tok.Fingerprint()
		return fp != "" && fp == t.Value
	case FieldContainer:
		return t.containerMatches(tok.Container())
	case FieldMetadata:
		got, ok := tok.Metadata(t.Key)
		return ok && strings.EqualFold(got, t.Value)
	case FieldData:
		return tok.HasSearchHash(t.Hash)
	case FieldCreatedAt:
		at, ok := tok.CreatedAt()
		return ok && t.Range.Contains(at)
	case FieldModifiedAt:
		at, ok := tok.ModifiedAt()
		return ok && t.Range.Contains(at)
	case FieldCreatedBy:
		return tok.CreatedBy() == t.Value
	case FieldModifiedBy:
		return tok.ModifiedBy() == t.Value
	case FieldCardBIN, FieldCardLast4, FieldCardBrand:
		bin, last4, brand, ok := tok.Card()
		switch {
		case !ok:
			return false
		case t.Field == FieldCardBIN:
			return bin == t.Value
		case t.Field == FieldCardLast4:
			return last4 == t.Value
		}
		return brand != "" && brand == t.brand
	}
	return false
}

func (t *Term) containerMatches(container string) bool {
	if t.Prefix {
		return strings.HasPrefix(container, t.Value)
	}
	return container == t.Value
}

// Entry is what an index entry tells about a token without opening it.
type Entry struct {
	// ID is the token's id.
	ID string
	// Container is the token's container.
	Container string
	// Type is the token's type, "" when the entry does not say.
	Type string
	// Created is the token's creation time, when HasCreated.
	Created time.Time
	// HasCreated says whether the entry gives the creation time.
	HasCreated bool
}

// Tri is a three-valued truth: a term an Entry cannot decide is Unknown.
type Tri uint8

// The three truths.
const (
	False Tri = iota
	True
	Unknown
)

// Partial evaluates the query on an index entry, in Kleene's logic:
// True and False are certain, Unknown needs the token itself.
func (e *Expr) Partial(o *Entry) Tri {
	switch e.Op {
	case AndOp:
		out := True
		for _, k := range e.Kids {
			switch k.Partial(o) {
			case False:
				return False
			case Unknown:
				out = Unknown
			}
		}
		return out
	case OrOp:
		out := False
		for _, k := range e.Kids {
			switch k.Partial(o) {
			case True:
				return True
			case Unknown:
				out = Unknown
			}
		}
		return out
	case NotOp:
		switch e.Kids[0].Partial(o) {
		case True:
			return False
		case False:
			return True
		}
		return Unknown
	}
	t := e.Term
	switch t.Field {
	case FieldID:
		return triOf(o.ID == t.Value)
	case FieldContainer:
		return triOf(t.containerMatches(o.Container))
	case FieldType:
		if o.Type != "" {
			return triOf(o.Type == t.Value)
		}
	case FieldCreatedAt:
		if o.HasCreated {
			return triOf(t.Range.Contains(o.Created))
		}
	}
	return Unknown
}

func triOf(b bool) Tri {
	if b {
		return True
	}
	return False
}

// Indexable reports whether index lookups alone find every token that
// may match the query: it is a data, fingerprint or id term, an AND
// with such a kid, or an OR of such kids. A NOT never is.
func (e *Expr) Indexable() bool {
	switch e.Op {
	case TermOp:
		switch e.Term.Field {
		case FieldID, FieldFingerprint, FieldData:
			return true
		}
	case AndOp:
		return slices.ContainsFunc(e.Kids, (*Expr).Indexable)
	case OrOp:
		return !slices.ContainsFunc(e.Kids, func(k *Expr) bool { return !k.Indexable() })
	}
	return false
}

// Candidates returns the ids the index lookups of an indexable query
// find, sorted and without duplicates, or indexed false when the query
// needs a scan. lookup answers one id, fingerprint or data term with
// sorted ids. An AND looks up its indexable kids only; its other kids
// are for Match on the loaded tokens.
func (e *Expr) Candidates(lookup func(*Term) ([]string, error)) (ids []string, indexed bool, err error) {
	if !e.Indexable() {
		return nil, false, nil
	}
	switch e.Op {
	case TermOp:
		ids, err := lookup(e.Term)
		return ids, err == nil, err
	case AndOp:
		var (
			set   []string
			found bool
		)
		for _, k := range e.Kids {
			if !k.Indexable() {
				continue
			}
			if found && len(set) == 0 {
				break // nothing left to intersect
			}
			ids, _, err := k.Candidates(lookup)
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
	for _, k := range e.Kids {
		ids, _, err := k.Candidates(lookup)
		if err != nil {
			return nil, false, err
		}
		set = append(set, ids...)
	}
	slices.Sort(set)
	return slices.Compact(set), true, nil
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

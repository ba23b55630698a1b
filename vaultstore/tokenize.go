package vaultstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/tokenvault/tokenvault/vaultstore/strictjson"
)

// tokenizeItem is one token a tokenize request creates, and where its
// answer goes.
type tokenizeItem struct {
	path  string // field path for errors, e.g. "card." or "[2]."
	input TokenInput
	plain bool // a primitive: answer with the id alone
	set   func(any)
}

// Tokenize turns any JSON value into tokens: primitives become generic
// tokens (answered by their id), objects with type and data are token
// creates (answered by the token, data left out), other objects and
// arrays are walked keeping names and order. Every token is created in one
// transaction, or none; the count is checked against the tenant's Tokenize
// Limit before anything is written.
func (s *Store) Tokenize(ctx context.Context, req TokenRequest, body any) (any, error) {
	var items []*tokenizeItem
	root := []any{nil}
	if err := collectTokenize(body, "", func(v any) { root[0] = v }, &items, 0); err != nil {
		return nil, err
	}
	if limit := req.Tenant.Quotas.TokenizeLimit; limit > 0 && len(items) > limit {
		return nil, invalid("body", fmt.Sprintf("the request would create %d tokens; the tenant's tokenize limit is %d", len(items), limit))
	}
	created := map[string]int{} // by type, for metrics
	err := s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, req.Tenant.ID)
		if err != nil {
			return err
		}
		ids := make([]string, 0, len(items))
		clear(created)
		for _, it := range items {
			rec, dedupe, err := s.buildToken(t, tk, req.Application.ID, it.input)
			if err != nil {
				return prefixed(it.path, err)
			}
			transform, err := req.Application.Authorize("token:create", rec.container())
			if err != nil {
				return err
			}
			got, deduplicated, err := s.insertToken(w, tk, rec, dedupe, it.input.ID == "")
			if err != nil {
				return prefixed(it.path, err)
			}
			ids = append(ids, got.ID)
			if !deduplicated {
				created[got.Type]++
			}
			if it.plain {
				it.set(got.ID)
				continue
			}
			tok, err := s.shapeCreated(req.Application, got, transform, deduplicated)
			if err != nil {
				return err
			}
			// a tokenize answer leaves the data out and shows the evaluated
			// mask object instead (for a card: the number's last four)
			tok.Mask, tok.Data = tok.Data, nil
			it.set(tok)
		}
		audit := byApp(req.Application, "token", "", "tokenize", fmt.Sprintf("%d tokens created or returned", len(ids)))
		audit.TokenIDs = ids
		return s.writeAudit(w, tk, t, audit)
	})
	if err != nil {
		return nil, err
	}
	for tokenType, n := range created {
		s.emit(EventTokenCreated, tokenType, n)
	}
	return root[0], nil
}

// collectTokenize walks a tokenize body, building the answer's skeleton
// and the list of tokens to create.
func collectTokenize(v any, path string, set func(any), items *[]*tokenizeItem, depth int) error {
	if depth > strictjson.DefaultMaxDepth {
		return invalid("body", "nested too deeply")
	}
	switch x := v.(type) {
	case nil:
		set(nil)
	case map[string]any:
		if _, hasType := x["type"]; hasType {
			if _, hasData := x["data"]; hasData {
				in, err := tokenInputOf(x, path)
				if err != nil {
					return err
				}
				*items = append(*items, &tokenizeItem{path: path, input: in, set: set})
				return nil
			}
		}
		out := make(map[string]any, len(x))
		set(out)
		for k, sub := range x {
			k := k
			if err := collectTokenize(sub, path+safeMember(k)+".", func(r any) { out[k] = r }, items, depth+1); err != nil {
				return err
			}
		}
	case []any:
		out := make([]any, len(x))
		set(out)
		for i, sub := range x {
			i := i
			if err := collectTokenize(sub, path+"["+strconv.Itoa(i)+"].", func(r any) { out[i] = r }, items, depth+1); err != nil {
				return err
			}
		}
	default:
		*items = append(*items, &tokenizeItem{path: path, input: TokenInput{Type: TokenTypeToken, Data: x}, plain: true, set: set})
	}
	return nil
}

// tokenInputOf reads a token-create object found inside a tokenize body.
func tokenInputOf(obj map[string]any, path string) (TokenInput, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return TokenInput{}, err
	}
	var in TokenInput
	if err := strictjson.Decode(raw, &in, strictjson.DefaultLimits); err != nil {
		var je *strictjson.Error
		if errors.As(err, &je) {
			return TokenInput{}, invalid(path+je.Field, je.Message)
		}
		return TokenInput{}, err
	}
	return in, nil
}

// safeMember names a body member in error paths only when it cannot be
// data: a short identifier with few digits. Anything else (a member name
// may be a card number) is shown as "*".
func safeMember(name string) string {
	if len(name) == 0 || len(name) > 64 {
		return "*"
	}
	digits := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '-':
		default:
			return "*"
		}
	}
	if digits > 4 {
		return "*"
	}
	return name
}

package vaultstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
)

// immutableTokenFields cannot appear in a token patch.
var immutableTokenFields = []string{"id", "type", "tenant_id", "fingerprint", "created_by", "created_at", "modified_by", "modified_at"}

// mergePatch applies an RFC 7386 JSON merge patch: objects merge member
// by member, null removes a member, anything else replaces the target.
// Depth is bounded by the request decoder's nesting limit.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	out := map[string]any{}
	if t, ok := target.(map[string]any); ok {
		for k, v := range t {
			out[k] = v
		}
	}
	for k, v := range p {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = mergePatch(out[k], v)
		}
	}
	return out
}

// UpdateToken applies a merge patch to a token: data, mask and metadata
// are merged, containers, search_indexes, fingerprint_expression,
// deduplicate_token and expires_at replaced. The result is validated in
// full and its fingerprint and search indexes recomputed in the same
// transaction. Moving a token needs token:update on both containers.
func (s *Store) UpdateToken(ctx context.Context, req TokenRequest, id string, patch map[string]any) (*Token, error) {
	v := &ValidationError{}
	refuseImmutable(patch, immutableTokenFields, v)
	if d, ok := patch["data"]; ok && d == nil {
		v.Add("data", "data cannot be removed; delete the token instead")
	}
	if err := v.OrNil(); err != nil {
		return nil, err
	}
	var out *Token
	err := s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, req.Tenant.ID)
		if err != nil {
			return err
		}
		old, err := s.loadToken(w, tk, req.Tenant.ID, id)
		if err != nil {
			return err
		}
		if _, err := req.Application.AuthorizeToken("token:update", old.ID, old.container()); err != nil {
			return err
		}
		maskChanged := changesMask(old, patch)
		if maskChanged {
			if err := mayReadRevealed(req.Application, old.container()); err != nil {
				return err
			}
		}
		next, dedupe, err := s.patched(t, old, patch, req.Application.ID)
		if err != nil {
			return err
		}
		transform, err := req.Application.AuthorizeToken("token:update", next.ID, next.container())
		if err != nil {
			return err
		}
		if maskChanged && next.container() != old.container() {
			if err := mayReadRevealed(req.Application, next.container()); err != nil {
				return err
			}
		}
		if err := s.derive(t, tk, next, dedupe); err != nil {
			return err
		}
		if dedupe && next.Fingerprint != "" && next.Fingerprint != old.Fingerprint {
			other, err := s.liveHolder(w, tk, t.ID, next.Fingerprint, id)
			if err != nil {
				return err
			}
			if other != nil {
				return fmt.Errorf("the update would duplicate another token: %w", ErrConflict)
			}
		}
		if err := s.removeToken(w, old); err != nil {
			return err
		}
		if err := s.writeToken(w, tk, next); err != nil {
			return err
		}
		if next.container() != old.container() { // the count moves with the token
			if err := errors.Join(s.countToken(w, old, -1, nil), s.countToken(w, next, 1, nil)); err != nil {
				return err
			}
		}
		if err := s.writeAudit(w, tk, t, byApp(req.Application, "token", id, "update", "token updated")); err != nil {
			return err
		}
		out, err = s.shapeUpdated(req.Application, next, transform)
		return err
	})
	return out, err
}

// changesMask reports whether a patch gives the token another mask.
func changesMask(old *tokenRecord, patch map[string]any) bool {
	m, ok := patch["mask"]
	if !ok {
		return false
	}
	typ, _ := LookupTokenType(old.Type)
	return !reflect.DeepEqual(maskAfter(old.Mask, typ, m), old.Mask)
}

// maskAfter returns the mask a token has after the mask member m of a
// patch: null restores the type's default, anything else is merged.
func maskAfter(old any, typ *TokenType, m any) any {
	if m == nil {
		return typ.DefaultMask
	}
	return mergePatch(old, m)
}

// mayReadRevealed returns a *PermissionError unless the application may
// read tokens of the container revealed. Changing a token's mask takes
// that right: a mask decides what every masked reader sees.
func mayReadRevealed(app *Application, container string) error {
	if transform, ok := app.grant("token:read", container); !ok || transform != TransformReveal {
		return &PermissionError{Permission: "token:read", Transform: TransformReveal, Container: container, Action: "changing a token's mask"}
	}
	return nil
}

// shapeUpdated shapes the answer to an update: data masked at most, and
// only to a caller who may also read the token; otherwise the answer
// leaves out data, metadata and every expression.
func (s *Store) shapeUpdated(app *Application, rec *tokenRecord, updateTransform string) (*Token, error) {
	readTransform, ok := app.grant("token:read", rec.container())
	if !ok {
		tok := rec.Token
		tok.Data, tok.Metadata, tok.Mask, tok.SearchIndexes, tok.FingerprintExpression = nil, nil, nil, nil, ""
		tok.Card, tok.Bank = nil, nil // details are for readers
		return &tok, nil
	}
	transform := TransformMask
	if readTransform == TransformRedact || updateTransform == TransformRedact {
		transform = TransformRedact
	}
	return s.shape(rec, transform)
}

// patched returns the token that old becomes under patch, validated.
func (s *Store) patched(t *Tenant, old *tokenRecord, patch map[string]any, actorID string) (*tokenRecord, bool, error) {
	next := *old
	next.Token.Extras = nil
	// work on the full data, CVC included while retained, so fingerprints
	// and search indexes come out as for a fresh token; derive seals the
	// CVC again without extending its retention
	next.Data = s.fullData(old)
	v := &ValidationError{}
	typ, _ := LookupTokenType(old.Type)
	if d, ok := patch["data"]; ok {
		next.Data = mergePatch(next.Data, d)
		typ.Validate(next.Data, v)
	}
	if m, ok := patch["mask"]; ok {
		next.Mask = maskAfter(old.Mask, typ, m) // removing the mask restores the type's
		checkExpressions("mask", next.Mask, v)
	}
	if m, ok := patch["metadata"]; ok {
		if _, isObject := m.(map[string]any); m != nil && !isObject {
			v.Add("metadata", "must be an object of strings")
		}
		merged, _ := mergePatch(anyMap(old.Metadata), m).(map[string]any)
		next.Metadata = nil
		for k, val := range merged {
			str, ok := val.(string)
			if !ok {
				v.Add("metadata."+k, "must be a string")
				continue
			}
			if next.Metadata == nil {
				next.Metadata = map[string]string{}
			}
			next.Metadata[k] = str
		}
		ValidateMetadata(next.Metadata, v)
	}
	if c, ok := patch["containers"]; ok {
		list, err := stringList("containers", c)
		if err != nil {
			mergeValidation(v, err)
		} else if next.Containers = NormalizeContainers(list, v); next.Containers == nil {
			next.Containers = []string{typ.DefaultContainer}
		}
	}
	if si, ok := patch["search_indexes"]; ok {
		list, err := stringList("search_indexes", si)
		mergeValidation(v, err)
		next.SearchIndexes = list
	}
	if fe, ok := patch["fingerprint_expression"]; ok {
		str, isString := fe.(string)
		if fe != nil && !isString {
			v.Add("fingerprint_expression", "must be a string")
		}
		next.FingerprintExpression = str
	}
	if dd, ok := patch["deduplicate_token"]; ok {
		b, isBool := dd.(bool)
		switch {
		case dd == nil:
			next.DeduplicateToken = nil
		case !isBool:
			v.Add("deduplicate_token", "must be a boolean")
		default:
			next.DeduplicateToken = &b
		}
	}
	if ea, ok := patch["expires_at"]; ok {
		str, isString := ea.(string)
		switch {
		case ea != nil && !isString:
			v.Add("expires_at", "must be a string")
		case ea == nil || str == "":
			next.ExpiresAt = nil
		default:
			at, err := ParseExpiresAt(str, s.now())
			mergeValidation(v, err)
			next.ExpiresAt = &Timestamp{at}
		}
	}
	if err := v.OrNil(); err != nil {
		return nil, false, err
	}
	_, dataPatched := patch["data"]
	_, maskPatched := patch["mask"]
	if dataPatched || maskPatched {
		// a mask is checked over the data it will be read with: new data
		// can make an old mask show what it did not
		if err := checkMask(next.Type, next.Mask, withoutCVC(next.Type, next.Data)); err != nil {
			return nil, false, err
		}
	}
	next.ModifiedBy, next.ModifiedAt = actorID, stamp(s.now())
	dedupe := t.Settings["deduplicate_tokens"] == "true"
	if next.DeduplicateToken != nil {
		dedupe = *next.DeduplicateToken
	}
	return &next, dedupe, nil
}

func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// stringList reads a JSON array of strings (null is an empty list).
func stringList(field string, v any) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, invalid(field, "must be an array of strings")
	}
	out := make([]string, 0, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, invalid(fmt.Sprintf("%s[%d]", field, i), "must be a string")
		}
		out = append(out, s)
	}
	return slices.Clip(out), nil
}

package vaultstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sort"
)

// Helpers shared by the tenant's sealed resources (applications, proxies,
// reactors, client keys, documents): read one, list them oldest first,
// update or delete one with its audit record, and merge a patch into the
// input that would create one.

// createdRecord is a sealed resource with a creation time.
type createdRecord interface {
	created() *Timestamp
}

func (a *Application) created() *Timestamp { return a.CreatedAt }
func (p *Proxy) created() *Timestamp       { return p.CreatedAt }
func (r *Reactor) created() *Timestamp     { return r.CreatedAt }

// getRecord reads one sealed record of kind under key; an id that is not
// a UUID names nothing.
func getRecord[T any](ctx context.Context, s *Store, kind, tenantID, id string, key []byte) (*T, error) {
	if !isID(id) {
		return nil, ErrNotFound
	}
	var v T
	err := s.kv.View(ctx, func(r Reader) error {
		tk, err := s.tenantKeysFor(r, tenantID)
		if err != nil {
			return err
		}
		return s.getSealed(r, tk, kind, tenantID, id, key, &v)
	})
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// listRecords reads every sealed record of kind under prefix, oldest
// first.
func listRecords[T any, P interface {
	*T
	createdRecord
}](ctx context.Context, s *Store, kind, tenantID string, prefix []byte) ([]*T, error) {
	var out []*T
	err := s.kv.View(ctx, func(r Reader) error {
		out = out[:0]
		tk, err := s.tenantKeysFor(r, tenantID)
		if err != nil {
			return err
		}
		return r.Scan(prefix, nil, func(key, raw []byte) error {
			v := new(T)
			if err := tk.openRecord(kind, tenantID, string(key[len(prefix):]), raw, v); err != nil {
				return err
			}
			out = append(out, v)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool {
		return P(out[i]).created().Before(P(out[j]).created().Time)
	})
	return out, nil
}

// updateRecord reads a sealed record of the tenant, lets change modify
// it (validating as it goes; an error changes nothing), writes it back and
// records the update, all in one transaction.
func updateRecord[T any](ctx context.Context, s *Store, kind, tenantID, id, actorID string, key []byte, change func(w Writer, tk *tenantKeys, rec *T) error) (*T, error) {
	if !isID(id) {
		return nil, ErrNotFound
	}
	var rec T
	err := s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		rec = *new(T)
		if err := s.getSealed(w, tk, kind, tenantID, id, key, &rec); err != nil {
			return err
		}
		if err := change(w, tk, &rec); err != nil {
			return err
		}
		if err := s.writeAudit(w, tk, t, byActor(actorID, kind, id, "update", kind+" updated")); err != nil {
			return err
		}
		return putSealed(w, tk, kind, tenantID, id, key, &rec)
	})
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// deleteRecord removes the tenant's record under key and records the
// deletion, in one transaction: an unknown id is ErrNotFound and changes
// nothing. removed, run first in the same transaction, removes what hangs
// off the record and returns the audit record of the deletion.
func deleteRecord(ctx context.Context, s *Store, tenantID, id string, key []byte, removed func(w Writer, tk *tenantKeys) (*AuditRecord, error)) error {
	if !isID(id) {
		return ErrNotFound
	}
	return s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		if _, err := w.Get(key); err != nil {
			return err
		}
		rec, err := removed(w, tk)
		if err != nil {
			return err
		}
		if err := s.writeAudit(w, tk, t, rec); err != nil {
			return err
		}
		return w.Delete(key)
	})
}

// deleted is the removed of deleteRecord for a record nothing hangs off.
func deleted(rec *AuditRecord) func(Writer, *tenantKeys) (*AuditRecord, error) {
	return func(Writer, *tenantKeys) (*AuditRecord, error) { return rec, nil }
}

// refuseImmutable names each member of a patch that may not change.
func refuseImmutable(patch map[string]any, fields []string, v *ValidationError) {
	for _, f := range fields {
		if _, ok := patch[f]; ok {
			v.Add(f, "cannot be changed")
		}
	}
}

// mergedInput applies an RFC 7386 merge patch to current (the input that
// would create the resource as it is) and decodes the result as a new
// input; a member of the wrong type is a ValidationError naming it.
func mergedInput[T any](current any, patch map[string]any) (*T, error) {
	value, err := toJSONValue(current)
	if err != nil {
		return nil, err
	}
	merged, err := json.Marshal(mergePatch(value, patch))
	if err != nil {
		return nil, err
	}
	var in T
	if err := json.NewDecoder(bytes.NewReader(merged)).Decode(&in); err != nil {
		return nil, patchTypeError(err)
	}
	return &in, nil
}

// toJSONValue converts v to its generic JSON form.
func toJSONValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return out, d.Decode(&out)
}

// patchTypeError names the member of a merged patch that has the wrong
// JSON type, without quoting the input.
func patchTypeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return invalid(te.Field, te.Field+" has the wrong type; expected "+jsonTypeName(te.Type.Kind().String()))
	}
	return invalid("body", "the patched resource is malformed")
}

// jsonTypeName turns a Go kind into the JSON type a caller should send.
func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "map", "struct", "ptr":
		return "an object"
	case "slice":
		return "an array"
	default:
		return "a number"
	}
}

package vaultstore

import (
	"context"
	"encoding/json"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Reactor is tenant code run on demand (POST /reactors/{id}/react) with a
// client acting as its application.
type Reactor struct {
	ID            string            `json:"id"`
	TenantID      string            `json:"tenant_id"`
	Name          string            `json:"name"`
	Code          string            `json:"code"`
	Application   *ApplicationRef   `json:"application,omitempty"`
	Configuration map[string]string `json:"configuration,omitempty"`
	CreatedBy     string            `json:"created_by,omitempty"`
	CreatedAt     *Timestamp        `json:"created_at,omitempty"`
	ModifiedBy    string            `json:"modified_by,omitempty"`
	ModifiedAt    *Timestamp        `json:"modified_at,omitempty"`
}

// ReactorInput is the body of POST and PUT /reactors, and what a PATCH
// produces after merging.
type ReactorInput struct {
	Name          string            `json:"name"`
	Code          string            `json:"code"`
	Application   *ApplicationRef   `json:"application,omitempty"`
	Configuration map[string]string `json:"configuration,omitempty"`
	// Formula is past its shutdown: a validation error naming code.
	Formula json.RawMessage `json:"formula,omitempty"`
}

// CodeCheck adds what the deployment refuses in tenant code (syntax,
// modules, patterns) to v under field.
type CodeCheck func(field, code string, v *ValidationError)

func (in *ReactorInput) validate(check CodeCheck) error {
	v := &ValidationError{}
	validateName(v, in.Name)
	if in.Formula != nil {
		v.Add("formula", "reactor formulas are no longer supported; give the reactor's code attribute instead")
	}
	switch {
	case in.Code == "":
		v.Add("code", "code is required")
	case utf8.RuneCountInString(in.Code) > MaxTransformCode:
		v.Add("code", "code must be at most 50000 characters")
	case check != nil:
		check("code", in.Code, v)
	}
	if in.Application != nil && !isID(in.Application.ID) {
		v.Add("application.id", "application.id must be the id of an application")
	}
	return v.OrNil()
}

func (r *Reactor) apply(in *ReactorInput) {
	r.Name, r.Code, r.Configuration = in.Name, in.Code, in.Configuration
	r.Application = nil
	if in.Application != nil {
		r.Application = &ApplicationRef{ID: in.Application.ID}
	}
}

func (r *Reactor) input() *ReactorInput {
	in := &ReactorInput{Name: r.Name, Code: r.Code, Configuration: r.Configuration}
	if r.Application != nil {
		in.Application = &ApplicationRef{ID: r.Application.ID}
	}
	return in
}

// CreateReactor creates a reactor.
func (s *Store) CreateReactor(ctx context.Context, tenantID, actorID string, in ReactorInput, check CodeCheck) (*Reactor, error) {
	if err := in.validate(check); err != nil {
		return nil, err
	}
	r := &Reactor{ID: uuid.NewString(), TenantID: tenantID, CreatedBy: actorID, CreatedAt: s.stampNow()}
	r.apply(&in)
	err := s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		if err := s.checkServiceApplication(w, tk, tenantID, in.Application); err != nil {
			return err
		}
		if err := s.writeAudit(w, tk, t, byActor(actorID, "reactor", r.ID, "create", "reactor created")); err != nil {
			return err
		}
		return putSealed(w, tk, "reactor", tenantID, r.ID, reactorKey(tenantID, r.ID), r)
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// GetReactor returns a reactor of the tenant.
func (s *Store) GetReactor(ctx context.Context, tenantID, id string) (*Reactor, error) {
	return getRecord[Reactor](ctx, s, "reactor", tenantID, id, reactorKey(tenantID, id))
}

// ListReactors returns the tenant's reactors, oldest first.
func (s *Store) ListReactors(ctx context.Context, tenantID string) ([]*Reactor, error) {
	return listRecords[Reactor](ctx, s, "reactor", tenantID, reactorPrefix(tenantID))
}

// UpdateReactor replaces a reactor's settings (PUT).
func (s *Store) UpdateReactor(ctx context.Context, tenantID, id, actorID string, in ReactorInput, check CodeCheck) (*Reactor, error) {
	return s.changeReactor(ctx, tenantID, id, actorID, func(*Reactor) (*ReactorInput, error) { return &in, nil }, check)
}

// immutableReactorFields cannot appear in a reactor patch.
var immutableReactorFields = []string{"id", "tenant_id", "created_by", "created_at", "modified_by", "modified_at"}

// PatchReactor applies an RFC 7386 merge patch to a reactor's settings,
// then validates the result as PUT would.
func (s *Store) PatchReactor(ctx context.Context, tenantID, id, actorID string, patch map[string]any, check CodeCheck) (*Reactor, error) {
	v := &ValidationError{}
	refuseImmutable(patch, immutableReactorFields, v)
	if err := v.OrNil(); err != nil {
		return nil, err
	}
	return s.changeReactor(ctx, tenantID, id, actorID, func(r *Reactor) (*ReactorInput, error) {
		return mergedInput[ReactorInput](r.input(), patch)
	}, check)
}

// changeReactor rewrites a reactor with the input that next derives from
// it.
func (s *Store) changeReactor(ctx context.Context, tenantID, id, actorID string, next func(*Reactor) (*ReactorInput, error), check CodeCheck) (*Reactor, error) {
	return updateRecord(ctx, s, "reactor", tenantID, id, actorID, reactorKey(tenantID, id), func(w Writer, tk *tenantKeys, r *Reactor) error {
		in, err := next(r)
		if err != nil {
			return err
		}
		if err := in.validate(check); err != nil {
			return err
		}
		if err := s.checkServiceApplication(w, tk, tenantID, in.Application); err != nil {
			return err
		}
		r.apply(in)
		r.ModifiedBy, r.ModifiedAt = actorID, s.stampNow()
		return nil
	})
}

// DeleteReactor removes a reactor.
func (s *Store) DeleteReactor(ctx context.Context, tenantID, id, actorID string) error {
	return deleteRecord(ctx, s, tenantID, id, reactorKey(tenantID, id), deleted(byActor(actorID, "reactor", id, "delete", "reactor deleted")))
}

// ApplicationID is the id of the application the reactor's code acts as,
// "" without one.
func (r *Reactor) ApplicationID() string {
	if r.Application == nil {
		return ""
	}
	return r.Application.ID
}

// ServiceApplication returns the application a proxy's or reactor's code
// acts as, if it has one that still exists.
func (s *Store) ServiceApplication(ctx context.Context, tenantID, appID string) (*Application, error) {
	if appID == "" {
		return nil, ErrNotFound
	}
	return s.GetApplication(ctx, tenantID, appID)
}

package vaultstore

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/google/uuid"
)

// Application is a caller of the API inside one tenant; its keys
// authenticate as it, and its permissions and access rules say what it
// may do.
type Application struct {
	ID          string       `json:"id"`
	TenantID    string       `json:"tenant_id"`
	Name        string       `json:"name"`
	Type        string       `json:"type"`
	Permissions []string     `json:"permissions"`
	Rules       []AccessRule `json:"rules,omitempty"`
	CreatedBy   string       `json:"created_by,omitempty"`
	CreatedAt   *Timestamp   `json:"created_at,omitempty"`
	ModifiedBy  string       `json:"modified_by,omitempty"`
	ModifiedAt  *Timestamp   `json:"modified_at,omitempty"`

	session *sessionGrant // set on a session key's stand-in (sessions.go)
}

// ApplicationInput is the body of POST and PUT /applications. Type cannot
// change on update.
type ApplicationInput struct {
	Name        string       `json:"name"`
	Type        string       `json:"type"`
	Permissions []string     `json:"permissions"`
	Rules       []AccessRule `json:"rules"`
	// CreateKey issues a first key with the application; default true.
	CreateKey *bool `json:"create_key"`
}

// validate checks the input for an application of appType and
// normalizes it.
func (in *ApplicationInput) validate(appType string) error {
	v := &ValidationError{}
	validateName(v, in.Name)
	if permissionsByType[appType] == nil {
		v.Add("type", "type must be private, public or management")
	}
	in.Rules = slices.Clone(in.Rules) // validateGrants normalizes; keep the caller's slices intact
	for i := range in.Rules {
		in.Rules[i].Permissions = slices.Clone(in.Rules[i].Permissions)
	}
	validateGrants(appType, in.Permissions, in.Rules, v)
	in.Permissions = normalizePermissions(in.Permissions)
	for i := range in.Rules {
		in.Rules[i].Permissions = normalizePermissions(in.Rules[i].Permissions)
	}
	return v.OrNil()
}

func normalizePermissions(p []string) []string {
	p = slices.Clone(p)
	sort.Strings(p)
	p = slices.Compact(p)
	if p == nil {
		p = []string{}
	}
	return p
}

// isID reports whether s is a canonical UUID, the form of every id the
// vault assigns; anything else cannot name a record.
func isID(s string) bool {
	if len(s) != 36 {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}

// CreateApplication creates an application and, unless in.CreateKey is
// false, its first key (returned only this once).
func (s *Store) CreateApplication(ctx context.Context, tenantID, actorID string, in ApplicationInput) (*Application, *IssuedKey, error) {
	if err := in.validate(in.Type); err != nil {
		return nil, nil, err
	}
	app := &Application{
		ID:          uuid.NewString(),
		TenantID:    tenantID,
		Name:        in.Name,
		Type:        in.Type,
		Permissions: in.Permissions,
		Rules:       in.Rules,
		CreatedBy:   actorID,
		CreatedAt:   s.stampNow(),
	}
	var issued *IssuedKey
	err := s.kv.Update(ctx, func(w Writer) error {
		issued = nil
		tk, t, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		if err := putSealed(w, tk, "application", tenantID, app.ID, applicationKey(tenantID, app.ID), app); err != nil {
			return err
		}
		if err := s.writeAudit(w, tk, t, byActor(actorID, "application", app.ID, "create", "application created")); err != nil {
			return err
		}
		if in.CreateKey != nil && !*in.CreateKey {
			return nil
		}
		key, rec, err := s.issueKey(w, tk, t, app.ID, actorID)
		if err != nil {
			return err
		}
		issued = &IssuedKey{ID: rec.ID, Key: key, CreatedBy: rec.CreatedBy, CreatedAt: rec.CreatedAt}
		return s.writeAudit(w, tk, t, byActor(actorID, "key", rec.ID, "create", "API key issued"))
	})
	if err != nil {
		return nil, nil, err
	}
	return app, issued, nil
}

// GetApplication returns an application of the tenant.
func (s *Store) GetApplication(ctx context.Context, tenantID, id string) (*Application, error) {
	return getRecord[Application](ctx, s, "application", tenantID, id, applicationKey(tenantID, id))
}

// ListApplications returns the tenant's applications, oldest first.
func (s *Store) ListApplications(ctx context.Context, tenantID string) ([]*Application, error) {
	return listRecords[Application](ctx, s, "application", tenantID, applicationPrefix(tenantID))
}

// UpdateApplication replaces an application's name, permissions and rules.
func (s *Store) UpdateApplication(ctx context.Context, tenantID, id, actorID string, in ApplicationInput) (*Application, error) {
	return updateRecord(ctx, s, "application", tenantID, id, actorID, applicationKey(tenantID, id), func(_ Writer, _ *tenantKeys, app *Application) error {
		if in.Type != "" && in.Type != app.Type {
			return invalid("type", "the type of an application cannot be changed")
		}
		if err := in.validate(app.Type); err != nil {
			return err
		}
		app.Name, app.Permissions, app.Rules = in.Name, in.Permissions, in.Rules
		app.ModifiedBy, app.ModifiedAt = actorID, s.stampNow()
		return nil
	})
}

// DeleteApplication removes an application and revokes all its keys.
func (s *Store) DeleteApplication(ctx context.Context, tenantID, id, actorID string) error {
	return deleteRecord(ctx, s, tenantID, id, applicationKey(tenantID, id), func(w Writer, tk *tenantKeys) (*AuditRecord, error) {
		keys, err := s.listKeyRecords(w, tk, tenantID, id)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if err := deleteKeyRecord(w, tenantID, k); err != nil {
				return nil, err
			}
		}
		return byActor(actorID, "application", id, "delete", fmt.Sprintf("application deleted with %d keys", len(keys))), nil
	})
}

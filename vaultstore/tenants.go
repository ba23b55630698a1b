package vaultstore

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"unicode/utf8"

	"github.com/google/uuid"
	"go.uber.org/zap"
)

// Tenant types.
const (
	TenantTest       = "test"
	TenantProduction = "production"
)

// TenantSettingNames are the settings a tenant has; each holds "true" or
// "false".
var TenantSettingNames = []string{"deduplicate_tokens", "disable_ephemeral_proxy", "fingerprint_tokens"}

// MaxNameLength bounds tenant, application and proxy names, in characters.
const MaxNameLength = 200

// Tenant is a logical group of applications and tokens, isolated from
// every other tenant.
type Tenant struct {
	ID         string            `json:"id"`
	Type       string            `json:"type"`
	Name       string            `json:"name"`
	Settings   map[string]string `json:"settings"`
	Quotas     Quotas            `json:"quotas"`
	CreatedAt  *Timestamp        `json:"created_at,omitempty"`
	ModifiedBy string            `json:"modified_by,omitempty"`
	ModifiedAt *Timestamp        `json:"modified_at,omitempty"`
}

// clone returns a copy of t that can be modified without touching t.
func (t *Tenant) clone() *Tenant {
	c := *t
	c.Settings = maps.Clone(t.Settings)
	return &c
}

// Quotas are a tenant's adjustable limits, set to the interface's
// defaults when the tenant is created.
type Quotas struct {
	TokenizeLimit               int    `json:"tokenize_limit"`
	DetokenizeLimit             int    `json:"detokenize_limit"`
	CVCRetentionSeconds         int64  `json:"cvc_retention_seconds"`
	LogRetentionSeconds         int64  `json:"log_retention_seconds"`
	IncludedMonthlyActiveTokens int64  `json:"included_monthly_active_tokens"`
	RateLimit                   string `json:"rate_limit"`
}

// Rate limit profiles a tenant's quota may name.
const (
	// RateLimitDefault applies the interface's rate limits to the tenant.
	RateLimitDefault = "default"
	// RateLimitExempt exempts the tenant's authenticated calls from the
	// per-tenant and per-application limits (the global per-IP limit
	// still applies), for trusted internal callers.
	RateLimitExempt = "exempt"
)

// QuotasUpdate changes the quotas it names.
type QuotasUpdate struct {
	TokenizeLimit               *int    `json:"tokenize_limit,omitempty"`
	DetokenizeLimit             *int    `json:"detokenize_limit,omitempty"`
	CVCRetentionSeconds         *int64  `json:"cvc_retention_seconds,omitempty"`
	LogRetentionSeconds         *int64  `json:"log_retention_seconds,omitempty"`
	IncludedMonthlyActiveTokens *int64  `json:"included_monthly_active_tokens,omitempty"`
	RateLimit                   *string `json:"rate_limit,omitempty"`
}

// Quota bounds.
const (
	maxTokenizeLimit = 100
	maxRetention     = 366 * 24 * 3600 // a year and a day
)

func (u *QuotasUpdate) validate() error {
	v := &ValidationError{}
	intIn := func(field string, p *int, lo, hi int) {
		if p != nil && (*p < lo || *p > hi) {
			v.Add(field, fmt.Sprintf("must be from %d to %d", lo, hi))
		}
	}
	int64In := func(field string, p *int64, lo, hi int64) {
		if p != nil && (*p < lo || *p > hi) {
			v.Add(field, fmt.Sprintf("must be from %d to %d", lo, hi))
		}
	}
	intIn("tokenize_limit", u.TokenizeLimit, 1, maxTokenizeLimit)
	intIn("detokenize_limit", u.DetokenizeLimit, 1, maxTokenizeLimit)
	int64In("cvc_retention_seconds", u.CVCRetentionSeconds, 60, maxRetention)
	int64In("log_retention_seconds", u.LogRetentionSeconds, 3600, maxRetention)
	int64In("included_monthly_active_tokens", u.IncludedMonthlyActiveTokens, 0, 1<<40)
	if u.RateLimit != nil && *u.RateLimit != RateLimitDefault && *u.RateLimit != RateLimitExempt {
		v.Add("rate_limit", `must be "default" or "exempt"`)
	}
	return v.OrNil()
}

// UpdateQuotas changes the quotas the update names (operator only).
func (s *Store) UpdateQuotas(ctx context.Context, id string, u QuotasUpdate) (*Tenant, error) {
	if !isID(id) {
		return nil, ErrNotFound
	}
	if err := u.validate(); err != nil {
		return nil, err
	}
	var t *Tenant
	err := s.kv.Update(ctx, func(w Writer) error {
		tk, tenant, err := s.tenantForWrite(w, id)
		if err != nil {
			return err
		}
		t = tenant
		q := &t.Quotas
		set := func(dst *int, src *int) {
			if src != nil {
				*dst = *src
			}
		}
		set64 := func(dst *int64, src *int64) {
			if src != nil {
				*dst = *src
			}
		}
		set(&q.TokenizeLimit, u.TokenizeLimit)
		set(&q.DetokenizeLimit, u.DetokenizeLimit)
		set64(&q.CVCRetentionSeconds, u.CVCRetentionSeconds)
		set64(&q.LogRetentionSeconds, u.LogRetentionSeconds)
		set64(&q.IncludedMonthlyActiveTokens, u.IncludedMonthlyActiveTokens)
		if u.RateLimit != nil {
			q.RateLimit = *u.RateLimit
		}
		t.ModifiedAt = s.stampNow()
		if err := s.writeAudit(w, tk, t, byActor("", "tenant", id, "update", "quotas changed")); err != nil {
			return err
		}
		return putSealed(w, tk, "tenant", id, id, tenantKey(id), t)
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// DefaultQuotas are a new tenant's quotas.
var DefaultQuotas = Quotas{
	TokenizeLimit:               5,
	DetokenizeLimit:             5,
	CVCRetentionSeconds:         3600,
	LogRetentionSeconds:         24 * 3600,
	IncludedMonthlyActiveTokens: 1000,
	RateLimit:                   RateLimitDefault,
}

// NewTenant is what an operator gives to create a tenant.
type NewTenant struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// TenantUpdate is the body of PUT /tenants/self. Settings not named keep
// their value.
type TenantUpdate struct {
	Name     string            `json:"name"`
	Settings map[string]string `json:"settings"`
}

// CreatedTenant is a new tenant with its first management application and
// that application's key, which is shown only this once.
type CreatedTenant struct {
	Tenant      *Tenant      `json:"tenant"`
	Application *Application `json:"application"`
	Key         string       `json:"key"`
}

func validateName(v *ValidationError, name string) {
	switch n := utf8.RuneCountInString(name); {
	case n == 0:
		v.Add("name", "name is required")
	case n > MaxNameLength:
		v.Add("name", fmt.Sprintf("name must be at most %d characters", MaxNameLength))
	}
}

// CreateTenant creates a tenant, its data key, and a management
// application holding every management permission, with one key.
func (s *Store) CreateTenant(ctx context.Context, in NewTenant) (*CreatedTenant, error) {
	v := &ValidationError{}
	validateName(v, in.Name)
	if in.Type != TenantTest && in.Type != TenantProduction {
		v.Add("type", "type must be test or production")
	}
	if err := v.OrNil(); err != nil {
		return nil, err
	}
	now := s.stampNow()
	t := &Tenant{
		ID:        uuid.NewString(),
		Type:      in.Type,
		Name:      in.Name,
		Settings:  map[string]string{},
		Quotas:    DefaultQuotas,
		CreatedAt: now,
	}
	for _, name := range TenantSettingNames {
		t.Settings[name] = "false"
	}
	app := &Application{
		ID:          uuid.NewString(),
		TenantID:    t.ID,
		Name:        "Management",
		Type:        AppManagement,
		Permissions: PermissionsFor(AppManagement),
		CreatedAt:   now,
	}
	var key string
	var tk *tenantKeys
	err := s.kv.Update(ctx, func(w Writer) error {
		var err error
		if tk, err = s.keys.create(w, t.ID); err != nil {
			return err
		}
		if err := putSealed(w, tk, "tenant", t.ID, t.ID, tenantKey(t.ID), t); err != nil {
			return err
		}
		if err := putSealed(w, tk, "application", t.ID, app.ID, applicationKey(t.ID, app.ID), app); err != nil {
			return err
		}
		var rec *apiKeyRecord
		if key, rec, err = s.issueKey(w, tk, t, app.ID, ""); err != nil {
			return err
		}
		for _, a := range []*AuditRecord{
			byActor("", "tenant", t.ID, "create", "tenant created"),
			byActor("", "application", app.ID, "create", "management application created"),
			byActor("", "key", rec.ID, "create", "API key issued"),
		} {
			if err := s.writeAudit(w, tk, t, a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("creating tenant: %w", err)
	}
	s.keys.remember(t.ID, tk)
	return &CreatedTenant{Tenant: t, Application: app, Key: key}, nil
}

// GetTenant returns a tenant by id.
func (s *Store) GetTenant(ctx context.Context, id string) (*Tenant, error) {
	if !isID(id) {
		return nil, ErrNotFound
	}
	var t Tenant
	err := s.kv.View(ctx, func(r Reader) error {
		tk, err := s.tenantKeysFor(r, id)
		if err != nil {
			return err
		}
		return s.getSealed(r, tk, "tenant", id, id, tenantKey(id), &t)
	})
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// ListTenants returns every tenant, oldest first.
func (s *Store) ListTenants(ctx context.Context) ([]*Tenant, error) {
	var out []*Tenant
	err := s.kv.View(ctx, func(r Reader) error {
		out = out[:0]
		prefix := tenantPrefix()
		return r.Scan(prefix, nil, func(key, raw []byte) error {
			id := string(key[len(prefix):])
			tk, err := s.tenantKeysFor(r, id)
			if err != nil {
				return err
			}
			var t Tenant
			if err := tk.openRecord("tenant", id, id, raw, &t); err != nil {
				return err
			}
			out = append(out, &t)
			return nil
		})
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt.Time) })
	return out, err
}

// UpdateTenant renames a tenant and changes the settings it names.
func (s *Store) UpdateTenant(ctx context.Context, id, actorID string, in TenantUpdate) (*Tenant, error) {
	v := &ValidationError{}
	validateName(v, in.Name)
	for name, value := range in.Settings {
		if !isSettingName(name) {
			v.Add("settings."+name, "unknown setting")
		} else if value != "true" && value != "false" {
			v.Add("settings."+name, `must be the string "true" or "false"`)
		}
	}
	if err := v.OrNil(); err != nil {
		return nil, err
	}
	var t *Tenant
	err := s.kv.Update(ctx, func(w Writer) error {
		tk, tenant, err := s.tenantForWrite(w, id)
		if err != nil {
			return err
		}
		t = tenant
		t.Name = in.Name
		for name, value := range in.Settings {
			t.Settings[name] = value
		}
		t.ModifiedBy = actorID
		t.ModifiedAt = s.stampNow()
		if err := s.writeAudit(w, tk, t, byActor(actorID, "tenant", id, "update", "tenant updated")); err != nil {
			return err
		}
		return putSealed(w, tk, "tenant", id, id, tenantKey(id), t)
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

func isSettingName(name string) bool {
	for _, n := range TenantSettingNames {
		if n == name {
			return true
		}
	}
	return false
}

// DeleteTenant destroys a tenant: its data keys, the index entries of its
// API keys, proxy keys and hostnames, and its record go in one
// transaction, so from that moment its keys authenticate nothing and its
// sealed data cannot be opened; then its remaining records are removed.
func (s *Store) DeleteTenant(ctx context.Context, id string) error {
	if !isID(id) {
		return ErrNotFound
	}
	err := s.kv.Update(ctx, func(w Writer) error {
		tk, err := s.tenantKeysFor(w, id)
		if err != nil {
			return err
		}
		var digests [][]byte
		prefix := []byte(keyVersion + "t/" + id + "/appkey/")
		err = w.Scan(prefix, nil, func(key, raw []byte) error {
			var k apiKeyRecord
			if err := tk.openRecord("apikey", id, lastSegment(key), raw, &k); err != nil {
				return err
			}
			digests = append(digests, apiKeyIndexKey(k.Digest))
			return nil
		})
		if err != nil {
			return err
		}
		proxyKeys, err := s.proxyKeyDigests(w, tk, id)
		if err != nil {
			return err
		}
		for _, d := range append(digests, proxyKeys...) {
			if err := w.Delete(d); err != nil {
				return err
			}
		}
		if err := deleteProxyHostnames(w, id, ""); err != nil {
			return err
		}
		var dataKeys [][]byte
		if err := w.Scan(dataKeyPrefix(id), nil, func(key, _ []byte) error {
			dataKeys = append(dataKeys, key)
			return nil
		}); err != nil {
			return err
		}
		for _, k := range dataKeys {
			if err := w.Delete(k); err != nil {
				return err
			}
		}
		if err := w.Delete(fingerprintKeyKey(id)); err != nil {
			return err
		}
		// the marker survives a crash in the middle of the bulk delete
		// below; Open resumes it
		if err := w.Put(tenantDeletionKey(id), nil, 0); err != nil {
			return err
		}
		return w.Delete(tenantKey(id))
	})
	if err != nil {
		return err
	}
	s.keys.forget(id)
	// the tenant's own audit log goes with it; the operator's log keeps the fact
	s.logger.Info("tenant deleted", zap.String("tenant_id", id))
	return s.removeTenantRecords(context.WithoutCancel(ctx), id)
}

// removeTenantRecords deletes what a deleted tenant owned, then its
// deletion marker.
func (s *Store) removeTenantRecords(ctx context.Context, id string) error {
	if err := s.kv.DeletePrefix(ctx, tenantDataPrefix(id)); err != nil {
		return fmt.Errorf("removing records of deleted tenant: %w", err)
	}
	return s.kv.Update(ctx, func(w Writer) error { return w.Delete(tenantDeletionKey(id)) })
}

// resumeTenantDeletions finishes the bulk deletes that a stop or crash
// interrupted.
func (s *Store) resumeTenantDeletions(ctx context.Context) error {
	var ids []string
	prefix := tenantDeletionPrefix()
	err := s.kv.View(ctx, func(r Reader) error {
		ids = ids[:0]
		return r.Scan(prefix, nil, func(key, _ []byte) error {
			ids = append(ids, string(key[len(prefix):]))
			return nil
		})
	})
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := s.removeTenantRecords(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

func lastSegment(key []byte) string {
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == '/' {
			return string(key[i+1:])
		}
	}
	return string(key)
}

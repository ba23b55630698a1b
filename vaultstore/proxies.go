package vaultstore

import (
	"context"
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/google/uuid"
)

// MaxTransformCode bounds a transform's code, in characters (the
// interface's Reactor code length limit).
const MaxTransformCode = 50_000

// proxyKeyRandomBytes is the entropy of a proxy key: with require_auth
// false the key is the only credential, so it is as strong as an API key.
const proxyKeyRandomBytes = 24

// Proxy is a pre-configured detokenizing proxy: requests sent to it with
// its key are detokenized and forwarded to DestinationURL.
type Proxy struct {
	ID                string            `json:"id"`
	Key               string            `json:"key"`
	TenantID          string            `json:"tenant_id"`
	Name              string            `json:"name"`
	DestinationURL    string            `json:"destination_url"`
	RequestTransform  *ProxyTransform   `json:"request_transform,omitempty"`
	ResponseTransform *ProxyTransform   `json:"response_transform,omitempty"`
	ApplicationID     string            `json:"application_id,omitempty"`
	Configuration     map[string]string `json:"configuration,omitempty"`
	RequireAuth       bool              `json:"require_auth"`
	CreatedBy         string            `json:"created_by,omitempty"`
	CreatedAt         *Timestamp        `json:"created_at,omitempty"`
	ModifiedBy        string            `json:"modified_by,omitempty"`
	ModifiedAt        *Timestamp        `json:"modified_at,omitempty"`
}

// ProxyTransform is code run on a proxied request or response.
type ProxyTransform struct {
	Code string `json:"code"`
}

// ApplicationRef names an application by id.
type ApplicationRef struct {
	ID string `json:"id"`
}

// ProxyInput is the body of POST and PUT /proxies, and what a PATCH
// produces after merging.
type ProxyInput struct {
	Name              string            `json:"name"`
	DestinationURL    string            `json:"destination_url"`
	RequestTransform  *ProxyTransform   `json:"request_transform,omitempty"`
	ResponseTransform *ProxyTransform   `json:"response_transform,omitempty"`
	Application       *ApplicationRef   `json:"application,omitempty"`
	Configuration     map[string]string `json:"configuration,omitempty"`
	RequireAuth       *bool             `json:"require_auth,omitempty"`
	// RequestReactorID and ResponseReactorID are past their shutdown;
	// either present is a validation error naming the replacement.
	RequestReactorID  json.RawMessage `json:"request_reactor_id,omitempty"`
	ResponseReactorID json.RawMessage `json:"response_reactor_id,omitempty"`
}

// ProxyCheck adds what the caller's configuration refuses in a proxy
// (a destination outside the egress policy, transform code that cannot
// run) to v. The store checks everything else.
type ProxyCheck func(in *ProxyInput, v *ValidationError)

// validate checks the input and, through check, the deployment's rules.
func (in *ProxyInput) validate(check ProxyCheck) error {
	v := &ValidationError{}
	validateName(v, in.Name)
	if in.DestinationURL == "" {
		v.Add("destination_url", "destination_url is required")
	}
	if in.RequestReactorID != nil {
		v.Add("request_reactor_id", "request reactors are no longer supported; use request_transform")
	}
	if in.ResponseReactorID != nil {
		v.Add("response_reactor_id", "response reactors are no longer supported; use response_transform")
	}
	for field, t := range map[string]*ProxyTransform{"request_transform": in.RequestTransform, "response_transform": in.ResponseTransform} {
		if t == nil {
			continue
		}
		if t.Code == "" {
			v.Add(field+".code", "code is required")
		} else if utf8.RuneCountInString(t.Code) > MaxTransformCode {
			v.Add(field+".code", "code must be at most 50000 characters")
		}
	}
	if in.Application != nil && !isID(in.Application.ID) {
		v.Add("application.id", "application.id must be the id of an application")
	}
	if check != nil && in.DestinationURL != "" {
		check(in, v)
	}
	return v.OrNil()
}

// requireAuth is the input's require_auth with its default.
func (in *ProxyInput) requireAuth() bool { return in.RequireAuth == nil || *in.RequireAuth }

// proxyKeyEntry is what a proxy key's digest points at.
type proxyKeyEntry struct {
	TenantID string `json:"tenant_id"`
	ProxyID  string `json:"proxy_id"`
}

// newProxyKey returns a fresh proxy key: 192 random bits in base62.
func newProxyKey() string { return base62(randomBytes(proxyKeyRandomBytes), keyPayloadLen) }

// checkServiceApplication refuses an application (of a proxy or a
// reactor, whose code gets a client acting as it) that is not a public or
// private application of the tenant.
func (s *Store) checkServiceApplication(r Reader, tk *tenantKeys, tenantID string, ref *ApplicationRef) error {
	if ref == nil {
		return nil
	}
	var app Application
	err := s.getSealed(r, tk, "application", tenantID, ref.ID, applicationKey(tenantID, ref.ID), &app)
	if errors.Is(err, ErrNotFound) {
		return invalid("application.id", "no such application")
	} else if err != nil {
		return err
	}
	if app.Type != AppPublic && app.Type != AppPrivate {
		return invalid("application.id", "the application must be a public or private application")
	}
	return nil
}

// apply copies the input onto p.
func (p *Proxy) apply(in *ProxyInput) {
	p.Name, p.DestinationURL = in.Name, in.DestinationURL
	p.RequestTransform, p.ResponseTransform = in.RequestTransform, in.ResponseTransform
	p.ApplicationID = ""
	if in.Application != nil {
		p.ApplicationID = in.Application.ID
	}
	p.Configuration = in.Configuration
	p.RequireAuth = in.requireAuth()
}

// input is the proxy as the body that would create it.
func (p *Proxy) input() *ProxyInput {
	in := &ProxyInput{
		Name: p.Name, DestinationURL: p.DestinationURL,
		RequestTransform: p.RequestTransform, ResponseTransform: p.ResponseTransform,
		Configuration: p.Configuration, RequireAuth: &p.RequireAuth,
	}
	if p.ApplicationID != "" {
		in.Application = &ApplicationRef{ID: p.ApplicationID}
	}
	return in
}

// CreateProxy creates a proxy with a new key.
func (s *Store) CreateProxy(ctx context.Context, tenantID, actorID string, in ProxyInput, check ProxyCheck) (*Proxy, error) {
	if err := in.validate(check); err != nil {
		return nil, err
	}
	p := &Proxy{ID: uuid.NewString(), Key: newProxyKey(), TenantID: tenantID, CreatedBy: actorID, CreatedAt: s.stampNow()}
	p.apply(&in)
	err := s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		if err := s.checkServiceApplication(w, tk, tenantID, in.Application); err != nil {
			return err
		}
		if err := s.writeAudit(w, tk, t, byActor(actorID, "proxy", p.ID, "create", "proxy created")); err != nil {
			return err
		}
		idx, err := json.Marshal(proxyKeyEntry{TenantID: tenantID, ProxyID: p.ID})
		if err != nil {
			return err
		}
		if err := w.Put(proxyKeyIndexKey(keyDigest(p.Key)), idx, 0); err != nil {
			return err
		}
		return putSealed(w, tk, "proxy", tenantID, p.ID, proxyKey(tenantID, p.ID), p)
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// GetProxy returns a proxy of the tenant.
func (s *Store) GetProxy(ctx context.Context, tenantID, id string) (*Proxy, error) {
	return getRecord[Proxy](ctx, s, "proxy", tenantID, id, proxyKey(tenantID, id))
}

// ListProxies returns the tenant's proxies, oldest first.
func (s *Store) ListProxies(ctx context.Context, tenantID string) ([]*Proxy, error) {
	return listRecords[Proxy](ctx, s, "proxy", tenantID, proxyPrefix(tenantID))
}

// UpdateProxy replaces a proxy's settings (PUT); its id and key stay.
func (s *Store) UpdateProxy(ctx context.Context, tenantID, id, actorID string, in ProxyInput, check ProxyCheck) (*Proxy, error) {
	return s.changeProxy(ctx, tenantID, id, actorID, func(*Proxy) (*ProxyInput, error) { return &in, nil }, check)
}

// immutableProxyFields cannot appear in a proxy patch.
var immutableProxyFields = []string{"id", "key", "tenant_id", "application_id", "created_by", "created_at", "modified_by", "modified_at"}

// PatchProxy applies an RFC 7386 merge patch to a proxy's settings
// (PATCH), then validates the result as PUT would.
func (s *Store) PatchProxy(ctx context.Context, tenantID, id, actorID string, patch map[string]any, check ProxyCheck) (*Proxy, error) {
	v := &ValidationError{}
	refuseImmutable(patch, immutableProxyFields, v)
	if err := v.OrNil(); err != nil {
		return nil, err
	}
	return s.changeProxy(ctx, tenantID, id, actorID, func(p *Proxy) (*ProxyInput, error) {
		return mergedInput[ProxyInput](p.input(), patch)
	}, check)
}

// changeProxy rewrites a proxy with the input that next derives from it.
func (s *Store) changeProxy(ctx context.Context, tenantID, id, actorID string, next func(*Proxy) (*ProxyInput, error), check ProxyCheck) (*Proxy, error) {
	return updateRecord(ctx, s, "proxy", tenantID, id, actorID, proxyKey(tenantID, id), func(w Writer, tk *tenantKeys, p *Proxy) error {
		in, err := next(p)
		if err != nil {
			return err
		}
		if err := in.validate(check); err != nil {
			return err
		}
		if err := s.checkServiceApplication(w, tk, tenantID, in.Application); err != nil {
			return err
		}
		p.apply(in)
		p.ModifiedBy, p.ModifiedAt = actorID, s.stampNow()
		return nil
	})
}

// DeleteProxy removes a proxy, its key and its whitelabel hostnames.
func (s *Store) DeleteProxy(ctx context.Context, tenantID, id, actorID string) error {
	return deleteRecord(ctx, s, tenantID, id, proxyKey(tenantID, id), func(w Writer, tk *tenantKeys) (*AuditRecord, error) {
		var p Proxy
		if err := s.getSealed(w, tk, "proxy", tenantID, id, proxyKey(tenantID, id), &p); err != nil {
			return nil, err
		}
		if err := deleteProxyHostnames(w, tenantID, id); err != nil {
			return nil, err
		}
		if err := w.Delete(proxyKeyIndexKey(keyDigest(p.Key))); err != nil {
			return nil, err
		}
		return byActor(actorID, "proxy", id, "delete", "proxy deleted"), nil
	})
}

// ProxyByKey resolves a proxy key to its proxy and tenant, which are
// shared with other requests: read them, never modify them. An unknown
// key, or one whose tenant is gone, is ErrNotFound.
func (s *Store) ProxyByKey(ctx context.Context, key string) (*Proxy, *Tenant, error) {
	if key == "" || len(key) > 128 {
		return nil, nil, ErrNotFound
	}
	digest := keyDigest(key)
	if p, t, ok := s.credentials.proxy(digest); ok {
		return p, t, nil
	}
	generation := s.credentials.generation.Load()
	var p *Proxy
	var t *Tenant
	err := s.kv.View(ctx, func(r Reader) error {
		idx, err := decodeCached[proxyKeyEntry](s, r, proxyKeyIndexKey(digest))
		if err != nil {
			return err
		}
		tk, err := s.tenantKeysFor(r, idx.TenantID)
		if err != nil {
			return err
		}
		if t, err = openCached[Tenant](s, r, tk, "tenant", idx.TenantID, idx.TenantID, tenantKey(idx.TenantID)); err != nil {
			return err
		}
		p, err = openCached[Proxy](s, r, tk, "proxy", idx.TenantID, idx.ProxyID, proxyKey(idx.TenantID, idx.ProxyID))
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	s.credentials.rememberProxy(digest, generation, p, t)
	return p, t, nil
}

// proxyKeyDigests lists the key index entries of a tenant's proxies, for
// a tenant delete.
func (s *Store) proxyKeyDigests(r Reader, tk *tenantKeys, tenantID string) ([][]byte, error) {
	var out [][]byte
	prefix := proxyPrefix(tenantID)
	err := r.Scan(prefix, nil, func(key, raw []byte) error {
		var p Proxy
		if err := tk.openRecord("proxy", tenantID, string(key[len(prefix):]), raw, &p); err != nil {
			return err
		}
		out = append(out, proxyKeyIndexKey(keyDigest(p.Key)))
		return nil
	})
	return out, err
}

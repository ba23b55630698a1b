package vaultstore

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"sort"
	"strings"
)

// Whitelabel hostnames let a tenant's proxy answer at the root of a host
// of its own (pay.example.com). An operator registers each hostname for
// one proxy; the TLS permission issues certificates only for registered
// hostnames, and a vault_proxy handler without a pinned key serves the
// proxy registered for the request's host.

// Hostname is a whitelabel hostname registered for a proxy.
type Hostname struct {
	Hostname  string     `json:"hostname"`
	TenantID  string     `json:"tenant_id"`
	ProxyID   string     `json:"proxy_id"`
	CreatedAt *Timestamp `json:"created_at,omitempty"`
}

var hostnamePattern = regexp.MustCompile(`^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$`)

// NormalizeHostname lower-cases a hostname and reports whether it is a
// DNS name with at least two labels (no IP address, port, wildcard or
// trailing dot).
func NormalizeHostname(h string) (string, bool) {
	// ASCII letters only (RFC 4343): Unicode lower-casing would turn the
	// Kelvin sign into "k" and register another name
	h = strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, h)
	return h, len(h) <= 253 && hostnamePattern.MatchString(h)
}

// RegisterHostname registers hostname for a proxy of the tenant. A
// hostname registered to anything else is ErrConflict; registering the
// same pair again is a no-op.
func (s *Store) RegisterHostname(ctx context.Context, tenantID, proxyID, hostname string) (*Hostname, error) {
	name, ok := NormalizeHostname(hostname)
	if !ok {
		return nil, invalid("hostname", "hostname must be a DNS name such as pay.example.com")
	}
	if !isID(proxyID) {
		return nil, invalid("proxy_id", "proxy_id must be the id of a proxy of the tenant")
	}
	h := &Hostname{Hostname: name, TenantID: tenantID, ProxyID: proxyID, CreatedAt: s.stampNow()}
	err := s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		if _, err := w.Get(proxyKey(tenantID, proxyID)); errors.Is(err, ErrNotFound) {
			return invalid("proxy_id", "no such proxy in the tenant")
		} else if err != nil {
			return err
		}
		if raw, err := w.Get(hostnameKey(name)); err == nil {
			var old Hostname
			if err := json.Unmarshal(raw, &old); err != nil {
				return err
			}
			if old.TenantID == tenantID && old.ProxyID == proxyID {
				*h = old
				return nil
			}
			return ErrConflict
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		raw, err := json.Marshal(h)
		if err != nil {
			return err
		}
		if err := w.Put(hostnameKey(name), raw, 0); err != nil {
			return err
		}
		if err := s.writeAudit(w, tk, t, byActor("", "hostname", name, "create", "whitelabel hostname registered for proxy "+proxyID)); err != nil {
			return err
		}
		return w.Put(tenantHostnameKey(tenantID, name), []byte(proxyID), 0)
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// LookupHostname returns the registration of a hostname; ErrNotFound when
// it is not registered or its tenant is gone.
func (s *Store) LookupHostname(ctx context.Context, hostname string) (*Hostname, error) {
	name, ok := NormalizeHostname(hostname)
	if !ok {
		return nil, ErrNotFound
	}
	var h Hostname
	err := s.kv.View(ctx, func(r Reader) error {
		raw, err := r.Get(hostnameKey(name))
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &h); err != nil {
			return err
		}
		_, err = s.tenantKeysFor(r, h.TenantID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// ListHostnames returns the tenant's hostnames, sorted.
func (s *Store) ListHostnames(ctx context.Context, tenantID string) ([]*Hostname, error) {
	var out []*Hostname
	err := s.kv.View(ctx, func(r Reader) error {
		out = out[:0]
		if _, err := s.tenantKeysFor(r, tenantID); err != nil {
			return err
		}
		prefix := tenantHostnamePrefix(tenantID)
		return r.Scan(prefix, nil, func(key, _ []byte) error {
			raw, err := r.Get(hostnameKey(string(key[len(prefix):])))
			if err != nil {
				return err
			}
			var h Hostname
			if err := json.Unmarshal(raw, &h); err != nil {
				return err
			}
			out = append(out, &h)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Hostname < out[j].Hostname })
	return out, nil
}

// DeleteHostname removes a hostname of the tenant.
func (s *Store) DeleteHostname(ctx context.Context, tenantID, hostname string) error {
	name, ok := NormalizeHostname(hostname)
	if !ok {
		return ErrNotFound
	}
	return s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		if _, err := w.Get(tenantHostnameKey(tenantID, name)); err != nil {
			return err
		}
		if err := s.writeAudit(w, tk, t, byActor("", "hostname", name, "delete", "whitelabel hostname removed")); err != nil {
			return err
		}
		if err := w.Delete(hostnameKey(name)); err != nil {
			return err
		}
		return w.Delete(tenantHostnameKey(tenantID, name))
	})
}

// deleteProxyHostnames removes the hostnames of one proxy, or of every
// proxy of the tenant when proxyID is empty.
func deleteProxyHostnames(w Writer, tenantID, proxyID string) error {
	var names []string
	prefix := tenantHostnamePrefix(tenantID)
	err := w.Scan(prefix, nil, func(key, value []byte) error {
		if proxyID == "" || string(value) == proxyID {
			names = append(names, string(key[len(prefix):]))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := w.Delete(hostnameKey(n)); err != nil {
			return err
		}
		if err := w.Delete(tenantHostnameKey(tenantID, n)); err != nil {
			return err
		}
	}
	return nil
}

package caddymodule

import (
	"context"
	"errors"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddytls"

	"github.com/tokenvault/tokenvault/vaultstore"
)

func init() {
	caddy.RegisterModule(TLSPermission{})
}

// TLSPermission lets on-demand TLS obtain certificates only for hostnames
// an operator registered for a whitelabel proxy, so that no one can make
// the server request certificates for names of their choosing:
//
//	{
//	    on_demand_tls {
//	        permission vault
//	    }
//	}
type TLSPermission struct {
	// hostnames finds a registered hostname: the vault app's store, once
	// its Start has opened it.
	hostnames func(ctx context.Context) (hostnameLookup, error)
}

// hostnameLookup finds a registered hostname; the store implements it.
type hostnameLookup interface {
	LookupHostname(ctx context.Context, hostname string) (*vaultstore.Hostname, error)
}

// CaddyModule returns the Caddy module information.
func (TLSPermission) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "tls.permission.vault",
		New: func() caddy.Module { return new(TLSPermission) },
	}
}

// Provision connects the permission to the vault app.
func (p *TLSPermission) Provision(ctx caddy.Context) error {
	appIface, err := ctx.App("vault")
	if err != nil {
		return err
	}
	app := appIface.(*App)
	p.hostnames = func(ctx context.Context) (hostnameLookup, error) { return app.waitStore(ctx) }
	return nil
}

// CertificateAllowed allows a certificate only for a registered hostname.
func (p *TLSPermission) CertificateAllowed(ctx context.Context, name string) error {
	hostnames, err := p.hostnames(ctx)
	if err != nil {
		return fmt.Errorf("checking %s: %w", name, err)
	}
	_, err = hostnames.LookupHostname(ctx, name)
	if errors.Is(err, vaultstore.ErrNotFound) {
		return fmt.Errorf("%s is not registered for a vault proxy: %w", name, caddytls.ErrPermissionDenied)
	}
	if err != nil {
		return fmt.Errorf("checking %s: %w", name, err)
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*TLSPermission)(nil)
	_ caddytls.OnDemandPermission = (*TLSPermission)(nil)
	_ caddyfile.Unmarshaler       = (*TLSPermission)(nil)
)

package caddymodule

import (
	"context"
	"errors"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddytls"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// TestTLSPermission: on-demand TLS may obtain a certificate for a
// registered hostname only, and for none once its proxy is gone.
func TestTLSPermission(t *testing.T) {
	e, _ := newProxyEnv(t, nil)
	ctx := context.Background()
	p, err := e.store.CreateProxy(ctx, e.tenantID, "", vaultstore.ProxyInput{Name: "pay", DestinationURL: "https://api.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.RegisterHostname(ctx, e.tenantID, p.ID, "Pay.Example.com"); err != nil {
		t.Fatal(err)
	}
	perm := &TLSPermission{hostnames: func(context.Context) (hostnameLookup, error) { return e.store, nil }}
	tests := []struct {
		name    string
		allowed bool
	}{
		{"pay.example.com", true},
		{"PAY.EXAMPLE.COM", true},
		{"other.example.com", false},
		{"example.com", false},
		{"127.0.0.1", false},
		{"", false},
	}
	for _, tt := range tests {
		err := perm.CertificateAllowed(ctx, tt.name)
		if tt.allowed && err != nil {
			t.Errorf("%q: want allowed, got %v", tt.name, err)
		}
		if !tt.allowed && !errors.Is(err, caddytls.ErrPermissionDenied) {
			t.Errorf("%q: want ErrPermissionDenied, got %v", tt.name, err)
		}
	}
	if err := e.store.DeleteProxy(ctx, e.tenantID, p.ID, ""); err != nil {
		t.Fatal(err)
	}
	if err := perm.CertificateAllowed(ctx, "pay.example.com"); !errors.Is(err, caddytls.ErrPermissionDenied) {
		t.Errorf("after the proxy is deleted: want ErrPermissionDenied, got %v", err)
	}
}

func TestEgressConfigPolicy(t *testing.T) {
	p, err := (&EgressConfig{AllowHTTP: true, AllowNetworks: []string{"127.0.0.1/8", "::1/128"}}).policy()
	if err != nil || !p.AllowHTTP || len(p.AllowNetworks) != 2 || p.AllowNetworks[0].String() != "127.0.0.0/8" {
		t.Fatalf("policy %+v, %v", p, err)
	}
	if _, err := (&EgressConfig{AllowNetworks: []string{"10.0.0.0"}}).policy(); err == nil {
		t.Error("a network without a prefix length was accepted")
	}
	if p, err := (*EgressConfig)(nil).policy(); err != nil || p.AllowHTTP || len(p.AllowNetworks) != 0 {
		t.Errorf("nil config: %+v, %v", p, err)
	}
}

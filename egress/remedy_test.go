package egress

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// TestRefusalRemedy: a refusal says which setting would allow the
// destination, names the network only when the caller named the address,
// and suggests nothing for addresses that embed a refused IPv4 address.
func TestRefusalRemedy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  *Policy
		raw     string
		remedy  Remedy
		network string // "" for the zero Prefix
	}{
		{"http", nil, "http://example.com/pay", RemedyAllowHTTP, ""},
		{"ftp", nil, "ftp://example.com/", RemedyNone, ""},
		{"ftp with http allowed", &Policy{AllowHTTP: true}, "ftp://example.com/", RemedyNone, ""},
		{"userinfo", nil, "https://u:p@example.com/", RemedyNone, ""},
		{"loopback", nil, "https://127.0.0.1:8443/", RemedyAllowNetwork, "127.0.0.1/32"},
		{"private", nil, "https://10.1.2.3/", RemedyAllowNetwork, "10.1.2.3/32"},
		{"IPv6 loopback", nil, "https://[::1]/", RemedyAllowNetwork, "::1/128"},
		{"IPv4-mapped loopback", nil, "https://[::ffff:127.0.0.1]/", RemedyAllowNetwork, "127.0.0.1/32"},
		{"link-local with another network allowed", &Policy{AllowNetworks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
			"https://169.254.169.254/", RemedyAllowNetwork, "169.254.169.254/32"},
		{"IPv4-translated loopback", nil, "https://[::ffff:0:7f00:1]/", RemedyNone, ""},
		{"NAT64 loopback", nil, "https://[64:ff9b::7f00:1]/", RemedyNone, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.policy.CheckURL(tc.raw)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("CheckURL(%q) = %v, want a refusal", tc.raw, err)
			}
			got := ""
			if e.Network.IsValid() {
				got = e.Network.String()
			}
			if e.Remedy != tc.remedy || got != tc.network {
				t.Errorf("CheckURL(%q): remedy %d network %q, want %d %q (%s)", tc.raw, e.Remedy, got, tc.remedy, tc.network, e.Reason)
			}
			if e.Remedy == RemedyAllowNetwork {
				p := Policy{}
				if tc.policy != nil {
					p = *tc.policy
				}
				p.AllowNetworks = append(p.AllowNetworks, e.Network)
				if _, err := p.CheckURL(tc.raw); err != nil {
					t.Errorf("with %s allowed: %v, want the URL allowed", e.Network, err)
				}
			}
		})
	}
}

// TestResolvedRefusalRemedy: a name that resolves only to refused
// addresses suggests allowing a network without naming the addresses.
func TestResolvedRefusalRemedy(t *testing.T) {
	p := &Policy{Resolver: newStub(map[string][]string{
		"internal.example": {"10.9.8.7", "192.168.1.2"},
		"embedded.example": {"64:ff9b::7f00:1"},
	})}
	for _, tc := range []struct {
		host   string
		remedy Remedy
	}{
		{"internal.example", RemedyAllowNetwork},
		{"embedded.example", RemedyNone},
	} {
		_, err := p.allowedAddrs(context.Background(), "tcp", tc.host)
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%s: %v, want a refusal", tc.host, err)
		}
		if e.Remedy != tc.remedy || e.Network.IsValid() {
			t.Errorf("%s: remedy %d network %v, want %d and no network", tc.host, e.Remedy, e.Network, tc.remedy)
		}
		for _, a := range []string{"10.9.8.7", "192.168.1.2", "7f00"} {
			if strings.Contains(e.Reason, a) {
				t.Errorf("%s: the reason %q names the resolved address %s", tc.host, e.Reason, a)
			}
		}
	}
}

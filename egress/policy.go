package egress

import (
	"context"
	"crypto/x509"
	"net/netip"
)

// Policy says which destinations the proxy may reach. The zero value (and
// a nil *Policy) is the default: https only, public addresses only, the
// system resolver and the system root certificates.
type Policy struct {
	// AllowHTTP also allows http:// destinations.
	AllowHTTP bool
	// AllowNetworks lists operator-allowed networks that are exempt from
	// the deny list, for example 127.0.0.0/8 for tests or an on-premises
	// range. IPv4 networks are best written in IPv4 form; IPv4-mapped
	// IPv6 prefixes (::ffff:a.b.c.d/n with n >= 96) are treated as their
	// IPv4 equivalent.
	AllowNetworks []netip.Prefix
	// Resolver resolves destination host names at dial time; nil means
	// net.DefaultResolver. Tests inject a stub.
	Resolver Resolver
	// RootCAs verifies destination certificates; nil means the system
	// roots. Tests pass the pool of an httptest TLS server.
	RootCAs *x509.CertPool
}

// Resolver looks up the addresses of a host name. *net.Resolver
// implements it; network is "ip", "ip4" or "ip6".
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Allowed reports whether addr may be connected to. An IPv4-mapped IPv6
// address is unmapped and an IPv6 zone is ignored first; then addr is
// allowed when it is in one of AllowNetworks, or else when it is in none
// of the special-purpose ranges of the deny list. The zero netip.Addr is
// never allowed.
//
// An IPv6 address that embeds IPv4 addresses (IPv4-compatible ::/96,
// IPv4-translated ::ffff:0:0:0/96, NAT64 64:ff9b::/96 and 64:ff9b:1::/48,
// 6to4 2002::/16, Teredo 2001::/32) must moreover have every embedded
// address allowed by the same rules, AllowNetworks included: the IPv4
// rules judge it, whatever its IPv6 spelling. Allowing an IPv6 prefix
// never allows the IPv4 addresses inside it.
func (p *Policy) Allowed(addr netip.Addr) bool {
	if !addr.IsValid() {
		return false
	}
	a := addr.Unmap().WithZone("")
	allowedBy, ok := p.allowedNetwork(a)
	if !ok && denied(a) {
		return false
	}
	v4, n := embeddedIPv4(a, localNAT64Bits(allowedBy))
	for _, e := range v4[:n] {
		if _, ok := p.allowedNetwork(e); !ok && denied(e) {
			return false
		}
	}
	return true
}

// allowedNetwork returns the first of AllowNetworks that contains a,
// which is unmapped and without zone.
func (p *Policy) allowedNetwork(a netip.Addr) (netip.Prefix, bool) {
	if p == nil {
		return netip.Prefix{}, false
	}
	for _, n := range p.AllowNetworks {
		if n = unmapPrefix(n); n.Contains(a) {
			return n, true
		}
	}
	return netip.Prefix{}, false
}

// unmapPrefix turns an IPv4-mapped IPv6 prefix into the IPv4 prefix it
// stands for, so that it can match the unmapped addresses Allowed tests.
func unmapPrefix(n netip.Prefix) netip.Prefix {
	if a := n.Addr(); a.Is4In6() && n.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), n.Bits()-96)
	}
	return n
}

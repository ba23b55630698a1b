package egress

import "net/netip"

// The deny list: IANA special-purpose and non-public ranges. Addresses are
// unmapped before they are tested, so ::ffff:0:0/96 only documents intent.
// The IPv4 addresses that IPv6 forms embed are checked against denied4 as
// well (see embeddedIPv4), so these IPv6 entries are not the only guard.
var (
	denied4 = mustPrefixes(
		"0.0.0.0/8",          // "this network"
		"10.0.0.0/8",         // private
		"100.64.0.0/10",      // carrier-grade NAT; 100.100.100.200 is Alibaba metadata
		"127.0.0.0/8",        // loopback
		"169.254.0.0/16",     // link-local, cloud metadata 169.254.169.254
		"172.16.0.0/12",      // private
		"192.0.0.0/24",       // IETF protocol assignments
		"192.0.2.0/24",       // TEST-NET-1
		"192.88.99.0/24",     // 6to4 relay anycast
		"192.168.0.0/16",     // private
		"198.18.0.0/15",      // benchmarking
		"198.51.100.0/24",    // TEST-NET-2
		"203.0.113.0/24",     // TEST-NET-3
		"224.0.0.0/4",        // multicast
		"240.0.0.0/4",        // reserved
		"255.255.255.255/32", // limited broadcast
	)
	denied6 = mustPrefixes(
		"::/128",         // unspecified
		"::1/128",        // loopback
		"::ffff:0:0/96",  // IPv4-mapped
		"64:ff9b::/96",   // NAT64, embeds IPv4
		"64:ff9b:1::/48", // local-use NAT64
		"100::/64",       // discard-only
		"2001::/23",      // IETF protocol assignments, Teredo
		"2001:db8::/32",  // documentation
		"2002::/16",      // 6to4, embeds IPv4
		"fc00::/7",       // unique local
		"fe80::/10",      // link-local
		"ff00::/8",       // multicast
	)
)

func mustPrefixes(ss ...string) []netip.Prefix {
	ps := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		ps[i] = netip.MustParsePrefix(s)
	}
	return ps
}

// denied reports whether a, already unmapped and without zone, is in the
// deny list.
func denied(a netip.Addr) bool {
	list := denied6
	if a.Is4() {
		list = denied4
	}
	for _, n := range list {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

package egress

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestEmbeddedIPv4 lists every IPv6 form that embeds an IPv4 address and
// the addresses it embeds.
func TestEmbeddedIPv4(t *testing.T) {
	for _, tc := range []struct {
		form  string
		addr  string
		bits  int      // NAT64 prefix length inside 64:ff9b:1::/48; 0 means 48
		embed []string // what embeddedIPv4 finds, in order
	}{
		{"IPv4-mapped ::ffff:0:0/96", "::ffff:127.0.0.1", 0, []string{"127.0.0.1"}},
		{"IPv4-mapped ::ffff:0:0/96", "::ffff:a9fe:a9fe", 0, []string{"169.254.169.254"}},

		{"IPv4-compatible ::/96", "::127.0.0.1", 0, []string{"127.0.0.1"}},
		{"IPv4-compatible ::/96", "::a9fe:a9fe", 0, []string{"169.254.169.254"}},
		{"IPv4-compatible ::/96", "::8.8.8.8", 0, []string{"8.8.8.8"}},
		{"IPv4-compatible ::/96", "::2", 0, []string{"0.0.0.2"}},
		{"unspecified, its own rule", "::", 0, nil},
		{"loopback, its own rule", "::1", 0, nil},

		{"IPv4-translated ::ffff:0:0:0/96", "::ffff:0:7f00:1", 0, []string{"127.0.0.1"}},
		{"IPv4-translated ::ffff:0:0:0/96", "::ffff:0:a9fe:a9fe", 0, []string{"169.254.169.254"}},

		{"NAT64 64:ff9b::/96", "64:ff9b::7f00:1", 0, []string{"127.0.0.1"}},
		{"NAT64 64:ff9b::/96", "64:ff9b::169.254.169.254", 0, []string{"169.254.169.254"}},

		// RFC 6052 section 2.2: a /48 prefix, the u-octet (byte 8) in the
		// middle of the address.
		{"NAT64 local-use 64:ff9b:1::/48", "64:ff9b:1:7f00:0:100::", 0, []string{"127.0.0.1"}},
		{"NAT64 local-use 64:ff9b:1::/48", "64:ff9b:1:a9fe:a9:fe00::", 0, []string{"169.254.169.254"}},
		{"NAT64 local-use 64:ff9b:1::/48", "64:ff9b:1:808:8:800::", 0, []string{"8.8.8.8"}},
		// Read at /48, a /96 spelling puts the IPv4 address in the suffix.
		{"NAT64 local-use 64:ff9b:1::/48", "64:ff9b:1::7f00:1", 0, []string{"0.0.0.0"}},
		// Longer NAT64 prefixes carved out of the local-use range.
		{"NAT64 local-use, /56 prefix", "64:ff9b:1:ab7f:0:1::", 56, []string{"127.0.0.1"}},
		{"NAT64 local-use, /64 prefix", "64:ff9b:1:abcd:7f:0:100:0", 64, []string{"127.0.0.1"}},
		{"NAT64 local-use, /96 prefix", "64:ff9b:1::7f00:1", 96, []string{"127.0.0.1"}},
		{"NAT64 local-use, not an RFC 6052 length", "64:ff9b:1:7f00:0:100::", 60, []string{"127.0.0.1"}},

		{"6to4 2002::/16", "2002:7f00:1::1", 0, []string{"127.0.0.1"}},
		{"6to4 2002::/16", "2002:a9fe:a9fe:1:2:3:4:5", 0, []string{"169.254.169.254"}},

		// Teredo: server, then client XOR 0xffffffff. The first is the
		// example of RFC 4380 section 4.
		{"Teredo 2001::/32", "2001:0:4136:e378:8000:63bf:3fff:fdd2", 0, []string{"65.54.227.120", "192.0.2.45"}},
		{"Teredo 2001::/32", "2001:0:808:808::80ff:fffe", 0, []string{"8.8.8.8", "127.0.0.1"}},
		{"Teredo 2001::/32", "2001:0:7f00:1::f7f7:f7f7", 0, []string{"127.0.0.1", "8.8.8.8"}},

		// No embedded address.
		{"global unicast", "2606:4700::1111", 0, nil},
		{"unique local", "fd00::1", 0, nil},
		{"documentation, beside Teredo", "2001:db8::1", 0, nil},
		{"IETF assignment beside Teredo", "2001:1::1", 0, nil},
		{"just outside ::/96", "::1:0:0:1", 0, nil},
		{"just outside ::ffff:0:0:0/96", "::fffe:0:7f00:1", 0, nil},
		{"beside the local-use NAT64 range", "64:ff9b:2::7f00:1", 0, nil},
		{"IPv4", "127.0.0.1", 0, nil},
	} {
		t.Run(tc.form+" "+tc.addr, func(t *testing.T) {
			bits := tc.bits
			if bits == 0 {
				bits = 48
			}
			v4, n := embeddedIPv4(netip.MustParseAddr(tc.addr), bits)
			var got []string
			for _, a := range v4[:n] {
				got = append(got, a.String())
			}
			if !slices.Equal(got, tc.embed) {
				t.Errorf("embeddedIPv4(%s, %d) = %q, want %q", tc.addr, bits, got, tc.embed)
			}
		})
	}
}

// TestAllowedEmbeddedIPv4: an IPv6 address is refused when an IPv4
// address it embeds is refused, even where the IPv6 prefix is allowed.
func TestAllowedEmbeddedIPv4(t *testing.T) {
	prefixes := func(ss ...string) *Policy {
		return &Policy{AllowNetworks: mustPrefixes(ss...)}
	}
	dns64 := prefixes("64:ff9b::/96")
	local48 := prefixes("64:ff9b:1::/48")
	local56 := prefixes("64:ff9b:1:ab00::/56")
	local64 := prefixes("64:ff9b:1:abcd::/64")
	local96 := prefixes("64:ff9b:1::/96")
	tunnels := prefixes("2002::/16", "2001::/32")
	allIPv6 := prefixes("::/0")
	loopback4 := prefixes("127.0.0.0/8")
	for _, tc := range []struct {
		name   string
		policy *Policy
		addr   string
		want   bool
	}{
		// The two spellings of issue 20.
		{"compatible loopback", nil, "::127.0.0.1", false},
		{"translated loopback", nil, "::ffff:0:7f00:1", false},

		{"compatible metadata", nil, "::169.254.169.254", false},
		{"compatible carrier-grade NAT", nil, "::100.100.100.200", false},
		{"compatible private", nil, "::10.0.0.1", false},
		{"compatible 0.0.0.2", nil, "::2", false},
		{"compatible public, judged as 8.8.8.8", nil, "::8.8.8.8", true},
		{"translated metadata", nil, "::ffff:0:a9fe:a9fe", false},
		{"translated public, judged as 8.8.8.8", nil, "::ffff:0:808:808", true},
		{"mapped loopback", nil, "::ffff:127.0.0.1", false},

		// The deny list refuses these prefixes whole by default.
		{"NAT64 public by default", nil, "64:ff9b::808:808", false},
		{"local NAT64 public by default", nil, "64:ff9b:1:808:8:800::", false},
		{"6to4 public by default", nil, "2002:808:808::1", false},
		{"Teredo public by default", nil, "2001:0:808:808::f7f7:f7f7", false},

		// An operator allowing DNS64's prefix allows public IPv4 only.
		{"DNS64 public", dns64, "64:ff9b::808:808", true},
		{"DNS64 loopback", dns64, "64:ff9b::7f00:1", false},
		{"DNS64 metadata", dns64, "64:ff9b::a9fe:a9fe", false},
		{"DNS64 carrier-grade NAT metadata", dns64, "64:ff9b::6464:64c8", false},

		// The local-use range, read at the allowed network's length.
		{"local /48 public", local48, "64:ff9b:1:808:8:800::", true},
		{"local /48 loopback", local48, "64:ff9b:1:7f00:0:100::", false},
		{"local /48 metadata", local48, "64:ff9b:1:a9fe:a9:fe00::", false},
		{"local /48, /96 spelling reads 0.0.0.0", local48, "64:ff9b:1::808:808", false},
		{"local /56 public", local56, "64:ff9b:1:ab08:8:808::", true},
		{"local /56 loopback", local56, "64:ff9b:1:ab7f:0:1::", false},
		{"local /64 public", local64, "64:ff9b:1:abcd:8:808:800:0", true},
		{"local /64 loopback", local64, "64:ff9b:1:abcd:7f:0:100:0", false},
		{"local /96 public", local96, "64:ff9b:1::808:808", true},
		{"local /96 loopback", local96, "64:ff9b:1::7f00:1", false},
		{"local /96 private", local96, "64:ff9b:1::a00:1", false},

		// Tunnels: 6to4 and both Teredo addresses.
		{"6to4 public", tunnels, "2002:808:808::1", true},
		{"6to4 loopback", tunnels, "2002:7f00:1::1", false},
		{"6to4 metadata", tunnels, "2002:a9fe:a9fe::1", false},
		{"Teredo public both", tunnels, "2001:0:808:808::f7f7:f7f7", true},
		{"Teredo loopback client", tunnels, "2001:0:808:808::80ff:fffe", false},
		{"Teredo loopback server", tunnels, "2001:0:7f00:1::f7f7:f7f7", false},
		{"Teredo documentation client (RFC 4380 example)", tunnels, "2001:0:4136:e378:8000:63bf:3fff:fdd2", false},

		// Allowing all of IPv6 allows no refused IPv4 address.
		{"all IPv6, unique local", allIPv6, "fd00::1", true},
		{"all IPv6, compatible loopback", allIPv6, "::127.0.0.1", false},
		{"all IPv6, translated loopback", allIPv6, "::ffff:0:7f00:1", false},
		{"all IPv6, NAT64 loopback", allIPv6, "64:ff9b::7f00:1", false},
		{"all IPv6, 6to4 loopback", allIPv6, "2002:7f00:1::", false},
		{"all IPv6, Teredo loopback client", allIPv6, "2001:0:808:808::80ff:fffe", false},

		// The IPv4 rules include AllowNetworks: an allowed IPv4 network
		// is allowed in the forms the IPv6 rules do not refuse whole.
		{"allowed loopback, mapped", loopback4, "::ffff:127.0.0.1", true},
		{"allowed loopback, compatible", loopback4, "::127.0.0.1", true},
		{"allowed loopback, translated", loopback4, "::ffff:0:7f00:1", true},
		{"allowed loopback, NAT64 refused by the IPv6 rules", loopback4, "64:ff9b::7f00:1", false},
		{"allowed loopback, 6to4 refused by the IPv6 rules", loopback4, "2002:7f00:1::", false},
		{"allowed loopback, other compatible address", loopback4, "::10.0.0.1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := netip.MustParseAddr(tc.addr)
			if got := tc.policy.Allowed(a); got != tc.want {
				t.Errorf("Allowed(%s) = %v, want %v", tc.addr, got, tc.want)
			}
			// The dialer's last check says the same.
			err := tc.policy.control("tcp6", netip.AddrPortFrom(a, 443).String(), nil)
			if (err == nil) != tc.want {
				t.Errorf("control(%s) = %v, want allowed %v", tc.addr, err, tc.want)
			}
		})
	}
}

// TestCheckURLEmbeddedIPv4: at save time, an IP literal that embeds a
// refused IPv4 address is refused, and named in the reason.
func TestCheckURLEmbeddedIPv4(t *testing.T) {
	// Every IPv6 prefix allowed, so that only the IPv4 rules can refuse.
	everyPrefix := &Policy{AllowNetworks: mustPrefixes("::/0")}
	for _, tc := range []struct {
		raw    string
		policy *Policy
	}{
		{"https://[::127.0.0.1]/", nil},
		{"https://[::ffff:0:7f00:1]/", nil},
		{"https://[::127.0.0.1]/", everyPrefix},
		{"https://[::ffff:0:7f00:1]/", everyPrefix},
		{"https://[::ffff:127.0.0.1]/", everyPrefix},
		{"https://[::169.254.169.254]/latest/meta-data/", nil},
		{"https://[::ffff:0:169.254.169.254]/latest/meta-data/", nil},
		{"https://[64:ff9b::7f00:1]:2019/load", everyPrefix},
		{"https://[64:ff9b:1:7f00:0:100::]/", everyPrefix},
		{"https://[2002:7f00:1::1]/", everyPrefix},
		{"https://[2001:0:808:808::80ff:fffe]/", everyPrefix},
		{"https://[2001:0:7f00:1::f7f7:f7f7]/", everyPrefix},
	} {
		u, err := tc.policy.CheckURL(tc.raw)
		var e *Error
		if err == nil || !errors.As(err, &e) || !errors.Is(err, ErrRefused) {
			t.Errorf("CheckURL(%q) = %v, %v; want a refusal", tc.raw, u, err)
			continue
		}
		host := strings.TrimSuffix(strings.TrimPrefix(strings.SplitN(tc.raw, "]", 2)[0], "https://["), "]")
		if want := refuseAddr(netip.MustParseAddr(host)).Reason; e.Reason != want {
			t.Errorf("CheckURL(%q) reason %q, want %q", tc.raw, e.Reason, want)
		}
	}
	// The positive control: a public IPv4 address in an allowed prefix.
	for _, raw := range []string{"https://[64:ff9b::808:808]/", "https://[2002:808:808::1]/"} {
		if _, err := everyPrefix.CheckURL(raw); err != nil {
			t.Errorf("CheckURL(%q) = %v, want accepted", raw, err)
		}
	}
}

// TestTransportRefusesEmbeddedIPv4 is the connect-time half: whether the
// address comes as a literal or from DNS, an IPv6 spelling of 127.0.0.1
// is refused by the policy before connect(2), and the server listening on
// 127.0.0.1 sees no connection. The policy allows every IPv6 prefix, so
// that the refusal can only come from the IPv4 rules.
//
// The kernel does not route most of these forms to 127.0.0.1, so a dial
// that got through would mostly time out or find no route; the test
// therefore insists on a policy refusal, which means no dial was made.
func TestTransportRefusesEmbeddedIPv4(t *testing.T) {
	srv := newTestServer(t, false, nil)
	port := srv.port()
	for _, addr := range []string{
		"::ffff:127.0.0.1",          // IPv4-mapped
		"::127.0.0.1",               // IPv4-compatible
		"::ffff:0:7f00:1",           // IPv4-translated
		"64:ff9b::7f00:1",           // NAT64
		"64:ff9b:1:7f00:0:100::",    // local-use NAT64, /48
		"2002:7f00:1::1",            // 6to4
		"2001:0:7f00:1::f7f7:f7f7",  // Teredo server 127.0.0.1
		"2001:0:808:808::80ff:fffe", // Teredo client 127.0.0.1
	} {
		for _, how := range []string{"literal", "resolved"} {
			t.Run(how+" "+addr, func(t *testing.T) {
				stub := newStub(map[string][]string{"dest.example": {addr}})
				p := &Policy{AllowHTTP: true, AllowNetworks: mustPrefixes("::/0"), Resolver: stub}
				target := "http://dest.example:" + port + "/"
				named := "dest.example"
				if how == "literal" {
					target = "http://[" + addr + "]:" + port + "/"
					named = netip.MustParseAddr(addr).String()
				}
				before := srv.conns.n.Load()
				_, _, err := roundTrip(t, newTransport(t, p), target)
				wantRefused(t, err, named)
				if n := srv.conns.n.Load() - before; n != 0 {
					t.Errorf("server accepted %d connections, want 0", n)
				}
			})
		}
	}
}

package egress

import (
	"net/netip"
	"testing"
)

func TestAllowed(t *testing.T) {
	denied := []string{
		// One or more addresses in every IPv4 range of the deny list.
		"0.0.0.0", "0.255.255.255",
		"10.0.0.1", "10.255.255.255",
		"100.64.0.1", "100.100.100.200", "100.127.255.255",
		"127.0.0.1", "127.255.255.254",
		"169.254.169.254", "169.254.0.1",
		"172.16.0.1", "172.31.255.255",
		"192.0.0.8",
		"192.0.2.1",
		"192.88.99.1",
		"192.168.1.1",
		"198.18.0.1", "198.19.255.255",
		"198.51.100.1",
		"203.0.113.1",
		"224.0.0.1", "239.255.255.250",
		"240.0.0.1", "255.255.255.254",
		"255.255.255.255",
		// IPv4-mapped forms are unmapped first.
		"::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1", "::ffff:0.0.0.0",
		// Every IPv6 range.
		"::",
		"::1",
		"64:ff9b::a9fe:a9fe", "64:ff9b::7f00:1",
		"64:ff9b:1::1",
		"100::1",
		"2001::1", "2001:1ff:ffff::1",
		"2001:db8::1",
		"2002:7f00:1::1",
		"fc00::1", "fd00::1",
		"fe80::1", "fe80::1%eth0", "febf::1",
		"ff02::1", "ff05::1:3",
	}
	allowed := []string{
		"8.8.8.8", "1.1.1.1", "93.184.216.34",
		// Just outside the ranges.
		"1.0.0.0", "9.255.255.255", "11.0.0.0",
		"100.63.255.255", "100.128.0.0",
		"126.255.255.255", "128.0.0.0",
		"169.253.255.255", "169.255.0.0",
		"172.15.255.255", "172.32.0.0",
		"192.0.1.1", "192.0.3.1", "192.88.98.1", "192.167.255.255", "192.169.0.0",
		"198.17.255.255", "198.20.0.0", "198.51.99.1", "203.0.112.1",
		"223.255.255.255",
		"::ffff:8.8.8.8",
		"2606:4700::1111", "2001:4860:4860::8888", "2001:200::1",
		"64:ff9b:2::1", "2003::1",
	}
	p := &Policy{}
	for _, s := range denied {
		if a := netip.MustParseAddr(s); p.Allowed(a) {
			t.Errorf("Allowed(%s) = true, want false", s)
		}
	}
	for _, s := range allowed {
		if a := netip.MustParseAddr(s); !p.Allowed(a) {
			t.Errorf("Allowed(%s) = false, want true", s)
		}
	}
	if p.Allowed(netip.Addr{}) {
		t.Errorf("Allowed(zero Addr) = true")
	}
	var nilPolicy *Policy
	if nilPolicy.Allowed(netip.MustParseAddr("127.0.0.1")) || !nilPolicy.Allowed(netip.MustParseAddr("8.8.8.8")) {
		t.Errorf("nil *Policy does not behave as the default")
	}
}

// TestAllowedDenyListEdges checks the first and last address of every deny
// list entry (addresses just outside are in TestAllowed), so a mistyped
// prefix length shows.
func TestAllowedDenyListEdges(t *testing.T) {
	p := &Policy{}
	for _, n := range append(append([]netip.Prefix{}, denied4...), denied6...) {
		first := n.Masked().Addr()
		last := lastAddr(n)
		for _, a := range []netip.Addr{first, last} {
			if a.Is4In6() {
				continue // ::ffff:0:0/96 is unmapped before the test
			}
			if p.Allowed(a) {
				t.Errorf("Allowed(%s) = true, in %s", a, n)
			}
		}
	}
	if got, want := len(denied4)+len(denied6), 28; got != want {
		t.Errorf("deny list has %d entries, want %d", got, want)
	}
}

func lastAddr(n netip.Prefix) netip.Addr {
	b := n.Masked().Addr().AsSlice()
	for i := n.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func TestAllowNetworks(t *testing.T) {
	p := &Policy{AllowNetworks: []netip.Prefix{
		netip.MustParsePrefix("127.0.0.0/8"),
		netip.MustParsePrefix("10.1.0.0/16"),
		netip.MustParsePrefix("fd00::/8"),
		netip.MustParsePrefix("::ffff:192.168.0.0/112"), // mapped form of 192.168.0.0/16
		netip.MustParsePrefix("fe80::/10"),
	}}
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1", true},
		{"127.9.9.9", true},
		{"::ffff:127.0.0.1", true},
		{"10.1.2.3", true},
		{"10.2.0.1", false},
		{"fd12::1", true},
		{"fc00::1", false},
		{"192.168.3.4", true},
		{"::ffff:192.168.3.4", true},
		{"fe80::1%eth0", true},
		{"169.254.169.254", false},
		{"::1", false},
		{"8.8.8.8", true},
	} {
		if got := p.Allowed(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Allowed(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
	if p.Allowed(netip.Addr{}) {
		t.Errorf("Allowed(zero Addr) = true with AllowNetworks")
	}
}

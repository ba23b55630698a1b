package egress

import (
	"net/netip"
	"testing"
)

func BenchmarkCheckURL(b *testing.B) {
	p := &Policy{}
	for _, bc := range []struct{ name, raw string }{
		{"name", "https://api.stripe.com/v1/charges?x=1"},
		{"ipv4", "https://1.2.3.4/v1/charges"},
		{"ipv6", "https://[2606:4700::1111]:8443/x"},
		{"refused", "https://169.254.169.254/latest/meta-data/"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.CheckURL(bc.raw)
			}
		})
	}
}

func BenchmarkAllowed(b *testing.B) {
	for _, bc := range []struct {
		name   string
		policy *Policy
		addr   string
	}{
		{"public4", &Policy{}, "8.8.8.8"},
		{"denied4", &Policy{}, "169.254.169.254"},
		{"public6", &Policy{}, "2606:4700::1111"},
		{"mapped", &Policy{}, "::ffff:127.0.0.1"},
		{"allowNetworks", &Policy{AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, "127.0.0.1"},
	} {
		a := netip.MustParseAddr(bc.addr)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.policy.Allowed(a)
			}
		})
	}
}

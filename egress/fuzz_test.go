package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// FuzzCheckURL: CheckURL never panics, refuses with an *Error, and what it
// accepts has the promised shape and is accepted again unchanged.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"https://api.stripe.com/v1/charges?x=1",
		"https://xn--exmple-cua.com/path?q=1",
		"HTTPS://API.EXAMPLE.COM",
		"http://127.0.0.1:8080/x",
		"https://169.254.169.254",
		"https://2130706433",
		"https://0x7f.1",
		"https://0177.0.0.1",
		"https://127.1",
		"https://[::ffff:a9fe:a9fe]",
		"https://[::127.0.0.1]/",
		"https://[::ffff:0:7f00:1]/",
		"https://[64:ff9b:1:7f00:0:100::]/",
		"https://[2001:0:808:808::80ff:fffe]/",
		"https://[::1]",
		"https://[fe80::1%25eth0]",
		"https://[2606:4700::1111]:8443/x",
		"https://1.2.3.4",
		"https://good@evil.com",
		"https://evil.com#@good.com",
		"https://evil.com\\@good.com",
		"https://exämple.com",
		"https://ex%61mple.com",
		"https://example.com.",
		"ftp://example.com",
		"//example.com",
		"example.com",
		"https://",
		"https://example.com:0",
		"https://example.com:70000",
		"https:example.com",
	} {
		f.Add(s)
	}
	policies := []*Policy{
		{},
		{AllowHTTP: true},
		{AllowHTTP: true, AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, p := range policies {
			u, err := p.CheckURL(raw)
			if err != nil {
				var e *Error
				if u != nil || !errors.As(err, &e) || !errors.Is(err, ErrRefused) || e.Reason == "" {
					t.Fatalf("CheckURL(%q) = %v, %#v: want nil and a refusal", raw, u, err)
				}
				continue
			}
			if u.User != nil || u.Fragment != "" || u.Opaque != "" || u.Host == "" {
				t.Fatalf("CheckURL(%q) accepted %#v", raw, u)
			}
			if u.Scheme != "https" && !(u.Scheme == "http" && p.AllowHTTP) {
				t.Fatalf("CheckURL(%q) accepted scheme %q with AllowHTTP=%v", raw, u.Scheme, p.AllowHTTP)
			}
			host := u.Hostname()
			if a, err := netip.ParseAddr(host); err == nil {
				if !p.Allowed(a) {
					t.Fatalf("CheckURL(%q) accepted address %s", raw, a)
				}
			} else if !isDNSName(host) || strings.ToLower(host) != host {
				t.Fatalf("CheckURL(%q) accepted host %q", raw, host)
			}
			again, err := p.CheckURL(u.String())
			if err != nil || again.String() != u.String() {
				t.Fatalf("CheckURL(%q) accepted %q, which checks again as %v, %v", raw, u, again, err)
			}
		}
	})
}

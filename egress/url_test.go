package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

var (
	defaultPolicy = &Policy{}
	httpPolicy    = &Policy{AllowHTTP: true}
	localPolicy   = &Policy{AllowHTTP: true, AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
)

func TestCheckURL(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	name253 := strings.Repeat(label63+".", 3) + strings.Repeat("b", 61) // 3*64 + 61 = 253
	addrReason := func(a string) string {
		return "destination address " + a + " is not allowed by the egress policy"
	}
	for _, tc := range []struct {
		name   string
		policy *Policy
		raw    string
		want   string // the accepted URL, or "" when refused
		reason string // the refusal's Reason
	}{
		// Accepted.
		{"punycode with path and query", nil, "https://xn--exmple-cua.com/path?q=1", "https://xn--exmple-cua.com/path?q=1", ""},
		{"stripe", nil, "https://api.stripe.com/v1/charges?x=1", "https://api.stripe.com/v1/charges?x=1", ""},
		{"upper case scheme and host are lowered", nil, "HTTPS://API.EXAMPLE.COM", "https://api.example.com", ""},
		{"mixed case path kept", nil, "https://Example.com/A/B?C=D", "https://example.com/A/B?C=D", ""},
		{"explicit port", nil, "https://example.com:443/x", "https://example.com:443/x", ""},
		{"max port", nil, "https://example.com:65535", "https://example.com:65535", ""},
		{"public IPv4 literal", nil, "https://1.2.3.4/x", "https://1.2.3.4/x", ""},
		{"public IPv6 literal", nil, "https://[2606:4700::1111]:8443/x", "https://[2606:4700::1111]:8443/x", ""},
		{"numeric labels before an alphabetic one", nil, "https://1.2.3.com", "https://1.2.3.com", ""},
		{"hyphens inside labels", nil, "https://a-b.c--d.example", "https://a-b.c--d.example", ""},
		{"63-character label", nil, "https://" + label63 + ".com", "https://" + label63 + ".com", ""},
		{"253-character name", nil, "https://" + name253, "https://" + name253, ""},
		{"single label name is syntax-checked only", nil, "https://localhost", "https://localhost", ""},
		{"encoded path kept", nil, "https://example.com/a%2Fb/%2e%2e?x=%23", "https://example.com/a%2Fb/%2e%2e?x=%23", ""},
		{"http with AllowHTTP", httpPolicy, "http://example.com/x", "http://example.com/x", ""},
		{"loopback with AllowHTTP and AllowNetworks", localPolicy, "http://127.0.0.1:8080/x", "http://127.0.0.1:8080/x", ""},
		{"mapped loopback with AllowNetworks", localPolicy, "https://[::ffff:127.0.0.1]", "https://[::ffff:127.0.0.1]", ""},

		// Scheme and shape.
		{"http by default", nil, "http://127.0.0.1", "", reasonHTTPS},
		{"http public by default", nil, "http://example.com", "", reasonHTTPS},
		{"ftp", nil, "ftp://example.com", "", reasonHTTPS},
		{"ftp with AllowHTTP", httpPolicy, "ftp://example.com", "", reasonHTTP},
		{"file", nil, "file:///etc/passwd", "", reasonHTTPS},
		{"scheme-relative", nil, "//example.com", "", reasonAbsolute},
		{"no scheme", nil, "example.com", "", reasonAbsolute},
		{"path only", nil, "/v1/charges", "", reasonAbsolute},
		{"empty", nil, "", "", reasonAbsolute},
		{"opaque", nil, "https:example.com", "", reasonAbsolute},
		{"opaque javascript", nil, "javascript:alert(1)", "", reasonAbsolute},
		{"no host", nil, "https://", "", reasonNoHost},
		{"no host with path", nil, "https:///etc/passwd", "", reasonNoHost},
		{"port without host", nil, "https://:443", "", reasonNoHost},
		{"unparseable", nil, "https://exa mple.com", "", reasonInvalid},
		{"control character", nil, "https://example.com/\x00", "", reasonInvalid},

		// User information and fragments.
		{"user", nil, "https://good@evil.com", "", reasonUserinfo},
		{"user and password", nil, "https://user:secret@evil.com", "", reasonUserinfo},
		{"empty user", nil, "https://@evil.com", "", reasonUserinfo},
		{"user at IP", nil, "https://good.com@127.0.0.1", "", reasonUserinfo},
		{"fragment hiding an authority", nil, "https://evil.com#@good.com", "", reasonFragment},
		{"empty fragment", nil, "https://example.com/#", "", reasonFragment},

		// Ports.
		{"port 0", nil, "https://example.com:0", "", reasonPort},
		{"port 70000", nil, "https://example.com:70000", "", reasonPort},
		{"port 65536", nil, "https://example.com:65536", "", reasonPort},
		{"empty port", nil, "https://example.com:", "", reasonPort},

		// Host names.
		{"non-ASCII host", nil, "https://exämple.com", "", reasonHost},
		{"percent-encoded non-ASCII host", nil, "https://ex%C3%A4mple.com", "", reasonHost},
		{"trailing dot", nil, "https://example.com.", "", reasonHost},
		{"empty label", nil, "https://example..com", "", reasonHost},
		{"leading dot", nil, "https://.example.com", "", reasonHost},
		{"leading hyphen", nil, "https://-example.com", "", reasonHost},
		{"trailing hyphen", nil, "https://example-.com", "", reasonHost},
		{"underscore", nil, "https://ex_ample.com", "", reasonHost},
		{"64-character label", nil, "https://" + label63 + "a.com", "", reasonHost},
		{"254-character name", nil, "https://" + name253 + "b", "", reasonHost},

		// Non-canonical IP forms.
		{"decimal IPv4", nil, "https://2130706433", "", reasonHost},
		{"hex and short IPv4", nil, "https://0x7f.1", "", reasonHost},
		{"hex IPv4", nil, "https://0x7f000001", "", reasonHost},
		{"upper hex last label", nil, "https://127.0.0.0X1", "", reasonHost},
		{"octal IPv4", nil, "https://0177.0.0.1", "", reasonHost},
		{"leading zero IPv4", nil, "https://01.2.3.4", "", reasonHost},
		{"short IPv4", nil, "https://127.1", "", reasonHost},
		{"short public IPv4", nil, "https://8.8.8", "", reasonHost},
		{"IPv4 in brackets", nil, "https://[1.2.3.4]", "", reasonInvalid},
		{"IPv6 zone", nil, "https://[fe80::1%25eth0]", "", reasonHost},
		{"IPv6 zone with AllowNetworks", &Policy{AllowNetworks: []netip.Prefix{netip.MustParsePrefix("fe80::/10")}}, "https://[fe80::1%25eth0]", "", reasonHost},

		// IP literals refused by the deny list.
		{"loopback with AllowHTTP", httpPolicy, "http://127.0.0.1:8080/x", "", addrReason("127.0.0.1")},
		{"loopback https", nil, "https://127.0.0.1", "", addrReason("127.0.0.1")},
		{"metadata", nil, "https://169.254.169.254", "", addrReason("169.254.169.254")},
		{"metadata with path", nil, "https://169.254.169.254/latest/meta-data/", "", addrReason("169.254.169.254")},
		{"mapped metadata", nil, "https://[::ffff:a9fe:a9fe]", "", addrReason("::ffff:169.254.169.254")},
		{"IPv6 loopback", nil, "https://[::1]", "", addrReason("::1")},
		{"IPv6 loopback long form", nil, "https://[0:0:0:0:0:0:0:1]:2019", "", addrReason("::1")},
		{"NAT64 metadata", nil, "https://[64:ff9b::a9fe:a9fe]", "", addrReason("64:ff9b::a9fe:a9fe")},
		{"private", nil, "https://10.0.0.1", "", addrReason("10.0.0.1")},
		{"unspecified", nil, "https://0.0.0.0:2019", "", addrReason("0.0.0.0")},
		{"AllowNetworks does not allow http", &Policy{AllowNetworks: localPolicy.AllowNetworks}, "http://127.0.0.1:8080/x", "", reasonHTTPS},
		{"AllowNetworks is exact", localPolicy, "http://10.0.0.1/x", "", addrReason("10.0.0.1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := tc.policy.CheckURL(tc.raw)
			if tc.want != "" {
				if err != nil {
					t.Fatalf("CheckURL(%q) = %v, want accepted", tc.raw, err)
				}
				if got := u.String(); got != tc.want {
					t.Fatalf("CheckURL(%q) = %q, want %q", tc.raw, got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckURL(%q) = %q, want refused (%s)", tc.raw, u, tc.reason)
			}
			if u != nil {
				t.Errorf("CheckURL(%q) returned a URL with its error", tc.raw)
			}
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrRefused) {
				t.Fatalf("CheckURL(%q) error %#v is not a refusal", tc.raw, err)
			}
			if e.Reason != tc.reason {
				t.Errorf("CheckURL(%q) reason %q, want %q", tc.raw, e.Reason, tc.reason)
			}
		})
	}
}

// TestCheckURLReasonHidesCredentials: no refusal repeats user information,
// even when url.Parse fails on a URL that contains some.
func TestCheckURLReasonHidesCredentials(t *testing.T) {
	for _, raw := range []string{
		"https://user:s3cr3t@example.com",
		"https://user:s3cr3t@exa mple.com",
		"https://user:s3cr3t@[::1",
		"ftp://user:s3cr3t@example.com",
		"https://user:s3cr3t@127.0.0.1",
		"https://example.com/?key=s3cr3t#frag",
		"https://example.com:99999/?key=s3cr3t",
	} {
		_, err := defaultPolicy.CheckURL(raw)
		if err == nil {
			t.Fatalf("CheckURL(%q) accepted", raw)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("CheckURL(%q) error %q leaks the secret", raw, err)
		}
	}
}

func TestErrorMatchesErrRefused(t *testing.T) {
	err := fmt.Errorf("proxy: %w", &Error{Reason: "destination_url must use https"})
	if !errors.Is(err, ErrRefused) {
		t.Errorf("wrapped *Error does not match ErrRefused")
	}
	if got, want := err.Error(), "proxy: egress: destination_url must use https"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if errors.Is(errors.New("other"), ErrRefused) {
		t.Errorf("unrelated error matches ErrRefused")
	}
	if (&Error{}).Is(errors.New("egress: destination refused by policy")) {
		t.Errorf("*Error matches an error that merely has ErrRefused's text")
	}
}

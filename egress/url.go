package egress

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Reasons given by CheckURL. They never quote the URL, which may carry
// credentials; only a refused IP literal is named.
const (
	reasonInvalid  = "destination_url is not a valid URL"
	reasonAbsolute = "destination_url must be an absolute URL"
	reasonHTTPS    = "destination_url must use https"
	reasonHTTP     = "destination_url must use http or https"
	reasonUserinfo = "destination_url must not contain user information"
	reasonFragment = "destination_url must not contain a fragment"
	reasonNoHost   = "destination_url must have a host"
	reasonPort     = "destination_url port must be between 1 and 65535"
	reasonHost     = "destination_url host must be a DNS name or a canonical IP address"
)

// DNS name limits (RFC 1035).
const (
	maxDNSNameLen  = 253
	maxDNSLabelLen = 63
)

// refuseAddr is the refusal of an address that Allowed rejects.
func refuseAddr(addr netip.Addr) *Error {
	return refuse("destination address " + addr.String() + " is not allowed by the egress policy")
}

// CheckURL validates a destination URL, when it is saved and again when it
// is used. It looks at syntax only and does no DNS; the addresses a name
// resolves to are checked by the dialer of [Policy.Transport].
//
// The URL must be absolute with scheme https (or http when AllowHTTP), and
// have no user information and no fragment. Its host must be either a DNS
// name made of ASCII letter-digit-hyphen labels whose last label does not
// look like a number, or an IP literal in canonical form (a dotted quad or
// a bracketed IPv6 address without zone) that [Policy.Allowed] accepts.
// A port, if present, must be 1 to 65535. Scheme and host are case
// insensitive; the returned URL has both in lower case and keeps path and
// query as given. Any refusal is an [*Error] matching [ErrRefused].
func (p *Policy) CheckURL(raw string) (*url.URL, error) {
	// A '#' can only start a fragment; checking the raw text also catches
	// the empty fragment, which url.URL does not record.
	if strings.Contains(raw, "#") {
		return nil, refuse(reasonFragment)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse errors quote the URL, credentials included.
		return nil, refuse(reasonInvalid)
	}
	if u.Scheme == "" || u.Opaque != "" {
		return nil, refuse(reasonAbsolute)
	}
	allowHTTP := p != nil && p.AllowHTTP
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowHTTP:
	case allowHTTP:
		return nil, refuse(reasonHTTP)
	case u.Scheme == "http":
		e := refuse(reasonHTTPS)
		e.Remedy = RemedyAllowHTTP
		return nil, e
	default:
		return nil, refuse(reasonHTTPS)
	}
	if u.User != nil {
		return nil, refuse(reasonUserinfo)
	}
	if u.Host == "" {
		return nil, refuse(reasonNoHost)
	}
	host, port := splitHostPort(u.Host)
	if port != nil {
		if n, err := strconv.ParseUint(*port, 10, 16); err != nil || n == 0 {
			return nil, refuse(reasonPort)
		}
	}
	if host == "" {
		return nil, refuse(reasonNoHost)
	}
	if strings.HasPrefix(host, "[") {
		// url.Parse guarantees the closing bracket.
		addr, err := netip.ParseAddr(strings.TrimSuffix(host[1:], "]"))
		if err != nil || !addr.Is6() || addr.Zone() != "" {
			return nil, refuse(reasonHost)
		}
		if !p.Allowed(addr) {
			return nil, p.refuseAddrOf(addr)
		}
	} else if addr, err := netip.ParseAddr(host); err == nil {
		// netip accepts only the canonical dotted quad for IPv4 (no octal,
		// hex or shortened forms); an unbracketed IPv6 cannot get here
		// through url.Parse, but refuse it anyway.
		if !addr.Is4() {
			return nil, refuse(reasonHost)
		}
		if !p.Allowed(addr) {
			return nil, p.refuseAddrOf(addr)
		}
	} else if !isDNSName(host) {
		return nil, refuse(reasonHost)
	}
	u.Host = strings.ToLower(u.Host)
	return u, nil
}

// splitHostPort splits u.Host into host and port; port is nil when there
// is no colon after the host, and points to "" for a trailing colon.
func splitHostPort(hostport string) (host string, port *string) {
	i := strings.LastIndexByte(hostport, ':')
	if i < 0 || strings.LastIndexByte(hostport, ']') > i {
		return hostport, nil
	}
	p := hostport[i+1:]
	return hostport[:i], &p
}

// isDNSName reports whether s is a DNS name in the form CheckURL accepts:
// ASCII letter-digit-hyphen labels of 1 to 63 characters that neither
// start nor end with a hyphen, at most 253 characters in all, no trailing
// dot, and a last label that is not all digits and does not start with
// "0x", so that nothing a resolver might read as an IPv4 address in a
// shorthand form (2130706433, 0x7f.1, 0177.0.0.1, 127.1) passes.
func isDNSName(s string) bool {
	if len(s) == 0 || len(s) > maxDNSNameLen {
		return false
	}
	var last string
	for label := range strings.SplitSeq(s, ".") {
		if len(label) == 0 || len(label) > maxDNSLabelLen ||
			label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
		last = label
	}
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		return false
	}
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return true
		}
	}
	return false // all digits
}

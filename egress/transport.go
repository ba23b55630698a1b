package egress

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"syscall"
	"time"
)

// Transport settings, see Policy.Transport.
const (
	dialTimeout            = 10 * time.Second
	dialKeepAlive          = 30 * time.Second
	tlsHandshakeTimeout    = 10 * time.Second
	maxIdleConns           = 512
	maxIdleConnsPerHost    = 256
	idleConnTimeout        = 90 * time.Second
	responseHeaderTimeout  = 25 * time.Second
	expectContinueTimeout  = 1 * time.Second
	maxResponseHeaderBytes = 64 << 10
)

// Transport returns a new *http.Transport that enforces the policy when it
// connects. Its dialer resolves the host with the policy's Resolver,
// drops every address that [Policy.Allowed] refuses, and dials the rest in
// order; the dialer's Control hook checks the exact address once more just
// before connecting. When no address is left the dial fails with an
// [*Error], which RoundTrip returns wrapped so that errors.Is(err,
// ErrRefused) holds. Resolver failures are returned as they are and do not
// match ErrRefused.
//
// The transport ignores the HTTP_PROXY, HTTPS_PROXY and NO_PROXY
// environment variables (Proxy is nil), verifies certificates normally
// against RootCAs with TLS 1.2 at least, attempts HTTP/2, and does not ask
// for or undo compression, so bodies pass through untouched.
//
// Like every http.Transport it does not follow redirects: a 3xx response
// is returned as it is. Callers should use RoundTrip directly; an
// http.Client built on this transport would follow redirects, and while
// the dialer would still refuse forbidden addresses, the redirect target
// would skip [Policy.CheckURL] (for example an https to http downgrade).
//
// The policy is copied, so later changes to p do not affect the returned
// transport. Create one transport and reuse it, so connections are pooled.
func (p *Policy) Transport() *http.Transport {
	pol := &Policy{}
	if p != nil {
		*pol = *p
		pol.AllowNetworks = slices.Clone(p.AllowNetworks)
	}
	d := &net.Dialer{
		Timeout:   dialTimeout,
		KeepAlive: dialKeepAlive,
		Control:   pol.control,
	}
	return &http.Transport{
		Proxy:       nil,
		DialContext: pol.dialContext(d),
		TLSClientConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			RootCAs:    pol.RootCAs,
		},
		TLSHandshakeTimeout:    tlsHandshakeTimeout,
		ForceAttemptHTTP2:      true,
		DisableCompression:     true,
		MaxIdleConns:           maxIdleConns,
		MaxIdleConnsPerHost:    maxIdleConnsPerHost,
		IdleConnTimeout:        idleConnTimeout,
		ResponseHeaderTimeout:  responseHeaderTimeout,
		ExpectContinueTimeout:  expectContinueTimeout,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
	}
}

// dialContext returns the transport's DialContext: resolve, filter by the
// policy, then dial the allowed addresses in order with d.
func (p *Policy) dialContext(d *net.Dialer) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		addrs, err := p.allowedAddrs(ctx, network, host)
		if err != nil {
			return nil, err
		}
		var first error
		for _, a := range addrs {
			c, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
			if err == nil {
				return c, nil
			}
			if first == nil {
				first = err
			}
			if ctx.Err() != nil {
				break
			}
		}
		return nil, first
	}
}

// allowedAddrs returns the addresses of host that the policy allows, in
// the resolver's order, or a refusal when there are none.
func (p *Policy) allowedAddrs(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if host == "" {
		return nil, refuse("destination host is empty")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !p.Allowed(a) {
			return nil, p.refuseAddrOf(a)
		}
		return []netip.Addr{a}, nil
	}
	var r Resolver = net.DefaultResolver
	if p.Resolver != nil {
		r = p.Resolver
	}
	ips, err := r.LookupNetIP(ctx, lookupNetwork(network), host)
	if err != nil {
		return nil, err
	}
	addrs := make([]netip.Addr, 0, len(ips))
	for _, a := range ips {
		if p.Allowed(a) {
			addrs = append(addrs, a.Unmap())
		}
	}
	if len(addrs) == 0 {
		return nil, p.refuseResolved("destination host "+host+" has no address allowed by the egress policy", ips)
	}
	return addrs, nil
}

// lookupNetwork maps a dial network to the matching lookup network.
func lookupNetwork(network string) string {
	switch network {
	case "tcp4":
		return "ip4"
	case "tcp6":
		return "ip6"
	}
	return "ip"
}

// control is the dialer's Control hook: it re-checks the address the
// socket is about to connect to, whatever produced it.
func (p *Policy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return refuse("destination address is not an IP address")
	}
	if !p.Allowed(ap.Addr()) {
		e := refuseAddr(ap.Addr())
		e.Remedy = p.refuseResolved("", []netip.Addr{ap.Addr()}).Remedy
		return e
	}
	return nil
}

package egress

import (
	"errors"
	"net/netip"
	"slices"
)

// ErrRefused is matched, through [errors.Is], by every refusal of the
// egress policy: those from [Policy.CheckURL] and those from the dialer of
// [Policy.Transport], even after net/http has wrapped them.
var ErrRefused = errors.New("egress: destination refused by policy")

// Error is a refusal by the egress policy. Reason is a short sentence that
// is safe to show to API callers: it may name the destination host or
// address but never includes credentials or the rest of the URL.
type Error struct {
	Reason string
	// Remedy is the Policy setting that would allow the destination,
	// RemedyNone when no setting would (or none should be suggested).
	Remedy Remedy
	// Network, with RemedyAllowNetwork, is an entry of AllowNetworks that
	// would allow the refused address: the address alone, named only when
	// the caller named it (an IP literal in the URL). It is the zero
	// Prefix when the address came from DNS, which callers do not learn.
	Network netip.Prefix
}

// Remedy names a Policy setting that would allow a refused destination.
type Remedy int

// Remedies of a refusal.
const (
	// RemedyNone: no setting of the policy would allow the destination.
	RemedyNone Remedy = iota
	// RemedyAllowHTTP: Policy.AllowHTTP would allow it (an http URL).
	RemedyAllowHTTP
	// RemedyAllowNetwork: an entry of Policy.AllowNetworks covering the
	// refused address would allow it (a loopback, private or other
	// special-purpose address).
	RemedyAllowNetwork
)

// Error returns the reason prefixed with "egress: ".
func (e *Error) Error() string { return "egress: " + e.Reason }

// Is reports whether target is [ErrRefused], so that errors.Is(err,
// ErrRefused) holds for every refusal.
func (e *Error) Is(target error) bool { return target == ErrRefused }

func refuse(reason string) *Error { return &Error{Reason: reason} }

// refuseAddrOf is refuseAddr with its remedy: the address alone, as a
// network, when allowing it would let addr through. An address that
// embeds a refused IPv4 address gets no remedy: allowing it alone does
// not help, and such spellings are how callers try to reach what the
// policy protects.
func (p *Policy) refuseAddrOf(addr netip.Addr) *Error {
	e := refuseAddr(addr)
	if n, ok := p.remedyNetwork(addr); ok {
		e.Remedy, e.Network = RemedyAllowNetwork, n
	}
	return e
}

// refuseResolved is the refusal of a host whose addresses the policy
// all refuses. The remedy names no address: they came from DNS.
func (p *Policy) refuseResolved(reason string, addrs []netip.Addr) *Error {
	e := refuse(reason)
	for _, a := range addrs {
		if _, ok := p.remedyNetwork(a); !ok {
			return e
		}
	}
	if len(addrs) > 0 {
		e.Remedy = RemedyAllowNetwork
	}
	return e
}

// remedyNetwork returns addr alone as a network, and whether adding it to
// AllowNetworks would allow addr.
func (p *Policy) remedyNetwork(addr netip.Addr) (netip.Prefix, bool) {
	a := addr.Unmap().WithZone("")
	if !a.IsValid() {
		return netip.Prefix{}, false
	}
	n := netip.PrefixFrom(a, a.BitLen())
	var q Policy
	if p != nil {
		q = *p
	}
	q.AllowNetworks = append(slices.Clip(q.AllowNetworks), n)
	return n, q.Allowed(addr)
}

package egress

import "net/netip"

// IPv6 forms that carry an IPv4 address. An address in one of them is
// refused when an IPv4 address it embeds is refused, whatever the IPv6
// rules say of the prefix itself, so that an operator who allows, say,
// 64:ff9b::/96 for DNS64 still cannot be led to 64:ff9b::127.0.0.1.
//
// The IPv4-mapped form (::ffff:0:0/96) needs no prefix here: Allowed
// unmaps it before anything else, so it is judged by the IPv4 rules alone.
var (
	prefixCompatible = netip.MustParsePrefix("::/96")           // IPv4-compatible, RFC 4291 2.5.5.1 (deprecated)
	prefixTranslated = netip.MustParsePrefix("::ffff:0:0:0/96") // IPv4-translated, RFC 2765 (SIIT)
	prefixNAT64      = netip.MustParsePrefix("64:ff9b::/96")    // NAT64 well-known prefix, RFC 6052
	prefixNAT64Local = netip.MustParsePrefix("64:ff9b:1::/48")  // NAT64 local-use prefix, RFC 8215
	prefix6to4       = netip.MustParsePrefix("2002::/16")       // 6to4, RFC 3056
	prefixTeredo     = netip.MustParsePrefix("2001::/32")       // Teredo, RFC 4380
	ipv6Unspecified  = netip.IPv6Unspecified()
	ipv6Loopback     = netip.IPv6Loopback()
)

// embeddedIPv4 returns the IPv4 addresses that the IPv6 address a embeds,
// n of them (0, 1 or 2), in v4[:n]. a must be without zone.
//
//   - IPv4-mapped ::ffff:a.b.c.d (::ffff:0:0/96): the last 32 bits (Allowed
//     unmaps these first, so they only show here for completeness).
//   - IPv4-compatible ::a.b.c.d (::/96): the last 32 bits; :: and ::1 are
//     not IPv4 addresses and keep their own rules.
//   - IPv4-translated ::ffff:0:a.b.c.d (::ffff:0:0:0/96): the last 32 bits.
//   - NAT64 well-known prefix 64:ff9b::a.b.c.d (64:ff9b::/96): the last 32
//     bits.
//   - NAT64 local-use prefix (64:ff9b:1::/48): where RFC 6052 section 2.2
//     puts the address for a NAT64 prefix of localBits bits (48, 56, 64
//     or 96; any other value is taken as 48, the length of the whole
//     local-use range). For /48 the address is split around the u-octet
//     (bits 64-71): its first half is in bits 48-63, its second in bits
//     72-87.
//   - 6to4 2002:aabb:ccdd::/48 (2002::/16): bits 16-47.
//   - Teredo (2001::/32): the server in bits 32-63, and the client in the
//     last 32 bits, inverted (XOR 0xffffffff).
func embeddedIPv4(a netip.Addr, localBits int) (v4 [2]netip.Addr, n int) {
	if !a.Is6() {
		return v4, 0
	}
	b := a.As16()
	switch {
	case a.Is4In6():
		v4[0] = a.Unmap()
		return v4, 1
	case prefixCompatible.Contains(a):
		if a == ipv6Unspecified || a == ipv6Loopback {
			return v4, 0
		}
		v4[0] = rfc6052IPv4(b, 96)
		return v4, 1
	case prefixTranslated.Contains(a), prefixNAT64.Contains(a):
		v4[0] = rfc6052IPv4(b, 96)
		return v4, 1
	case prefixNAT64Local.Contains(a):
		v4[0] = rfc6052IPv4(b, localBits)
		return v4, 1
	case prefix6to4.Contains(a):
		v4[0] = netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
		return v4, 1
	case prefixTeredo.Contains(a):
		v4[0] = netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]})
		v4[1] = netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		return v4, 2
	}
	return v4, 0
}

// rfc6052IPv4 extracts the IPv4 address embedded in the IPv6 address b
// behind a NAT64 prefix of prefixBits bits (RFC 6052 section 2.2, figure
// 1). The u-octet, byte 8, never holds address bits. Lengths below 48 are
// not reachable inside 64:ff9b:1::/48 and lengths other than those RFC
// 6052 defines are taken as 48.
func rfc6052IPv4(b [16]byte, prefixBits int) netip.Addr {
	switch prefixBits {
	case 56:
		return netip.AddrFrom4([4]byte{b[7], b[9], b[10], b[11]})
	case 64:
		return netip.AddrFrom4([4]byte{b[9], b[10], b[11], b[12]})
	case 96:
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	default: // 48
		return netip.AddrFrom4([4]byte{b[6], b[7], b[9], b[10]})
	}
}

// localNAT64Bits is the length of the NAT64 prefix in use inside
// 64:ff9b:1::/48, as far as the policy tells: the length of the allowed
// network that let the address through, when that network lies inside
// the local-use range, or else 48. It only matters when an operator has
// allowed part of that range, which the deny list refuses by default.
func localNAT64Bits(allowedBy netip.Prefix) int {
	if allowedBy.IsValid() && allowedBy.Bits() >= prefixNAT64Local.Bits() && prefixNAT64Local.Contains(allowedBy.Addr()) {
		return allowedBy.Bits()
	}
	return prefixNAT64Local.Bits()
}

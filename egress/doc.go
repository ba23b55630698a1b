// Package egress decides which destinations the detokenizing proxy may
// reach, and enforces that decision when connections are made.
//
// The proxy forwards customer requests, with real card numbers in them, to
// a destination URL that a customer chose: one stored on a proxy or one
// given in a request header. Left unchecked this is a server-side request
// forgery (SSRF) primitive: a customer could make the vault call its own
// admin API on localhost:2019, other services on the private network, or
// a cloud metadata endpoint such as 169.254.169.254 that hands out
// credentials, and read the answers back.
//
// The defence has two layers, both driven by a [Policy]:
//
//   - [Policy.CheckURL] checks a destination URL's syntax when it is saved
//     and again when it is used: an absolute https URL (http only when
//     allowed), no user information, no fragment, and a host that is
//     either a plain DNS name or an IP literal in canonical form. The
//     shorthand IPv4 forms that resolvers accept (2130706433, 0x7f.1,
//     0177.0.0.1, 127.1) are refused rather than interpreted, and an IP
//     literal must be allowed by [Policy.Allowed]. CheckURL does no DNS.
//
//   - [Policy.Transport] builds a [net/http.Transport] that resolves the
//     host itself and connects only to addresses that [Policy.Allowed]
//     accepts, re-checking the exact address in the dialer's Control hook
//     just before connect(2). A name that looked public when it was saved
//     or checked may resolve to 127.0.0.1 a second later (DNS rebinding);
//     because the check happens on the very address being connected to,
//     that does not help an attacker. Proxy environment variables are
//     ignored so the policy cannot be side-stepped through an HTTP proxy.
//
// [Policy.Allowed] refuses the special-purpose address ranges (loopback,
// RFC 1918 and carrier-grade NAT space, link-local including the metadata
// address, multicast, documentation and benchmarking ranges, NAT64 and
// 6to4 prefixes that embed IPv4 addresses, unique-local IPv6, ...) unless
// the operator listed a network in [Policy.AllowNetworks], which is meant
// for tests and on-premises destinations. Every IPv6 form that embeds an
// IPv4 address (mapped, compatible, translated, NAT64, 6to4, Teredo) is
// also judged by the IPv4 rules: it is refused when an address it embeds
// is refused, even if its IPv6 prefix is allowed.
//
// Every refusal, whether from CheckURL or at dial time, is an [*Error] and
// matches [ErrRefused] with [errors.Is].
package egress

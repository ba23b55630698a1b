package console

import "net/http"

// ContentSecurityPolicy is the policy of every console response. Scripts,
// styles and images come from the console's own files only (no inline
// script or style, no eval), fetch and XHR go to the same origin only
// (the vault's API), nothing may frame the console, forms post nowhere,
// and DOM sinks that parse HTML from strings are closed (Trusted Types
// with no policy: the console builds its DOM with Preact, never with
// innerHTML).
const ContentSecurityPolicy = "default-src 'none'; " +
	"script-src 'self'; " +
	"style-src 'self'; " +
	"img-src 'self'; " +
	"connect-src 'self'; " +
	"base-uri 'none'; " +
	"form-action 'none'; " +
	"frame-ancestors 'none'; " +
	"object-src 'none'; " +
	"require-trusted-types-for 'script'; " +
	"trusted-types 'none'"

// securityHeaders are set on every response of the console.
var securityHeaders = [][2]string{
	{"Content-Security-Policy", ContentSecurityPolicy},
	{"X-Content-Type-Options", "nosniff"},
	{"X-Frame-Options", "DENY"},
	{"Referrer-Policy", "no-referrer"},
	{"Cross-Origin-Opener-Policy", "same-origin"},
	{"Cross-Origin-Resource-Policy", "same-origin"},
	{"Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=(), usb=(), clipboard-read=()"},
}

func setSecurityHeaders(h http.Header) {
	for _, kv := range securityHeaders {
		h.Set(kv[0], kv[1])
	}
}

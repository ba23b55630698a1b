// Package console is the vault's web console: the Caddy handler
// http.handlers.vault_console (Caddyfile directive vault_console) serves
// a single-page application whose files are embedded in the binary
// (assets/, go:embed), so there is no second server and no build step.
//
// The console holds no secret and no state of its own. In the browser it
// calls the vault's public REST API on the same origin with the API keys
// the user pastes in (kept in memory, or in sessionStorage when the user
// asks; never in localStorage or a cookie), so it can do nothing that
// those keys cannot. Every response the handler writes carries a strict
// Content-Security-Policy: scripts and styles from the console's own
// files only, no inline script, no eval, connections to the same origin
// only (the API), no frames around it, no other origin contacted.
//
// The front end is plain ES modules with Preact and htm vendored as files
// (assets/vendor, versions and licences in assets/vendor/VENDOR.md): what
// is committed is what is served.
package console

// Package tokenvault is the Caddy plugin: importing it registers every
// Tokenvault module (the vault app, the vault_api, vault_proxy and
// vault_console handlers, the tls.permission.vault on-demand permission, the
// admin.api.vault routes, the caddy.storage.vault_postgres certificate
// storage) and the `caddy vault` command, as xcaddy's generated main does:
//
//	xcaddy build --with github.com/tokenvault/tokenvault
//
// The modules themselves live in the caddymodule package and below it.
package tokenvault

import (
	_ "github.com/tokenvault/tokenvault/caddymodule"             // the vault app, handlers, admin routes and CLI
	_ "github.com/tokenvault/tokenvault/caddymodule/certstorage" // caddy.storage.vault_postgres
	_ "github.com/tokenvault/tokenvault/caddymodule/console"     // http.handlers.vault_console
	"github.com/tokenvault/tokenvault/internal/version"
)

// Version is Tokenvault's release (semantic versioning, without the
// leading "v"); the release's tag is "v" + Version.
const Version = version.Version

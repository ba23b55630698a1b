package caddymodule

// The certificate storage on PostgreSQL (caddy.storage.vault_postgres) is
// a package of its own; importing it here registers it in every build
// that has the vault, an xcaddy build included.
import _ "github.com/tokenvault/tokenvault/caddymodule/certstorage"

package caddymodule

// The web console (http.handlers.vault_console) is a package of its own;
// importing it here registers it in every build that has the vault, an
// xcaddy build included.
import _ "github.com/tokenvault/tokenvault/caddymodule/console"

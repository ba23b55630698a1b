// Command caddy is Caddy with the token vault: what xcaddy would build
// from xcaddy.json (xcaddy itself is not needed).
package main

import (
	_ "time/tzdata"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/tokenvault/tokenvault/caddymodule"
	_ "github.com/tokenvault/tokenvault/caddymodule/certstorage" // caddy.storage.vault_postgres
)

func main() {
	caddycmd.Main()
}

// Command caddy is Caddy with the token vault: what xcaddy would build
// from xcaddy.json (xcaddy itself is not needed). Like xcaddy's generated
// main it imports the plugin's module path, whose package registers every
// vault module.
package main

import (
	_ "time/tzdata"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/tokenvault/tokenvault"
)

func main() {
	caddycmd.Main()
}

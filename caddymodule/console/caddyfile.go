package console

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("vault_console", parseVaultConsole)
	// Before file_server, as vault_api; this package's init runs before
	// caddymodule's (which imports it), so vault_console lands ahead of
	// vault_api and sees the console's paths first
	// (testdata/caddyfile_adapt/vault_console.caddyfiletest).
	httpcaddyfile.RegisterDirectiveOrder("vault_console", httpcaddyfile.Before, "file_server")
}

func parseVaultConsole(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	c := new(Console)
	err := c.UnmarshalCaddyfile(h.Dispenser)
	return c, err
}

// UnmarshalCaddyfile sets up the console from Caddyfile tokens. Syntax:
//
//	vault_console {
//	    prefix <path>
//	}
//
// The prefix defaults to /console. (It is not an argument: Caddy reads a
// first argument that starts with / as a request matcher.) Put the
// directive in the site that serves vault_api: the console calls the API
// on its own origin.
func (c *Console) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "prefix":
			if c.Prefix != "" {
				return d.Err("prefix already set")
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			c.Prefix = d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}
		default:
			return d.Errf("unrecognized vault_console option %q", d.Val())
		}
	}
	if err := checkPrefix(c.Prefix); err != nil {
		return d.Err(err.Error())
	}
	return nil
}

// Interface guard.
var _ caddyfile.Unmarshaler = (*Console)(nil)

package certstorage

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// UnmarshalCaddyfile sets up the storage from Caddyfile tokens, in the
// global options. Syntax:
//
//	storage vault_postgres {
//	    connection_string <placeholder>
//	    table             <name>
//	}
//
// The connection string must be one placeholder, {env.NAME} or
// {file./path}; a literal is refused here already, so that caddy adapt
// never prints a password. The table is optional.
func (m *Module) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the module name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "connection_string":
			if m.ConnectionString != "" {
				return d.Err("connection_string already set")
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			m.ConnectionString = d.Val()
			if !placeholderRE.MatchString(m.ConnectionString) {
				m.ConnectionString = ""
				return d.Err(errLiteral.Error())
			}
		case "table":
			if m.Table != "" {
				return d.Err("table already set")
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			m.Table = d.Val()
		default:
			return d.Errf("unrecognized vault_postgres storage option %q", d.Val())
		}
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	if err := m.check(); err != nil {
		return d.Err(err.Error())
	}
	return nil
}

// Interface guard.
var _ caddyfile.Unmarshaler = (*Module)(nil)

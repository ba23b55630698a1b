package caddymodule

import (
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("vault", parseGlobalVault)
	httpcaddyfile.RegisterHandlerDirective("vault_api", parseVaultAPI)
	// after respond and reverse_proxy, so a site can still answer its own paths beside the API
	httpcaddyfile.RegisterDirectiveOrder("vault_api", httpcaddyfile.Before, "file_server")
}

// parseGlobalVault sets up the vault app from the global option.
func parseGlobalVault(d *caddyfile.Dispenser, existing any) (any, error) {
	app := new(App)
	if existing != nil {
		return nil, d.Err("the vault global option may appear only once")
	}
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "vault", Value: caddyconfig.JSON(app, nil)}, nil
}

// UnmarshalCaddyfile sets up the vault app from Caddyfile tokens. Syntax:
//
//	vault {
//	    storage         <directory>
//	    master_key      <{env.NAME} or {file.PATH} placeholder>
//	    master_key_file <path>
//	    previous_master_keys <placeholder>...
//	    sync_writes     on|off
//	    metrics_per_tenant on|off
//	    header_prefix   <prefix>
//	    transforms {
//	        min_workers <n>
//	        max_workers <n>
//	        max_workers_per_tenant <n>
//	        timeout <duration>
//	        queue_timeout <duration>
//	        memory_limit <size>
//	        modules_dir <directory>
//	        allow <package>...
//	    }
//	    egress {
//	        allow_http
//	        allow_network <cidr>...
//	    }
//	    cache {
//	        records     <n>
//	        block_cache <size>
//	    }
//	    rate_limit_redis [<url>] {
//	        url        <url>
//	        key_prefix <prefix>
//	        timeout    <duration>
//	    }
//	    postgres {
//	        connection_string {env.TOKENVAULT_POSTGRES_URL}
//	        table             <name>
//	        max_conns         <n>
//	        statement_timeout <duration>
//	    }
//	}
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // option name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		option := d.Val()
		switch option {
		case "egress":
			if err := a.unmarshalEgress(d); err != nil {
				return err
			}
			continue
		case "transforms":
			if err := a.unmarshalTransforms(d); err != nil {
				return err
			}
			continue
		case "cache":
			if err := a.unmarshalCache(d); err != nil {
				return err
			}
			continue
		case "rate_limit_redis":
			if err := a.unmarshalRateLimitRedis(d); err != nil {
				return err
			}
			continue
		case "postgres":
			if err := a.unmarshalPostgres(d); err != nil {
				return err
			}
			continue
		case "previous_master_keys":
			if a.PreviousMasterKeys = d.RemainingArgs(); len(a.PreviousMasterKeys) == 0 {
				return d.ArgErr()
			}
			for _, p := range a.PreviousMasterKeys {
				if !isPlaceholder(p) {
					return d.Err(errPreviousMasterKeyLiteral.Error()) // at adapt time, so a key never reaches the JSON
				}
			}
			continue
		}
		var value string
		if !d.Args(&value) || d.NextArg() {
			return d.ArgErr()
		}
		switch option {
		case "storage":
			a.Storage = value
		case "master_key":
			if !isPlaceholder(value) {
				return d.Err(errMasterKeyLiteral.Error()) // at adapt time, so the key never reaches the JSON
			}
			a.MasterKey = value
		case "master_key_file":
			a.MasterKeyFile = value
		case "header_prefix":
			a.HeaderPrefix = value
		case "metrics_per_tenant":
			on, err := parseOnOff(value)
			if err != nil {
				return d.Errf("metrics_per_tenant: %v", err)
			}
			a.MetricsPerTenant = on
		case "sync_writes":
			on, err := parseOnOff(value)
			if err != nil {
				return d.Errf("sync_writes: %v", err)
			}
			a.SyncWrites = &on
		default:
			return d.Errf("unrecognized vault option %q", option)
		}
	}
	return nil
}

// unmarshalEgress reads the egress block.
func (a *App) unmarshalEgress(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	if a.Egress == nil {
		a.Egress = new(EgressConfig)
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "allow_http":
			if d.NextArg() {
				return d.ArgErr()
			}
			a.Egress.AllowHTTP = true
		case "allow_network":
			networks := d.RemainingArgs()
			if len(networks) == 0 {
				return d.ArgErr()
			}
			a.Egress.AllowNetworks = append(a.Egress.AllowNetworks, networks...)
		default:
			return d.Errf("unrecognized egress option %q", d.Val())
		}
	}
	return nil
}

func parseOnOff(v string) (bool, error) {
	switch v {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return strconv.ParseBool(v)
}

// parseVaultAPI sets up the vault_api handler.
func parseVaultAPI(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	api := new(API)
	err := api.UnmarshalCaddyfile(h.Dispenser)
	return api, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	vault_api {
//	    health_path <path>
//	    rate_limits off | { <rule> off | <rule> <limit> <period> [block <duration>] }
//	}
//
// The handler answers every request that reaches it with the vault's REST
// API; the vault app's global option configures the vault itself.
func (h *API) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "health_path":
			if !d.Args(&h.HealthPath) || d.NextArg() {
				return d.ArgErr()
			}
			if !strings.HasPrefix(h.HealthPath, "/") {
				return d.Errf("health_path must start with /")
			}
		case "rate_limits":
			cfg, err := unmarshalRateLimits(d)
			if err != nil {
				return err
			}
			h.RateLimits = cfg
		default:
			return d.Errf("unrecognized vault_api option %q", d.Val())
		}
	}
	return nil
}

// Interface guards
var (
	_ caddyfile.Unmarshaler = (*App)(nil)
	_ caddyfile.Unmarshaler = (*API)(nil)
)

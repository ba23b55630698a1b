package caddymodule

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("vault", parseGlobalVault)
	httpcaddyfile.RegisterHandlerDirective("vault_api", parseVaultAPI)
	// after respond and reverse_proxy, so a site can still answer its own paths beside the API
	httpcaddyfile.RegisterDirectiveOrder("vault_api", httpcaddyfile.Before, "file_server")
	httpcaddyfile.RegisterHandlerDirective("vault_proxy", parseVaultProxy)
	httpcaddyfile.RegisterDirectiveOrder("vault_proxy", httpcaddyfile.Before, "file_server")
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
//	    bin_table       <CSV file>
//	    previous_master_keys <placeholder>...
//	    sync_writes     on|off
//	    audit_sync      deferred|strict
//	    metrics_per_tenant on|off
//	    header_prefix   <prefix>
//	    document_max_size <size>
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
//	    async_reactions {
//	        max_queued_per_tenant <n>
//	        result_ttl            <duration>
//	        concurrency           <n>
//	    }
//	    egress {
//	        allow_http
//	        allow_network <cidr>...
//	    }
//	    webhooks {
//	        retry_base <duration>
//	        retry_max  <duration>
//	        retry_for  <duration>
//	        timeout    <duration>
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
		case "webhooks":
			if err := a.unmarshalWebhooks(d); err != nil {
				return err
			}
			continue
		case "transforms":
			if err := a.unmarshalTransforms(d); err != nil {
				return err
			}
			continue
		case "async_reactions":
			if err := a.unmarshalAsyncReactions(d); err != nil {
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
		case "bin_table":
			a.BINTable = value
		case "master_key":
			if !isPlaceholder(value) {
				return d.Err(errMasterKeyLiteral.Error()) // at adapt time, so the key never reaches the JSON
			}
			a.MasterKey = value
		case "master_key_file":
			a.MasterKeyFile = value
		case "header_prefix":
			a.HeaderPrefix = value
		case "document_max_size":
			n, err := humanize.ParseBytes(value)
			if err != nil || n == 0 || n > 1<<40 {
				return d.Errf("document_max_size: %q is not a size such as 25MB", value)
			}
			a.DocumentMaxSize = int64(n)
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
		case "audit_sync":
			if value != AuditSyncDeferred && value != AuditSyncStrict {
				return d.Errf("audit_sync: %q is not deferred or strict", value)
			}
			a.AuditSync = value
		default:
			return d.Errf("unrecognized vault option %q", option)
		}
	}
	return nil
}

// unmarshalWebhooks reads the webhooks block.
func (a *App) unmarshalWebhooks(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	if a.Webhooks == nil {
		a.Webhooks = new(WebhooksConfig)
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		option := d.Val()
		var value string
		if !d.Args(&value) || d.NextArg() {
			return d.ArgErr()
		}
		if err := a.Webhooks.set(option, value); err != nil {
			return d.Err(err.Error())
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

// unmarshalCache reads the cache block:
//
//	cache {
//	    records     <n>
//	    block_cache <size, e.g. 256MiB>
//	}
//
// index_cache <size> is still read, and ignored with a warning.
func (a *App) unmarshalCache(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	if a.Cache == nil {
		a.Cache = new(CacheConfig)
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		option := d.Val()
		var value string
		if !d.Args(&value) || d.NextArg() {
			return d.ArgErr()
		}
		switch option {
		case "records":
			n, err := strconv.Atoi(value)
			if err != nil || n < 1 {
				return d.Errf("cache records: want a positive number of entries, got %q", value)
			}
			a.Cache.Records = n
		case "block_cache", "index_cache":
			n, err := humanize.ParseBytes(value)
			if err != nil || n == 0 || n > maxCacheBytes {
				return d.Errf("cache %s: want a size such as 64MiB, got %q", option, value)
			}
			if option == "block_cache" {
				a.Cache.BlockCache = int64(n)
			} else {
				a.Cache.IndexCache = int64(n)
			}
		default:
			return d.Errf("unrecognized cache option %q", option)
		}
	}
	return nil
}

// unmarshalTransforms reads the vault app's transforms block:
//
//	transforms {
//	    min_workers   <n>
//	    max_workers   <n>
//	    max_workers_per_tenant <n>
//	    timeout       <duration>
//	    queue_timeout <duration>
//	    memory_limit  <size, e.g. 256MiB>
//	    modules_dir   <directory>
//	    allow         <package>...
//	}
func (a *App) unmarshalTransforms(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	cfg := &TransformsConfig{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		option := d.Val()
		if option == "allow" {
			if cfg.AllowModules = append(cfg.AllowModules, d.RemainingArgs()...); len(cfg.AllowModules) == 0 {
				return d.ArgErr()
			}
			continue
		}
		var value string
		if !d.Args(&value) || d.NextArg() {
			return d.ArgErr()
		}
		var err error
		switch option {
		case "min_workers":
			_, err = fmt.Sscan(value, &cfg.MinWorkers)
		case "max_workers":
			_, err = fmt.Sscan(value, &cfg.MaxWorkers)
		case "max_workers_per_tenant":
			if _, err = fmt.Sscan(value, &cfg.MaxWorkersPerTenant); err == nil && cfg.MaxWorkersPerTenant < 1 {
				err = errors.New("must be at least 1")
			}
		case "timeout", "queue_timeout":
			var dur time.Duration
			if dur, err = caddy.ParseDuration(value); err == nil {
				if option == "timeout" {
					cfg.Timeout = caddy.Duration(dur)
				} else {
					cfg.QueueTimeout = caddy.Duration(dur)
				}
			}
		case "memory_limit":
			var n uint64
			if n, err = humanize.ParseBytes(value); err == nil {
				cfg.MemoryLimit = int64(n)
			}
		case "modules_dir":
			cfg.ModulesDir = value
		default:
			return d.Errf("unrecognized transforms option %q", option)
		}
		if err != nil {
			return d.Errf("transforms %s: %v", option, err)
		}
	}
	a.Transforms = cfg
	return nil
}

// unmarshalRateLimits reads a handler's rate_limits option:
//
//	rate_limits off
//	rate_limits {
//	    <rule> off
//	    <rule> <limit> <period> [block <duration>]
//	}
func unmarshalRateLimits(d *caddyfile.Dispenser) (*RateLimits, error) {
	cfg := &RateLimits{}
	if d.NextArg() {
		if d.Val() != "off" || d.NextArg() {
			return nil, d.Err("rate_limits takes 'off' or a block of rules")
		}
		cfg.Off = true
		return cfg, nil
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		args := d.RemainingArgs()
		var rule RateLimitRule
		switch {
		case len(args) == 1 && args[0] == "off":
			rule.Off = true
		case len(args) == 2 || (len(args) == 4 && args[2] == "block"):
			if _, err := fmt.Sscan(args[0], &rule.Limit); err != nil {
				return nil, d.Errf("rate_limits %s: limit %q is not a number", name, args[0])
			}
			per, err := caddy.ParseDuration(args[1])
			if err != nil {
				return nil, d.Errf("rate_limits %s: %v", name, err)
			}
			rule.Per = caddy.Duration(per)
			if len(args) == 4 {
				block, err := caddy.ParseDuration(args[3])
				if err != nil {
					return nil, d.Errf("rate_limits %s: %v", name, err)
				}
				rule.Block = caddy.Duration(block)
			}
		default:
			return nil, d.Errf("rate_limits %s: want 'off' or '<limit> <period> [block <duration>]'", name)
		}
		if cfg.Rules == nil {
			cfg.Rules = map[string]RateLimitRule{}
		}
		cfg.Rules[name] = rule
	}
	if _, err := cfg.rules(); err != nil {
		return nil, d.Err(err.Error())
	}
	return cfg, nil
}

// unmarshalRateLimitRedis reads the rate_limit_redis option of the vault
// block:
//
//	rate_limit_redis <url>
//	rate_limit_redis [<url>] {
//	    url        <url>
//	    key_prefix <prefix>
//	    timeout    <duration>
//	}
func (a *App) unmarshalRateLimitRedis(d *caddyfile.Dispenser) error {
	c := new(RateLimitRedis)
	if d.NextArg() {
		c.URL = d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		option := d.Val()
		var value string
		if !d.Args(&value) || d.NextArg() {
			return d.ArgErr()
		}
		switch option {
		case "url":
			c.URL = value
		case "key_prefix":
			c.KeyPrefix = value
		case "timeout":
			t, err := caddy.ParseDuration(value)
			if err != nil {
				return d.Errf("rate_limit_redis timeout: %v", err)
			}
			c.Timeout = caddy.Duration(t)
		default:
			return d.Errf("unrecognized rate_limit_redis option %q", option)
		}
	}
	if err := c.validate(); err != nil {
		return d.Err(err.Error())
	}
	a.RateLimitRedis = c
	return nil
}

// unmarshalPostgres reads the postgres block:
//
//	postgres {
//	    connection_string {env.TOKENVAULT_POSTGRES_URL}
//	    table             <name>
//	    max_conns         <n>
//	    statement_timeout <duration>
//	}
func (a *App) unmarshalPostgres(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	a.Postgres = &PostgresConfig{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		option := d.Val()
		var value string
		if !d.Args(&value) || d.NextArg() {
			return d.ArgErr()
		}
		switch option {
		case "connection_string":
			a.Postgres.ConnectionString = value
		case "table":
			a.Postgres.Table = value
		case "max_conns":
			n, err := strconv.Atoi(value)
			if err != nil || n < 1 {
				return d.Errf("max_conns: %q is not a positive number", value)
			}
			a.Postgres.MaxConns = n
		case "statement_timeout":
			dur, err := caddy.ParseDuration(value)
			if err != nil {
				return d.Errf("statement_timeout: %v", err)
			}
			a.Postgres.StatementTimeout = caddy.Duration(dur)
		default:
			return d.Errf("unrecognized postgres option %q", option)
		}
	}
	if err := a.Postgres.validate(); err != nil {
		return d.Err(err.Error()) // at adapt time, so a literal never reaches the JSON
	}
	return nil
}

// parseVaultProxy sets up the vault_proxy handler.
func parseVaultProxy(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	p := new(ProxyHandler)
	err := p.UnmarshalCaddyfile(h.Dispenser)
	return p, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	vault_proxy [<proxy key placeholder>] {
//	    rate_limits off | { <rule> off | <rule> <limit> <period> [block <duration>] }
//	}
func (h *ProxyHandler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		h.ProxyKey = d.Val()
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		if d.Val() != "rate_limits" {
			return d.Errf("unrecognized vault_proxy option %q", d.Val())
		}
		cfg, err := unmarshalRateLimits(d)
		if err != nil {
			return err
		}
		h.RateLimits = cfg
	}
	if err := h.Validate(); err != nil {
		return d.Err(err.Error()) // at adapt time, so the key never reaches the JSON
	}
	return nil
}

// UnmarshalCaddyfile sets up the permission from Caddyfile tokens. Syntax:
//
//	permission vault
func (p *TLSPermission) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // module name
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// Interface guards
var (
	_ caddyfile.Unmarshaler = (*App)(nil)
	_ caddyfile.Unmarshaler = (*API)(nil)
)

package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"
)

// CacheConfig bounds the store's in-memory caches; zero fields keep the
// defaults. Every cache is bounded: with the defaults, a store of any
// size stays within about 350 MiB of cache (see the README's Memory
// section for what a million tokens cost).
type CacheConfig struct {
	// Records bounds the decoded tenant, application, proxy and key index
	// records, and separately the principals API keys resolved to
	// (default 10,000 entries each).
	Records int `json:"records,omitempty"`
	// BlockCache is the storage engine's cache of parsed table blocks, in
	// bytes of block (default 256 MiB). Tables are stored uncompressed, so
	// a cached block points into its memory-mapped table file: the bound
	// is on file pages kept referenced, not on heap.
	BlockCache int64 `json:"block_cache,omitempty"`
	// IndexCache is the storage engine's cache of table indexes and bloom
	// filters, in bytes (default 64 MiB). Badger consults it only for
	// tables it encrypts itself; the vault seals records above the engine,
	// so its indexes are read from the memory-mapped tables instead.
	IndexCache int64 `json:"index_cache,omitempty"`
}

func (c *CacheConfig) records() int {
	if c == nil {
		return 0
	}
	return c.Records
}

func (c *CacheConfig) blockCache() int64 {
	if c == nil {
		return 0
	}
	return c.BlockCache
}

func (c *CacheConfig) indexCache() int64 {
	if c == nil {
		return 0
	}
	return c.IndexCache
}

// unmarshalCache reads the cache block:
//
//	cache {
//	    records     <n>
//	    block_cache <size, e.g. 256MiB>
//	    index_cache <size>
//	}
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
			if err != nil || n == 0 || n > 1<<40 {
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

package caddymodule

import "fmt"

// CacheConfig bounds the store's in-memory caches; zero fields keep the
// defaults. Every cache is bounded, whatever the size of the store: the
// records by entries, the block cache by the table pages it keeps
// referenced (see the Memory section of docs/benchmarks.md for what a million tokens
// cost).
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
	// IndexCache is deprecated and has no effect: Badger consults an index
	// cache only for tables it encrypts itself, and the vault seals records
	// above the engine, so every table's index and bloom filter are read
	// from its memory-mapped file. A configuration that sets it still
	// loads, with a warning.
	IndexCache int64 `json:"index_cache,omitempty"`
}

// indexCacheDeprecated is the warning a configuration that sets
// index_cache gets.
const indexCacheDeprecated = "cache index_cache has no effect and will be removed: remove it from the configuration (table indexes are read from the memory-mapped table files)"

// maxCacheBytes bounds block_cache and index_cache: 1 TiB, past any
// machine the vault runs on, so that a unit mistake is refused.
const maxCacheBytes = 1 << 40

// validate checks the sizes. Zero keeps a default; in a Caddyfile, where a
// written 0 would be lost in the JSON, the adapter refuses it.
func (c *CacheConfig) validate() error {
	switch {
	case c == nil:
		return nil
	case c.Records < 0:
		return fmt.Errorf("cache: records must be a positive number of entries, got %d", c.Records)
	case c.BlockCache < 0 || c.BlockCache > maxCacheBytes:
		return fmt.Errorf("cache: block_cache must be a positive size of at most 1 TiB, got %d", c.BlockCache)
	case c.IndexCache < 0 || c.IndexCache > maxCacheBytes:
		return fmt.Errorf("cache: index_cache must be a positive size of at most 1 TiB, got %d", c.IndexCache)
	}
	return nil
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

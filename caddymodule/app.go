// Package caddymodule plugs the vault into Caddy: the vault app, the
// vault_api handler, the operator's admin routes and CLI, and their
// Caddyfile syntax. The vault's rules live in vaultstore; this package
// only adapts them to HTTP and to Caddy's lifecycle.
package caddymodule

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/egress"
	"github.com/tokenvault/tokenvault/ratelimit"
	"github.com/tokenvault/tokenvault/transforms"
	"github.com/tokenvault/tokenvault/vaultstore"
)

func init() {
	caddy.RegisterModule(App{})
}

// stores holds each open store once per process, keyed by its absolute
// directory: Caddy starts a new config before it stops the old one, and
// Badger cannot open a directory twice.
var stores = caddy.NewUsagePool()

// App is the vault: it opens the store once per process and holds the
// settings the vault's handlers share. Handlers reach it with
// ctx.App("vault").
type App struct {
	// Storage is the directory of the vault's database. Default: the
	// "vault" folder in Caddy's data directory.
	Storage string `json:"storage,omitempty"`

	// Postgres keeps the vault's state in PostgreSQL instead of the Storage
	// directory, so that several nodes can share it. Storage must then be
	// empty.
	Postgres *PostgresConfig `json:"postgres,omitempty"`

	// MasterKey is the base64 encoding of the 32-byte master key that
	// wraps every tenant's data key. It must be a placeholder, such as
	// {env.TOKENVAULT_MASTER_KEY} or {file./run/secrets/master_key}, so the
	// key never appears in the adapted configuration.
	MasterKey string `json:"master_key,omitempty"`

	// MasterKeyFile is a file holding the base64 master key, created with
	// mode 0600 and a fresh key on first start if it does not exist. Meant
	// for trying the vault out: production keys belong in a secret store.
	// It must not be inside Storage.
	MasterKeyFile string `json:"master_key_file,omitempty"`

	// PreviousMasterKeys are placeholders of earlier master keys, needed
	// only to finish a master key rotation that was interrupted.
	PreviousMasterKeys []string `json:"previous_master_keys,omitempty"`

	// SyncWrites makes every acknowledged write durable against power loss.
	// Default: true.
	SyncWrites *bool `json:"sync_writes,omitempty"`

	// HeaderPrefix prefixes the vault's HTTP headers ("SVC" gives
	// SVC-API-KEY) and, lower-cased, the proxy key query parameter.
	// "BT" lets existing clients of this interface work unchanged.
	// Default: SVC.
	HeaderPrefix string `json:"header_prefix,omitempty"`

	// MetricsPerTenant labels request metrics with the tenant id. Off by
	// default: tenant ids in a metrics system are a map of your customers.
	MetricsPerTenant bool `json:"metrics_per_tenant,omitempty"`

	// Egress says which destinations proxies may reach. Default: https
	// destinations whose addresses are public, checked at connect time.
	Egress *EgressConfig `json:"egress,omitempty"`

	// Transforms sizes the worker processes that run tenant JavaScript.
	Transforms *TransformsConfig `json:"transforms,omitempty"`

	// Cache bounds the store's in-memory caches. They are sized when the
	// store opens: a change takes effect at the next start, not a reload.
	Cache *CacheConfig `json:"cache,omitempty"`

	// RateLimitRedis makes the handlers' rate limits cluster-wide through
	// Redis; each node falls back to its own limits while Redis does not
	// answer. Default: each node limits on its own.
	RateLimitRedis *RateLimitRedis `json:"rate_limit_redis,omitempty"`

	store     *vaultstore.Store
	poolKey   string
	logger    *zap.Logger
	egress    *egress.Policy
	transport *http.Transport

	workers    *transforms.Pool
	workersKey string

	rateLimitRedis    *ratelimit.Redis // nil: not configured
	rateLimitRedisKey string
}

// EgressConfig relaxes the default egress policy for on-premises
// destinations and tests.
type EgressConfig struct {
	// AllowHTTP also allows plain http destinations.
	AllowHTTP bool `json:"allow_http,omitempty"`
	// AllowNetworks are CIDR networks proxies may reach even though the
	// default policy refuses them (loopback, private, link-local, ...).
	AllowNetworks []string `json:"allow_networks,omitempty"`
}

// policy builds the egress policy of the configuration.
func (c *EgressConfig) policy() (*egress.Policy, error) {
	p := &egress.Policy{}
	if c == nil {
		return p, nil
	}
	p.AllowHTTP = c.AllowHTTP
	for _, n := range c.AllowNetworks {
		prefix, err := netip.ParsePrefix(n)
		if err != nil {
			return nil, fmt.Errorf("egress: allow_network %q: %w", n, err)
		}
		p.AllowNetworks = append(p.AllowNetworks, prefix.Masked())
	}
	return p, nil
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "vault",
		New: func() caddy.Module { return new(App) },
	}
}

var headerPrefixPattern = regexp.MustCompile(`^[A-Za-z0-9]+(-[A-Za-z0-9]+)*$`)

// Provision opens (or shares) the store.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	if a.HeaderPrefix == "" {
		a.HeaderPrefix = "SVC"
	}
	if a.Storage == "" {
		a.Storage = filepath.Join(caddy.AppDataDir(), "vault")
	}
	if a.SyncWrites == nil {
		on := true
		a.SyncWrites = &on
	}
	if err := a.Validate(); err != nil {
		return err
	}
	if a.Cache != nil && a.Cache.IndexCache != 0 {
		a.logger.Warn(indexCacheDeprecated)
	}
	if err := protectProcessMemory(); err != nil {
		a.logger.Warn("the process could not be made non-dumpable: processes of the same user can read its memory", zap.Error(err))
	}
	policy, err := a.Egress.policy()
	if err != nil {
		return err
	}
	a.egress, a.transport = policy, policy.Transport()
	if err := a.provisionTransforms(); err != nil {
		return err
	}
	dir, err := filepath.Abs(a.Storage)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	key, err := a.loadMasterKey(dir)
	if err != nil {
		return err
	}
	defer clear(key)
	var previous [][]byte
	for i, p := range a.PreviousMasterKeys {
		k, err := decodeMasterKey(caddy.NewReplacer().ReplaceAll(p, ""))
		if err != nil {
			return fmt.Errorf("previous_master_keys[%d]: %w", i, err)
		}
		defer clear(k)
		previous = append(previous, k)
	}
	opts := vaultstore.Options{
		Dir:                dir,
		MasterKey:          key,
		PreviousMasterKeys: previous,
		SyncWrites:         *a.SyncWrites,
		RecordCacheEntries: a.Cache.records(),
		BlockCacheBytes:    a.Cache.blockCache(),
		Logger:             a.logger.Named("store"),
		Events:             countStoreEvent,
	}
	poolKey := dir
	if a.Postgres != nil {
		if opts.Postgres, poolKey, err = a.Postgres.options(); err != nil {
			return err
		}
		opts.Dir = ""
	}
	val, loaded, err := stores.LoadOrNew(poolKey, func() (caddy.Destructor, error) {
		s, err := vaultstore.Open(opts)
		if err != nil {
			return nil, err
		}
		return pooledStore{s, *a.SyncWrites}, nil
	})
	if err != nil {
		return fmt.Errorf("opening vault storage: %w", err)
	}
	a.poolKey = poolKey
	ps := val.(pooledStore)
	a.store = ps.Store
	if err := registerMetrics(ctx.GetMetricsRegistry(), a.store, a.workers); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	if err := a.provisionRateLimitRedis(ctx); err != nil {
		return err
	}
	if loaded {
		if !a.store.MasterKeyMatches(key) {
			return errors.New("the master key differs from the one the running store was opened with; restart Caddy to change it")
		}
		if ps.syncWrites != *a.SyncWrites {
			a.logger.Warn("sync_writes changes take effect on restart", zap.Bool("in_effect", ps.syncWrites))
		}
	}
	return nil
}

// Validate checks the configuration without side effects.
func (a *App) Validate() error {
	if !headerPrefixPattern.MatchString(a.HeaderPrefix) {
		return fmt.Errorf("header_prefix: %q is not a valid header name prefix", a.HeaderPrefix)
	}
	switch {
	case a.MasterKey == "" && a.MasterKeyFile == "":
		return errors.New("master_key or master_key_file is required")
	case a.MasterKey != "" && a.MasterKeyFile != "":
		return errors.New("master_key and master_key_file are mutually exclusive")
	case a.MasterKey != "" && !isPlaceholder(a.MasterKey):
		return errors.New("master_key must be a placeholder such as {env.TOKENVAULT_MASTER_KEY} or {file./run/secrets/master_key}, never the key itself")
	}
	for _, p := range a.PreviousMasterKeys {
		if !isPlaceholder(p) {
			return errors.New("previous_master_keys must be placeholders, never keys")
		}
	}
	if err := a.RateLimitRedis.validate(); err != nil {
		return err
	}
	if a.Postgres != nil {
		return a.Postgres.validate()
	}
	return nil
}

func isPlaceholder(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}")
}

// loadMasterKey resolves the master key from its placeholder or file.
func (a *App) loadMasterKey(storageDir string) ([]byte, error) {
	var encoded string
	if a.MasterKey != "" {
		encoded = caddy.NewReplacer().ReplaceAll(a.MasterKey, "")
		if encoded == "" {
			return nil, errors.New("master_key: the placeholder resolved to nothing")
		}
	} else {
		path, err := filepath.Abs(a.MasterKeyFile)
		if err != nil {
			return nil, fmt.Errorf("master_key_file: %w", err)
		}
		if rel, err := filepath.Rel(storageDir, path); err == nil && !strings.HasPrefix(rel, "..") {
			return nil, errors.New("master_key_file must not be inside the storage directory: a copy of the data would carry its key")
		}
		if encoded, err = a.readOrCreateKeyFile(path, storageDir); err != nil {
			return nil, fmt.Errorf("master_key_file: %w", err)
		}
	}
	return decodeMasterKey(encoded)
}

// decodeMasterKey decodes a base64 master key and checks its length.
func decodeMasterKey(encoded string) ([]byte, error) {
	if strings.TrimSpace(encoded) == "" {
		return nil, errors.New("master key: the placeholder resolved to nothing")
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return nil, errors.New("master key: not valid base64")
	}
	if len(key) != vaultstore.MasterKeySize {
		return nil, fmt.Errorf("master key: must decode to %d bytes, got %d", vaultstore.MasterKeySize, len(key))
	}
	return key, nil
}

func (a *App) readOrCreateKeyFile(path, storageDir string) (string, error) {
	raw, err := os.ReadFile(path)
	if err == nil {
		return string(raw), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(storageDir, "tokenvault.json")); err == nil {
		return "", fmt.Errorf("%s is missing, but %s already holds a store: restore the key file; a new key cannot open it", path, storageDir)
	}
	key := make([]byte, vaultstore.MasterKeySize)
	rand.Read(key)
	encoded := base64.StdEncoding.EncodeToString(key)
	clear(key)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(encoded + "\n"); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Sync(); err != nil { // the key must be on disk before any data sealed under it
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return "", err
		}
	}
	a.logger.Warn("created a new master key file; production keys belong in a secret store, given as a {env.*} or {file.*} placeholder in master_key",
		zap.String("path", path))
	return encoded, nil
}

// Start implements caddy.App.
func (a *App) Start() error { return nil }

// Stop implements caddy.App.
func (a *App) Stop() error { return nil }

// Cleanup releases this config's reference to the store; the last one
// closes it.
func (a *App) Cleanup() error {
	var err error
	if a.poolKey != "" {
		_, err = stores.Delete(a.poolKey)
		a.poolKey, a.store = "", nil
	}
	if a.transport != nil {
		a.transport.CloseIdleConnections()
	}
	if a.workersKey != "" {
		_, werr := pools.Delete(a.workersKey)
		err = errors.Join(err, werr)
		a.workersKey, a.workers = "", nil
	}
	return errors.Join(err, a.cleanupRateLimitRedis())
}

// Store returns the vault's store.
func (a *App) Store() *vaultstore.Store { return a.store }

// pooledStore is the store as held in the usage pool.
type pooledStore struct {
	*vaultstore.Store
	syncWrites bool
}

// Destruct closes the store when its last config is gone.
func (p pooledStore) Destruct() error { return p.Close() }

// Interface guards
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.Validator    = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
	_ caddy.Destructor   = pooledStore{}
)

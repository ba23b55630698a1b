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

	// AuditSync is the durability tier of the audit records of reads and
	// proxied calls: "deferred" (the default) commits each record to the
	// storage's log before data leaves, where a crash of the vault process
	// cannot lose it, and syncs it to disk within a few milliseconds,
	// shared by every record in flight; "strict" syncs it before data
	// leaves. Writes of token data are always synced before their answer
	// (with sync_writes on). A reload applies it at once.
	AuditSync string `json:"audit_sync,omitempty"`

	// HeaderPrefix prefixes the vault's HTTP headers ("SVC" gives
	// SVC-API-KEY) and, lower-cased, the proxy key query parameter.
	// "BT" lets existing clients of this interface work unchanged.
	// Default: SVC.
	HeaderPrefix string `json:"header_prefix,omitempty"`

	// MetricsPerTenant labels request metrics with the tenant id. Off by
	// default: tenant ids in a metrics system are a map of your customers.
	MetricsPerTenant bool `json:"metrics_per_tenant,omitempty"`

	// BINTable is a CSV file of the operator's BIN database (format:
	// vaultstore.BINTable), read at each start: card details then carry
	// its funding, issuer, issuer country, segment and product. Without
	// one they are absent, never guessed.
	BINTable string `json:"bin_table,omitempty"`

	// Egress says which destinations proxies may reach. Default: https
	// destinations whose addresses are public, checked at connect time.
	Egress *EgressConfig `json:"egress,omitempty"`

	// Transforms sizes the worker processes that run tenant JavaScript.
	Transforms *TransformsConfig `json:"transforms,omitempty"`

	// AsyncReactions tunes asynchronous reactions: the queue's bound per
	// tenant, how long results are kept, how many run at once per node.
	AsyncReactions *AsyncReactionsConfig `json:"async_reactions,omitempty"`

	// Cache bounds the store's in-memory caches. They are sized when the
	// store opens: a change takes effect at the next start, not a reload.
	Cache *CacheConfig `json:"cache,omitempty"`

	// RateLimitRedis makes the handlers' rate limits cluster-wide through
	// Redis; each node falls back to its own limits while Redis does not
	// answer. Default: each node limits on its own.
	RateLimitRedis *RateLimitRedis `json:"rate_limit_redis,omitempty"`

	// DocumentMaxSize is the largest document POST /documents accepts, in
	// bytes; larger ones are refused with 413. Default: 25 MB
	// (vaultstore.DefaultDocumentMaxBytes).
	DocumentMaxSize int64 `json:"document_max_size,omitempty"`

	// Webhooks tunes webhook delivery (retries, timeout).
	Webhooks *WebhooksConfig `json:"webhooks,omitempty"`

	ctx      caddy.Context
	dir      string // Storage, absolute
	storeKey string // the store's key in the pool: dir, or the database's digest
	store    *vaultstore.Store
	poolKey  string // storeKey once Start holds a reference in the pool
	// ready is closed by Start once store and workers are set; failed,
	// when Start failed; stopped, by Stop (see app_lifecycle.go).
	ready, failed, stopped chan struct{}
	logger                 *zap.Logger
	egress                 *egress.Policy
	transport              *http.Transport

	workers    *transforms.Pool
	workersKey string

	rateLimitRedis    *ratelimit.Redis // nil: not configured
	rateLimitRedisKey string

	stopWebhooks func() // stops this config's webhook delivery worker

	asyncs *asyncDispatcher // runs queued asynchronous reactions
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

// Provision sets the defaults and works out what the handlers need
// (absolute paths, the egress policy, the shared Redis limiter) without
// changing anything: it creates no file, opens no store and starts no
// worker, so `caddy validate` leaves no trace and works beside a running
// server. Caddy calls Validate next, and Start does the work.
func (a *App) Provision(ctx caddy.Context) error {
	a.ctx, a.logger = ctx, ctx.Logger()
	a.ready, a.failed, a.stopped = make(chan struct{}), make(chan struct{}), make(chan struct{})
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
	if a.dir, err = filepath.Abs(a.Storage); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	a.storeKey = a.dir
	if a.Postgres != nil && a.Postgres.ConnectionString != "" { // none: Validate says so
		if _, a.storeKey, err = a.Postgres.options(); err != nil {
			return err
		}
	}
	if err := a.provisionRateLimitRedis(ctx); err != nil {
		return err
	}
	return nil
}

// previousMasterKeys resolves and decodes previous_master_keys.
func (a *App) previousMasterKeys() ([][]byte, error) {
	var previous [][]byte
	for i, p := range a.PreviousMasterKeys {
		k, err := decodeMasterKey(caddy.NewReplacer().ReplaceAll(p, ""))
		if err != nil {
			clearAll(previous)
			return nil, fmt.Errorf("previous_master_keys[%d]: %w", i, err)
		}
		previous = append(previous, k)
	}
	return previous, nil
}

// clearAll zeroes keys.
func clearAll(keys [][]byte) {
	for _, k := range keys {
		clear(k)
	}
}

// checkMasterKey checks the master key without writing anything: against
// the running store on a reload, else against the check value in the
// storage directory (a database's is checked when Start opens it). A key
// file that does not exist yet passes for a new store, whose Start
// creates it, and is refused for an existing one.
func (a *App) checkMasterKey(previous [][]byte) error {
	key, err := a.resolveMasterKey()
	if err != nil {
		return err
	}
	if key == nil { // master_key_file, not created yet
		if a.Postgres == nil && vaultstore.DirHoldsStore(a.dir) {
			return fmt.Errorf("master_key_file: %s is missing, but %s already holds a store: restore the key file; a new key cannot open it", a.MasterKeyFile, a.dir)
		}
		return nil
	}
	defer clear(key)
	if running := pooledStoreAt(a.storeKey); running != nil {
		if !running.MasterKeyMatches(key) {
			return errors.New("the master key differs from the one the running store was opened with; restart Caddy to change it")
		}
		return nil
	}
	if a.Postgres != nil {
		return nil
	}
	if err := vaultstore.CheckMasterKey(a.dir, key, previous...); err != nil {
		return fmt.Errorf("storage directory %s: %w", a.dir, err)
	}
	return nil
}

// pooledStoreAt returns the store open in the pool under key, or nil,
// without taking a reference.
func pooledStoreAt(key string) *vaultstore.Store {
	var found *vaultstore.Store
	stores.Range(func(k, v any) bool {
		if k != key {
			return true
		}
		if ps, ok := v.(pooledStore); ok {
			found = ps.Store
		}
		return false
	})
	return found
}

// Validate checks the configuration, JSON or adapted from a Caddyfile
// alike, then what it refers to (see checkKeys), writing nothing. Caddy
// calls it once, after Provision.
func (a *App) Validate() error {
	if !headerPrefixPattern.MatchString(a.HeaderPrefix) {
		return fmt.Errorf("header_prefix: %q is not a valid header name prefix", a.HeaderPrefix)
	}
	if err := validateAuditSync(a.AuditSync); err != nil {
		return err
	}
	switch {
	case a.MasterKey == "" && a.MasterKeyFile == "":
		return errors.New("master_key or master_key_file is required")
	case a.MasterKey != "" && a.MasterKeyFile != "":
		return errors.New("master_key and master_key_file are mutually exclusive")
	case a.MasterKey != "" && !isPlaceholder(a.MasterKey):
		return errMasterKeyLiteral
	}
	for _, p := range a.PreviousMasterKeys {
		if !isPlaceholder(p) {
			return errPreviousMasterKeyLiteral
		}
	}
	if err := a.RateLimitRedis.validate(); err != nil {
		return err
	}
	if a.DocumentMaxSize < 0 {
		return errors.New("document_max_size must not be negative")
	}
	if err := a.Webhooks.validate(); err != nil {
		return err
	}
	if err := a.Cache.validate(); err != nil {
		return err
	}
	if err := a.Transforms.Validate(); err != nil {
		return err
	}
	if err := a.AsyncReactions.validate(); err != nil {
		return err
	}
	if a.Postgres != nil {
		if err := a.Postgres.validate(); err != nil {
			return err
		}
	}
	return a.checkKeys()
}

// checkKeys checks the keys the configuration refers to, once it is
// valid: previous_master_keys decode, and the master key opens the store
// (see checkMasterKey). It needs the absolute storage path Provision
// works out.
func (a *App) checkKeys() error {
	previous, err := a.previousMasterKeys()
	if err != nil {
		return err
	}
	defer clearAll(previous)
	return a.checkMasterKey(previous)
}

// The refusals of a key written out, at adapt time (Caddyfile) as in
// Validate (JSON): a key in the configuration would show in `caddy adapt`
// output, the admin API's /config and every copy of the file.
var (
	errMasterKeyLiteral         = errors.New("master_key must be a placeholder such as {env.TOKENVAULT_MASTER_KEY} or {file./run/secrets/master_key}, never the key itself")
	errPreviousMasterKeyLiteral = errors.New("previous_master_keys must be placeholders, never keys")
)

func isPlaceholder(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}")
}

// resolveMasterKey resolves the master key from its placeholder or file
// without writing anything: nil, and no error, when master_key_file does
// not exist yet.
func (a *App) resolveMasterKey() ([]byte, error) {
	if a.MasterKey != "" {
		return a.placeholderMasterKey()
	}
	path, err := a.keyFilePath()
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("master_key_file: %w", err)
	}
	key, err := decodeMasterKey(string(raw))
	if err != nil {
		return nil, fmt.Errorf("master_key_file: %w", err)
	}
	return key, nil
}

// loadMasterKey resolves the master key from its placeholder or file,
// creating the file with a fresh key when it does not exist (Start only).
func (a *App) loadMasterKey() ([]byte, error) {
	if a.MasterKey != "" {
		return a.placeholderMasterKey()
	}
	path, err := a.keyFilePath()
	if err != nil {
		return nil, err
	}
	encoded, err := a.readOrCreateKeyFile(path, a.dir)
	if err != nil {
		return nil, fmt.Errorf("master_key_file: %w", err)
	}
	return decodeMasterKey(encoded)
}

// placeholderMasterKey resolves and decodes master_key.
func (a *App) placeholderMasterKey() ([]byte, error) {
	encoded := caddy.NewReplacer().ReplaceAll(a.MasterKey, "")
	if encoded == "" {
		return nil, errors.New("master_key: the placeholder resolved to nothing")
	}
	return decodeMasterKey(encoded)
}

// keyFilePath is master_key_file, absolute, refused inside the storage
// directory.
func (a *App) keyFilePath() (string, error) {
	path, err := filepath.Abs(a.MasterKeyFile)
	if err != nil {
		return "", fmt.Errorf("master_key_file: %w", err)
	}
	if rel, err := filepath.Rel(a.dir, path); err == nil && !strings.HasPrefix(rel, "..") {
		return "", errors.New("master_key_file must not be inside the storage directory: a copy of the data would carry its key")
	}
	return path, nil
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

// Start opens the store, or shares the one a running config opened
// (Caddy starts a new config before it stops the old one), creates
// master_key_file when it does not exist, and starts the transform
// workers: the work Provision leaves out. Requests that reach the vault's
// handlers before Start is done wait for it (see App.waitStore).
func (a *App) Start() error {
	store, err := a.start()
	if err != nil {
		close(a.failed)
		return err
	}
	a.opened(store)
	return nil
}

func (a *App) start() (*vaultstore.Store, error) {
	key, err := a.loadMasterKey()
	if err != nil {
		return nil, err
	}
	defer clear(key)
	previous, err := a.previousMasterKeys()
	if err != nil {
		return nil, err
	}
	defer clearAll(previous)
	bins, err := a.loadBINTable()
	if err != nil {
		return nil, err
	}
	opts := vaultstore.Options{
		Dir:                a.dir,
		MasterKey:          key,
		PreviousMasterKeys: previous,
		SyncWrites:         *a.SyncWrites,
		StrictAuditSync:    a.AuditSync == AuditSyncStrict,
		RecordCacheEntries: a.Cache.records(),
		BlockCacheBytes:    a.Cache.blockCache(),
		Logger:             a.logger.Named("store"),
		Events:             countStoreEvent,
	}
	if a.Postgres != nil {
		if opts.Postgres, _, err = a.Postgres.options(); err != nil {
			return nil, err
		}
		opts.Dir = ""
	}
	val, loaded, err := stores.LoadOrNew(a.storeKey, func() (caddy.Destructor, error) {
		s, err := vaultstore.Open(opts)
		if err != nil {
			return nil, err
		}
		return pooledStore{s, *a.SyncWrites}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("opening vault storage: %w", err)
	}
	a.poolKey = a.storeKey
	ps := val.(pooledStore)
	ps.SetStrictAuditSync(a.AuditSync == AuditSyncStrict) // a reload applies it at once
	if loaded {
		if !ps.MasterKeyMatches(key) {
			return nil, errors.New("the master key differs from the one the running store was opened with; restart Caddy to change it")
		}
		if ps.syncWrites != *a.SyncWrites {
			a.logger.Warn("sync_writes changes take effect on restart", zap.Bool("in_effect", ps.syncWrites))
		}
	}
	// this config's BIN table, or none: a reload changes it at once
	ps.SetBINTable(bins)
	if err := a.startTransforms(); err != nil { // after the store: a refused start fails before it forks
		return nil, err
	}
	if err := registerMetrics(a.ctx.GetMetricsRegistry(), ps.Store, a.workers); err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	if err := a.startAuditExport(ps.Store); err != nil {
		return nil, fmt.Errorf("starting the audit export: %w", err)
	}
	if err := a.startWebhooks(ps.Store); err != nil {
		return nil, err
	}
	a.startAsyncReactions(ps.Store, !loaded)
	return ps.Store, nil
}

// loadBINTable reads the BIN table file, if one is configured.
func (a *App) loadBINTable() (*vaultstore.BINTable, error) {
	if a.BINTable == "" {
		return nil, nil
	}
	t, err := vaultstore.LoadBINTable(a.BINTable)
	if err != nil {
		return nil, err
	}
	a.logger.Info("BIN table loaded", zap.String("file", a.BINTable), zap.Int("rows", t.Len()))
	return t, nil
}

// Stop implements caddy.App. The store stays open until Cleanup, for the
// requests still in flight.
func (a *App) Stop() error {
	if a.stopped != nil && !isClosed(a.stopped) {
		close(a.stopped)
	}
	if a.stopWebhooks != nil {
		a.stopWebhooks()
	}
	a.stopAsyncReactions()
	return nil
}

// Cleanup releases this config's reference to the store; the last one
// closes it. The app keeps its pointers to the store and the workers:
// a request still in flight gets an error from a closed store, never a
// nil pointer.
func (a *App) Cleanup() error {
	a.stopAuditExport()
	var err error
	if a.poolKey != "" {
		_, err = stores.Delete(a.poolKey)
		a.poolKey = ""
	}
	if a.transport != nil {
		a.transport.CloseIdleConnections()
	}
	if a.workersKey != "" {
		_, werr := pools.Delete(a.workersKey)
		err = errors.Join(err, werr)
		a.workersKey = ""
	}
	return errors.Join(err, a.cleanupRateLimitRedis())
}

// Store returns the vault's store, nil until Start has opened it.
func (a *App) Store() *vaultstore.Store {
	select {
	case <-a.ready:
		return a.store
	default:
		return nil
	}
}

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

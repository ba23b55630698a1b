package certstorage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(Module{})
}

// Module is the Caddy storage module caddy.storage.vault_postgres: the
// certificates and ACME accounts of every node in one PostgreSQL
// database, so that a certificate one node obtained on demand is served
// by all of them.
type Module struct {
	// ConnectionString is the PostgreSQL connection string (URL or
	// key=value form), given as a single placeholder, {env.NAME} or
	// {file./path}, so that its password never appears in the
	// configuration. A literal connection string is refused.
	ConnectionString string `json:"connection_string,omitempty"`
	// Table is the table certificates are kept in, created on first use;
	// locks go in the same name with "_locks". Default
	// "tokenvault_certmagic".
	Table string `json:"table,omitempty"`

	key     string // in the pool of storages
	storage *Storage
}

// CaddyModule returns the Caddy module information.
func (Module) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.storage.vault_postgres",
		New: func() caddy.Module { return new(Module) },
	}
}

// placeholderRE is the only form ConnectionString may take.
var placeholderRE = regexp.MustCompile(`^\{(env\.[^{}\s]+|file\.[^{}]+)\}$`)

// errLiteral explains why a literal connection string is refused.
var errLiteral = errors.New("connection_string must be a placeholder such as {env.TV_PG} or {file./run/secrets/tv_pg}, never the connection string itself: it would show its password in the configuration and in caddy adapt")

// check applies the configuration rules; Validate and Provision both
// call it, and the Caddyfile parser too.
func (m *Module) check() error {
	if m.ConnectionString == "" {
		return errors.New("connection_string is required")
	}
	if !placeholderRE.MatchString(m.ConnectionString) {
		return errLiteral
	}
	if m.Table != "" {
		if err := checkTable(m.Table); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks the configuration.
func (m *Module) Validate() error {
	if err := m.check(); err != nil {
		return fmt.Errorf("vault_postgres storage: %w", err)
	}
	return nil
}

// storages shares one pool and one Storage between the configurations
// that name the same database and table: Caddy starts the new
// configuration of a reload before it stops the old one, and a lock
// taken under the old one stays held, and renewed, under the new one.
var storages = caddy.NewUsagePool()

// pooled is a Storage with the pool it owns.
type pooled struct {
	storage *Storage
	pool    *pgxpool.Pool
}

// Destruct releases the locks still held and closes the pool.
func (p pooled) Destruct() error {
	err := p.storage.Close()
	p.pool.Close()
	return err
}

// Provision resolves the connection string and sets up the pool, which
// connects on first use.
func (m *Module) Provision(ctx caddy.Context) error {
	if err := m.Validate(); err != nil {
		return err
	}
	conn := caddy.NewReplacer().ReplaceAll(m.ConnectionString, "")
	if conn == "" {
		return fmt.Errorf("vault_postgres storage: connection_string %s resolved to nothing", m.ConnectionString)
	}
	table := m.Table
	if table == "" {
		table = DefaultTable
	}
	sum := sha256.Sum256([]byte(conn + "\x00" + table))
	m.key = hex.EncodeToString(sum[:])
	logger := ctx.Logger()
	val, _, err := storages.LoadOrNew(m.key, func() (caddy.Destructor, error) {
		cfg, err := pgxpool.ParseConfig(conn)
		if err != nil {
			// pgx quotes the connection string in its parse errors,
			// password included when it cannot tell where it is.
			return nil, fmt.Errorf("vault_postgres storage: connection_string %s is not a valid PostgreSQL connection string", m.ConnectionString)
		}
		if cfg.ConnConfig.ConnectTimeout == 0 {
			cfg.ConnConfig.ConnectTimeout = connectTimeout
		}
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			return nil, fmt.Errorf("vault_postgres storage: %w", err)
		}
		s, err := New(pool, Options{Table: table, Logger: logger})
		if err != nil {
			pool.Close()
			return nil, err
		}
		logger.Info("certificate storage on PostgreSQL", zap.String("table", table),
			zap.String("host", cfg.ConnConfig.Host), zap.String("database", cfg.ConnConfig.Database))
		return pooled{storage: s, pool: pool}, nil
	})
	if err != nil {
		m.key = ""
		return err
	}
	m.storage = val.(pooled).storage
	return nil
}

// connectTimeout bounds a connection attempt when the connection string
// sets none.
const connectTimeout = 15 * time.Second

// Cleanup gives back this configuration's use of the shared storage.
func (m *Module) Cleanup() error {
	if m.key == "" {
		return nil
	}
	_, err := storages.Delete(m.key)
	m.key, m.storage = "", nil
	return err
}

// CertMagicStorage returns the storage, once provisioned.
func (m *Module) CertMagicStorage() (certmagic.Storage, error) {
	if m.storage == nil {
		return nil, errors.New("vault_postgres storage: not provisioned")
	}
	return m.storage, nil
}

// Interface guards.
var (
	_ caddy.Provisioner      = (*Module)(nil)
	_ caddy.Validator        = (*Module)(nil)
	_ caddy.CleanerUpper     = (*Module)(nil)
	_ caddy.StorageConverter = (*Module)(nil)
	_ certmagic.Storage      = (*Storage)(nil)
	_ certmagic.TryLocker    = (*Storage)(nil)
)

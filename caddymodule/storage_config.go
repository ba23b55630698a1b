package caddymodule

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/tokenvault/tokenvault/vaultstore/kv/postgres"
)

// PostgresConfig keeps the vault's state in PostgreSQL instead of an
// embedded Badger directory, so that several Caddy nodes behind a load
// balancer can serve one vault. Every node gets the same configuration
// and the same master key.
type PostgresConfig struct {
	// ConnectionString is the database's URL or key=value string. It must
	// be a placeholder, such as {env.TOKENVAULT_POSTGRES_URL} or
	// {file./run/secrets/postgres_url}, so a password never appears in the
	// adapted configuration or the admin API.
	ConnectionString string `json:"connection_string,omitempty"`
	// Table names the table of the vault's entries (created when
	// missing). Default: tokenvault_kv.
	Table string `json:"table,omitempty"`
	// MaxConns is the size of each node's connection pool. Default: 16.
	MaxConns int `json:"max_conns,omitempty"`
	// StatementTimeout bounds each statement on the server. Default: 10s.
	StatementTimeout caddy.Duration `json:"statement_timeout,omitempty"`
}

// validate checks the settings without connecting.
func (c *PostgresConfig) validate() error {
	switch {
	case c.ConnectionString == "":
		return errors.New("postgres: connection_string is required")
	case !isPlaceholder(c.ConnectionString):
		return errors.New("postgres: connection_string must be a placeholder such as {env.TOKENVAULT_POSTGRES_URL} or {file./run/secrets/postgres_url}, so its password never shows in the configuration")
	case c.MaxConns < 0:
		return errors.New("postgres: max_conns must not be negative")
	case c.StatementTimeout < 0:
		return errors.New("postgres: statement_timeout must not be negative")
	}
	return nil
}

// options resolves the connection string's placeholder into the engine's
// options, and returns with them a key naming the database and table for
// the store pool (a digest, so the password stays out of it).
func (c *PostgresConfig) options() (*postgres.Options, string, error) {
	dsn := caddy.NewReplacer().ReplaceAll(c.ConnectionString, "")
	if dsn == "" {
		return nil, "", errors.New("postgres: connection_string: the placeholder resolved to nothing")
	}
	sum := sha256.Sum256([]byte(dsn + "\x00" + c.Table))
	return &postgres.Options{
		DSN:              dsn,
		Table:            c.Table,
		MaxConns:         int32(c.MaxConns),
		StatementTimeout: time.Duration(c.StatementTimeout),
	}, "postgres:" + hex.EncodeToString(sum[:]), nil
}

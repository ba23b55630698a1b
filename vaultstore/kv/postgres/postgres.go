// Package postgres is the vault's KV engine on PostgreSQL, for several
// nodes sharing one database. Every entry is a row of one table (key bytea
// primary key, value bytea, expires_at timestamptz): bytea compares
// bytewise, so the table's key order is the byte order the vault expects.
//
// Reads run in REPEATABLE READ, READ ONLY transactions (one snapshot);
// writes run in SERIALIZABLE transactions, retried when PostgreSQL reports
// a serialization failure, a deadlock or a racing insert. Writes are
// queued and sent together with the next read or with COMMIT, in one
// round trip. Other nodes learn of changes under watched prefixes through
// LISTEN/NOTIFY (see Watch).
//
// Operating notes. SERIALIZABLE tracks reads with predicate locks on index
// and heap pages, so transactions touching neighbouring keys can conflict
// and run again; on a nearly empty table that is most of them. Servers
// with many concurrent writers may want max_pred_locks_per_transaction
// and max_pred_locks_per_page raised. The pool uses prepared statements
// and the listener a session of its own: behind PgBouncer, use session
// pooling. A multi-host DSN with target_session_attrs=read-write makes
// new connections find the primary after a failover.
package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// Defaults for the zero values of Options.
const (
	// DefaultTable is the table the entries live in.
	DefaultTable = "tokenvault_kv"
	// DefaultMaxConns is the connection pool's size. In the load
	// benchmark (TV_LOAD_ENGINE=postgres, 64 connections, 2 cores shared
	// with the server) pools of 8, 16 and 32 served POST /tokens, a
	// revealed read and a page of 20 within the runs' noise of each
	// other: the reads are bound by CPU and the writes by serialization
	// conflicts, not by the pool. 16 leaves room for several nodes under
	// PostgreSQL's default max_connections of 100 (each node also holds
	// one listening session of its own).
	DefaultMaxConns = 16
	// DefaultStatementTimeout bounds every statement the engine sends.
	DefaultStatementTimeout = 10 * time.Second
	// DefaultAcquireTimeout bounds the wait for a pooled connection.
	DefaultAcquireTimeout = 10 * time.Second
	// DefaultPurgeInterval is how often expired rows are deleted.
	DefaultPurgeInterval = time.Minute
)

// Options configure the engine.
type Options struct {
	// DSN is the connection string, as a URL
	// (postgres://user:pass@host:5432/db?sslmode=verify-full) or as
	// key=value pairs. Its password never appears in logs or errors.
	DSN string
	// Table is the name of the entries' table, created when missing: a
	// lower-case SQL identifier of at most 48 characters. Default
	// DefaultTable. It also names the LISTEN/NOTIFY channel, so clusters
	// with different tables in one database do not hear each other.
	Table string
	// MaxConns is the connection pool's size. Default DefaultMaxConns.
	MaxConns int32
	// StatementTimeout bounds each statement on the server
	// (statement_timeout). Default DefaultStatementTimeout; negative
	// disables it.
	StatementTimeout time.Duration
	// AcquireTimeout bounds the wait for a free pooled connection; when it
	// runs out the call fails with kv.ErrUnavailable. Default
	// DefaultAcquireTimeout.
	AcquireTimeout time.Duration
	// PurgeInterval is how often this node deletes expired rows (every
	// node may; a purge is idempotent). Default DefaultPurgeInterval;
	// negative disables the purge.
	PurgeInterval time.Duration
	// Logger receives the engine's warnings. Default: none.
	Logger *zap.Logger
}

// tableName is what Options.Table accepts: a plain identifier that needs
// no quoting and leaves room for the index names derived from it.
var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

func (o Options) withDefaults() (Options, error) {
	if o.DSN == "" {
		return o, errors.New("postgres: no DSN")
	}
	o.Table = cmp.Or(o.Table, DefaultTable)
	if !tableName.MatchString(o.Table) {
		return o, fmt.Errorf("postgres: table name %q: want a lower-case identifier of at most 48 characters", o.Table)
	}
	if o.MaxConns < 0 {
		return o, fmt.Errorf("postgres: MaxConns %d is negative", o.MaxConns)
	}
	o.MaxConns = cmp.Or(o.MaxConns, DefaultMaxConns)
	o.StatementTimeout = cmp.Or(o.StatementTimeout, DefaultStatementTimeout)
	o.AcquireTimeout = cmp.Or(o.AcquireTimeout, DefaultAcquireTimeout)
	o.PurgeInterval = cmp.Or(o.PurgeInterval, DefaultPurgeInterval)
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o, nil
}

// Store is a kv.KV on one PostgreSQL table.
type Store struct {
	pool   *pgxpool.Pool
	config *pgxpool.Config // for the listener's own connection
	opts   Options
	sql    statements
	logger *zap.Logger

	gate  gate
	stop  context.CancelFunc // ends the background work
	bgCtx context.Context
	wg    sync.WaitGroup

	watch     atomic.Pointer[watchState]
	closeOnce sync.Once
}

// Open connects to the database, creates the table when it is missing
// and starts the purge of expired rows. It fails, wrapping
// kv.ErrUnavailable, when the database cannot be reached.
func Open(ctx context.Context, o Options) (*Store, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(o.DSN) // its errors redact the password
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	cfg.MaxConns = o.MaxConns
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	if o.StatementTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(o.StatementTimeout.Milliseconds(), 10)
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "tokenvault"
	}
	where := describe(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connecting to %s: %w", where, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connecting to %s: %w", where, classify("ping", err, true))
	}
	s := &Store{pool: pool, config: cfg, opts: o, sql: newStatements(o.Table), logger: o.Logger}
	s.gate.done = make(chan struct{})
	if err := s.ensureSchema(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: preparing table %s in %s: %w", o.Table, where, err)
	}
	s.bgCtx, s.stop = context.WithCancel(context.Background())
	if o.PurgeInterval > 0 {
		s.wg.Add(1)
		go s.purgeLoop()
	}
	return s, nil
}

// describe names the database for errors and logs, without the password.
func describe(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("%s:%d/%s as %s", c.Host, c.Port, c.Database, c.User)
}

// ensureSchema creates the table and its expiry index when missing. Nodes
// starting together take turns on a transaction-scoped advisory lock: two
// concurrent CREATE TABLE IF NOT EXISTS can otherwise both try to create
// the table's type, and one fails.
func (s *Store) ensureSchema(ctx context.Context) error {
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s.opts.Table).Scan(&exists); err != nil {
		return classify("schema", err, false)
	}
	if exists { // nothing to create: needs no CREATE privilege
		return nil
	}
	h := fnv.New64a()
	h.Write([]byte("tokenvault kv schema " + s.opts.Table))
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(h.Sum64())); err != nil {
			return classify("schema lock", err, false)
		}
		for _, q := range s.sql.schema {
			if _, err := tx.Exec(ctx, q); err != nil {
				return classify("schema", err, false)
			}
		}
		return nil
	})
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.gate.enter(); err != nil {
		return err
	}
	defer s.gate.leave()
	if err := s.pool.Ping(ctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("postgres: ping: %w", ctx.Err())
		}
		return classify("ping", err, true)
	}
	return nil
}

// Close waits for running calls, stops the purge and the listener, and
// closes the pool. Later calls fail with kv.ErrClosed; a second Close
// returns nil.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.gate.close()
		s.stop()
		s.wg.Wait()
		s.pool.Close()
	})
	return nil
}

// gate lets calls in until Close, and lets Close wait for the calls that
// got in. Unlike a read-write mutex, a call that arrives while Close waits
// (a nested call from inside a transaction's fn, say) fails at once with
// kv.ErrClosed instead of waiting behind Close.
type gate struct {
	mu      sync.Mutex
	closed  bool
	done    chan struct{} // made by Open, closed when Close begins: ends retry waits
	running sync.WaitGroup
}

func (g *gate) enter() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return kv.ErrClosed
	}
	g.running.Add(1)
	return nil
}

func (g *gate) leave() { g.running.Done() }

// closing is closed once Close has begun.
func (g *gate) closing() <-chan struct{} { return g.done }

func (g *gate) close() {
	g.mu.Lock()
	g.closed = true
	close(g.done)
	g.mu.Unlock()
	g.running.Wait()
}

// sleep waits d, or less when ctx ends (its error) or Close begins
// (kv.ErrClosed).
func (s *Store) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.gate.closing():
		return kv.ErrClosed
	}
}

// jitter returns a random duration in [d/2, d).
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2)
}

// Interface guards
var (
	_ kv.KV          = (*Store)(nil)
	_ kv.Watcher     = (*Store)(nil)
	_ kv.Snapshotter = (*Store)(nil)
	_ kv.Loader      = (*Store)(nil)
	_ kv.Pinger      = (*Store)(nil)
	_ kv.Writer      = (*txn)(nil)
)

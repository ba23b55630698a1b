package certstorage

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/certmagic"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// DefaultTable is the table certificates are kept in when none is
// configured; its locks are in DefaultTable + "_locks".
const DefaultTable = "tokenvault_certmagic"

// Lock timing defaults, see Options.
const (
	DefaultLockTTL  = 30 * time.Second
	DefaultLockPoll = time.Second
)

// maxTableLen leaves room for the "_locks" suffix within PostgreSQL's
// 63-byte identifiers.
const maxTableLen = 63 - len("_locks")

// tableRE is the table names accepted: plain lower-case identifiers, so
// that no quoting question arises and the name reads the same in psql.
var tableRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// ErrInvalidKey is returned for an empty key (after trimming slashes)
// where a file is needed: Store and Delete.
var ErrInvalidKey = errors.New("certstorage: empty key")

// Options tune a [Storage]. The zero value gives the defaults.
type Options struct {
	// Table is the table keys are stored in, DefaultTable when empty. The
	// locks are in Table + "_locks".
	Table string
	// LockTTL is how long a lock outlives its holder: the holder renews
	// it every LockTTL/3, and another node may take it over once LockTTL
	// has passed since the last renewal. DefaultLockTTL when zero.
	LockTTL time.Duration
	// LockPoll is how often Lock retries a lock that another holder has,
	// DefaultLockPoll when zero.
	LockPoll time.Duration
	// Logger receives warnings about locks (a renewal that failed or
	// came too late); nil means no logging.
	Logger *zap.Logger
}

// Storage is a certmagic.Storage on PostgreSQL. It is safe for
// concurrent use, by several goroutines and by several processes on the
// same tables. Create it with [New].
type Storage struct {
	pool  *pgxpool.Pool
	opts  Options
	table string // quoted
	locks string // quoted
	log   *zap.Logger

	// schema holds a token while the tables are being created; ready
	// turns true once they exist.
	schema chan struct{}
	ready  bool

	mu   sync.Mutex
	held map[string]*heldLock // locks this Storage holds, by name

	// Test hooks, when set: onRenew is called after each renewal attempt,
	// onTry after each attempt to take a lock that someone holds.
	onRenew func(name string, renewed bool)
	onTry   func(name string, taken bool)
}

// New returns a Storage on the tables of opts in the database of pool.
// It does no I/O: the tables are created on first use. The pool stays
// the caller's to close, after [Storage.Close].
func New(pool *pgxpool.Pool, opts Options) (*Storage, error) {
	if pool == nil {
		return nil, errors.New("certstorage: nil pool")
	}
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	if err := checkTable(opts.Table); err != nil {
		return nil, err
	}
	if opts.LockTTL <= 0 {
		opts.LockTTL = DefaultLockTTL
	}
	if opts.LockPoll <= 0 {
		opts.LockPoll = DefaultLockPoll
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Storage{
		pool:   pool,
		opts:   opts,
		table:  pgx.Identifier{opts.Table}.Sanitize(),
		locks:  pgx.Identifier{opts.Table + "_locks"}.Sanitize(),
		log:    log,
		schema: make(chan struct{}, 1),
		held:   map[string]*heldLock{},
	}, nil
}

// checkTable refuses a table name New cannot use.
func checkTable(t string) error {
	if len(t) > maxTableLen || !tableRE.MatchString(t) {
		return fmt.Errorf("certstorage: table %q must be a lower-case SQL identifier ([a-z_][a-z0-9_]*) of at most %d characters", t, maxTableLen)
	}
	return nil
}

// String names the storage in certmagic's log lines, without any
// connection detail.
func (s *Storage) String() string { return "vault_postgres:" + s.opts.Table }

// schemaLockID is the transaction-scoped advisory lock under which nodes
// create the tables: two concurrent CREATE TABLE IF NOT EXISTS of one
// name can otherwise both try to create its row type, and one fails on a
// unique violation in pg_type.
var schemaLockID = func() int64 {
	h := fnv.New64a()
	h.Write([]byte("tokenvault certstorage schema"))
	return int64(h.Sum64())
}()

// ensureSchema creates the tables once per Storage, on first use. A
// failure is returned to that caller and the next one tries again.
func (s *Storage) ensureSchema(ctx context.Context) error {
	select {
	case s.schema <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.schema }()
	if s.ready {
		return nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, schemaLockID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.table+` (
	key text COLLATE "C" PRIMARY KEY,
	value bytea NOT NULL,
	modified timestamptz NOT NULL DEFAULT now()
)`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.locks+` (
	name text COLLATE "C" PRIMARY KEY,
	token text NOT NULL,
	owner text NOT NULL,
	expires timestamptz NOT NULL
)`)
		return err
	})
	if err != nil {
		return fmt.Errorf("certstorage: creating table %s: %w", s.opts.Table, err)
	}
	s.ready = true
	return nil
}

// cleanKey drops leading and trailing slashes: certmagic keys have none,
// and "a/" names the same directory as "a".
func cleanKey(key string) string { return strings.Trim(key, "/") }

// under returns the bounds of the keys below directory dir in byte
// order: every key k with lo <= k < hi, where '0' follows '/'.
func under(dir string) (lo, hi string) { return dir + "/", dir + "0" }

// Store puts value at key, replacing any value it had.
func (s *Storage) Store(ctx context.Context, key string, value []byte) error {
	key = cleanKey(key)
	if key == "" {
		return ErrInvalidKey
	}
	if err := s.ensureSchema(ctx); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO `+s.table+` (key, value, modified) VALUES ($1, $2, now())
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, modified = EXCLUDED.modified`, key, value)
	if err != nil {
		return fmt.Errorf("certstorage: storing %s: %w", key, err)
	}
	return nil
}

// Load returns the value at key, or an error matching fs.ErrNotExist
// when key holds no value.
func (s *Storage) Load(ctx context.Context, key string) ([]byte, error) {
	key = cleanKey(key)
	if err := s.ensureSchema(ctx); err != nil {
		return nil, err
	}
	var value []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM `+s.table+` WHERE key = $1`, key).Scan(&value)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notExist(key)
	}
	if err != nil {
		return nil, fmt.Errorf("certstorage: loading %s: %w", key, err)
	}
	return value, nil
}

// Delete deletes key and, when key is a directory, every key below it.
// A key that does not exist is not an error.
func (s *Storage) Delete(ctx context.Context, key string) error {
	key = cleanKey(key)
	if key == "" {
		return ErrInvalidKey
	}
	if err := s.ensureSchema(ctx); err != nil {
		return err
	}
	lo, hi := under(key)
	_, err := s.pool.Exec(ctx, `DELETE FROM `+s.table+` WHERE key = $1 OR (key >= $2 AND key < $3)`, key, lo, hi)
	if err != nil {
		return fmt.Errorf("certstorage: deleting %s: %w", key, err)
	}
	return nil
}

// Exists reports whether key holds a value or is a directory of keys;
// it is false when the database cannot be asked.
func (s *Storage) Exists(ctx context.Context, key string) bool {
	_, err := s.Stat(ctx, key)
	return err == nil
}

// Stat describes key: a file with its size and the time it was last
// stored, or a directory (IsTerminal false) whose Modified is the latest
// of the keys below it. A key that is neither gives an error matching
// fs.ErrNotExist. The empty key is the root directory, which exists.
func (s *Storage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	key = cleanKey(key)
	if err := s.ensureSchema(ctx); err != nil {
		return certmagic.KeyInfo{}, err
	}
	info := certmagic.KeyInfo{Key: key}
	if key != "" {
		err := s.pool.QueryRow(ctx, `SELECT octet_length(value), modified FROM `+s.table+` WHERE key = $1`, key).
			Scan(&info.Size, &info.Modified)
		if err == nil {
			info.IsTerminal = true
			return info, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return certmagic.KeyInfo{}, fmt.Errorf("certstorage: stat %s: %w", key, err)
		}
	}
	var modified *time.Time
	var err error
	if key == "" {
		err = s.pool.QueryRow(ctx, `SELECT max(modified) FROM `+s.table).Scan(&modified)
	} else {
		lo, hi := under(key)
		err = s.pool.QueryRow(ctx, `SELECT max(modified) FROM `+s.table+` WHERE key >= $1 AND key < $2`, lo, hi).Scan(&modified)
	}
	if err != nil {
		return certmagic.KeyInfo{}, fmt.Errorf("certstorage: stat %s: %w", key, err)
	}
	if modified == nil && key != "" {
		return certmagic.KeyInfo{}, notExist(key)
	}
	if modified != nil {
		info.Modified = *modified
	}
	return info, nil
}

// List returns the keys in directory dir, each as a full key (dir/name).
// Not recursive, it lists dir's direct children, files and directories
// alike; recursive, every key below dir and every directory between
// them, as certmagic's FileStorage does. Keys come sorted. A dir that
// holds nothing gives an error matching fs.ErrNotExist, except the root
// (""); a file lists as empty.
func (s *Storage) List(ctx context.Context, dir string, recursive bool) ([]string, error) {
	dir = cleanKey(dir)
	if err := s.ensureSchema(ctx); err != nil {
		return nil, err
	}
	var (
		rows pgx.Rows
		err  error
	)
	lo, hi := under(dir)
	switch {
	case dir == "" && recursive:
		rows, err = s.pool.Query(ctx, `SELECT key FROM `+s.table+` ORDER BY key`)
	case dir == "":
		rows, err = s.pool.Query(ctx, `SELECT DISTINCT split_part(key, '/', 1) AS k FROM `+s.table+` ORDER BY k`)
	case recursive:
		rows, err = s.pool.Query(ctx, `SELECT key FROM `+s.table+` WHERE key >= $1 AND key < $2 ORDER BY key`, lo, hi)
	default:
		// substr counts characters, not bytes.
		rows, err = s.pool.Query(ctx, `SELECT DISTINCT split_part(substr(key, $3), '/', 1) AS k FROM `+s.table+`
WHERE key >= $1 AND key < $2 ORDER BY k`, lo, hi, utf8.RuneCountInString(lo)+1)
	}
	if err != nil {
		return nil, fmt.Errorf("certstorage: listing %s: %w", dir, err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("certstorage: listing %s: %w", dir, err)
	}
	if len(found) == 0 && dir != "" {
		if _, err := s.Stat(ctx, dir); err != nil {
			return nil, err // fs.ErrNotExist, or the failure
		}
		return []string{}, nil // a file
	}
	if !recursive {
		if dir != "" {
			for i, name := range found {
				found[i] = dir + "/" + name
			}
		}
		return found, nil
	}
	return withDirectories(dir, found), nil
}

// withDirectories adds to keys, all below dir and sorted, the
// directories between dir and each of them, and returns them sorted.
func withDirectories(dir string, keys []string) []string {
	seen := make(map[string]bool, len(keys))
	out := make([]string, 0, len(keys))
	start := 0
	if dir != "" {
		start = len(dir) + 1
	}
	for _, k := range keys {
		for i := start; i < len(k); i++ {
			if k[i] == '/' && !seen[k[:i]] {
				seen[k[:i]] = true
				out = append(out, k[:i])
			}
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// notExist is the error for a key that does not exist.
func notExist(key string) error {
	return &fs.PathError{Op: "certstorage", Path: key, Err: fs.ErrNotExist}
}

package postgres

import "fmt"

// statements is the SQL the engine sends, built once for its table.
type statements struct {
	schema []string // run in order when the table is missing

	get         string // key → value of a live entry
	put         string // key, value, ttl in microseconds (0: none)
	del         string // key
	scanRange   string // live entries with lower <= key < end, by key, limit
	scanFrom    string // live entries with lower <= key, by key, limit
	deleteRange string // deletes up to limit keys with lower <= key < end, returning them
	deleteFrom  string // deletes up to limit keys with lower <= key, returning them
	purge       string // deletes up to limit expired entries
	snapshot    string // every live entry with its expiry, by key
	notify      string // channel, payload
	lockReads   string // locks the rows of keys read (see readcheck.go)
}

// live is the condition of an entry whose time to live has not run out,
// as of the transaction's start (now() is constant in a transaction).
const live = `(expires_at IS NULL OR expires_at > now())`

// The BEGIN statements of the transaction kinds.
const (
	beginView   = `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`
	beginUpdate = `BEGIN ISOLATION LEVEL SERIALIZABLE`
	// asyncCommit lets one transaction's COMMIT return before its WAL is
	// flushed (kv.WithDeferredSync): the WAL writer flushes it within
	// three wal_writer_delay (600 ms by default). A crash of the vault
	// cannot lose it, a crash of the server or its machine can.
	asyncCommit = `SET LOCAL synchronous_commit = off`
	beginBulk   = `BEGIN ISOLATION LEVEL READ COMMITTED`
)

func newStatements(table string) statements {
	// table is validated as a plain lower-case identifier: no quoting
	t := table
	return statements{
		schema: []string{
			fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	key bytea PRIMARY KEY,
	value bytea NOT NULL,
	expires_at timestamptz NULL
)`, t),
			// values are sealed by the vault: compressing them is wasted work
			fmt.Sprintf(`ALTER TABLE %s ALTER COLUMN value SET STORAGE EXTERNAL`, t),
			fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %s_expires_at ON %s (expires_at) WHERE expires_at IS NOT NULL`, t, t),
		},
		get: fmt.Sprintf(`SELECT value FROM %s WHERE key = $1 AND %s`, t, live),
		put: fmt.Sprintf(`INSERT INTO %s (key, value, expires_at)
VALUES ($1, $2, CASE WHEN $3::bigint > 0 THEN now() + $3::bigint * interval '1 microsecond' END)
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at`, t),
		del:       fmt.Sprintf(`DELETE FROM %s WHERE key = $1`, t),
		scanRange: fmt.Sprintf(`SELECT key, value FROM %s WHERE key >= $1 AND key < $2 AND %s ORDER BY key LIMIT $3`, t, live),
		scanFrom:  fmt.Sprintf(`SELECT key, value FROM %s WHERE key >= $1 AND %s ORDER BY key LIMIT $2`, t, live),
		deleteRange: fmt.Sprintf(`WITH d AS (SELECT key FROM %s WHERE key >= $1 AND key < $2 ORDER BY key LIMIT $3 FOR UPDATE)
DELETE FROM %s t USING d WHERE t.key = d.key RETURNING t.key`, t, t),
		deleteFrom: fmt.Sprintf(`WITH d AS (SELECT key FROM %s WHERE key >= $1 ORDER BY key LIMIT $2 FOR UPDATE)
DELETE FROM %s t USING d WHERE t.key = d.key RETURNING t.key`, t, t),
		purge: fmt.Sprintf(`DELETE FROM %s WHERE key IN (
	SELECT key FROM %s WHERE expires_at <= now() LIMIT $1 FOR UPDATE SKIP LOCKED
) AND expires_at <= now()`, t, t),
		snapshot:  fmt.Sprintf(`SELECT key, value, expires_at FROM %s WHERE %s ORDER BY key`, t, live),
		notify:    `SELECT pg_notify($1, $2)`,
		lockReads: fmt.Sprintf(`SELECT 1 FROM %s WHERE key = ANY($1::bytea[]) ORDER BY key FOR SHARE`, t),
	}
}

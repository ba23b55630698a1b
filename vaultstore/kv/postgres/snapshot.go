package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
)

// Load batches: each is one transaction of COPY, bounded in rows and
// bytes.
const (
	loadBatchRows  = 1000
	loadBatchBytes = 8 << 20
)

// Snapshot streams every live entry in key order from one REPEATABLE
// READ, READ ONLY transaction, so that concurrent writes do not change
// what it sees. It holds one pooled connection, and the transaction's
// snapshot keeps PostgreSQL from vacuuming rows that die meanwhile: a
// backup of a large, busy table holds back vacuum for its whole run.
func (s *Store) Snapshot(ctx context.Context, fn func(key, value []byte, expiresAt time.Time) error) error {
	if err := s.gate.enter(); err != nil {
		return err
	}
	defer s.gate.leave()
	t := s.newTxn(ctx, beginView)
	defer t.end()
	var fnErr error
	err := t.roundTrip("snapshot", []stmt{{sql: s.sql.snapshot, rows: func(rows pgx.Rows) error {
		var key, value []byte
		var expires *time.Time
		for rows.Next() {
			if err := rows.Scan(&key, &value, &expires); err != nil {
				return err
			}
			var at time.Time
			if expires != nil {
				at = expires.UTC()
			}
			if fnErr = fn(key, nonNil(value), at); fnErr != nil {
				return fnErr
			}
		}
		return nil
	}}}, -1)
	if fnErr != nil {
		return fnErr
	}
	return err
}

// Load copies entries, until next returns io.EOF, into the table with
// COPY, in transactions of up to loadBatchRows rows. It expects an empty table: a key already there fails
// the load (unique violation). Entries whose expiry has passed by this
// machine's clock are skipped. When changes are watched, it announces
// "drop everything" at the end.
func (s *Store) Load(ctx context.Context, next func() (key, value []byte, expiresAt time.Time, err error)) error {
	if err := s.gate.enter(); err != nil {
		return err
	}
	defer s.gate.leave()
	var rows [][]any
	size := 0
	flush := func() error {
		if len(rows) == 0 {
			return nil
		}
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			_, err := tx.CopyFrom(ctx, pgx.Identifier{s.opts.Table}, []string{"key", "value", "expires_at"}, pgx.CopyFromRows(rows))
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				return wrapCtx("load", ctx.Err())
			}
			return classify("load", err, false)
		}
		rows, size = rows[:0], 0
		return nil
	}
	now := time.Now()
	for {
		key, value, expiresAt, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("postgres: load: reading the entries: %w", err)
		}
		var at any // NULL
		if !expiresAt.IsZero() {
			if !expiresAt.After(now) {
				continue
			}
			at = expiresAt
		}
		rows = append(rows, []any{clone(key), clone(value), at})
		if size += len(key) + len(value); len(rows) >= loadBatchRows || size >= loadBatchBytes {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if s.watch.Load() != nil {
		if _, err := s.pool.Exec(ctx, s.sql.notify, s.opts.Table, flushAll); err != nil {
			return classify("load notice", err, false)
		}
	}
	return nil
}

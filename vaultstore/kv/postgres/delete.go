package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// Bulk deletes run in bounded batches, each its own transaction, so that
// none holds many row locks or runs into the statement timeout.
const (
	deleteBatch = 1000
	purgeBatch  = 1000
)

// DeletePrefix deletes every key under prefix, a batch at a time. Each
// batch is a READ COMMITTED transaction: a SERIALIZABLE one would take
// predicate locks on a whole index range, and make every concurrent writer
// near it conflict. Deleted keys under the watched prefixes are announced
// like an Update's.
func (s *Store) DeletePrefix(ctx context.Context, prefix []byte) error {
	if err := s.gate.enter(); err != nil {
		return err
	}
	defer s.gate.leave()
	lower := clone(prefix)
	end := kv.PrefixEnd(prefix)
	for {
		deleted := 0
		err := s.run(ctx, "delete prefix", beginBulk, func(t *txn) error {
			deleted = 0
			st := stmt{sql: t.s.sql.deleteFrom, args: []any{lower, deleteBatch}}
			if end != nil {
				st = stmt{sql: t.s.sql.deleteRange, args: []any{lower, end, deleteBatch}}
			}
			st.rows = func(rows pgx.Rows) error {
				for rows.Next() {
					var k []byte
					if err := rows.Scan(&k); err != nil {
						return err
					}
					deleted++
					t.changed(k)
				}
				return nil
			}
			return t.roundTrip("delete prefix", []stmt{st}, -1)
		})
		if err != nil {
			return err
		}
		if deleted == 0 { // a short batch may mean rows deleted by another node meanwhile: go on until none
			return nil
		}
	}
}

// purgeLoop deletes expired rows every PurgeInterval, jittered so that
// nodes do not purge in step, until Close.
func (s *Store) purgeLoop() {
	defer s.wg.Done()
	for {
		t := time.NewTimer(jitter(s.opts.PurgeInterval) + s.opts.PurgeInterval/2)
		select {
		case <-s.bgCtx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		n, err := s.purge(s.bgCtx)
		if err != nil && s.bgCtx.Err() == nil {
			s.logger.Warn("purging expired entries failed", zap.Int64("purged", n), zap.Error(err))
		}
	}
}

// purge deletes expired rows in batches until none is left, and returns
// how many it deleted. Expired rows are already invisible to reads, so
// their deletion is announced to no one. Concurrent purges skip each
// other's rows.
func (s *Store) purge(ctx context.Context) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, s.sql.purge, purgeBatch)
		if err != nil {
			if ctx.Err() != nil {
				return total, wrapCtx("purge", ctx.Err())
			}
			return total, classify("purge", err, false)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < purgeBatch {
			return total, nil
		}
	}
}

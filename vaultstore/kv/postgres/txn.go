package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// Retry bounds of Update.
const (
	// conflictAttempts bounds how often a transaction that keeps losing
	// serialization conflicts runs before Update returns kv.ErrConflict.
	// PostgreSQL's predicate locks cover index pages, so unrelated
	// transactions touching neighbouring keys can conflict too: creates in
	// one tenant read its usage epoch and insert beside it. Measured with
	// 16 writers creating cards in one tenant over two nodes (4,000
	// creates): 12 attempts left 0.3–0.8% of them failing, 30 left none.
	// The backoff's cap bounds the wait at about 5 s.
	conflictAttempts = 30
	// conflictBackoff is the first wait after a conflict; it doubles
	// with each attempt up to maxConflictBackoff, jittered.
	conflictBackoff    = time.Millisecond
	maxConflictBackoff = 200 * time.Millisecond
	// unavailableAttempts bounds the runs of a transaction whose
	// connection failed before COMMIT (a restarted server, a terminated
	// backend): a fresh connection usually works at once.
	unavailableAttempts = 3
	unavailableBackoff  = 50 * time.Millisecond
	// resends bounds how often a transaction's first round trip is sent
	// again on another connection when the pooled one turns out dead.
	resends = 2
	// maxPending bounds the writes queued before they are sent without
	// waiting for a read or COMMIT.
	maxPending = 512
)

// View runs fn in a REPEATABLE READ, READ ONLY transaction: one snapshot,
// taken at fn's first read.
func (s *Store) View(ctx context.Context, fn func(kv.Reader) error) error {
	if err := s.gate.enter(); err != nil {
		return err
	}
	defer s.gate.leave()
	if err := ctx.Err(); err != nil {
		return wrapCtx("view", err)
	}
	t := s.newTxn(ctx, beginView)
	defer t.end()
	err := fn(t)
	if err == nil && t.err != nil { // fn ignored a failed read
		err = t.err
	}
	return err
}

// Update runs fn in a SERIALIZABLE transaction and commits it. A run that
// loses a serialization conflict, a deadlock or an insert race runs again
// after a jittered, growing wait, at most conflictAttempts times in all,
// then Update fails with kv.ErrConflict. A run whose connection failed
// before COMMIT runs again on another connection, at most
// unavailableAttempts times, then Update fails with kv.ErrUnavailable.
// When the connection fails during COMMIT, the outcome is unknown: Update
// does not run fn again and fails with kv.ErrUnavailable.
func (s *Store) Update(ctx context.Context, fn func(kv.Writer) error) error {
	if err := s.gate.enter(); err != nil {
		return err
	}
	defer s.gate.leave()
	return s.run(ctx, "update", beginUpdate, func(t *txn) error { return fn(t) })
}

// run runs fn in transactions that begin with begin until one commits, fn
// fails, or the retries run out.
func (s *Store) run(ctx context.Context, op, begin string, fn func(*txn) error) error {
	conflicts, unavailable := 0, 0
	for {
		if err := ctx.Err(); err != nil {
			return wrapCtx(op, err)
		}
		err, again := s.runOnce(ctx, begin, fn)
		var wait time.Duration
		switch again {
		case retryNo:
			return err
		case retryConflict:
			if conflicts++; conflicts >= conflictAttempts {
				return fmt.Errorf("postgres: %s: %d attempts: %w: %w", op, conflicts, kv.ErrConflict, err)
			}
			wait = jitter(min(maxConflictBackoff, conflictBackoff<<conflicts))
		case retryUnavailable:
			if unavailable++; unavailable >= unavailableAttempts {
				return err
			}
			wait = jitter(unavailableBackoff << unavailable)
			s.logger.Debug("retrying a transaction whose connection failed", zap.String("op", op), zap.Error(err))
		}
		if werr := s.sleep(ctx, wait); werr != nil {
			if errors.Is(werr, kv.ErrClosed) {
				return werr
			}
			return wrapCtx(op, werr)
		}
	}
}

// runOnce runs fn in one transaction and commits it. It reports whether
// the transaction may run again.
//
//lint:ignore ST1008 the retry verdict qualifies the error, and reads after it
func (s *Store) runOnce(ctx context.Context, begin string, fn func(*txn) error) (error, retry) {
	t := s.newTxn(ctx, begin)
	defer t.end()
	err := fn(t)
	if t.err != nil {
		// a failed statement decides the transaction's fate, whatever fn
		// made of it
		return t.err, t.err.retry
	}
	if err != nil {
		return err, retryNo
	}
	if err := t.commit(); err != nil {
		var oe *opError
		if errors.As(err, &oe) {
			return err, oe.retry
		}
		return err, retryNo
	}
	return nil, retryNo
}

// txn is one transaction on one pooled connection, acquired at its first
// round trip. Writes are queued and sent in order with the next read or
// with COMMIT: the server sees the statements in fn's order, so reads see
// the transaction's own writes, and a transaction that only writes takes a
// single round trip. A failed statement's error is kept and answers every
// later call.
type txn struct {
	s     *Store
	ctx   context.Context
	begin string // the BEGIN statement, sent with the first round trip
	// deferred: the commit need not wait for its WAL flush
	// (kv.WithDeferredSync), sent as SET LOCAL after BEGIN
	deferred bool

	conn    *pgxpool.Conn
	begun   bool // the server has run BEGIN: the transaction must end
	pending []stmt
	err     *opError
	notify  [][]byte // changed keys under the watched prefixes
	watch   *watchState
	resent  int
	reads   [][]byte            // keys found, checked at commit (see readcheck.go)
	written map[string]struct{} // keys written
}

// stmt is a statement of a round trip; rows reads its result rows, or is
// nil for a statement whose result is only a command tag.
type stmt struct {
	sql  string
	args []any
	rows func(pgx.Rows) error
}

func (s *Store) newTxn(ctx context.Context, begin string) *txn {
	return &txn{s: s, ctx: ctx, begin: begin, watch: s.watch.Load(), deferred: begin == beginUpdate && kv.DeferredSync(ctx)}
}

// fail keeps err as the transaction's failure and returns it.
func (t *txn) fail(err *opError) *opError {
	if t.err == nil {
		t.err = err
	}
	return t.err
}

// acquire takes a pooled connection, waiting at most AcquireTimeout.
func (t *txn) acquire() *opError {
	ctx, cancel := context.WithTimeout(t.ctx, t.s.opts.AcquireTimeout)
	defer cancel()
	conn, err := t.s.pool.Acquire(ctx)
	if err == nil {
		t.conn = conn
		return nil
	}
	if t.ctx.Err() != nil {
		return &opError{op: "acquiring a connection", err: t.ctx.Err()}
	}
	e := classify("acquiring a connection", err, true)
	if errors.Is(err, context.DeadlineExceeded) {
		e.note = fmt.Sprintf("none free within %s", t.s.opts.AcquireTimeout)
	}
	return e
}

// roundTrip sends BEGIN when the transaction has not begun, the queued
// writes, then final, in one round trip. A COMMIT among final is
// commitAt's index in it (-1 for none): then the round trip runs on a
// context the caller cannot cancel, so that a cancellation never leaves a
// commit's outcome unknown.
func (t *txn) roundTrip(op string, final []stmt, commitAt int) error {
	if t.err != nil {
		return t.err
	}
	for {
		if t.conn == nil {
			if err := t.acquire(); err != nil {
				return t.fail(err)
			}
		}
		var all []stmt
		if !t.begun {
			all = append(all, stmt{sql: t.begin})
			if t.deferred {
				all = append(all, stmt{sql: asyncCommit})
			}
		}
		all = append(all, t.pending...)
		at := -1 // COMMIT's index in all
		if commitAt >= 0 {
			at = commitAt + len(all)
		}
		all = append(all, final...)

		first := !t.begun
		failedAt, err := t.sendAll(all, at >= 0)
		if err == nil {
			t.begun = true
			t.pending = nil
			return nil
		}

		lost := t.conn.Conn().IsClosed()
		if !lost && t.conn.Conn().PgConn().TxStatus() != 'I' {
			t.begun = true // BEGIN ran: end rolls back
		}
		var e *opError
		switch {
		case commitAt < 0 && t.ctx.Err() != nil:
			// the caller gave up: its context's error, never retried
			e = &opError{op: op, err: t.ctx.Err()}
		case commitAt < 0:
			e = classify(op, err, lost)
		case failedAt < at && isServerError(err), pgconn.SafeToRetry(err):
			// the server refused a statement before COMMIT, and so
			// skipped COMMIT; or the driver sent nothing
			e = classify(op, err, lost)
		case failedAt >= at && definitelyRolledBack(err):
			e = classify(op, err, lost)
		default:
			e = classify(op, err, true)
			e.kind, e.retry = kv.ErrUnavailable, retryNo
			e.note = "the connection failed during COMMIT: its writes may or may not be committed"
		}
		if first && lost && e.retry == retryUnavailable && t.resent < resends && t.ctx.Err() == nil {
			// a dead pooled connection, found on the first round trip:
			// nothing ran, so send it again on another connection
			t.resent++
			t.conn.Release()
			t.conn = nil
			continue
		}
		return t.fail(e)
	}
}

// isServerError reports an error the server sent for a statement.
func isServerError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr)
}

// sendAll sends stmts; a round trip that commits runs on a context the
// caller cannot cancel, bounded by commitTimeout.
func (t *txn) sendAll(stmts []stmt, commits bool) (int, error) {
	if !commits {
		return t.send(t.ctx, stmts)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), t.s.commitTimeout())
	defer cancel()
	return t.send(ctx, stmts)
}

// send runs stmts as one pipelined batch and reports the index of the
// statement that failed, or len(stmts) for a failure after them all.
func (t *txn) send(ctx context.Context, stmts []stmt) (int, error) {
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(stmts))}
	for _, st := range stmts {
		b.Queue(st.sql, st.args...)
	}
	br := t.conn.SendBatch(ctx, b)
	for i, st := range stmts {
		var err error
		if st.rows != nil {
			var rows pgx.Rows
			if rows, err = br.Query(); err == nil {
				err = st.rows(rows)
				rows.Close()
				if err == nil {
					err = rows.Err()
				}
			}
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			br.Close()
			return i, err
		}
	}
	if err := br.Close(); err != nil {
		return len(stmts), err
	}
	return -1, nil
}

// commitTimeout bounds a round trip that commits.
func (s *Store) commitTimeout() time.Duration {
	return max(s.opts.StatementTimeout, 10*time.Second) + 5*time.Second
}

// commit sends the queued writes, the change notices and COMMIT.
func (t *txn) commit() error {
	if t.err != nil {
		return t.err
	}
	if !t.begun && len(t.pending) == 0 {
		return nil // nothing was read or written
	}
	final := append(t.notices(), t.readChecks()...)
	commitAt := len(final)
	final = append(final, stmt{sql: "COMMIT"})
	if err := t.roundTrip("commit", final, commitAt); err != nil {
		return err
	}
	t.begun = false // ended
	return nil
}

// end rolls back a transaction that did not commit and returns its
// connection to the pool (which drops a connection left in a transaction).
func (t *txn) end() {
	if t.conn == nil {
		return
	}
	if t.begun && !t.conn.Conn().IsClosed() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), 5*time.Second)
		_, _ = t.conn.Exec(ctx, "ROLLBACK")
		cancel()
	}
	t.conn.Release()
	t.conn = nil
}

// queue adds a write, sending the queue when it is long.
func (t *txn) queue(st stmt) error {
	if t.err != nil {
		return t.err
	}
	t.pending = append(t.pending, st)
	if len(t.pending) >= maxPending {
		if err := t.roundTrip("write", nil, -1); err != nil {
			return err
		}
	}
	return nil
}

// Get returns a copy of the live value under key.
func (t *txn) Get(key []byte) ([]byte, error) {
	var value []byte
	found := false
	err := t.roundTrip("get", []stmt{{sql: t.s.sql.get, args: []any{nonNil(key)}, rows: func(rows pgx.Rows) error {
		for rows.Next() {
			found = true
			if err := rows.Scan(&value); err != nil {
				return err
			}
		}
		return nil
	}}}, -1)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, kv.ErrNotFound
	}
	t.read(key)
	if value == nil {
		value = []byte{}
	}
	return value, nil
}

// Put queues an upsert of key; its failure, if any, answers a later call.
func (t *txn) Put(key, value []byte, ttl time.Duration) error {
	if t.begin == beginView {
		return errors.New("postgres: put in a read-only transaction")
	}
	var micros int64
	if ttl > 0 {
		micros = max(1, ttl.Microseconds())
	}
	key = clone(key)
	t.changed(key)
	t.wrote(key)
	return t.queue(stmt{sql: t.s.sql.put, args: []any{key, clone(value), micros}})
}

// Delete queues a delete of key; its failure, if any, answers a later
// call.
func (t *txn) Delete(key []byte) error {
	if t.begin == beginView {
		return errors.New("postgres: delete in a read-only transaction")
	}
	key = clone(key)
	t.changed(key)
	t.wrote(key)
	return t.queue(stmt{sql: t.s.sql.del, args: []any{key}})
}

// clone copies b, never returning nil (which the driver would send as
// NULL).
func clone(b []byte) []byte { return append(make([]byte, 0, len(b)), b...) }

// nonNil returns b, or an empty slice for nil.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

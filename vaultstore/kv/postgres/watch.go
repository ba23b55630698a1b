package postgres

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// Change notices travel on one channel per table, named after the table.
// A transaction that changed keys under the watched prefixes sends, right
// before COMMIT, one or more notices listing them; PostgreSQL delivers
// them to every listener (the writer's too) only if the transaction
// commits. A payload is either
//
//	k:<key>,<key>,...   keys in unpadded standard base64
//	*                   "drop everything": too many keys to list
//
// and a receiver treats anything else as "*". PostgreSQL refuses payloads
// of 8000 bytes or more.
const (
	maxPayload      = 7900
	maxNoticeKeys   = 256     // more keys in one transaction: one "*" instead
	maxNoticesBytes = 1 << 16 // likewise for the keys' encoded size
	flushAll        = "*"
	keysPrefix      = "k:"
)

// Listener timing: how long WaitForNotification waits before the listener
// checks its connection with a ping, and the bounds of its reconnect
// backoff.
const (
	listenKeepalive   = 15 * time.Second
	listenPingTimeout = 10 * time.Second
	reconnectMin      = 100 * time.Millisecond
	reconnectMax      = 5 * time.Second
)

// watchState is what Watch set up: which keys' changes are announced,
// and the listener.
type watchState struct {
	watched func(key []byte) bool
	changed func(key []byte)
	healthy atomic.Bool

	mu   sync.Mutex
	conn *pgx.Conn // the listening connection, for tests
}

// changed records key, written or deleted, for the notices sent at
// commit.
func (t *txn) changed(key []byte) {
	if t.watch != nil && t.watch.watched(key) {
		t.notify = append(t.notify, key)
	}
}

// notices returns the statements that announce the transaction's changed
// keys.
func (t *txn) notices() []stmt {
	if len(t.notify) == 0 {
		return nil
	}
	var out []stmt
	for _, p := range encodeNotices(t.notify) {
		out = append(out, stmt{sql: t.s.sql.notify, args: []any{t.s.opts.Table, p}})
	}
	return out
}

// encodeNotices packs keys into payloads under maxPayload bytes, or one
// "*" when they are too many or too long.
func encodeNotices(keys [][]byte) []string {
	if len(keys) > maxNoticeKeys {
		return []string{flushAll}
	}
	var out []string
	var b strings.Builder
	total := 0
	for _, k := range keys {
		enc := base64.RawStdEncoding.EncodeToString(k)
		if total += len(enc) + 1; total > maxNoticesBytes || len(keysPrefix)+len(enc) > maxPayload {
			return []string{flushAll}
		}
		if b.Len() > 0 && b.Len()+1+len(enc) > maxPayload {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() == 0 {
			b.WriteString(keysPrefix)
		} else {
			b.WriteByte(',')
		}
		b.WriteString(enc)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// decodeNotice returns the keys a payload lists, or ok false for "drop
// everything" (including a payload it cannot read).
func decodeNotice(payload string) (keys [][]byte, ok bool) {
	rest, found := strings.CutPrefix(payload, keysPrefix)
	if !found || rest == "" {
		return nil, false
	}
	for _, enc := range strings.Split(rest, ",") {
		k, err := base64.RawStdEncoding.DecodeString(enc)
		if err != nil {
			return nil, false
		}
		keys = append(keys, k)
	}
	return keys, true
}

// Watch starts announcing committed changes to the keys for which watched
// is true (written by any node, through this engine) to changed, from one
// goroutine, in the order each node's notices arrive. Only Updates and
// DeletePrefix calls of processes that called Watch send notices, for the
// keys their own watched accepts. changed
// gets a nil key when notices may have been missed: after the listening
// connection was lost and made again. Watch makes the first connection
// before it returns; if it cannot, it returns nil all the same, the
// listener keeps trying in the background, and Healthy is false until it
// succeeds.
func (s *Store) Watch(watched func(key []byte) bool, changed func(key []byte)) error {
	if err := s.gate.enter(); err != nil {
		return err
	}
	defer s.gate.leave()
	w := &watchState{watched: watched, changed: changed}
	if !s.watch.CompareAndSwap(nil, w) {
		return errors.New("postgres: Watch called twice")
	}
	ctx, cancel := context.WithTimeout(s.bgCtx, s.config.ConnConfig.ConnectTimeout+5*time.Second)
	conn, err := s.listen(ctx)
	cancel()
	if err != nil {
		s.logger.Warn("listening for change notices failed; retrying in the background", zap.Error(err))
	} else {
		w.setConn(conn)
		w.healthy.Store(true)
	}
	s.wg.Add(1)
	go s.listenLoop(w, conn)
	return nil
}

// Healthy reports whether the listener is connected, so that change
// notices flow. It is false before Watch.
func (s *Store) Healthy() bool {
	w := s.watch.Load()
	return w != nil && w.healthy.Load()
}

func (w *watchState) setConn(c *pgx.Conn) {
	w.mu.Lock()
	w.conn = c
	w.mu.Unlock()
}

// listenerPID is the server process of the listening connection, or 0.
func (w *watchState) listenerPID() uint32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn == nil {
		return 0
	}
	return w.conn.PgConn().PID()
}

// listen opens a connection of its own (not the pool's: it stays busy
// waiting) and listens on the table's channel.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	cfg := s.config.ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = cfg.RuntimeParams["application_name"] + " listener"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, classify("listen", err, true)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.opts.Table}.Sanitize()); err != nil {
		conn.Close(context.Background())
		return nil, classify("listen", err, conn.IsClosed())
	}
	return conn, nil
}

// listenLoop delivers notices from conn, and when the connection is lost,
// makes another with a growing backoff, then calls changed(nil), since
// notices may have been missed meanwhile. It ends at Close.
func (s *Store) listenLoop(w *watchState, conn *pgx.Conn) {
	defer s.wg.Done()
	backoff := reconnectMin
	for {
		if conn != nil {
			err := s.serve(w, conn)
			w.healthy.Store(false)
			w.setConn(nil)
			conn.Close(context.Background())
			if s.bgCtx.Err() != nil {
				return
			}
			s.logger.Warn("the change notice listener lost its connection; caches are not trusted until it is back", zap.Error(err))
			backoff = reconnectMin
		}
		if s.sleepBackground(jitter(backoff)) != nil {
			return
		}
		backoff = min(reconnectMax, 2*backoff)
		var err error
		if conn, err = s.listen(s.bgCtx); err != nil {
			if s.bgCtx.Err() != nil {
				return
			}
			s.logger.Warn("reconnecting the change notice listener failed", zap.Error(err), zap.Duration("next_try_in", backoff))
			continue
		}
		w.setConn(conn)
		w.changed(nil) // what changed while it was away is unknown
		w.healthy.Store(true)
		s.logger.Info("the change notice listener is connected again")
	}
}

// serve waits for notices on conn and hands them to changed; between
// notices it pings the connection every listenKeepalive, so that a
// silently dead connection is found.
func (s *Store) serve(w *watchState, conn *pgx.Conn) error {
	for {
		ctx, cancel := context.WithTimeout(s.bgCtx, listenKeepalive)
		n, err := conn.WaitForNotification(ctx)
		cancel()
		if err != nil {
			if s.bgCtx.Err() != nil {
				return s.bgCtx.Err()
			}
			if !errors.Is(err, context.DeadlineExceeded) || conn.IsClosed() {
				return err
			}
			ctx, cancel := context.WithTimeout(s.bgCtx, listenPingTimeout)
			err = conn.Ping(ctx)
			cancel()
			if err != nil {
				return err
			}
			continue
		}
		keys, ok := decodeNotice(n.Payload)
		if !ok {
			w.changed(nil)
			continue
		}
		for _, k := range keys {
			w.changed(k)
		}
	}
}

// sleepBackground waits d, or returns the background context's error at
// Close.
func (s *Store) sleepBackground(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-s.bgCtx.Done():
		return s.bgCtx.Err()
	}
}

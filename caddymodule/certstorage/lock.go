package certstorage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// Locks are rows of the locks table (name, token, owner, expires), not
// PostgreSQL advisory locks. An advisory lock lives as long as the
// session that took it: it would pin one pooled connection per held lock,
// it does not survive a pooler in transaction mode, and when a node dies
// without closing its socket (power loss, a partition) the server keeps
// the session, and the lock, until TCP keepalive gives up on it, two
// hours with Linux defaults. A row with a lease has none of these
// problems: the holder renews the lease every LockTTL/3 while it holds
// the lock, and once LockTTL has passed without a renewal any node may
// take the lock over, as certmagic expects of a lock whose holder died.
// Leases are set and judged by the database's clock (now()), so clock
// skew between nodes does not matter. Taking a lock is one INSERT ... ON
// CONFLICT DO UPDATE WHERE the lease has run out: PostgreSQL serialises
// concurrent attempts on the row, so one at most succeeds. Each
// acquisition has its own random token, and renewals and Unlock touch
// the row only while it still carries that token: a holder whose lease
// ran out and was taken over can no longer renew or delete the new
// holder's lock.

// heldLock is a lock this Storage holds, with its lease renewer.
type heldLock struct {
	token string
	stop  context.CancelFunc
	done  chan struct{} // closed when the renewer has returned
}

// owner tells operators which process holds a lock (host and pid); it is
// informational only, the token decides.
var owner = func() string {
	host, _ := os.Hostname()
	return host + ":" + strconv.Itoa(os.Getpid())
}()

// Lock takes the lock name, waiting while another holder, in this or
// another process, has it and its lease runs. It returns ctx's error
// when ctx ends first, or a database failure.
func (s *Storage) Lock(ctx context.Context, name string) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		ok, err := s.TryLock(ctx, name)
		if err != nil || ok {
			return err
		}
		t.Reset(s.opts.LockPoll)
	}
}

// TryLock takes the lock name if no one holds it, or if its holder's
// lease has run out, and reports whether it did.
func (s *Storage) TryLock(ctx context.Context, name string) (bool, error) {
	if err := s.ensureSchema(ctx); err != nil {
		return false, err
	}
	token, err := newToken()
	if err != nil {
		return false, err
	}
	var taken bool
	err = s.pool.QueryRow(ctx, `INSERT INTO `+s.locks+` AS l (name, token, owner, expires)
VALUES ($1, $2, $3, now() + $4 * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE SET token = EXCLUDED.token, owner = EXCLUDED.owner, expires = EXCLUDED.expires
WHERE l.expires <= now()
RETURNING true`, name, token, owner, s.opts.LockTTL.Microseconds()).Scan(&taken)
	if errors.Is(err, pgx.ErrNoRows) {
		if s.onTry != nil {
			s.onTry(name, false)
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("certstorage: taking lock %s: %w", name, err)
	}
	renewCtx, stop := context.WithCancel(context.Background())
	h := &heldLock{token: token, stop: stop, done: make(chan struct{})}
	s.mu.Lock()
	prev := s.held[name]
	s.held[name] = h
	s.mu.Unlock()
	if prev != nil {
		// This Storage held the lock before, and its lease ran out
		// before it was renewed: that renewer has nothing left to renew.
		prev.stop()
	}
	go s.renew(renewCtx, name, h)
	return true, nil
}

// Unlock releases the lock name, which must have been taken by Lock or
// TryLock on this Storage. A lock this Storage does not hold (already
// released, or never taken) is not an error; a lock whose lease ran out
// and that another holder took is left to that holder.
func (s *Storage) Unlock(ctx context.Context, name string) error {
	s.mu.Lock()
	h := s.held[name]
	delete(s.held, name)
	s.mu.Unlock()
	if h == nil {
		return nil
	}
	h.stop()
	<-h.done
	return s.release(ctx, name, h.token)
}

// release deletes the lock row if it still carries token.
func (s *Storage) release(ctx context.Context, name, token string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM `+s.locks+` WHERE name = $1 AND token = $2`, name, token); err != nil {
		return fmt.Errorf("certstorage: releasing lock %s (it expires by itself): %w", name, err)
	}
	return nil
}

// renew extends the lease of a held lock every LockTTL/3 until ctx ends.
// A lock found taken over is given up: renewing stops, with a warning.
func (s *Storage) renew(ctx context.Context, name string, h *heldLock) {
	defer close(h.done)
	every := s.opts.LockTTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// One renewal may take at most one period, so that a slow one
		// does not eat the lease's margin unnoticed.
		rctx, cancel := context.WithTimeout(ctx, every)
		tag, err := s.pool.Exec(rctx, `UPDATE `+s.locks+` SET expires = now() + $3 * interval '1 microsecond'
WHERE name = $1 AND token = $2`, name, h.token, s.opts.LockTTL.Microseconds())
		cancel()
		if ctx.Err() != nil {
			return // released meanwhile
		}
		renewed := err == nil && tag.RowsAffected() == 1
		if s.onRenew != nil {
			s.onRenew(name, renewed)
		}
		switch {
		case err != nil:
			// The lease still runs; the next tick tries again.
			s.log.Warn("could not renew the lease of a certificate storage lock", zap.String("lock", name), zap.Error(err))
		case !renewed:
			s.log.Warn("a certificate storage lock expired before its lease was renewed; another node may have taken it",
				zap.String("lock", name), zap.Duration("lock_ttl", s.opts.LockTTL))
			return
		}
	}
}

// Close stops renewing the leases of the locks this Storage holds and
// releases them, so other nodes need not wait for them to expire. The
// Storage must not be used afterwards; the pool stays open.
func (s *Storage) Close() error {
	s.mu.Lock()
	held := s.held
	s.held = map[string]*heldLock{}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for name, h := range held {
		h.stop()
		<-h.done
		errs = append(errs, s.release(ctx, name, h.token))
	}
	return errors.Join(errs...)
}

// newToken returns a random lock token.
func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("certstorage: lock token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

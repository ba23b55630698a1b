package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// retry says whether a failed transaction may run again.
type retry int

const (
	retryNo          retry = iota // the error goes to the caller
	retryConflict                 // lost to a concurrent transaction: nothing committed
	retryUnavailable              // the connection failed before COMMIT: nothing committed
)

// opError is a failure of the database in one operation. It wraps
// kv.ErrUnavailable (or kv.ErrNoSpace) where the database is away or
// refuses work, and always the driver's error.
type opError struct {
	op    string
	err   error
	kind  error // kv.ErrUnavailable, kv.ErrNoSpace or nil
	retry retry
	note  string // said after op, e.g. that a commit's outcome is unknown
}

func (e *opError) Error() string {
	msg := "postgres: " + e.op
	if e.note != "" {
		msg += " (" + e.note + ")"
	}
	if e.kind != nil {
		return msg + ": " + e.kind.Error() + ": " + e.err.Error()
	}
	return msg + ": " + e.err.Error()
}

func (e *opError) Unwrap() []error {
	if e.kind != nil {
		return []error{e.kind, e.err}
	}
	return []error{e.err}
}

// SQLSTATE codes the engine tells apart.
const (
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeUniqueViolation      = "23505"
	codeDiskFull             = "53100"
)

// unavailableCodes are server errors that mean the database is away or
// refuses work for now; class 08 (connection exceptions) is added in
// classify.
var unavailableCodes = map[string]bool{
	"57P01": true, // admin_shutdown (also pg_terminate_backend)
	"57P02": true, // crash_shutdown
	"57P03": true, // cannot_connect_now (starting up, shutting down)
	"57P05": true, // idle_session_timeout
	"57014": true, // query_canceled: statement_timeout or a cancel request
	"53000": true, // insufficient_resources
	"53200": true, // out_of_memory
	"53300": true, // too_many_connections
	"53400": true, // configuration_limit_exceeded
	"55P03": true, // lock_not_available (lock_timeout)
	"25006": true, // read_only_sql_transaction: a standby, or a primary demoted by a failover
	"58000": true, // system_error
	"58030": true, // io_error
	"25P03": true, // idle_in_transaction_session_timeout
}

// classify wraps err, a failure of operation op, as an *opError. connLost
// says the connection is gone, whatever the error says.
func classify(op string, err error, connLost bool) *opError {
	e := &opError{op: op, err: err}
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		switch code := pgErr.Code; {
		case code == codeSerializationFailure || code == codeDeadlockDetected || code == codeUniqueViolation:
			e.retry = retryConflict
		case code == codeDiskFull:
			e.kind = kv.ErrNoSpace
		case unavailableCodes[code] || len(code) == 5 && code[:2] == "08":
			e.kind = kv.ErrUnavailable
			e.retry = retryUnavailable
		case connLost:
			e.kind = kv.ErrUnavailable
			e.retry = retryUnavailable
		}
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		// the caller's context ended: its error, not the database's
		// (callers that set deadlines of their own classify those)
	case connLost || isNetworkError(err):
		e.kind = kv.ErrUnavailable
		e.retry = retryUnavailable
	}
	return e
}

// isNetworkError reports failures to reach or keep the server.
func isNetworkError(err error) bool {
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	return errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		pgconn.Timeout(err) || pgconn.SafeToRetry(err)
}

// definitelyRolledBack reports whether a server error answering COMMIT
// means the transaction did not commit. Other failures during COMMIT leave
// its outcome unknown.
func definitelyRolledBack(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch c := pgErr.Code; {
	case len(c) == 5 && (c[:2] == "40" || c[:2] == "23" || c[:2] == "25"), c == codeDiskFull:
		return true
	}
	return false
}

// keyValuePassword finds the password in a key=value connection string.
var keyValuePassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// RedactDSN returns dsn with its password replaced by "xxxxx", for logs
// and errors.
func RedactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return keyValuePassword.ReplaceAllString(dsn, "${1}xxxxx")
}

// wrapCtx reports that the caller's context ended op.
func wrapCtx(op string, err error) error {
	return fmt.Errorf("postgres: %s: %w", op, err)
}

package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

func TestClassify(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: code, Message: "m"}) }
	tests := []struct {
		name        string
		err         error
		connLost    bool
		unavailable bool
		noSpace     bool
		retry       retry
	}{
		{"serialization failure", pg("40001"), false, false, false, retryConflict},
		{"deadlock", pg("40P01"), false, false, false, retryConflict},
		{"unique violation", pg("23505"), false, false, false, retryConflict},
		{"admin shutdown", pg("57P01"), true, true, false, retryUnavailable},
		{"crash shutdown", pg("57P02"), true, true, false, retryUnavailable},
		{"cannot connect now", pg("57P03"), true, true, false, retryUnavailable},
		{"too many connections", pg("53300"), true, true, false, retryUnavailable},
		{"connection exception", pg("08006"), true, true, false, retryUnavailable},
		{"statement timeout", pg("57014"), false, true, false, retryUnavailable},
		{"read-only standby", pg("25006"), false, true, false, retryUnavailable},
		{"disk full", pg("53100"), false, true, true, retryNo},
		{"syntax error", pg("42601"), false, false, false, retryNo},
		{"other error on a lost connection", pg("XX000"), true, true, false, retryUnavailable},
		{"eof", io.ErrUnexpectedEOF, false, true, false, retryUnavailable},
		{"connect error", &pgconn.ConnectError{}, false, true, false, retryUnavailable},
		{"lost connection", errors.New("conn closed"), true, true, false, retryUnavailable},
		{"caller canceled", context.Canceled, true, false, false, retryNo},
		{"plain error", errors.New("bad"), false, false, false, retryNo},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := classify("op", tc.err, tc.connLost)
			if got := errors.Is(e, kv.ErrUnavailable); got != tc.unavailable {
				t.Errorf("errors.Is(kv.ErrUnavailable) = %v, want %v (%v)", got, tc.unavailable, e)
			}
			if got := errors.Is(e, kv.ErrNoSpace); got != tc.noSpace {
				t.Errorf("errors.Is(kv.ErrNoSpace) = %v, want %v", got, tc.noSpace)
			}
			if e.retry != tc.retry {
				t.Errorf("retry = %v, want %v", e.retry, tc.retry)
			}
			if !errors.Is(e, tc.err) {
				t.Errorf("the driver's error is not wrapped: %v", e)
			}
		})
	}
}

func TestDefinitelyRolledBack(t *testing.T) {
	for code, want := range map[string]bool{"40001": true, "40P01": true, "23505": true, "25P02": true, "53100": true, "57P01": false, "08006": false} {
		if got := definitelyRolledBack(&pgconn.PgError{Code: code}); got != want {
			t.Errorf("definitelyRolledBack(%s) = %v, want %v", code, got, want)
		}
	}
	if definitelyRolledBack(io.EOF) {
		t.Error("a network error during COMMIT must leave the outcome unknown")
	}
}

func TestRedactDSN(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://vault:s3cret@db:5432/vault?sslmode=require", "postgres://vault:xxxxx@db:5432/vault?sslmode=require"},
		{"postgresql://vault@db/vault", "postgresql://vault@db/vault"},
		{"postgres://db/vault?password=s3cret&sslmode=disable", "postgres://db/vault?password=xxxxx&sslmode=disable"},
		{"host=db user=vault password=s3cret dbname=vault", "host=db user=vault password=xxxxx dbname=vault"},
		{"host=db password='s3 cret' dbname=vault", "host=db password=xxxxx dbname=vault"},
		{"host=db PASSWORD = s3cret", "host=db PASSWORD = xxxxx"},
	}
	for _, tc := range tests {
		got := RedactDSN(tc.in)
		if got != tc.want || strings.Contains(got, "s3") {
			t.Errorf("RedactDSN(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

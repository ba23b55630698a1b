// Package pgtest gives tests a PostgreSQL database of their own: a new,
// randomly named database on the server named by TV_POSTGRES_URL,
// dropped when the test ends. Tests never mock PostgreSQL.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	// EnvAdminURL names the environment variable holding the DSN of a
	// role that may create databases.
	EnvAdminURL = "TV_POSTGRES_URL"
	// DefaultAdminURL is the admin DSN when EnvAdminURL is unset: the
	// machine's own PostgreSQL, trusting local connections.
	DefaultAdminURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

// startHint tells how to start the machine's PostgreSQL.
const startHint = "start it with 'pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start', or point " + EnvAdminURL + " at a server"

// AdminURL returns the admin DSN: TV_POSTGRES_URL, or DefaultAdminURL.
func AdminURL() string {
	if u := os.Getenv(EnvAdminURL); u != "" {
		return u
	}
	return DefaultAdminURL
}

// NewDatabase creates a database named tv_<random hex> and returns its
// DSN; the database is dropped, with its connections, when tb ends. It
// fails tb with instructions when PostgreSQL is unreachable.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	admin := AdminURL()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		tb.Fatalf("pgtest: PostgreSQL at %s is unreachable: %v; %s", redact(admin), err, startHint)
	}
	defer conn.Close(context.Background())

	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "tv_" + hex.EncodeToString(b[:])
	for attempt := 0; ; attempt++ {
		_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
		// 55006: template1 is in use by another session creating a
		// database at the same moment; it passes
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || attempt == 20 {
			break
		}
		time.Sleep(time.Duration(100*(attempt+1)) * time.Millisecond)
	}
	if err != nil {
		tb.Fatalf("pgtest: creating database %s on %s: %v", name, redact(admin), err)
	}
	tb.Cleanup(func() { drop(tb, admin, name) })
	dsn, err := withDatabase(admin, name)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// drop drops the database, ending its sessions.
func drop(tb testing.TB, admin, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		tb.Errorf("pgtest: dropping database %s: %v", name, err)
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		tb.Errorf("pgtest: dropping database %s: %v", name, err)
	}
}

// withDatabase returns dsn with its database replaced by name.
func withDatabase(dsn, name string) (string, error) {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + name
		q := u.Query()
		if q.Has("dbname") || q.Has("database") {
			q.Del("dbname")
			q.Del("database")
			u.RawQuery = q.Encode()
		}
		return u.String(), nil
	}
	if strings.Contains(dsn, "=") { // key=value pairs: a later dbname wins
		return dsn + " dbname=" + name, nil
	}
	return "", fmt.Errorf("cannot set the database in the DSN %s", redact(dsn))
}

// redact hides the password of a DSN.
func redact(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "(an unparsable DSN)"
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}

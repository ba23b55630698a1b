package certstorage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The tests run against a real PostgreSQL, never a mock: the server of
// TV_POSTGRES_URL (a role that may create databases), by default the
// machine's own with trust authentication.
const (
	envAdminURL     = "TV_POSTGRES_URL"
	defaultAdminURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

// testTimeout bounds every database step of a test; generous, for a busy
// machine.
const testTimeout = 2 * time.Minute

func adminURL() string {
	if u := os.Getenv(envAdminURL); u != "" {
		return u
	}
	return defaultAdminURL
}

// newDatabase creates a database tv_cert_<random hex> of its own for the
// test, dropped with its sessions when the test ends, and returns its
// connection string.
func newDatabase(t *testing.T) string {
	t.Helper()
	admin := adminURL()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("PostgreSQL (%s) is unreachable: %v; start it, or point %s at a server", envAdminURL, err, envAdminURL)
	}
	defer conn.Close(context.Background())
	var b [8]byte
	rand.Read(b[:])
	name := "tv_cert_" + hex.EncodeToString(b[:])
	for attempt := 0; ; attempt++ {
		_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
		// 55006: another session is copying template1 at this moment.
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || attempt == 30 {
			break
		}
		time.Sleep(time.Duration(100*(attempt+1)) * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("dropping database %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("%s must be a postgres:// URL", envAdminURL)
	}
	u.Path = "/" + name
	return u.String()
}

// newPool opens a pool of its own on dsn, as one node would, closed when
// the test ends.
func newPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newNode is a Storage on a pool of its own: one node of a cluster.
// Its locks are released when the test ends, before its pool closes.
func newNode(t *testing.T, dsn string, opts Options) *Storage {
	t.Helper()
	s, err := New(newPool(t, dsn), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testCtx is a context with the generous test deadline.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

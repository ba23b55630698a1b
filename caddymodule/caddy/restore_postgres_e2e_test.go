package main

import (
	"bytes"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
	"github.com/tokenvault/tokenvault/vaultstore/kv/postgres/pgtest"
)

// TestRestoreIntoPostgres moves a vault from Badger to PostgreSQL the way
// an operator would: `caddy vault backup` from the running single node,
// `caddy vault restore --postgres-env` into an empty database, then a node
// on that database answers as the first one did. A second restore into
// the database now in use is refused, and changes nothing.
func TestRestoreIntoPostgres(t *testing.T) {
	s := startServer(t, serverOpts{})
	ct := s.createTenant("Moving")
	_, revealKey, _ := s.createApp(ct.Key, map[string]any{
		"name": "reader", "type": "private",
		"permissions": []string{"token:create", "token:read"},
		"rules":       []map[string]any{{"description": "all", "priority": 1, "container": "/", "transform": "reveal", "permissions": []string{"token:create", "token:read"}}},
	})
	var ids []string
	want := map[string][]byte{}
	for _, body := range []map[string]any{
		{"type": "token", "data": "hello"},
		{"type": "card", "data": map[string]any{"number": "4242424242424242", "expiration_month": 12, "expiration_year": 2031}},
	} {
		id := testjson.Str(s.expect(http.StatusCreated, http.MethodPost, "/tokens", revealKey, body).Body, "id")
		ids = append(ids, id)
	}
	for _, id := range ids {
		want[id] = s.expect(http.StatusOK, http.MethodGet, "/tokens/"+id, revealKey, nil).Raw
	}
	backup := filepath.Join(t.TempDir(), "vault.backup")
	if _, errOut, err := s.runCLI("vault", "backup", "--output", backup, "--address", s.adminAddr); err != nil {
		t.Fatalf("caddy vault backup: %v\n%s", err, errOut)
	}
	s.stopClean()

	dsn := pgtest.NewDatabase(t)
	restore := func() (string, error) {
		_, errOut, err := s.runCLI("vault", "restore", "--input", backup, "--postgres-env", "TV_RESTORE_PG", "--master-key-env", "TV_MASTER_KEY")
		return errOut, err
	}
	s.opts.Env = append(s.opts.Env, "TV_RESTORE_PG="+dsn)
	if errOut, err := restore(); err != nil || !strings.Contains(errOut, "restored ") {
		t.Fatalf("caddy vault restore --postgres-env: %v\n%s", err, errOut)
	}

	node := startServer(t, serverOpts{
		VaultExtra: "postgres {\n\t\t\tconnection_string {env.TV_NODE_PG}\n\t\t}",
		Env:        []string{"TV_NODE_PG=" + dsn},
	})
	for _, id := range ids {
		if got := node.expect(http.StatusOK, http.MethodGet, "/tokens/"+id, revealKey, nil).Raw; !bytes.Equal(got, want[id]) {
			t.Errorf("token %s on PostgreSQL:\n%s\nwant\n%s", id, got, want[id])
		}
	}
	node.expect(http.StatusCreated, http.MethodPost, "/tokens", revealKey, map[string]any{"type": "token", "data": "after the move"})

	errOut, err := restore()
	if err == nil || !strings.Contains(errOut, "not empty") {
		t.Errorf("a restore into the database in use: %v, %s", err, errOut)
	}
	for _, id := range ids {
		node.expect(http.StatusOK, http.MethodGet, "/tokens/"+id, revealKey, nil)
	}
	node.stopClean()
}

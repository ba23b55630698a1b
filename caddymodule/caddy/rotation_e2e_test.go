package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// TestKeyRotationEndToEnd: the master key rotates online, after which
// only the new key opens the store; a data key rotation re-seals in the
// background and survives kill -9 in the middle.
func TestKeyRotationEndToEnd(t *testing.T) {
	storage := t.TempDir() + "/data"
	s := startServer(t, serverOpts{Storage: storage, Env: []string{"TV_NEW_KEY=" + masterKeyB}})
	ct := s.createTenant("rotation")
	_, key, _ := s.createApp(ct.Key, map[string]any{"name": "r", "type": "private", "rules": []map[string]any{{
		"priority": 1, "container": "/", "transform": "reveal", "permissions": []string{"token:create", "token:read"}}}})
	card := map[string]any{"type": "card", "data": map[string]any{"number": "4242424242424242", "expiration_month": 12, "expiration_year": 2030}}
	var ids []string
	for i := 0; i < 300; i++ {
		r := s.expect(http.StatusCreated, http.MethodPost, "/tokens", key, card)
		ids = append(ids, testjson.Str(r.Body, "id"))
	}
	readAll := func(s *server) {
		t.Helper()
		for _, id := range ids {
			r := s.do(http.MethodGet, "/tokens/"+id, key, nil)
			if r.Status != http.StatusOK || testjson.Str(r.Body, "data", "number") != "4242424242424242" {
				t.Fatalf("token %s: %d %s", id, r.Status, r.Raw)
			}
		}
	}

	out, errOut, err := s.runCLI("vault", "rotate-master-key", "--new-key", "{env.TV_NEW_KEY}", "--address", s.adminAddr)
	if err != nil || !strings.Contains(out, `"rotated"`) {
		t.Fatalf("rotate-master-key: %v\n%s\n%s", err, out, errOut)
	}
	readAll(s)
	s.stopClean()

	// the old key no longer opens the store; the new one does
	if code, stderr := runRefused(t, serverOpts{Storage: storage, MasterKey: masterKeyA}); code == 0 || !strings.Contains(stderr, "master key does not match") {
		t.Fatalf("the old key: exit %d\n%s", code, tail(stderr, 5))
	}
	s = startServer(t, serverOpts{Storage: storage, MasterKey: masterKeyB})
	readAll(s)

	// data key rotation, killed while it re-seals
	out, errOut, err = s.runCLI("vault", "rotate-data-key", "--tenant", ct.Tenant.ID, "--address", s.adminAddr)
	if err != nil || !strings.Contains(out, `"current_version": 2`) {
		t.Fatalf("rotate-data-key: %v\n%s\n%s", err, out, errOut)
	}
	s.kill()
	s = startServer(t, serverOpts{Storage: storage, MasterKey: masterKeyB})
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := s.adminGet("/vault/tenants/" + ct.Tenant.ID + "/data-keys")
		versions, _ := testjson.Field(r.Body, "versions").([]any)
		if r.Status == http.StatusOK && len(versions) == 1 && versions[0] == 2.0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the re-seal did not finish after the restart: %s", r.Raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	readAll(s)
}

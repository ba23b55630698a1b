package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// exampleServer prepares a server on the repository's Caddyfile.example,
// as the README's quick start runs it, with only its two ports moved to
// free ones: the API's 8080 and the admin endpoint's 2019. Its relative
// paths (./tokenvault-data, ./tokenvault-master.key) land in the server's
// directory.
func exampleServer(t *testing.T) *server {
	t.Helper()
	raw, err := os.ReadFile("../../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, serverOpts{NoMasterKey: true})
	config := string(raw)
	for _, sub := range []struct{ old, new string }{
		{"http://:8080 {", fmt.Sprintf("http://:%d {", s.apiPort)},
		{"admin localhost:2019", "admin " + s.adminAddr},
	} {
		if n := strings.Count(config, sub.old); n != 1 {
			t.Fatalf("Caddyfile.example holds %q %d times, want once: the quick start changed shape, update this test", sub.old, n)
		}
		config = strings.Replace(config, sub.old, sub.new, 1)
	}
	if err := os.WriteFile(s.configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestExampleServesEveryLoopbackName runs the binary on Caddyfile.example:
// POST /tokens creates a token through http://127.0.0.1, http://localhost
// and http://[::1] alike (an SDK pointed at any of them works), and a
// request naming a host no site names still reaches the vault, never an
// empty 200.
func TestExampleServesEveryLoopbackName(t *testing.T) {
	t.Parallel()
	s := exampleServer(t)
	s.launch()
	if err := s.waitReady(); err != nil {
		t.Fatalf("caddy did not start on Caddyfile.example: %v\n%s", err, tail(s.stderr(), 4000))
	}
	ct := s.createTenant("Example Co")
	_, key, _ := s.createApp(ct.Key, map[string]any{"name": "backend", "type": "private",
		"permissions": []string{"token:create", "token:read"}})

	var ids []string
	for _, host := range []string{"127.0.0.1", "localhost", "[::1]"} {
		base := fmt.Sprintf("http://%s:%d", host, s.apiPort)
		r, err := doRequest(s.client, http.MethodPost, base+"/tokens", key, map[string]any{"type": "token", "data": "example via " + host})
		if err != nil {
			t.Errorf("POST %s/tokens: %v", base, err)
			continue
		}
		if r.Status != http.StatusCreated || testjson.Str(r.Body, "id") == "" {
			t.Errorf("POST %s/tokens: %d %s", base, r.Status, r.Raw)
			continue
		}
		ids = append(ids, testjson.Str(r.Body, "id"))
	}
	for _, id := range ids { // one vault behind every name
		s.expect(http.StatusOK, http.MethodGet, "/tokens/"+id, key, nil)
	}

	for _, host := range []string{"unknown.example", "vault.example.com:443"} {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, s.baseURL+"/tokens", strings.NewReader(`{"type":"token","data":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatalf("Host %s: %v", host, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && len(strings.TrimSpace(string(body))) == 0 {
			t.Errorf("Host %s: an empty 200", host)
		}
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("Content-Type"), "problem+json") {
			t.Errorf("Host %s: %d %q %s, want the vault's 401 problem", host, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
}

// TestValidateLeavesNoTraceAndWorksBesideTheServer: `caddy validate` on
// Caddyfile.example creates neither the master key file nor the storage
// directory; with a server running on the same files it still succeeds
// (the storage's lock is the server's), and it refuses another master
// key, read from the store's check value.
func TestValidateLeavesNoTraceAndWorksBesideTheServer(t *testing.T) {
	t.Parallel()
	s := exampleServer(t)
	keyFile, storage := filepath.Join(s.dir, "tokenvault-master.key"), filepath.Join(s.dir, "tokenvault-data")
	validate := func(config string) (string, error) {
		out, errOut, err := s.runCLI("validate", "--config", config, "--adapter", "caddyfile")
		return out + errOut, err
	}
	absent := func(when string) {
		t.Helper()
		for _, p := range []string{keyFile, storage} {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: %s exists (%v)", when, p, err)
			}
		}
	}

	absent("before")
	if out, err := validate(s.configPath); err != nil || !strings.Contains(out, "Valid configuration") {
		t.Fatalf("caddy validate before the first start: %v\n%s", err, out)
	}
	absent("after caddy validate")

	s.launch()
	if err := s.waitReady(); err != nil {
		t.Fatalf("caddy did not start: %v\n%s", err, tail(s.stderr(), 4000))
	}
	ct := s.createTenant("Validate Co")
	if out, err := validate(s.configPath); err != nil || !strings.Contains(out, "Valid configuration") {
		t.Fatalf("caddy validate while the server runs: %v\n%s", err, out)
	}

	// the same configuration with another master key: refused from the
	// store's check value, read without the lock
	otherKey := filepath.Join(t.TempDir(), "other.key")
	if err := os.WriteFile(otherKey, []byte(masterKeyB+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(s.configPath)
	if err != nil {
		t.Fatal(err)
	}
	const keyLine = "master_key_file ./tokenvault-master.key"
	if !strings.Contains(string(raw), keyLine) {
		t.Fatalf("Caddyfile.example has no %q line", keyLine)
	}
	wrong := filepath.Join(s.dir, "Caddyfile.wrong-key")
	if err := os.WriteFile(wrong, []byte(strings.Replace(string(raw), keyLine, "master_key_file "+otherKey, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := validate(wrong); err == nil || !strings.Contains(out, "master key does not match") {
		t.Errorf("caddy validate with another master key: %v\n%s", err, out)
	} else if strings.Contains(out, masterKeyB) {
		t.Error("caddy validate printed the master key")
	}
	s.expect(http.StatusOK, http.MethodGet, "/tenants/self", ct.Key, nil)
	s.stopClean()
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// TestBackupRestoreEndToEnd backs up a running vault while a writer keeps
// creating tokens, restores the backup offline into a new directory and
// starts a second vault on it: every token created before the backup
// began reads back the same, and the applications, their keys and the
// proxies are there. A restore with another master key, or into a
// directory that is not empty, is refused and writes nothing.
func TestBackupRestoreEndToEnd(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{})
	ct := s.createTenant("Backup Co")
	mgmt := ct.Key
	allPerms := []string{"token:create", "token:read", "token:update", "token:delete"}
	revealID, revealKey, _ := s.createApp(mgmt, map[string]any{"name": "reveal", "type": "private",
		"rules": []map[string]any{{"priority": 1, "container": "/", "transform": "reveal", "permissions": allPerms}}})
	secondKey := testjson.Str(s.expect(http.StatusCreated, http.MethodPost, "/applications/"+revealID+"/keys", mgmt, nil).Body, "key")
	_, billingKey, _ := s.createApp(mgmt, billingApp)
	proxyID, _ := createProxy(t, s, mgmt, map[string]any{"name": "charges", "destination_url": "https://payments.example.com/charges"})
	apiKeys := []string{mgmt, revealKey, secondKey, billingKey}

	var mu sync.Mutex
	var created []string // tokens whose creation has been answered
	create := func(body any) (string, error) {
		r, err := s.request(http.MethodPost, "/tokens", revealKey, body)
		if err != nil {
			return "", err
		}
		if r.Status != http.StatusCreated {
			return "", fmt.Errorf("POST /tokens: %d %s", r.Status, r.Raw)
		}
		id := testjson.Str(r.Body, "id")
		mu.Lock()
		created = append(created, id)
		mu.Unlock()
		return id, nil
	}
	for i := 0; i < 40; i++ {
		var body map[string]any
		switch i % 4 {
		case 0:
			body = map[string]any{"type": "card", "data": map[string]any{"number": e2ePAN, "expiration_month": 1 + i%12, "expiration_year": 2031}, "deduplicate_token": false}
		case 1:
			body = map[string]any{"type": "bank", "data": map[string]any{"routing_number": "021000021", "account_number": e2eAccount}, "deduplicate_token": false}
		case 2:
			body = map[string]any{"type": "token", "data": fmt.Sprintf("backup secret %d", i), "metadata": map[string]string{"n": fmt.Sprint(i)}, "search_indexes": []string{"{{ data }}"}}
		default:
			body = map[string]any{"type": "token", "data": map[string]any{"nested": []any{i, "x"}}, "containers": []string{"/general/"}}
		}
		if _, err := create(body); err != nil {
			t.Fatal(err)
		}
	}
	cvcCard, err := create(map[string]any{"type": "card", "data": map[string]any{"number": "5555555555554444", "expiration_month": 12, "expiration_year": 2031, "cvc": e2eCVC}})
	if err != nil {
		t.Fatal(err)
	}

	// a writer that keeps creating tokens until told to stop, or for at
	// most 3000 tokens
	stop := make(chan struct{})
	var writer sync.WaitGroup
	var writerErr error
	var lateMu sync.Mutex
	var late []string // tokens whose creation was sent after the backup ended
	backupDone := make(chan struct{})
	writer.Add(1)
	go func() {
		defer writer.Done()
		for i := 0; i < 3000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			isLate := false
			select {
			case <-backupDone:
				isLate = true
			default:
			}
			id, err := create(map[string]any{"type": "token", "data": fmt.Sprintf("written under load %d", i)})
			if err != nil {
				writerErr = err
				return
			}
			if isLate {
				lateMu.Lock()
				late = append(late, id)
				lateMu.Unlock()
			}
		}
	}()
	for deadline := time.Now().Add(requestTimeout); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(created)
		mu.Unlock()
		if n >= 80 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the writer created only %d tokens", n)
		}
	}

	mu.Lock()
	before := append([]string(nil), created...)
	mu.Unlock()
	backup := filepath.Join(t.TempDir(), "vault.backup")
	out, errOut, err := s.runCLI("vault", "backup", "--output", backup, "--address", s.adminAddr)
	close(backupDone)
	time.Sleep(100 * time.Millisecond) // let a few late tokens be written
	close(stop)
	writer.Wait()
	if err != nil {
		t.Fatalf("caddy vault backup: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	if writerErr != nil {
		t.Fatalf("the writer failed: %v", writerErr)
	}
	if !strings.Contains(errOut, "backup written to "+backup) || !strings.Contains(errOut, "records") {
		t.Errorf("backup summary: %q", errOut)
	}
	if strings.Contains(errOut, "\r") {
		t.Errorf("a progress line was printed although stderr is not a terminal: %q", errOut)
	}
	if st, err := os.Stat(backup); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v, %v; want mode 0600", st, err)
	}
	if found, _ := scanFile(backup, map[string][]byte{
		"card number": []byte(e2ePAN), "account number": []byte(e2eAccount), "token data": []byte("backup secret"),
		"tenant id": []byte(ct.Tenant.ID), "management key": []byte(mgmt), "key layout": []byte("v1/t/"),
	}); len(found) > 0 {
		t.Errorf("the backup holds in clear: %v", found)
	}
	t.Logf("%d tokens before the backup, %d created in all; %s", len(before), len(created), strings.TrimSpace(errOut))

	t.Run("admin endpoint", func(t *testing.T) {
		r := s.adminGet("/vault/backup")
		if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "application/octet-stream" || !bytes.HasPrefix(r.Raw, []byte("TVBACKUP")) {
			t.Errorf("GET /vault/backup: %d %v %.20q", r.Status, r.Header, r.Raw)
		}
		post, err := doRequest(s.client, http.MethodPost, "http://"+s.adminAddr+"/vault/backup", "", nil)
		if err != nil || post.Status != http.StatusMethodNotAllowed {
			t.Errorf("POST /vault/backup: %v, %v", post.Status, err)
		}
	})

	t.Run("backup refuses to overwrite", func(t *testing.T) {
		digest := fileDigests(t, filepath.Dir(backup))
		_, errOut, err := s.runCLI("vault", "backup", "--output", backup, "--address", s.adminAddr)
		if err == nil || !strings.Contains(errOut, "--force") {
			t.Errorf("a second backup to the same file: %v, %s", err, errOut)
		}
		if again := fileDigests(t, filepath.Dir(backup)); again[filepath.Base(backup)] != digest[filepath.Base(backup)] || len(again) != len(digest) {
			t.Error("the refused backup changed the directory")
		}
		other := filepath.Join(t.TempDir(), "replaced.backup")
		os.WriteFile(other, []byte("old"), 0o644)
		if _, errOut, err := s.runCLI("vault", "backup", "--output", other, "--force", "--address", s.adminAddr); err != nil {
			t.Errorf("backup --force: %v, %s", err, errOut)
		}
		if st, err := os.Stat(other); err != nil || st.Size() < 100 || st.Mode().Perm() != 0o600 {
			t.Errorf("the replaced backup: %v, %v", st, err)
		}
	})

	// what the first vault answers, to compare with the restored one
	want := map[string][]byte{}
	for _, id := range before {
		want[id] = s.expect(http.StatusOK, http.MethodGet, "/tokens/"+id, revealKey, nil).Raw
	}
	if !strings.Contains(string(want[cvcCard]), e2eCVC) {
		t.Fatalf("the card's CVC before the backup: %s", want[cvcCard])
	}
	wantApps := s.expect(http.StatusOK, http.MethodGet, "/applications?size=100", mgmt, nil).Raw
	wantProxy := s.expect(http.StatusOK, http.MethodGet, "/proxies/"+proxyID, mgmt, nil).Raw
	s.stopClean()

	restored := filepath.Join(t.TempDir(), "restored")
	out, errOut, err = s.runCLI("vault", "restore", "--input", backup, "--storage", restored, "--master-key-env", "TV_MASTER_KEY")
	if err != nil {
		t.Fatalf("caddy vault restore: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	if !strings.Contains(errOut, "restored ") {
		t.Errorf("restore summary: %q", errOut)
	}

	t.Run("restore with another master key", func(t *testing.T) {
		keyFile := filepath.Join(t.TempDir(), "other.key")
		if err := os.WriteFile(keyFile, []byte(masterKeyB+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "restored2")
		_, errOut, err := s.runCLI("vault", "restore", "--input", backup, "--storage", dir, "--master-key-file", keyFile)
		if err == nil || !strings.Contains(errOut, "the master key does not match the backup") {
			t.Errorf("restore with another master key: %v, %s", err, errOut)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the refused restore created %s: %v", dir, err)
		}
	})

	t.Run("restore into a directory that is not empty", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "keep"), []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errOut, err := s.runCLI("vault", "restore", "--input", backup, "--storage", dir, "--master-key-env", "TV_MASTER_KEY")
		if err == nil || !strings.Contains(errOut, "not empty") {
			t.Errorf("restore into a non-empty directory: %v, %s", err, errOut)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("the refused restore changed the directory: %d entries", len(entries))
		}
		if _, errOut, err := s.runCLI("vault", "restore", "--input", backup, "--storage", restored, "--master-key-env", "TV_MASTER_KEY"); err == nil || !strings.Contains(errOut, "not empty") {
			t.Errorf("restore over the restored store: %v, %s", err, errOut)
		}
	})

	s2 := startServer(t, serverOpts{Storage: restored})
	for _, id := range before {
		got := s2.expect(http.StatusOK, http.MethodGet, "/tokens/"+id, revealKey, nil).Raw
		if id == cvcCard {
			if bytes.Contains(got, []byte(`"cvc"`)) {
				t.Errorf("the restored card has its CVC: %s", got)
			}
			if !sameJSON(t, withoutCVC(t, want[id]), got) {
				t.Errorf("card %s after restore:\n%s\nwant (without its CVC)\n%s", id, got, want[id])
			}
			continue
		}
		if !bytes.Equal(got, want[id]) {
			t.Errorf("token %s after restore:\n%s\nwant\n%s", id, got, want[id])
		}
	}
	lateMu.Lock()
	for _, id := range late {
		if r := s2.do(http.MethodGet, "/tokens/"+id, revealKey, nil); r.Status != http.StatusNotFound {
			t.Errorf("token %s, created after the backup ended, is in it: %d", id, r.Status)
		}
	}
	lateMu.Unlock()
	if got := s2.expect(http.StatusOK, http.MethodGet, "/applications?size=100", mgmt, nil).Raw; !bytes.Equal(got, wantApps) {
		t.Errorf("applications after restore:\n%s\nwant\n%s", got, wantApps)
	}
	if got := s2.expect(http.StatusOK, http.MethodGet, "/proxies/"+proxyID, mgmt, nil).Raw; !bytes.Equal(got, wantProxy) {
		t.Errorf("proxy after restore:\n%s\nwant\n%s", got, wantProxy)
	}
	for i, k := range apiKeys {
		if r := s2.do(http.MethodGet, "/applications/key", k, nil); r.Status != http.StatusOK {
			t.Errorf("API key %d does not authenticate after restore: %d %s", i, r.Status, r.Raw)
		}
	}
	if r := s2.adminGet("/vault/tenants"); !strings.Contains(string(r.Raw), ct.Tenant.ID) {
		t.Errorf("the tenant after restore: %s", r.Raw)
	}
	total := testjson.Field(s2.expect(http.StatusOK, http.MethodGet, "/tokens?size=1", revealKey, nil).Body, "pagination", "total_items")
	t.Logf("the restored vault lists %v tokens", total)
	s2.stopClean()
}

// withoutCVC removes data.cvc from a token's JSON.
func withoutCVC(t *testing.T, raw []byte) []byte {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if d, ok := v["data"].(map[string]any); ok {
		delete(d, "cvc")
	}
	out, _ := json.Marshal(v)
	return out
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ra, _ := json.Marshal(x)
	rb, _ := json.Marshal(y)
	return bytes.Equal(ra, rb)
}

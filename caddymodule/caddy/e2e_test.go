package main

// End-to-end tests: the real binary, real Badger on disk, real HTTP on
// 127.0.0.1. Each test asserts what a user of the vault sees.

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// billingApp is a private application that may read tokens.
var billingApp = map[string]any{"name": "billing", "type": "private", "permissions": []string{"token:read"}}

// TestMasterKeyFileAndRestart: with master_key_file, the first start
// writes a 0600 base64 key; a tenant made by the CLI and a private
// application are still there, with the same key file, after a restart.
// (TestREADMEQuickStart replays the README's own commands.)
func TestMasterKeyFileAndRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := serverOpts{
		Storage:       filepath.Join(dir, "tokenvault-data"),
		MasterKeyFile: filepath.Join(dir, "secrets", "tokenvault-master.key"),
	}
	s := startServer(t, opts)

	ct := s.createTenant("Quick Start Co")
	r := s.expect(http.StatusOK, http.MethodGet, "/tenants/self", ct.Key, nil)
	if testjson.Str(r.Body, "id") != ct.Tenant.ID || testjson.Str(r.Body, "name") != "Quick Start Co" {
		t.Errorf("GET /tenants/self = %s, want tenant %s named Quick Start Co", r.Raw, ct.Tenant.ID)
	}

	st, err := os.Stat(opts.MasterKeyFile)
	if err != nil {
		t.Fatalf("master key file: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("master key file mode %v, want 0600", st.Mode().Perm())
	}
	keyFile, _ := os.ReadFile(opts.MasterKeyFile)
	if raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(keyFile))); err != nil || len(raw) != 32 {
		t.Errorf("master key file does not hold a base64 32-byte key (%d bytes, %v)", len(raw), err)
	}

	r = s.expect(http.StatusCreated, http.MethodPost, "/applications", ct.Key, billingApp)
	appID, appKey := testjson.Str(r.Body, "id"), testjson.Str(r.Body, "key")
	if appID == "" || !strings.HasPrefix(appKey, "key_test_") {
		t.Fatalf("POST /applications: no id or key: %s", r.Raw)
	}
	if k0 := testjson.Str(r.Body, "keys", 0, "key"); k0 != appKey {
		t.Errorf("keys[0].key = %q, want the same key as key", k0)
	}
	if testjson.Str(r.Body, "type") != "private" || testjson.Str(r.Body, "name") != "billing" {
		t.Errorf("created application: %s", r.Raw)
	}
	if perms, _ := testjson.Field(r.Body, "permissions").([]any); len(perms) != 1 || perms[0] != "token:read" {
		t.Errorf("permissions = %v, want [token:read]", testjson.Field(r.Body, "permissions"))
	}
	r = s.expect(http.StatusOK, http.MethodGet, "/applications/key", appKey, nil)
	if testjson.Str(r.Body, "id") != appID {
		t.Errorf("GET /applications/key with the billing key = %s, want application %s", r.Raw, appID)
	}
	s.stopClean()

	s2 := startServer(t, opts)
	if again, _ := os.ReadFile(opts.MasterKeyFile); !bytes.Equal(again, keyFile) {
		t.Errorf("the master key file changed across a restart")
	}
	r = s2.expect(http.StatusOK, http.MethodGet, "/tenants/self", ct.Key, nil)
	if testjson.Str(r.Body, "id") != ct.Tenant.ID || testjson.Str(r.Body, "name") != "Quick Start Co" {
		t.Errorf("after restart GET /tenants/self = %s", r.Raw)
	}
	r = s2.expect(http.StatusOK, http.MethodGet, "/applications/"+appID, ct.Key, nil)
	if testjson.Str(r.Body, "name") != "billing" || testjson.Str(r.Body, "type") != "private" {
		t.Errorf("after restart GET /applications/{id} = %s", r.Raw)
	}
	r = s2.expect(http.StatusOK, http.MethodGet, "/applications/key", appKey, nil)
	if testjson.Str(r.Body, "id") != appID {
		t.Errorf("after restart the billing key authenticates as %s, want %s", testjson.Str(r.Body, "id"), appID)
	}
	s2.stopClean()
}

// mutateKey changes one payload character of a key, keeping it base62.
func mutateKey(key string, at int) string {
	i := len("key_test_") + at
	b := []byte(key)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// TestAuthentication: every way of not having a valid key gets the same
// 401 problem.
func TestAuthentication(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{})
	ct := s.createTenant("Auth Co")

	victimID, revokedKey, revokedKeyID := s.createApp(ct.Key, map[string]any{"name": "victim", "type": "private", "permissions": []string{"token:read"}})
	r := s.expect(http.StatusCreated, http.MethodPost, "/applications/"+victimID+"/keys", ct.Key, nil)
	survivorKey := testjson.Str(r.Body, "key")
	goneID, goneKey, _ := s.createApp(ct.Key, map[string]any{"name": "gone", "type": "private", "permissions": []string{"token:read"}})
	for _, k := range []string{revokedKey, survivorKey, goneKey} {
		s.expect(http.StatusOK, http.MethodGet, "/applications/key", k, nil)
	}
	s.expect(http.StatusNoContent, http.MethodDelete, "/applications/"+victimID+"/keys/"+revokedKeyID, ct.Key, nil)
	s.expect(http.StatusNoContent, http.MethodDelete, "/applications/"+goneID, ct.Key, nil)

	cases := []struct {
		name string
		key  string
		raw  bool // send the header even if empty
	}{
		{"missing", "", false},
		{"empty", "", true},
		{"malformed", "not-a-key", false},
		{"bearer", "Bearer " + ct.Key, false},
		{"truncated", ct.Key[:len(ct.Key)-1], false},
		{"checksum", mutateKey(ct.Key, 5), false},
		{"other env", "key_prod_" + strings.TrimPrefix(ct.Key, "key_test_"), false},
		{"deleted application", goneKey, false},
		{"revoked", revokedKey, false},
	}
	var first []byte
	for _, c := range cases {
		for _, path := range []string{"/applications/key", "/tenants/self"} {
			var hdr []string
			if c.raw {
				hdr = []string{"SVC-API-KEY", c.key}
			}
			r := s.do(http.MethodGet, path, c.key, nil, hdr...)
			what := fmt.Sprintf("%s key on GET %s", c.name, path)
			wantProblem(t, r, http.StatusUnauthorized, what)
			if first == nil {
				first = r.Raw
			} else if !bytes.Equal(r.Raw, first) {
				t.Errorf("%s: body %q differs from the first 401 body %q", what, r.Raw, first)
			}
		}
	}
	// A wrong key on a route that needs a permission is still 401, not 403.
	r = s.do(http.MethodPost, "/applications", revokedKey, billingApp)
	wantProblem(t, r, http.StatusUnauthorized, "revoked key on POST /applications")
	if !bytes.Equal(r.Raw, first) {
		t.Errorf("POST with a revoked key: body %q differs from %q", r.Raw, first)
	}
	// Revocation is narrow: the application's other key still works.
	s.expect(http.StatusOK, http.MethodGet, "/applications/key", survivorKey, nil)
	s.expect(http.StatusOK, http.MethodGet, "/tenants/self", ct.Key, nil)
}

// TestPermissions: an application gets 403 for what it is not granted.
func TestPermissions(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{})
	ct := s.createTenant("Perm Co")

	_, readerKey, _ := s.createApp(ct.Key, map[string]any{"name": "reader", "type": "management", "permissions": []string{"tenant:read"}})
	s.expect(http.StatusOK, http.MethodGet, "/tenants/self", readerKey, nil)
	r := s.do(http.MethodPut, "/tenants/self", readerKey, map[string]any{"name": "Renamed"})
	wantProblem(t, r, http.StatusForbidden, "PUT /tenants/self with only tenant:read")
	r = s.expect(http.StatusOK, http.MethodGet, "/tenants/self", ct.Key, nil)
	if testjson.Str(r.Body, "name") != "Perm Co" {
		t.Errorf("a refused PUT renamed the tenant to %q", testjson.Str(r.Body, "name"))
	}
	wantProblem(t, s.do(http.MethodGet, "/applications", readerKey, nil), http.StatusForbidden, "GET /applications with only tenant:read")

	_, privKey, _ := s.createApp(ct.Key, billingApp)
	wantProblem(t, s.do(http.MethodGet, "/applications", privKey, nil), http.StatusForbidden, "GET /applications with a private key")
	wantProblem(t, s.do(http.MethodPost, "/applications", privKey, map[string]any{"name": "sneaky", "type": "management", "permissions": []string{"application:create"}}),
		http.StatusForbidden, "POST /applications with a private key")
	wantProblem(t, s.do(http.MethodDelete, "/tenants/self", privKey, nil), http.StatusForbidden, "DELETE /tenants/self with a private key")

	r = s.expect(http.StatusOK, http.MethodGet, "/applications?size=100", ct.Key, nil)
	for _, a := range listData(r) {
		if testjson.Str(a, "name") == "sneaky" {
			t.Errorf("a refused POST created an application: %v", a)
		}
	}
	s.expect(http.StatusOK, http.MethodGet, "/tenants/self", ct.Key, nil)
}

// listData returns the data array of a list response.
func listData(r apiResponse) []any {
	d, _ := testjson.Field(r.Body, "data").([]any)
	return d
}

// TestTenantIsolation: another tenant's application is 404, whatever the
// operation, and never listed.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{})
	a := s.createTenant("Tenant A")
	b := s.createTenant("Tenant B")

	bAppID, bAppKey, bKeyID := s.createApp(b.Key, map[string]any{"name": "b-secret-app", "type": "private", "permissions": []string{"token:read"}})
	s.createApp(a.Key, map[string]any{"name": "a-app", "type": "private", "permissions": []string{"token:read"}})

	missing := "00000000-0000-4000-8000-000000000000"
	ops := []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/applications/%s", nil},
		{http.MethodPut, "/applications/%s", map[string]any{"name": "hijacked", "permissions": []string{"token:read"}}},
		{http.MethodGet, "/applications/%s/keys", nil},
		{http.MethodPost, "/applications/%s/keys", nil},
		{http.MethodDelete, "/applications/%s/keys/" + bKeyID, nil},
		{http.MethodDelete, "/applications/%s", nil},
	}
	for _, op := range ops {
		rb := s.do(op.method, fmt.Sprintf(op.path, bAppID), a.Key, op.body)
		what := fmt.Sprintf("tenant A: %s %s", op.method, fmt.Sprintf(op.path, "{B's app}"))
		wantProblem(t, rb, http.StatusNotFound, what)
		rm := s.do(op.method, fmt.Sprintf(op.path, missing), a.Key, op.body)
		if rb.Status == rm.Status && !bytes.Equal(rb.Raw, rm.Raw) {
			t.Errorf("%s: body %q differs from a missing id's %q", what, rb.Raw, rm.Raw)
		}
	}

	r := s.expect(http.StatusOK, http.MethodGet, "/applications?size=100", a.Key, nil)
	data := listData(r)
	if len(data) != 2 {
		t.Errorf("tenant A lists %d applications, want 2: %s", len(data), r.Raw)
	}
	for _, app := range data {
		if testjson.Str(app, "id") == bAppID || testjson.Str(app, "tenant_id") != a.Tenant.ID {
			t.Errorf("tenant A's list holds %v", app)
		}
	}
	r = s.expect(http.StatusOK, http.MethodGet, "/applications/?id="+bAppID, a.Key, nil)
	if len(listData(r)) != 0 {
		t.Errorf("tenant A's list filtered by B's id: %s", r.Raw)
	}

	// B's application is untouched and its key still works.
	r = s.expect(http.StatusOK, http.MethodGet, "/applications/"+bAppID, b.Key, nil)
	if testjson.Str(r.Body, "name") != "b-secret-app" {
		t.Errorf("B's application after A's attempts: %s", r.Raw)
	}
	r = s.expect(http.StatusOK, http.MethodGet, "/applications/"+bAppID+"/keys", b.Key, nil)
	if keys, _ := r.Body.([]any); len(keys) != 1 {
		t.Errorf("B's application has keys %s, want exactly its first one", r.Raw)
	}
	s.expect(http.StatusOK, http.MethodGet, "/applications/key", bAppKey, nil)
}

// TestKeys: a second key, then revoking one of the two.
func TestKeys(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{})
	ct := s.createTenant("Keys Co")
	appID, firstKey, firstKeyID := s.createApp(ct.Key, billingApp)

	r := s.expect(http.StatusCreated, http.MethodPost, "/applications/"+appID+"/keys", ct.Key, nil)
	secondKey, secondKeyID := testjson.Str(r.Body, "key"), testjson.Str(r.Body, "id")
	if !strings.HasPrefix(secondKey, "key_test_") || secondKeyID == "" || secondKey == firstKey {
		t.Fatalf("POST /applications/{id}/keys: %s", r.Raw)
	}
	for _, k := range []string{firstKey, secondKey} {
		r = s.expect(http.StatusOK, http.MethodGet, "/applications/key", k, nil)
		if testjson.Str(r.Body, "id") != appID {
			t.Errorf("GET /applications/key = %s, want %s", r.Raw, appID)
		}
	}
	r = s.expect(http.StatusOK, http.MethodGet, "/applications/"+appID+"/keys", ct.Key, nil)
	if strings.Contains(string(r.Raw), firstKey) || strings.Contains(string(r.Raw), secondKey) {
		t.Errorf("GET /applications/{id}/keys shows a secret: %s", r.Raw)
	}
	if keys, _ := r.Body.([]any); len(keys) != 2 {
		t.Errorf("GET /applications/{id}/keys = %s, want 2 keys", r.Raw)
	}

	s.expect(http.StatusNoContent, http.MethodDelete, "/applications/"+appID+"/keys/"+firstKeyID, ct.Key, nil)
	wantProblem(t, s.do(http.MethodGet, "/applications/key", firstKey, nil), http.StatusUnauthorized, "the revoked key")
	r = s.expect(http.StatusOK, http.MethodGet, "/applications/key", secondKey, nil)
	if testjson.Str(r.Body, "id") != appID {
		t.Errorf("the other key authenticates as %s, want %s", testjson.Str(r.Body, "id"), appID)
	}
	wantProblem(t, s.do(http.MethodDelete, "/applications/"+appID+"/keys/"+firstKeyID, ct.Key, nil), http.StatusNotFound, "deleting a revoked key again")
	r = s.expect(http.StatusOK, http.MethodGet, "/applications/"+appID+"/keys", ct.Key, nil)
	if keys, _ := r.Body.([]any); len(keys) != 1 || testjson.Str(keys[0], "id") != secondKeyID {
		t.Errorf("after revoking, keys = %s, want only %s", r.Raw, secondKeyID)
	}
}

// TestTenantDelete: a deleted tenant's keys stop working and the operator
// no longer sees it.
func TestTenantDelete(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{})
	doomed := s.createTenant("Doomed Co")
	keep := s.createTenant("Keeper Co")

	appID, appKey, _ := s.createApp(doomed.Key, billingApp)
	r := s.expect(http.StatusCreated, http.MethodPost, "/applications/"+appID+"/keys", doomed.Key, nil)
	extraKey := testjson.Str(r.Body, "key")
	_, mgmt2Key, _ := s.createApp(doomed.Key, map[string]any{"name": "ops", "type": "management", "permissions": []string{"tenant:read"}})
	_, keepAppKey, _ := s.createApp(keep.Key, billingApp)

	s.expect(http.StatusNoContent, http.MethodDelete, "/tenants/self", doomed.Key, nil)
	for i, k := range []string{doomed.Key, appKey, extraKey, mgmt2Key} {
		wantProblem(t, s.do(http.MethodGet, "/applications/key", k, nil), http.StatusUnauthorized, fmt.Sprintf("deleted tenant's key #%d", i))
		wantProblem(t, s.do(http.MethodGet, "/tenants/self", k, nil), http.StatusUnauthorized, fmt.Sprintf("deleted tenant's key #%d on /tenants/self", i))
	}

	r = s.adminGet("/vault/tenants")
	if r.Status != http.StatusOK {
		t.Fatalf("admin GET /vault/tenants: %d %s", r.Status, r.Raw)
	}
	list, _ := r.Body.([]any)
	var ids []string
	for _, tn := range list {
		ids = append(ids, testjson.Str(tn, "id"))
	}
	if slices.Contains(ids, doomed.Tenant.ID) {
		t.Errorf("admin GET /vault/tenants still lists the deleted tenant: %s", r.Raw)
	}
	if !slices.Contains(ids, keep.Tenant.ID) {
		t.Errorf("admin GET /vault/tenants lost the other tenant: %s", r.Raw)
	}
	if r := s.adminGet("/vault/tenants/" + doomed.Tenant.ID); r.Status != http.StatusNotFound {
		t.Errorf("admin GET /vault/tenants/{deleted}: %d %s, want 404", r.Status, r.Raw)
	}
	s.expect(http.StatusOK, http.MethodGet, "/tenants/self", keep.Key, nil)
	s.expect(http.StatusOK, http.MethodGet, "/applications/key", keepAppKey, nil)
}

// TestDiskScan: no key, name or master key in clear in the storage
// directory, neither while the server runs nor after it stopped.
func TestDiskScan(t *testing.T) {
	t.Parallel()
	storage := filepath.Join(t.TempDir(), "data")
	s := startServer(t, serverOpts{Storage: storage})
	ct := s.createTenant("ZebraCorpUniqueName")
	names := []string{"ZebraCorpUniqueName", "ZebraBillingUniqueName", "ZebraOpsUniqueName", "ZebraRenamedUniqueName"}
	billingID, billingKey, _ := s.createApp(ct.Key, map[string]any{"name": names[1], "type": "private", "permissions": []string{"token:read"}})
	_, opsKey, _ := s.createApp(ct.Key, map[string]any{"name": names[2], "type": "management", "permissions": []string{"application:read"}})
	r := s.expect(http.StatusCreated, http.MethodPost, "/applications/"+billingID+"/keys", ct.Key, nil)
	extraKey := testjson.Str(r.Body, "key")
	s.expect(http.StatusOK, http.MethodPut, "/tenants/self", ct.Key, map[string]any{"name": names[3]})

	masterRaw, _ := base64.StdEncoding.DecodeString(masterKeyA)
	needles := map[string][]byte{
		"management key": []byte(ct.Key),
		"billing key":    []byte(billingKey),
		"ops key":        []byte(opsKey),
		"extra key":      []byte(extraKey),
		"master key":     masterRaw,
		"master key b64": []byte(masterKeyA),
	}
	for _, n := range names {
		needles["name "+n] = []byte(n)
	}
	// Positive control: the scan must see the write-ahead log, where the
	// tenant id is part of the (clear) record keys.
	const control = "control: tenant id"
	needles[control] = []byte(ct.Tenant.ID)
	scan := func(when string) map[string][]string {
		found := scanTree(t, storage, needles)
		for what, paths := range found {
			if what != control {
				t.Errorf("%s: %s appears in clear in %v", when, what, paths)
			}
		}
		return found
	}
	if found := scan("while running"); len(found[control]) == 0 {
		t.Errorf("positive control: the tenant id %s is nowhere in %s, so the scan proves nothing", ct.Tenant.ID, storage)
	}
	s.stopClean()
	scan("after stop")
}

// TestRefusedStarts: a wrong, short or missing master key, or storage
// locked by a running server, stops Caddy from starting, with a clear
// message, and changes no file.
func TestRefusedStarts(t *testing.T) {
	t.Parallel()
	storage := filepath.Join(t.TempDir(), "data")
	s := startServer(t, serverOpts{Storage: storage, MasterKey: masterKeyA})
	ct := s.createTenant("Refusal Co")
	s.stopClean()
	before := fileDigests(t, storage)

	cases := []struct {
		name string
		opts serverOpts
		want []string // all must appear in the output
	}{
		{"wrong key", serverOpts{Storage: storage, MasterKey: masterKeyB}, []string{"master key does not match"}},
		{"short key", serverOpts{Storage: storage, MasterKey: shortKey}, []string{"master key", "32 bytes", "16"}},
		{"missing key", serverOpts{Storage: storage, NoMasterKey: true}, []string{"master_key"}},
	}
	for _, c := range cases {
		start := time.Now()
		code, out := runRefused(t, c.opts)
		if code == 0 {
			t.Errorf("%s: caddy exited 0, want a failure", c.name)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output does not mention %q:\n%s", c.name, w, tail(out, 3000))
			}
		}
		for _, secret := range []string{masterKeyA, masterKeyB, shortKey} {
			if strings.Contains(out, secret) {
				t.Errorf("%s: the output shows a master key", c.name)
			}
		}
		t.Logf("%s: refused in %v with exit code %d", c.name, time.Since(start).Round(time.Millisecond), code)
	}
	after := fileDigests(t, storage)
	if !mapsEqual(before, after) {
		t.Errorf("refused starts changed the storage:\nbefore %v\nafter  %v", before, after)
	}

	// Locked: a second server on the storage of a running one.
	s1 := startServer(t, serverOpts{Storage: storage, MasterKey: masterKeyA})
	code, out := runRefused(t, serverOpts{Storage: storage, MasterKey: masterKeyA})
	if code == 0 {
		t.Errorf("locked storage: caddy exited 0, want a failure")
	}
	if !strings.Contains(out, "locked by another process") {
		t.Errorf("locked storage: output does not mention %q:\n%s", "locked by another process", tail(out, 3000))
	}
	// The running server is unharmed.
	r := s1.expect(http.StatusOK, http.MethodGet, "/tenants/self", ct.Key, nil)
	if testjson.Str(r.Body, "id") != ct.Tenant.ID {
		t.Errorf("after the refused second server: %s", r.Raw)
	}
	s1.createApp(ct.Key, billingApp)
	s1.stopClean()
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// loadResult collects what concurrent creators saw.
type loadResult struct {
	mu       sync.Mutex
	ids      []string
	failures []string
}

func (l *loadResult) add(id string) {
	l.mu.Lock()
	l.ids = append(l.ids, id)
	l.mu.Unlock()
}

func (l *loadResult) fail(msg string) {
	l.mu.Lock()
	if len(l.failures) < 20 {
		l.failures = append(l.failures, msg)
	}
	l.mu.Unlock()
}

// TestReloadUnderLoad: 20 config reloads while 4 clients create
// applications; no request fails and nothing is lost. It runs once with a
// new connection per request, which isolates the server's reload
// handover, and once with keep-alive connections as clients use them.
func TestReloadUnderLoad(t *testing.T) {
	t.Parallel()
	t.Run("fresh connections", func(t *testing.T) { reloadUnderLoad(t, false) })
	t.Run("keep-alive", func(t *testing.T) { reloadUnderLoad(t, true) })
}

func reloadUnderLoad(t *testing.T, keepAlive bool) {
	s := startServer(t, serverOpts{})
	ct := s.createTenant("Reload Co")
	const idleConns = 8
	client := &http.Client{
		Timeout:   requestTimeout,
		Transport: &http.Transport{DisableKeepAlives: !keepAlive, MaxIdleConnsPerHost: idleConns},
	}

	const (
		workers   = 4
		reloads   = 20
		maxPerGor = 3000
	)
	var (
		res         loadResult
		failures    atomic.Int64 // every failed create
		reusedFails atomic.Int64 // transport errors on a reused keep-alive connection
		retried     atomic.Int64 // attempts that got no response and were sent again
		requests    atomic.Int64
		stop        = make(chan struct{})
		wg          sync.WaitGroup
	)
	deadline := time.Now().Add(90 * time.Second)
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < maxPerGor && time.Now().Before(deadline); i++ {
				select {
				case <-stop:
					return
				default:
				}
				requests.Add(1)
				body := map[string]any{"name": fmt.Sprintf("reload-%d-%d", g, i), "type": "private", "permissions": []string{"token:read"}}
				// A reload resets a few connections in flight (Caddy on
				// Linux binds a new SO_REUSEPORT socket and closes the old
				// one, and closes idle keep-alive connections). A request
				// that got no response at all is retried, as a client
				// would; total_items below proves none of them had been
				// applied, so the retries duplicate nothing. Every idle
				// connection in the client's pool may have been closed by
				// the same reload, so a request may fail once on each.
				var (
					r      apiResponse
					reused bool
					err    error
				)
				for attempt := 0; attempt < idleConns+2; attempt++ {
					r, reused, err = doRequestTraced(client, http.MethodPost, s.baseURL+"/applications", ct.Key, body)
					if err == nil {
						break
					}
					retried.Add(1)
					if reused {
						reusedFails.Add(1)
					}
				}
				switch {
				case err != nil:
					failures.Add(1)
					res.fail(fmt.Sprintf("worker %d request %d (reused connection: %v): %v", g, i, reused, err))
				case r.Status != http.StatusCreated:
					failures.Add(1)
					res.fail(fmt.Sprintf("worker %d request %d: status %d: %s", g, i, r.Status, r.Raw))
				default:
					res.add(testjson.Str(r.Body, "id"))
				}
			}
		}()
	}

	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	for i := 1; i <= reloads; i++ {
		gen := fmt.Sprint(i)
		if err := s.reload("\theader X-E2e-Generation " + gen + "\n\t# reload " + gen); err != nil {
			t.Errorf("reload %d: %v", i, err)
			break
		}
		r, err := s.request(http.MethodGet, "/tenants/self", ct.Key, nil)
		switch {
		case err != nil:
			t.Errorf("after reload %d: %v", i, err)
		case r.Status != http.StatusOK:
			t.Errorf("after reload %d: GET /tenants/self %d %s", i, r.Status, r.Raw)
		case r.Header.Get("X-E2e-Generation") != gen:
			t.Errorf("after reload %d the new config is not in effect: X-E2e-Generation %q", i, r.Header.Get("X-E2e-Generation"))
		}
	}
	reloadTime := time.Since(start)
	close(stop)
	wg.Wait()

	t.Logf("keep-alive %v: %d reloads in %v; %d creates, %d retried after a connection reset (%d on reused keep-alive connections), %d failed",
		keepAlive, reloads, reloadTime.Round(time.Millisecond), requests.Load(), retried.Load(), reusedFails.Load(), failures.Load())
	if n := failures.Load(); n > 0 {
		t.Errorf("%d of %d creates failed during reloads; first ones:\n%s",
			n, requests.Load(), strings.Join(res.failures, "\n"))
	}
	if len(res.ids) == 0 {
		t.Fatalf("no application was created")
	}
	if missing := verifyReadable(t, s, ct.Key, res.ids); missing > 0 {
		t.Errorf("%d of %d acknowledged applications are not readable after the reloads", missing, len(res.ids))
	}
	// A failed create left nothing behind, so a client may safely retry it.
	r := s.expect(http.StatusOK, http.MethodGet, "/applications?size=1", ct.Key, nil)
	if total, _ := testjson.Field(r.Body, "pagination", "total_items").(float64); int(total) != len(res.ids)+1 {
		t.Errorf("total_items = %v, want %d (acknowledged creates + the management application)", total, len(res.ids)+1)
	}
	if strings.Contains(s.stderr(), `"level":"error"`) {
		t.Errorf("the server logged errors during the reloads:\n%s", tail(grepLines(s.stderr(), `"level":"error"`), 3000))
	}
	s.stopClean()
}

// verifyReadable GETs every id with 4 workers and returns how many are not
// 200, logging the first few.
func verifyReadable(t *testing.T, s *server, key string, ids []string) int {
	t.Helper()
	var (
		missing atomic.Int64
		next    atomic.Int64
		wg      sync.WaitGroup
		mu      sync.Mutex
		logged  int
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ids) {
					return
				}
				r, err := s.request(http.MethodGet, "/applications/"+ids[i], key, nil)
				if err == nil && r.Status == http.StatusOK && testjson.Str(r.Body, "id") == ids[i] {
					continue
				}
				missing.Add(1)
				mu.Lock()
				if logged < 10 {
					logged++
					if err != nil {
						t.Logf("GET /applications/%s: %v", ids[i], err)
					} else {
						t.Logf("GET /applications/%s: %d %s", ids[i], r.Status, r.Raw)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return int(missing.Load())
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestKill9: every acknowledged create survives SIGKILL.
func TestKill9(t *testing.T) {
	t.Parallel()
	storage := filepath.Join(t.TempDir(), "data")
	const (
		rounds  = 3
		workers = 4
		runFor  = 1500 * time.Millisecond
		maxPer  = 5000
	)
	var (
		acked []string
		key   string
	)
	for round := 0; round <= rounds; round++ {
		s := startServer(t, serverOpts{Storage: storage})
		if round == 0 {
			key = s.createTenant("Kill Co").Key
		}
		if len(acked) > 0 {
			if missing := verifyReadable(t, s, key, acked); missing > 0 {
				t.Errorf("round %d: %d of %d acknowledged applications were lost to kill -9", round, missing, len(acked))
			}
		}
		if round == rounds {
			s.stopClean()
			break
		}
		var (
			res    loadResult
			killed atomic.Bool
			errs   atomic.Int64
			wg     sync.WaitGroup
		)
		for g := 0; g < workers; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < maxPer && !killed.Load(); i++ {
					r, err := s.request(http.MethodPost, "/applications", key,
						map[string]any{"name": fmt.Sprintf("kill-%d-%d-%d", round, g, i), "type": "private", "permissions": []string{"token:read"}})
					switch {
					case err != nil:
						if !killed.Load() {
							errs.Add(1)
							res.fail(fmt.Sprintf("before the kill: %v", err))
						}
						return
					case r.Status == http.StatusCreated:
						res.add(testjson.Str(r.Body, "id"))
					default:
						errs.Add(1)
						res.fail(fmt.Sprintf("status %d: %s", r.Status, r.Raw))
					}
				}
			}()
		}
		time.Sleep(runFor)
		killed.Store(true)
		s.kill()
		wg.Wait()
		if n := errs.Load(); n > 0 {
			t.Errorf("round %d: %d creates failed before the kill:\n%s", round, n, strings.Join(res.failures, "\n"))
		}
		if len(res.ids) == 0 {
			t.Fatalf("round %d: nothing was acknowledged before the kill", round)
		}
		t.Logf("round %d: %d creates acknowledged before SIGKILL", round, len(res.ids))
		acked = append(acked, res.ids...)
	}
}

// TestAccessLog: access entries carry trace ids and never a key.
func TestAccessLog(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{})
	ct := s.createTenant("Log Co")
	appID, appKey, _ := s.createApp(ct.Key, billingApp)
	r := s.expect(http.StatusCreated, http.MethodPost, "/applications/"+appID+"/keys", ct.Key, nil)
	extraKey := testjson.Str(r.Body, "key")
	keys := []string{ct.Key, appKey, extraKey}

	traces := []string{}
	for i, k := range keys {
		tr := fmt.Sprintf("e2e-log-trace-%d", i)
		traces = append(traces, tr)
		s.expect(http.StatusOK, http.MethodGet, "/applications/key", k, nil, "SVC-TRACE-ID", tr)
	}
	// Lower-case header name, a 401 and a 403 with real keys.
	s.expect(http.StatusOK, http.MethodGet, "/applications/key", "", nil, "svc-api-key", appKey)
	s.expect(http.StatusUnauthorized, http.MethodGet, "/tenants/self", mutateKey(ct.Key, 3), nil)
	s.expect(http.StatusForbidden, http.MethodGet, "/applications", appKey, nil)
	s.expect(http.StatusNotFound, http.MethodGet, "/nowhere", ct.Key, nil)

	wantLines := 2 + len(keys) + 4 // the requests above
	var logText string
	deadline := time.Now().Add(5 * time.Second)
	for {
		raw, _ := os.ReadFile(s.accessLog)
		logText = string(raw)
		if strings.Count(logText, "\n") >= wantLines || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, tr := range traces {
		if !strings.Contains(logText, `"trace_id":"`+tr+`"`) {
			t.Errorf("the access log has no entry with trace_id %q", tr)
		}
	}
	lines := strings.Split(strings.TrimSpace(logText), "\n")
	withTrace := 0
	for _, l := range lines {
		if strings.Contains(l, `"trace_id":"`) {
			withTrace++
		}
	}
	if withTrace < wantLines || withTrace != len(lines) {
		t.Errorf("%d of %d access log lines have a trace_id, want all of at least %d", withTrace, len(lines), wantLines)
	}
	s.stopClean()
	stderr := s.stderr()
	for i, k := range append(keys, mutateKey(ct.Key, 3)) {
		if strings.Contains(logText, k) {
			t.Errorf("the access log contains API key #%d", i)
		}
		if strings.Contains(stderr, k) {
			t.Errorf("the server log contains API key #%d", i)
		}
	}
	if strings.Contains(logText, "Svc-Api-Key") {
		t.Errorf("the access log names the Svc-Api-Key header")
	}
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// TestTraceID: a caller's trace id comes back; otherwise one is made.
func TestTraceID(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{})
	ct := s.createTenant("Trace Co")

	r := s.expect(http.StatusOK, http.MethodGet, "/tenants/self", ct.Key, nil, "SVC-TRACE-ID", "abc-123")
	if got := r.Header.Get("SVC-TRACE-ID"); got != "abc-123" {
		t.Errorf("SVC-TRACE-ID = %q, want abc-123", got)
	}
	r = s.do(http.MethodGet, "/tenants/self", "", nil, "SVC-TRACE-ID", "abc-123")
	if got := r.Header.Get("SVC-TRACE-ID"); r.Status != http.StatusUnauthorized || got != "abc-123" {
		t.Errorf("on a 401: status %d, SVC-TRACE-ID = %q, want abc-123", r.Status, got)
	}
	seen := map[string]bool{}
	for i := 0; i < 3; i++ {
		r = s.expect(http.StatusOK, http.MethodGet, "/tenants/self", ct.Key, nil)
		got := r.Header.Get("SVC-TRACE-ID")
		if !uuidPattern.MatchString(got) {
			t.Errorf("generated SVC-TRACE-ID = %q, want a UUID", got)
		}
		if seen[got] {
			t.Errorf("generated trace id %q repeats", got)
		}
		seen[got] = true
	}
	// A trace id that is not a plain token is replaced, not echoed.
	for _, bad := range []string{"has space", strings.Repeat("x", 200), "<script>"} {
		r = s.expect(http.StatusOK, http.MethodGet, "/tenants/self", ct.Key, nil, "SVC-TRACE-ID", bad)
		if got := r.Header.Get("SVC-TRACE-ID"); got == bad || !uuidPattern.MatchString(got) {
			t.Errorf("for trace id %q the response carries %q, want a generated one", bad, got)
		}
	}
}

// TestErrors: routing, size and body validation errors as problems.
func TestErrors(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{})
	ct := s.createTenant("Errors Co")
	k := ct.Key

	wantProblem(t, s.do(http.MethodGet, "/no/such/route", k, nil), http.StatusNotFound, "unknown route")
	// without a key every path is 401: the API tells nothing to strangers
	wantProblem(t, s.do(http.MethodGet, "/no/such/route", "", nil), http.StatusUnauthorized, "unknown route without a key")

	r := s.do(http.MethodPatch, "/applications", k, map[string]any{})
	wantProblem(t, r, http.StatusMethodNotAllowed, "PATCH /applications")
	allow := r.Header.Get("Allow")
	for _, m := range []string{"GET", "POST"} {
		if !strings.Contains(allow, m) {
			t.Errorf("405 Allow = %q, want it to name %s", allow, m)
		}
	}
	r = s.do(http.MethodPost, "/tenants/self", k, map[string]any{})
	wantProblem(t, r, http.StatusMethodNotAllowed, "POST /tenants/self")
	if a := r.Header.Get("Allow"); !strings.Contains(a, "GET") || !strings.Contains(a, "PUT") || !strings.Contains(a, "DELETE") {
		t.Errorf("405 on /tenants/self: Allow = %q", a)
	}

	big := `{"name":"` + strings.Repeat("a", 1<<20) + `","type":"private"}`
	wantProblem(t, s.do(http.MethodPost, "/applications", k, big), http.StatusRequestEntityTooLarge, "1 MB body")

	badRequest := func(what string, method, path, body, wantField string) {
		t.Helper()
		var b any
		if body != "" {
			b = body
		}
		r := s.do(method, path, k, b)
		wantProblem(t, r, http.StatusBadRequest, what)
		if wantField == "" {
			return
		}
		errs, _ := testjson.Field(r.Body, "errors").(map[string]any)
		if _, ok := errs[wantField]; !ok {
			t.Errorf("%s: errors %v do not name %q; body %s", what, errs, wantField, r.Raw)
		}
	}
	badRequest("duplicate member", http.MethodPost, "/applications", `{"name":"a","name":"b","type":"private"}`, "name")
	badRequest("invalid UTF-8", http.MethodPost, "/applications", "{\"name\":\"\xff\xfe\",\"type\":\"private\"}", "")
	badRequest("wrong type", http.MethodPost, "/applications", `{"name":5,"type":"private"}`, "name")
	badRequest("syntax", http.MethodPost, "/applications", `{"name":"a",`, "")
	badRequest("unknown setting", http.MethodPut, "/tenants/self", `{"name":"Errors Co","settings":{"bogus_setting":"true"}}`, "settings.bogus_setting")
	badRequest("bad setting value", http.MethodPut, "/tenants/self", `{"name":"Errors Co","settings":{"fingerprint_tokens":"yes"}}`, "settings.fingerprint_tokens")
	badRequest("page size", http.MethodGet, "/applications?size=101", "", "size")
	// The rejected bodies created nothing.
	r = s.expect(http.StatusOK, http.MethodGet, "/applications", k, nil)
	if n := len(listData(r)); n != 1 {
		t.Errorf("after rejected creates there are %d applications, want 1: %s", n, r.Raw)
	}

	// Collection paths with and without a trailing slash.
	r = s.expect(http.StatusCreated, http.MethodPost, "/applications/", k, billingApp)
	slashID := testjson.Str(r.Body, "id")
	s.expect(http.StatusCreated, http.MethodPost, "/applications", k, billingApp)
	for _, p := range []string{"/applications", "/applications/"} {
		r = s.expect(http.StatusOK, http.MethodGet, p, k, nil)
		if n := len(listData(r)); n != 3 {
			t.Errorf("GET %s lists %d applications, want 3", p, n)
		}
	}
	s.expect(http.StatusOK, http.MethodGet, "/applications/"+slashID+"/", k, nil)
	s.expect(http.StatusOK, http.MethodGet, "/applications/"+slashID+"/keys/", k, nil)
	s.expect(http.StatusOK, http.MethodGet, "/tenants/self/", k, nil)
}

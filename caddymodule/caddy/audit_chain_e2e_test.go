package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// auditLogBlock routes the vault's audit export to file with Caddy's own
// log directives only, and keeps it out of the default log.
func auditLogBlock(file string) string {
	return fmt.Sprintf(`	log audit {
		output file %s {
			roll_size 100MiB
			roll_keep_for 8760h
		}
		format json
		include vault.audit
	}
	log default {
		exclude vault.audit
	}
`, file)
}

// auditReports runs caddy vault audit verify with args and decodes its
// reports; it returns the error the command ended with and its stderr.
func auditReports(t *testing.T, s *server, args ...string) ([]map[string]any, string, error) {
	t.Helper()
	out, errOut, err := s.runCLI(append([]string{"vault", "audit", "verify", "--address", s.adminAddr}, args...)...)
	var reps []map[string]any
	if jerr := json.Unmarshal([]byte(out), &reps); jerr != nil {
		t.Fatalf("caddy vault audit verify %v printed no reports (%v): %q\nstderr: %s", args, jerr, out, errOut)
	}
	return reps, errOut, err
}

// TestAuditChainExportEndToEnd: the audit export reaches a file that only
// Caddy's log configuration names, one JSON line per record with its
// sequence number and MAC and no data; caddy vault audit verify checks the
// running vault's chain, a backup with the master key, and the exported
// file (with the key the admin API hands out, a key file, or the backup),
// and reports a line deleted, changed, moved or cut off the end.
func TestAuditChainExportEndToEnd(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{})
	auditFile := filepath.Join(s.dir, "audit.log")
	cfg := s.caddyfile("")
	admin := fmt.Sprintf("\tadmin 127.0.0.1:%d\n", s.adminPort)
	if !strings.Contains(cfg, admin) {
		t.Fatalf("the harness's Caddyfile changed: %s", cfg)
	}
	cfg = strings.Replace(cfg, admin, admin+auditLogBlock(auditFile), 1)
	if err := os.WriteFile(s.configPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s.launch()
	if err := s.waitReady(); err != nil {
		t.Fatalf("caddy did not start: %v\n%s", err, tail(s.stderr(), 4000))
	}
	ct := s.createTenant("Audit Co")
	tenant, mgmt := ct.Tenant.ID, ct.Key
	_, readKey, _ := s.createApp(mgmt, map[string]any{"name": "reader", "type": "private",
		"rules": []map[string]any{{"priority": 1, "container": "/", "transform": "reveal", "permissions": []string{"token:create", "token:read"}}}})
	for i := range 4 {
		id := testjson.Str(s.expect(http.StatusCreated, http.MethodPost, "/tokens", readKey, map[string]any{"type": "card",
			"data": map[string]any{"number": e2ePAN, "expiration_month": 1 + i, "expiration_year": 2031, "cvc": e2eCVC}, "deduplicate_token": false}).Body, "id")
		s.expect(http.StatusOK, http.MethodGet, "/tokens/"+id, readKey, nil)
	}

	// the key and the head, from the admin API
	out, errOut, err := s.runCLI("vault", "audit", "key", "--tenant", tenant, "--address", s.adminAddr)
	if err != nil {
		t.Fatalf("caddy vault audit key: %v\n%s", err, errOut)
	}
	var handout struct {
		TenantID string `json:"tenant_id"`
		Key      string `json:"key"`
		HeadSeq  int    `json:"head_seq"`
	}
	if err := json.Unmarshal([]byte(out), &handout); err != nil || handout.TenantID != tenant || len(handout.Key) != 64 || handout.HeadSeq < 13 {
		t.Fatalf("caddy vault audit key printed %q (%v)", out, err)
	}
	keyFile := filepath.Join(s.dir, "audit-key.json")
	if err := os.WriteFile(keyFile, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}

	// every record reaches the file, as Caddy's log writes it
	var lines []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw, _ := os.ReadFile(auditFile)
		lines = lines[:0]
		for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			if strings.Contains(l, `"seq":`) {
				lines = append(lines, l)
			}
		}
		if len(lines) >= handout.HeadSeq {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d audit lines in %s after 30 s, want %d:\n%s", len(lines), auditFile, handout.HeadSeq, raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i, l := range lines[:handout.HeadSeq] {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d is not JSON: %s", i, l)
		}
		if m["logger"] != "vault.audit" || m["tenant_id"] != tenant || m["seq"] != float64(i+1) || len(testjson.Str(m, "mac")) != 64 {
			t.Errorf("line %d: %s", i, l)
		}
		// ids, MACs and the time are random or hex and may hold any four
		// digits; every other member must hold none of the card's
		for _, random := range []string{"id", "tenant_id", "actor_id", "entity_id", "mac", "prev", "ts", "created_at"} {
			delete(m, random)
		}
		rest, _ := json.Marshal(m)
		for _, leak := range []string{e2ePAN, e2eCVC, "4242"} {
			if strings.Contains(string(rest), leak) || strings.Contains(l, e2ePAN) {
				t.Errorf("an exported line holds %q: %s", leak, l)
			}
		}
	}
	if strings.Contains(s.stderr(), `"vault.audit"`) {
		t.Error("the audit export reached the default log, which excludes it")
	}

	// the running vault's chain
	reps, errOut, err := auditReports(t, s, "--tenant", tenant)
	if err != nil || len(reps) != 1 || reps[0]["ok"] != true || reps[0]["verified"].(float64) < float64(handout.HeadSeq) {
		t.Fatalf("verify --tenant: %v %v\n%s", err, reps, errOut)
	}
	if reps, _, err := auditReports(t, s, "--tenant", tenant, "--since", "5"); err != nil || reps[0]["first_seq"] != float64(5) {
		t.Errorf("verify --since 5: %v %v", err, reps)
	}
	// the exported file, with the key from the admin API or from the key file
	for _, args := range [][]string{{"--file", auditFile, "--tenant", tenant}, {"--file", auditFile, "--key-file", keyFile}} {
		reps, errOut, err := auditReports(t, s, args...)
		if err != nil || len(reps) != 1 || reps[0]["ok"] != true || reps[0]["first_seq"] != float64(1) {
			t.Errorf("verify %v: %v %v\n%s", args, err, reps, errOut)
		}
	}

	// a backup, offline with the master key, and the file checked against it
	backup := filepath.Join(s.dir, "vault.backup")
	if _, errOut, err := s.runCLI("vault", "backup", "--output", backup, "--address", s.adminAddr); err != nil {
		t.Fatalf("caddy vault backup: %v\n%s", err, errOut)
	}
	for _, args := range [][]string{{"--backup", backup}, {"--backup", backup, "--tenant", tenant}, {"--file", auditFile, "--backup", backup, "--tenant", tenant}} {
		reps, errOut, err := auditReports(t, s, append(args, "--master-key-env", "TV_MASTER_KEY")...)
		if err != nil || len(reps) != 1 || reps[0]["ok"] != true {
			t.Errorf("verify %v: %v %v\n%s", args, err, reps, errOut)
		}
	}
	// the operator plane: the backup and a tenant's deletion are in the
	// export, beside the chains
	gone := s.createTenant("Gone Co").Tenant.ID
	if _, errOut, err := s.runCLI("vault", "tenant", "delete", gone, "--address", s.adminAddr); err != nil {
		t.Fatalf("caddy vault tenant delete: %v\n%s", err, errOut)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		var backupEvent, deleteEvent bool
		raw, _ := os.ReadFile(auditFile)
		for _, l := range strings.Split(string(raw), "\n") {
			if !strings.Contains(l, `"plane":"operator"`) {
				continue
			}
			backupEvent = backupEvent || strings.Contains(l, `"entity_type":"backup"`)
			deleteEvent = deleteEvent || strings.Contains(l, `"entity_id":"`+gone+`"`) && strings.Contains(l, `"operation":"delete"`)
		}
		if backupEvent && deleteEvent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("operator events in the exported file: backup %v, tenant deletion %v", backupEvent, deleteEvent)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if v := s.metric("tokenvault_audit_export_dropped_total"); v != "0" {
		t.Errorf("tokenvault_audit_export_dropped_total = %q, want 0", v)
	}

	// a tampered file: each kind is reported, and the command fails
	tampered := filepath.Join(s.dir, "tampered.log")
	moved := append([]string(nil), lines...)
	moved[6], moved[7] = moved[7], moved[6]
	changed := append([]string(nil), lines...)
	changed[5] = strings.Replace(changed[5], `"operation":"`, `"operation":"x`, 1)
	for _, tc := range []struct {
		name  string
		lines []string
		kind  string
		seq   float64
	}{
		{"a line deleted", append(append([]string(nil), lines[:4]...), lines[5:]...), "gap", 5},
		{"a line changed", changed, "modified", 6},
		{"two lines swapped", moved, "gap", 7},
		{"the end cut off", lines[:10], "truncated", 11},
	} {
		if err := os.WriteFile(tampered, []byte(strings.Join(tc.lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		reps, errOut, err := auditReports(t, s, "--file", tampered, "--key-file", keyFile)
		if err == nil || !strings.Contains(errOut, "does not verify") {
			t.Errorf("%s: the command did not fail: %v %s", tc.name, err, errOut)
			continue
		}
		faults, _ := reps[0]["faults"].([]any)
		if reps[0]["ok"] != false || len(faults) == 0 || testjson.Field(faults[0], "kind") != tc.kind || testjson.Field(faults[0], "seq") != tc.seq {
			t.Errorf("%s: %v", tc.name, reps)
		}
		if tc.name == "two lines swapped" && !strings.Contains(fmt.Sprint(faults), "reordered") {
			t.Errorf("two lines swapped: no reordering in %v", faults)
		}
		for _, leak := range []string{e2ePAN, e2eCVC, "reader"} {
			if strings.Contains(errOut, leak) || strings.Contains(fmt.Sprint(reps), leak) {
				t.Errorf("%s: the report names %q", tc.name, leak)
			}
		}
	}

	// refusals name what is wrong
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"vault", "audit", "verify", "--address", s.adminAddr}, "give --tenant, --backup or --file"},
		{[]string{"vault", "audit", "verify", "--tenant", "no-such-tenant", "--address", s.adminAddr}, "Not Found"},
		{[]string{"vault", "audit", "verify", "--tenant", tenant, "--since", "yesterday", "--address", s.adminAddr}, "since"},
		{[]string{"vault", "audit", "verify", "--file", auditFile, "--address", s.adminAddr}, "--file needs the keys"},
		{[]string{"vault", "audit", "verify", "--backup", backup, "--master-key-env", "NO_SUCH_VAR", "--address", s.adminAddr}, "NO_SUCH_VAR"},
		{[]string{"vault", "audit", "key", "--address", s.adminAddr}, "--tenant is required"},
	} {
		_, errOut, err := s.runCLI(tc.args...)
		if err == nil || !strings.Contains(errOut, tc.want) {
			t.Errorf("caddy %v: %v, stderr %q; want it to fail naming %q", tc.args, err, errOut, tc.want)
		}
	}
	// the admin route answers problems naming the field
	for name, path := range map[string]string{"tenant": "/vault/audit/verify", "since": "/vault/audit/verify?tenant=" + tenant + "&since=yesterday"} {
		r := s.adminGet(path)
		wantProblem(t, r, http.StatusBadRequest, name)
		if testjson.Field(r.Body, "errors", name) == nil {
			t.Errorf("GET %s: the problem does not name %s: %s", path, name, r.Raw)
		}
	}
	wantProblem(t, s.adminGet("/vault/audit/key?tenant=no-such-tenant"), http.StatusNotFound, "unknown tenant")
	wantProblem(t, s.adminGet("/vault/audit/other?tenant="+tenant), http.StatusNotFound, "unknown route")
}

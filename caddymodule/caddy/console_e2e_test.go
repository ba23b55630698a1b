package main

// TestConsoleBrowser: the web console (http.handlers.vault_console) in a
// real browser. testdata/console/console.test.mjs drives Debian's
// Chromium through playwright-core (headless, background networking off)
// against the built binary, and checks sign-in, applications and keys,
// tokens (masked, searched, read on request), a proxy test request, a
// reactor saved with a syntax error and fixed, the audit log, usage, the
// phone width, keyboard use, labels, axe-core (no serious or critical
// violation), the CSP (no violation) and that no request leaves the
// console's origin. Then prefix.test.mjs checks, against a second vault
// with header_prefix BT, that the console's calls carry that prefix's
// headers. Screenshots go to docs/console (TV_CONSOLE_SHOTS overrides). It needs node, npm (the registry for the first npm ci) and
// /usr/bin/chromium (TV_CHROMIUM overrides), so it runs only with
// TV_CONSOLE=1:
//
//	TV_CONSOLE=1 go test ./caddymodule/caddy/ -run TestConsoleBrowser -count=1 -v

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// consoleTimeout bounds the browser suite; it takes about a minute and a
// half on an idle two-core machine.
const consoleTimeout = 8 * time.Minute

// consoleCard is the card number the suite tokenizes and sends through
// the proxy (console.test.mjs, CARD_A).
const consoleCard = "4242424242424242"

func TestConsoleBrowser(t *testing.T) {
	if os.Getenv("TV_CONSOLE") != "1" {
		t.Skip("the console's browser suite runs with TV_CONSOLE=1 (it needs node, npm and /usr/bin/chromium)")
	}
	needBinary(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("TV_CONSOLE=1 but node is not on PATH")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatal("TV_CONSOLE=1 but npm is not on PATH")
	}
	browser := os.Getenv("TV_CHROMIUM")
	if browser == "" {
		browser = "/usr/bin/chromium"
	}
	if _, err := os.Stat(browser); err != nil {
		t.Fatalf("TV_CONSOLE=1 but there is no browser at %s (apt-get install -y chromium): %v", browser, err)
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "testdata", "console"))
	if err != nil {
		t.Fatal(err)
	}
	shots := os.Getenv("TV_CONSOLE_SHOTS")
	if shots == "" {
		if shots, err = filepath.Abs(filepath.Join("..", "..", "docs", "console")); err != nil {
			t.Fatal(err)
		}
	}
	ensureNodeModules(t, npm, dir)

	dest := newEchoDestination(t)
	s := startServer(t, serverOpts{
		SiteExtra:  "\tvault_console",
		VaultExtra: egressLoopback,
	})
	tenant := s.createTenant("console")
	report := filepath.Join(t.TempDir(), "report.json")
	runNodeSuite(t, node, dir, "console.test.mjs", consoleTimeout, []string{
		"TV_CONSOLE_URL=" + s.baseURL + "/console/",
		"TV_MANAGEMENT_KEY=" + tenant.Key,
		"TV_DESTINATION_URL=" + dest.URL,
		"TV_SCREENSHOT_DIR=" + shots,
		"TV_CHROMIUM=" + browser,
		"TV_REPORT=" + report,
	})

	// The console's test request reached the destination, detokenized.
	reached := false
	for _, r := range dest.requests() {
		if r.Path == "/charges" && strings.Contains(r.Body, consoleCard) {
			reached = true
		}
		for name := range r.Header {
			if strings.HasPrefix(strings.ToUpper(name), "SVC-") {
				t.Errorf("the destination received the vault header %s", name)
			}
		}
	}
	if !reached {
		t.Errorf("no request reached the destination at /charges with the card number detokenized (%d requests)", len(dest.requests()))
	}
	// No key in the access log, although the console sent one with every call.
	checkSDKAccessLog(t, s.accessLog)
	logConsoleReport(t, report)

	// A vault with header_prefix BT: the console's calls follow it.
	t.Run("header_prefix BT", func(t *testing.T) {
		bt := startServer(t, serverOpts{
			SiteExtra:    "\tvault_console",
			VaultExtra:   egressLoopback,
			HeaderPrefix: "BT",
		})
		runNodeSuite(t, node, dir, "prefix.test.mjs", consoleTimeout, []string{
			"TV_CONSOLE_URL=" + bt.baseURL + "/console/",
			"TV_MANAGEMENT_KEY=" + bt.createTenant("console bt").Key,
			"TV_DESTINATION_URL=" + dest.URL,
			"TV_CHROMIUM=" + browser,
		})
		found := false
		for _, r := range dest.requests() {
			if r.Path == "/prefix-check" {
				found = true
				for name := range r.Header {
					if up := strings.ToUpper(name); strings.HasPrefix(up, "BT-") || strings.HasPrefix(up, "SVC-") {
						t.Errorf("the destination received the vault header %s", name)
					}
				}
			}
		}
		if !found {
			t.Error("the BT console's test request did not reach the destination")
		}
		checkSDKAccessLog(t, bt.accessLog)
	})
}

// logConsoleReport logs the suite's figures: pages, axe-core results by
// page, requests made, screenshots.
func logConsoleReport(t *testing.T, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("the console suite wrote no report: %v", err)
		return
	}
	var rep struct {
		Pages       []string       `json:"pages"`
		Axe         map[string]any `json:"axe"`
		Requests    int            `json:"requests"`
		Screenshots []string       `json:"screenshots"`
		Audit       map[string]int `json:"audit"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Errorf("the console report: %v", err)
		return
	}
	axe, _ := json.Marshal(rep.Axe)
	t.Logf("console: pages %v; %d requests, all to the console's origin; audit records by entity %v; %d screenshots",
		rep.Pages, rep.Requests, rep.Audit, len(rep.Screenshots))
	t.Logf("console: axe-core by page: %s", axe)
}

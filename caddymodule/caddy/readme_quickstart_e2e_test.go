package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// TestREADMEQuickStart replays the README's quick start as a newcomer
// would: its shell commands run in bash, in the directory of a copy of
// Caddyfile.example, with ./caddy the built binary. The only changes are
// the ports (8080, 2019 and the destination's 9000 move to free ones, so
// that tests can run side by side) and the placeholders a reader fills in
// by hand (MGMT, KEY and TOKEN take the values the earlier commands
// printed). Every answer is checked against the sample the README shows
// after it, so the README cannot drift from the product unnoticed.
func TestREADMEQuickStart(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := quickStartBlocks(t, string(readme))

	s := exampleServer(t)
	example := filepath.Join(s.dir, "Caddyfile.example")
	moved, err := os.ReadFile(s.configPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(example, moved, 0o600); err != nil {
		t.Fatal(err)
	}
	s.configPath = example
	if err := os.Symlink(binPath, filepath.Join(s.dir, "caddy")); err != nil {
		t.Fatal(err)
	}
	destPort := freePorts(t, 1)[0]
	q := &quickStart{t: t, s: s, readme: string(readme), destPort: destPort, vars: map[string]string{}}

	var lastOutput string
	for i, b := range blocks {
		switch b.lang {
		case "sh":
			lastOutput = q.runBlock(b.text)
		case "json":
			if i == 0 || blocks[i-1].lang != "sh" {
				t.Fatalf("README quick start: a json sample not after a command:\n%s", b.text)
			}
			q.compare(b.text, lastOutput)
			q.capture(lastOutput)
		case "caddyfile":
			q.applyEgress(b.text)
		default:
			t.Fatalf("README quick start: a %q block this test cannot replay", b.lang)
		}
	}
	for _, want := range []string{"tenant", "backend", "token", "proxy"} {
		if !q.done[want] {
			t.Errorf("the replay never reached the %s step: the quick start changed shape", want)
		}
	}
}

// readmeBlock is one fenced code block of the README.
type readmeBlock struct {
	lang, text string
}

// quickStartBlocks returns the fenced blocks of the README's "Quick start"
// section, in order.
func quickStartBlocks(t *testing.T, readme string) []readmeBlock {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## Quick start\n")
	if !ok {
		t.Fatal("README has no \"## Quick start\" section")
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var blocks []readmeBlock
	fence := regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```")
	for _, m := range fence.FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, readmeBlock{lang: m[1], text: m[2]})
	}
	if len(blocks) < 8 {
		t.Fatalf("README quick start has %d code blocks, want the full walk-through", len(blocks))
	}
	return blocks
}

// quickStart is the state of one replay: the server, the shell variables
// a reader would set, and the steps reached.
type quickStart struct {
	t        *testing.T
	s        *server
	readme   string
	destPort int
	vars     map[string]string // MGMT, KEY, TOKEN: filled from earlier answers
	done     map[string]bool
	dest     *exec.Cmd
}

// placeholder is a line where the reader pastes a value by hand:
// NAME=value-with-an-ellipsis   # comment
var placeholder = regexp.MustCompile(`^([A-Z]+)=\S*…\S*(\s+#.*)?$`)

// commands splits a shell block into commands: a command's continuation
// lines are indented, as the README writes them.
func commands(block string) []string {
	var cmds []string
	for _, line := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
		if line == "" {
			continue
		}
		if (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")) && len(cmds) > 0 {
			cmds[len(cmds)-1] += "\n" + line
			continue
		}
		cmds = append(cmds, line)
	}
	return cmds
}

// runBlock runs a shell block's commands one by one and returns what the
// last one printed.
func (q *quickStart) runBlock(block string) string {
	t := q.t
	t.Helper()
	var out string
	for _, cmd := range commands(block) {
		switch {
		case strings.HasPrefix(cmd, "git clone "), strings.HasPrefix(cmd, "cd "):
			// the checkout under test is the clone
		case cmd == "go build -o caddy ./caddymodule/caddy":
			// TestMain built binPath with this very command
		case cmd == "./caddy run --config Caddyfile.example":
			q.s.launch()
			if err := q.s.waitReady(); err != nil {
				t.Fatalf("%s: %v\n%s", cmd, err, tail(q.s.stderr(), 4000))
			}
		case strings.HasPrefix(cmd, "./caddy respond "):
			q.startDestination(cmd)
		case placeholder.MatchString(cmd):
			name := placeholder.FindStringSubmatch(cmd)[1]
			if q.vars[name] == "" && out != "" {
				q.capture(out) // the command just before printed it
			}
			if q.vars[name] == "" {
				t.Fatalf("README sets %s by hand before any answer gave it a value", name)
			}
		default:
			out = q.shell(cmd)
		}
	}
	return out
}

// shell runs one command in bash with the ports moved and the reader's
// variables set, and fails the test when it fails.
func (q *quickStart) shell(cmd string) string {
	t := q.t
	t.Helper()
	line := q.movePorts(cmd)
	if strings.HasPrefix(line, "./caddy vault ") {
		line += " --address " + q.s.adminAddr
	}
	if strings.HasPrefix(line, "./caddy vault tenant create") {
		q.markDone("tenant")
	}
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", line)
	c.Dir = q.s.dir
	c.Env = q.s.env()
	for name, v := range q.vars {
		c.Env = append(c.Env, name+"="+v)
	}
	out, err := c.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("README command failed: %s\n%v\nstdout: %s\nstderr: %s", cmd, err, out, stderr)
	}
	if strings.Contains(line, "/proxy ") {
		q.markDone("proxy")
	}
	return string(out)
}

func (q *quickStart) markDone(step string) {
	if q.done == nil {
		q.done = map[string]bool{}
	}
	q.done[step] = true
}

// movePorts moves the README's fixed ports to the test's free ones.
func (q *quickStart) movePorts(cmd string) string {
	return strings.NewReplacer(
		"localhost:8080", fmt.Sprintf("localhost:%d", q.s.apiPort),
		"127.0.0.1:9000", fmt.Sprintf("127.0.0.1:%d", q.destPort),
	).Replace(cmd)
}

// startDestination runs the README's `caddy respond` destination in the
// background until the test ends.
func (q *quickStart) startDestination(cmd string) {
	t := q.t
	t.Helper()
	q.dest = exec.Command("bash", "-c", "exec "+q.movePorts(cmd))
	q.dest.Dir = q.s.dir
	q.dest.Env = q.s.env()
	if err := q.dest.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = q.dest.Process.Kill()
		_ = q.dest.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", q.destPort)
	deadline := time.Now().Add(readyTimeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the README's destination did not listen on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// applyEgress does what the README asks of its caddyfile snippet: it
// replaces the commented-out egress block of Caddyfile.example, and the
// next command reloads.
func (q *quickStart) applyEgress(snippet string) {
	t := q.t
	t.Helper()
	raw, err := os.ReadFile(q.s.configPath)
	if err != nil {
		t.Fatal(err)
	}
	commented := regexp.MustCompile(`(?m)^\t\t# egress \{\n(\t\t#.*\n)*?\t\t# \}\n`)
	if !commented.Match(raw) {
		t.Fatal("Caddyfile.example has no commented-out egress block for the README's snippet to replace")
	}
	config := commented.ReplaceAllLiteral(raw, []byte(snippet))
	if err := os.WriteFile(q.s.configPath, config, 0o600); err != nil {
		t.Fatal(err)
	}
	// The README says so in prose, after the snippet.
	const reload = "./caddy reload --config Caddyfile.example"
	if !strings.Contains(q.readme, "`"+reload+"`") {
		t.Fatalf("the README no longer says to run %s after the egress snippet", reload)
	}
	q.shell(reload)
}

// capture takes from an answer the values the README's next commands ask
// the reader to paste.
func (q *quickStart) capture(output string) {
	t := q.t
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal([]byte(output), &body); err != nil {
		return // the proxy's answer is the destination's; nothing to take
	}
	switch {
	case testjson.Str(body, "tenant", "id") != "":
		q.vars["MGMT"] = testjson.Str(body, "key")
	case testjson.Str(body, "type") == "private":
		q.vars["KEY"] = testjson.Str(body, "key")
		q.markDone("backend")
	case testjson.Str(body, "type") == "card":
		q.vars["TOKEN"] = testjson.Str(body, "id")
		q.markDone("token")
	}
}

// samplePair matches a member of a README sample whose value is shown in
// full: "name": "string" or "name": number.
var samplePair = regexp.MustCompile(`"([a-z_]+)":\s*("[^"…]*"|-?[0-9]+)\s*[,}]`)

// compare checks an answer against the README's sample of it: a sample
// without an ellipsis must equal the answer as JSON; in one with
// ellipses, every member shown in full must be in the answer.
func (q *quickStart) compare(sample, output string) {
	t := q.t
	t.Helper()
	output = strings.TrimSpace(output)
	if output == "" {
		t.Fatalf("a README command printed nothing where the README shows:\n%s", sample)
	}
	if !strings.Contains(sample, "…") {
		var want, got any
		if err := json.Unmarshal([]byte(sample), &want); err != nil {
			t.Fatalf("README sample is not JSON: %v\n%s", err, sample)
		}
		if err := json.Unmarshal([]byte(output), &got); err != nil {
			t.Fatalf("answer is not JSON: %v\n%s", err, output)
		}
		w, _ := json.Marshal(want)
		g, _ := json.Marshal(got)
		if string(w) != string(g) {
			t.Errorf("the README shows\n%s\nthe vault answered\n%s", sample, output)
		}
		return
	}
	var got any
	if err := json.Unmarshal([]byte(output), &got); err != nil {
		t.Fatalf("answer is not JSON: %v\n%s", err, output)
	}
	matches := samplePair.FindAllStringSubmatch(sample, -1)
	if len(matches) == 0 {
		t.Fatalf("README sample shows no member in full, nothing to check:\n%s", sample)
	}
	for _, m := range matches {
		if m[1] == "key" {
			continue // a sample key is made up; its shape is checked below
		}
		var want any
		if err := json.Unmarshal([]byte(m[2]), &want); err != nil {
			t.Fatalf("sample member %s: %v", m[0], err)
		}
		if !hasMember(got, m[1], want) {
			t.Errorf("the README shows %s: %s, the vault's answer has no such member:\n%s", m[1], m[2], output)
		}
	}
	if strings.Contains(sample, `"key"`) && !regexp.MustCompile(`"key":\s*"key_test_`).MatchString(output) {
		t.Errorf("the README shows a key, the answer has none:\n%s", output)
	}
}

// hasMember reports whether v holds, at any depth, a member name with the
// value want.
func hasMember(v any, name string, want any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == name && fmt.Sprint(e) == fmt.Sprint(want) {
				return true
			}
			if hasMember(e, name, want) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasMember(e, name, want) {
				return true
			}
		}
	}
	return false
}

package transforms

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"
)

// workerEnv makes the test binary act as a worker: the pools of these
// tests run os.Args[0] with it set, so the production ServeWorker runs in
// a separate process exactly as under the server binary.
const workerEnv = "TRANSFORMS_WORKER"

// workerProfileEnv, set for the test process, makes its workers write CPU
// profiles (see TestMain).
const workerProfileEnv = "TRANSFORMS_WORKER_CPUPROFILE"

// workerBreakEnv, set to 1 for a worker, makes it break the protocol: it
// writes a frame that is not JSON instead of any frame that holds
// breakMarker (the result of a run that returns it).
const workerBreakEnv = "TRANSFORMS_WORKER_BREAK"

// breakMarker is what a run returns to make a worker with workerBreakEnv
// break the protocol.
const breakMarker = "BREAK-THE-PROTOCOL"

// breakingWriter is the stdout of a worker with workerBreakEnv. A worker
// writes each frame with one Write.
type breakingWriter struct{ w io.Writer }

func (b breakingWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(breakMarker)) {
		if _, err := b.w.Write([]byte{0, 0, 0, 3, '{', 'x', '}'}); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return b.w.Write(p)
}

// sandboxProbe, where the platform has a system call filter, runs the
// checks of TestSyscallFilter in a process of its own: the test binary
// started with sandboxProbeEnv set.
var sandboxProbe func() int

const sandboxProbeEnv = "TRANSFORMS_SANDBOX_PROBE"

func TestMain(m *testing.M) {
	if os.Getenv(sandboxProbeEnv) != "" && sandboxProbe != nil {
		os.Exit(sandboxProbe())
	}
	if os.Getenv(workerEnv) == "1" {
		if prefix := os.Getenv(workerProfileEnv); prefix != "" {
			// Profiling a worker: go test -bench ... with
			// TRANSFORMS_WORKER_CPUPROFILE=/tmp/w set writes the first two
			// seconds of each worker to /tmp/w.<pid> (a closed pool's
			// workers may be killed before they could write more).
			if f, err := os.Create(fmt.Sprintf("%s.%d", prefix, os.Getpid())); err == nil {
				if pprof.StartCPUProfile(f) == nil {
					time.AfterFunc(2*time.Second, pprof.StopCPUProfile)
				}
			}
		}
		var out io.Writer = os.Stdout
		if os.Getenv(workerBreakEnv) == "1" {
			out = breakingWriter{os.Stdout}
		}
		if err := ServeWorker(os.Stdin, out); err != nil {
			pprof.StopCPUProfile()
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		pprof.StopCPUProfile()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testOptions are pool options running this test binary as the worker.
func testOptions() Options {
	env := []string{workerEnv + "=1"}
	if prefix := os.Getenv(workerProfileEnv); prefix != "" {
		env = append(env, workerProfileEnv+"="+prefix)
	}
	return Options{
		Command:    []string{os.Args[0]},
		Env:        env,
		MinWorkers: 1,
		MaxWorkers: 2,
		Timeout:    5 * time.Second,
		// a worker starved of CPU by a busy machine (stress-ng beside the
		// suite) may answer its interrupt late; killing it would fail tests
		// that expect the interrupt to work
		KillGrace: 5 * time.Second,
	}
}

// newTestPool starts a pool and closes it when the test ends.
func newTestPool(t testing.TB, edit func(*Options)) *Pool {
	t.Helper()
	o := testOptions()
	if edit != nil {
		edit(&o)
	}
	p, err := NewPool(o)
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// run runs code as a job of kind with args and returns the result.
func run(t testing.TB, p *Pool, kind, code string, args any) (*Result, error) {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return p.Run(context.Background(), Job{Kind: kind, Code: code, Args: raw})
}

// kindOf returns the Kind of an *Error, "" for nil, or "plain".
func kindOf(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Kind
	}
	return "plain"
}

// mustJSON compacts JSON text for comparisons.
func mustJSON(t testing.TB, v any) string {
	t.Helper()
	switch v := v.(type) {
	case json.RawMessage:
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			t.Fatalf("invalid JSON %q: %v", v, err)
		}
		b, _ := json.Marshal(x)
		return string(b)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
}

// logSink collects Logger lines.
type logSink struct {
	mu    sync.Mutex
	lines []string
	metas []map[string]string
}

func (l *logSink) log(meta map[string]string, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	l.metas = append(l.metas, meta)
}

func (l *logSink) snapshot() ([]string, []map[string]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...), append([]map[string]string(nil), l.metas...)
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

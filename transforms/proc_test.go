package transforms

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// anyWorkerPID returns the pid of one worker of the pool.
func anyWorkerPID(t *testing.T, p *Pool) int {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for w := range p.alive {
		return w.pid
	}
	t.Fatal("no worker alive")
	return 0
}

// TestWorkerProcessLimits reads a worker's limits and environment from
// /proc: RLIMIT_AS set to its size at start plus 4x the memory cap,
// RLIMIT_CORE 0, and only the configured environment.
func TestWorkerProcessLimits(t *testing.T) {
	if _, err := os.Stat("/proc/self/limits"); err != nil {
		t.Skip("no /proc")
	}
	const limit = 128 << 20
	p := newTestPool(t, func(o *Options) { o.MemoryLimit = limit; o.Env = append(o.Env, "ONLY_THIS=1") })
	if _, err := run(t, p, JobReactor, `module.exports = () => ({ raw: 1 })`, nil); err != nil {
		t.Fatal(err)
	}
	pid := anyWorkerPID(t, p)
	if pid == os.Getpid() {
		t.Fatal("the worker is this process")
	}
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	var as, core string
	for _, line := range strings.Split(string(limits), "\n") {
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "Max address space"):
			as = f[3]
		case strings.HasPrefix(line, "Max core file size"):
			core = f[4]
		}
	}
	asBytes, err := strconv.ParseUint(as, 10, 64)
	if err != nil {
		t.Fatalf("address space limit %q: %v", as, err)
	}
	// The Go runtime reserves about 1.2 GB at start; the limit is that
	// plus four times the cap.
	if asBytes < 4*limit || asBytes > 4*limit+4<<30 {
		t.Errorf("RLIMIT_AS = %d bytes, want about the start-up size + %d", asBytes, 4*limit)
	}
	if core != "0" {
		t.Errorf("RLIMIT_CORE = %s, want 0", core)
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(strings.TrimRight(string(env), "\x00"), "\x00"); len(got) != 2 || got[1] != "ONLY_THIS=1" {
		t.Errorf("worker environment = %q, want only the configured entries", got)
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if !strings.Contains(string(status), "NoNewPrivs:\t1") {
		t.Errorf("no_new_privs is not set")
	}
	if os.Geteuid() == 0 && (!strings.Contains(string(status), "Uid:\t65534\t65534\t65534\t65534") ||
		!strings.Contains(string(status), "Gid:\t65534\t65534\t65534\t65534") || !regexp.MustCompile(`\nGroups:\s*\n`).MatchString(string(status))) {
		t.Errorf("a worker started by root does not run as nobody without groups:\n%s", status)
	}
	// the system call filter (see TestSyscallFilter for what it refuses)
	unconfined := p.Stats().Unconfined
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		if !strings.Contains(string(status), "Seccomp:\t2") || unconfined != "" {
			t.Errorf("the worker runs without its seccomp filter (%q); status:\n%s", unconfined, status)
		}
	} else if unconfined == "" {
		t.Error("a worker without a system call filter does not say so")
	}
	t.Logf("worker %d: RLIMIT_AS %d MiB, RLIMIT_CORE %s", pid, asBytes>>20, core)
}

// TestWorkerDeathClassification kills a busy worker from outside: SIGKILL
// that the pool did not send reads as the OOM killer (memory); another
// signal is a crash. Only that run fails, and the pool recovers.
func TestWorkerDeathClassification(t *testing.T) {
	p := newTestPool(t, func(o *Options) { o.MinWorkers, o.MaxWorkers = 1, 1 })
	for _, tc := range []struct {
		sig  syscall.Signal
		kind string
	}{{syscall.SIGKILL, KindMemory}, {syscall.SIGTERM, KindCrash}, {syscall.SIGSEGV, KindCrash}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			if _, err := run(t, p, JobReactor, `module.exports = () => ({ raw: 1 })`, nil); err != nil {
				t.Fatal(err)
			}
			pid := anyWorkerPID(t, p)
			go func() {
				time.Sleep(200 * time.Millisecond)
				_ = syscall.Kill(pid, tc.sig)
			}()
			_, err := p.Run(context.Background(), Job{Kind: JobReactor, Code: `module.exports = () => { for (;;) {} }`})
			if kindOf(err) != tc.kind {
				t.Fatalf("err = %v, want kind %s", err, tc.kind)
			}
			if res, err := run(t, p, JobReactor, `module.exports = () => ({ raw: 2 })`, nil); err != nil || string(res.Raw) != "2" {
				t.Fatalf("the pool did not recover: %v", err)
			}
			if anyWorkerPID(t, p) == pid {
				t.Error("the dead worker is still in the pool")
			}
		})
	}
}

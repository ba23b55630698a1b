//go:build linux && amd64

package transforms

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func init() { sandboxProbe = probeSandbox }

// TestSyscallFilter installs the worker's limits (not dumpable, no
// new privileges, no core dump) and system call filter in a process of its own (this test binary,
// re-run) and reports what it could still do: the Go runtime keeps
// working (threads, garbage collection, preemption, timers, random
// numbers), and the process cannot reach the network, start a program,
// signal, trace or read another process, or touch the filesystem, not
// even to read or stat a file.
func TestSyscallFilter(t *testing.T) {
	dir := t.TempDir()
	readable := filepath.Join(dir, "module.js")
	if err := os.WriteFile(readable, []byte("module.exports = 1"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"dumpable": "0", "no_new_privs": "1", "core limit": "0/0", "threads": "ok", "gc": "ok", "preemption": "ok", "timers": "ok", "random": "ok",
		"signal self": "ok", "read file": "EPERM", "stat": "EPERM", "write file": "EPERM", "create file": "EPERM",
		"tcp connect": "EPERM", "unix socket": "EPERM", "exec": "EPERM", "signal other": "EPERM", "ptrace other": "EPERM",
		"read other's memory": "EPERM", "read other's environ": "EPERM", "executable memory": "EPERM", "writable memory": "ok",
		"protect memory": "ok", "make memory executable": "EPERM"}
	// the other process, standing for the vault: one that an unconfined
	// probe can stop or read without harm
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), sandboxProbeEnv+"=1", "PROBE_FILE="+readable,
		"PROBE_DIR="+dir, "PROBE_OTHER="+strconv.Itoa(other.Process.Pid))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v\n%s%s", err, out, stderr.Bytes())
	}
	var got map[string]string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("probe output: %v: %s", err, out)
	}
	// started by root, a worker runs as nobody (dropRoot)
	want["uid"] = strconv.Itoa(os.Geteuid())
	if os.Geteuid() == 0 {
		want["uid"] = strconv.Itoa(nobody)
	}
	if !maps.Equal(got, want) {
		t.Errorf("what the confined probe could do:\n got %v\nwant %v", got, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the probe wrote into the directory: %v", entries)
	}
}

// probeSandbox is the probe process of TestSyscallFilter: it confines
// itself as a worker does, tries each thing, and prints what happened,
// by name, as JSON.
func probeSandbox() int {
	// no_new_privs is per thread until the filter's TSYNC spreads it: read
	// it on the thread that set it (the Go runtime may otherwise move the
	// probe to a thread that has not got it yet, as it did once in CI)
	runtime.LockOSThread()
	if _, err := setProcessLimits(1 << 30); err != nil { // no_new_privs, as in a worker
		fmt.Fprintln(os.Stderr, "limits:", err)
		return 2
	}
	dumpable, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	noNewPrivs, _ := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	var core unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &core); err != nil {
		fmt.Fprintln(os.Stderr, "core limit:", err)
		return 2
	}
	uid := os.Geteuid() // the filter refuses getuid
	if err := confineSyscalls(); err != nil {
		fmt.Fprintln(os.Stderr, "confine:", err)
		return 2
	}
	res := map[string]string{"dumpable": strconv.Itoa(dumpable), "uid": strconv.Itoa(uid),
		"no_new_privs": strconv.Itoa(noNewPrivs), "core limit": fmt.Sprintf("%d/%d", core.Cur, core.Max)}
	note := func(name string, err error) {
		var errno syscall.Errno
		switch {
		case err == nil:
			res[name] = "ok"
		case errors.As(err, &errno):
			res[name] = unix.ErrnoName(errno)
		default:
			res[name] = err.Error()
		}
	}
	file, dir := os.Getenv("PROBE_FILE"), os.Getenv("PROBE_DIR")
	other, _ := strconv.Atoi(os.Getenv("PROBE_OTHER"))

	_, err := os.ReadFile(file)
	note("read file", err)
	_, err = os.Stat(file)
	note("stat", err)
	_, err = os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0)
	note("write file", err)
	_, err = os.OpenFile(filepath.Join(dir, "new"), os.O_RDONLY|os.O_CREATE, 0o600)
	note("create file", err)
	_, err = net.DialTimeout("tcp", "127.0.0.1:9", time.Second)
	note("tcp connect", err)
	_, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	note("unix socket", err)
	note("exec", exec.Command("/bin/true").Run())
	note("signal other", unix.Kill(other, 0))
	note("ptrace other", unix.PtraceAttach(other))
	_, err = unix.ProcessVMReadv(other, []unix.Iovec{{Base: new(byte), Len: 1}}, []unix.RemoteIovec{{Base: 0x400000, Len: 1}}, 0)
	note("read other's memory", err)
	_, err = os.ReadFile(fmt.Sprintf("/proc/%d/environ", other))
	note("read other's environ", err)
	note("signal self", unix.Kill(os.Getpid(), 0))
	_, err = unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_ANON)
	note("executable memory", err)
	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	note("writable memory", err)
	if err == nil {
		note("protect memory", unix.Mprotect(mem, unix.PROT_READ))
		note("make memory executable", unix.Mprotect(mem, unix.PROT_READ|unix.PROT_EXEC))
	}

	// new threads: goroutines that keep their thread while they sleep
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			time.Sleep(20 * time.Millisecond)
		}()
	}
	wg.Wait()
	note("threads", nil)
	// garbage collection, and memory handed back to the kernel
	var keep [][]byte
	for i := 0; i < 64; i++ {
		keep = append(keep, make([]byte, 1<<20))
	}
	runtime.KeepAlive(keep) // 64 MiB live at once, then garbage
	keep = nil
	runtime.GC()
	debug.FreeOSMemory()
	note("gc", nil)
	// asynchronous preemption: with one P, a goroutine spinning in a
	// loop without calls is stopped by a signal to its thread
	prev := runtime.GOMAXPROCS(1)
	stop := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			if i%(1<<30) == 0 {
				select {
				case <-stop:
					return
				default:
				}
			}
		}
	}()
	began := time.Now()
	time.Sleep(time.Millisecond)
	if d := time.Since(began); d > 500*time.Millisecond {
		note("preemption", fmt.Errorf("the sleeping goroutine ran again after %v", d))
	} else {
		note("preemption", nil)
	}
	close(stop)
	runtime.GOMAXPROCS(prev)
	timer := time.NewTimer(5 * time.Millisecond)
	<-timer.C
	note("timers", nil)
	_, err = rand.Read(make([]byte, 32))
	note("random", err)

	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	return 0
}

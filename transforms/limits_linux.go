//go:build linux

package transforms

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// workerSysProcAttr makes the kernel kill a worker when the thread that
// started it exits (the pool starts workers from one locked OS thread that
// lives as long as the pool), so that no worker outlives a crashed server.
func workerSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// setProcessLimits applies the OS limits of a worker to the calling
// process:
//
//   - RLIMIT_AS, the address space, to what is mapped now plus extra
//     bytes. The Go runtime reserves about 1.2 GB of address space at
//     start (mostly PROT_NONE), which is why the limit is relative to the
//     current size and set after start-up, not by the parent: a limit
//     below the reservation makes every later allocation fail. Past the
//     limit, an allocation fails with Go's fatal "out of memory", which
//     the parent maps to KindMemory; this is the backstop for a single
//     huge allocation that the watchdog cannot see coming.
//   - RLIMIT_CORE to 0: a worker's memory holds card data, and must never
//     be dumped to disk.
//   - no_new_privs, so that nothing the worker executes can gain
//     privileges.
//   - not dumpable: its /proc files (mem, environ, maps) belong to root,
//     so another process of the vault's user (another worker, holding
//     another tenant's data) cannot read its memory.
func setProcessLimits(extra int64) (addressSpace uint64, err error) {
	_ = syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	const prSetNoNewPrivs, prSetDumpable = 38, 4
	_, _, _ = syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0)
	_, _, _ = syscall.RawSyscall6(syscall.SYS_PRCTL, prSetDumpable, 0, 0, 0, 0, 0)
	size, err := virtualSize()
	if err != nil {
		return 0, err
	}
	limit := size + uint64(extra)
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		return 0, err
	}
	return limit, nil
}

// pollable returns a non-blocking duplicate of f that the Go runtime's
// poller serves, or f itself when that cannot be made. A worker's stdin
// and stdout are pipes that exec hands over in blocking mode, and a read
// of a blocking descriptor parks an OS thread in the kernel while the
// runtime hands its P to another thread. The duplicate shares the pipe
// (and its O_NONBLOCK flag) with the original, which nothing else in a
// worker may use.
func pollable(f *os.File) *os.File {
	rc, err := f.SyscallConn()
	if err != nil {
		return f
	}
	nfd, derr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) { nfd, derr = syscall.Dup(int(fd)) }); err != nil || derr != nil {
		return f
	}
	syscall.CloseOnExec(nfd)
	if err := syscall.SetNonblock(nfd, true); err != nil {
		_ = syscall.Close(nfd)
		return f
	}
	return os.NewFile(uintptr(nfd), f.Name())
}

// virtualSize reads VmSize from /proc/self/status, in bytes.
func virtualSize() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmSize:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, os.ErrNotExist
}

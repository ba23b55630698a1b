//go:build linux

package transforms

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
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
//     privileges. The flag is per thread: this sets it on the calling
//     thread, and confineSyscalls's TSYNC gives it to every thread.
//   - not root: see dropRoot.
//   - not dumpable: its /proc files (mem, environ, maps) belong to root,
//     so another process of the vault's user (another worker, holding
//     another tenant's data) cannot read its memory.
func setProcessLimits(extra int64) (addressSpace uint64, err error) {
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		return 0, fmt.Errorf("core dump limit: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 0, fmt.Errorf("no_new_privs: %w", err)
	}
	if err := dropRoot(); err != nil {
		return 0, err
	}
	// After dropRoot: a change of user resets the dumpable flag.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return 0, fmt.Errorf("not dumpable: %w", err)
	}
	size, err := virtualSize()
	if err != nil {
		return 0, err
	}
	limit := size + uint64(extra)
	if err := unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
		return 0, fmt.Errorf("address space limit: %w", err)
	}
	return limit, nil
}

// nobody is the user and group a worker started by root runs as.
const nobody = 65534

// dropRoot switches a worker that a server running as root started (as
// in many containers) to the nobody user and group, without
// supplementary groups. It then holds no capability, and the files of
// the server's user are out of its reach even on a platform without the
// system call filter. A change of user clears the parent-death signal,
// which is set again; a parent that died meanwhile ends the worker.
func dropRoot() error {
	if syscall.Geteuid() != 0 {
		return nil
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("dropping groups: %w", err)
	}
	if err := syscall.Setgid(nobody); err != nil {
		return fmt.Errorf("switching to group nobody: %w", err)
	}
	if err := syscall.Setuid(nobody); err != nil {
		return fmt.Errorf("switching to user nobody: %w", err)
	}
	ppid := syscall.Getppid()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("parent-death signal: %w", err)
	}
	if syscall.Getppid() != ppid {
		return errors.New("the parent went away")
	}
	return nil
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

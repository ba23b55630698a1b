//go:build linux && amd64

package transforms

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// confineSyscalls installs the worker's system call filter (seccomp) on
// every thread of the process, for the rest of its life. A worker past
// its start-up needs the Go runtime (memory, threads, timers, signals to
// its own threads), its pipes and random numbers; the filter allows
// those and answers everything else with EPERM:
//
//   - no network: socket, connect and the like;
//   - no new processes and no other process touched: clone only for a
//     thread, no execve, no ptrace or process_vm_readv, kill and tgkill
//     only to the worker itself (the vault and the other workers run as
//     the same user);
//   - no new executable memory: mmap and mprotect without PROT_EXEC;
//   - no filesystem: no open, not even stat (operator modules are read
//     by the parent: module_files.go). A worker inherits no descriptor but
//     its pipes and stderr, so reads and writes reach nothing else.
//
// EPERM rather than death for a refused call: a call the runtime makes
// in some rare path fails like a missing permission instead of killing
// the worker (the worker's own code handles the error or the runtime
// reports it), while tenant code that broke out of the engine still
// reaches nothing. clone3 answers ENOSYS, so that glibc (in a binary
// linked with cgo) falls back to clone, which the filter can inspect.
//
// Without CAP_SYS_ADMIN the kernel wants no_new_privs on the calling
// thread, which is per thread: it is set here, on the thread that then
// installs the filter, and TSYNC gives it to the others.
func confineSyscalls() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	prog := syscallFilter(unix.Getpid())
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	tid, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	switch {
	case errno != 0:
		return fmt.Errorf("seccomp: %w", errno)
	case tid != 0: // a thread that could not take the filter; none has it
		return fmt.Errorf("seccomp: thread %d could not be synchronized", tid)
	}
	return nil
}

// alwaysAllowed are the system calls a worker makes whatever their
// arguments: the Go runtime's (and glibc's, in a cgo binary: brk, mremap,
// rseq, set_robust_list), its pipes', and getrandom.
var alwaysAllowed = []uint32{
	unix.SYS_READ, unix.SYS_WRITE, unix.SYS_READV, unix.SYS_WRITEV, unix.SYS_CLOSE,
	unix.SYS_MUNMAP, unix.SYS_MADVISE, unix.SYS_MREMAP, unix.SYS_BRK,
	unix.SYS_FUTEX, unix.SYS_SCHED_YIELD, unix.SYS_SCHED_GETAFFINITY,
	unix.SYS_NANOSLEEP, unix.SYS_CLOCK_NANOSLEEP, unix.SYS_CLOCK_GETTIME, unix.SYS_GETTIMEOFDAY,
	unix.SYS_RT_SIGACTION, unix.SYS_RT_SIGPROCMASK, unix.SYS_RT_SIGRETURN, unix.SYS_SIGALTSTACK,
	unix.SYS_GETPID, unix.SYS_GETTID,
	unix.SYS_EPOLL_CREATE1, unix.SYS_EPOLL_CTL, unix.SYS_EPOLL_WAIT, unix.SYS_EPOLL_PWAIT, unix.SYS_EPOLL_PWAIT2,
	unix.SYS_EVENTFD2, unix.SYS_PIPE2, unix.SYS_FCNTL,
	unix.SYS_TIMER_CREATE, unix.SYS_TIMER_SETTIME, unix.SYS_TIMER_DELETE, unix.SYS_SETITIMER,
	unix.SYS_GETRANDOM, unix.SYS_RSEQ, unix.SYS_SET_ROBUST_LIST,
	unix.SYS_EXIT, unix.SYS_EXIT_GROUP, unix.SYS_RESTART_SYSCALL,
}

// Offsets into struct seccomp_data: nr, arch, then the arguments (the low
// 32 bits of one, little endian, are enough for the int and flag
// arguments checked here).
const (
	seccompNr   = 0
	seccompArch = 4
	seccompArg0 = 16
	seccompArg2 = 32
	x32Bit      = 0x40000000 // the x32 ABI's system calls, same arch value
)

// syscallFilter builds the filter for a worker whose process id is pid.
// Every test is followed by its own return, so no jump is longer than a
// few instructions.
func syscallFilter(pid int) []unix.SockFilter {
	const (
		allow = uint32(unix.SECCOMP_RET_ALLOW)
		deny  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	)
	var p []unix.SockFilter
	stmt := func(code uint16, k uint32) { p = append(p, unix.SockFilter{Code: code, K: k}) }
	jump := func(code uint16, k uint32, jt, jf uint8) {
		p = append(p, unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k})
	}
	// when nr is n, return ret; otherwise go on
	retIf := func(n, ret uint32) {
		jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, n, 0, 1)
		stmt(unix.BPF_RET|unix.BPF_K, ret)
	}
	// when nr is n, decide on the low word of the argument at off: allow
	// the call if it satisfies test (jeq or jset against k), else refuse
	// it, or the other way round with unless; otherwise go on with nr
	// still loaded
	argIf := func(n, off uint32, test uint16, k uint32, unless bool) {
		yes, no := allow, deny
		if unless {
			yes, no = deny, allow
		}
		jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, n, 0, 4)
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, off)
		jump(unix.BPF_JMP|test|unix.BPF_K, k, 0, 1)
		stmt(unix.BPF_RET|unix.BPF_K, yes)
		stmt(unix.BPF_RET|unix.BPF_K, no)
	}

	// another architecture's calls are refused outright
	stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompArch)
	jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, unix.AUDIT_ARCH_X86_64, 1, 0)
	stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_KILL_PROCESS)
	stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompNr)
	jump(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, x32Bit, 0, 1)
	stmt(unix.BPF_RET|unix.BPF_K, deny)

	for _, n := range alwaysAllowed {
		retIf(n, allow)
	}
	retIf(unix.SYS_CLONE3, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
	argIf(unix.SYS_CLONE, seccompArg0, unix.BPF_JSET, unix.CLONE_THREAD, false)
	argIf(unix.SYS_TGKILL, seccompArg0, unix.BPF_JEQ, uint32(pid), false)
	argIf(unix.SYS_KILL, seccompArg0, unix.BPF_JEQ, uint32(pid), false)
	argIf(unix.SYS_PRCTL, seccompArg0, unix.BPF_JEQ, unix.PR_SET_VMA, false) // the runtime names its mappings
	// memory, but never executable: the code a worker runs was mapped at
	// its start
	argIf(unix.SYS_MMAP, seccompArg2, unix.BPF_JSET, unix.PROT_EXEC, true)
	argIf(unix.SYS_MPROTECT, seccompArg2, unix.BPF_JSET, unix.PROT_EXEC, true)
	stmt(unix.BPF_RET|unix.BPF_K, deny)
	return p
}

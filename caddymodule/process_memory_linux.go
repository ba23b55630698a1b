//go:build linux

package caddymodule

import "golang.org/x/sys/unix"

// protectProcessMemory makes the server not dumpable: its /proc files
// (mem, environ, maps, fd) then belong to root, so no other process of
// the same user (a transform worker whose code escaped the engine,
// another service) can read the master key from its environment or
// memory, and it never dumps core. The process itself still reads its own
// /proc files; an operator needs root to attach a debugger.
func protectProcessMemory() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

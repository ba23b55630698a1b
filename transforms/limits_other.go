//go:build !linux

package transforms

import (
	"os"
	"syscall"
)

// pollable leaves f as it is outside Linux.
func pollable(f *os.File) *os.File { return f }

// workerSysProcAttr has nothing to add outside Linux.
func workerSysProcAttr() *syscall.SysProcAttr { return nil }

// setProcessLimits does nothing outside Linux: the memory watchdog is the
// only memory limit there.
func setProcessLimits(int64) (uint64, error) { return 0, nil }

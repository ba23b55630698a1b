//go:build !linux

package badgerkv

import "errors"

// statfs is not implemented here: writes are not checked against the
// file system's free space.
func statfs(string) (int64, error) {
	return 0, errors.New("free space is not read on this platform")
}

// memtableBytes is not needed where the free space is not read.
func memtableBytes(string) int64 { return 0 }

//go:build linux

package badgerkv

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// statfs returns the bytes of dir's file system available to unprivileged
// writers (f_bavail: on ext4 the blocks reserved for root are left out,
// though the vault may run as root and use them).
func statfs(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// memtableBytes is what Badger's memtable logs in dir hold: the blocks
// allocated to them (the files are long and sparse, written from the
// start).
func memtableBytes(dir string) int64 {
	f, err := os.Open(dir)
	if err != nil {
		return 0
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	var n int64
	for _, name := range names {
		if !strings.HasSuffix(name, ".mem") {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join(dir, name), &st) == nil {
			n += st.Blocks * 512
		}
	}
	return n
}

//go:build linux

// Package testfs gives tests the file systems they need: a copy of a
// fixture directory (CopyDir), and a small file system of their own that they
// can fill: a size-limited tmpfs, mounted for the test and unmounted after
// it. Tests of what a full disk does use it; it needs Linux and root, and
// skips the test, saying why, where mounting is not permitted.
package testfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// MountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted
// when the test ends.
func MountTmpfs(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a size-limited tmpfs needs root; not running as root")
	}
	dir := t.TempDir()
	err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size))
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		t.Skipf("mounting a tmpfs is not permitted here: %v", err)
	}
	if err != nil {
		t.Fatalf("mounting a %d MiB tmpfs on %s: %v", size>>20, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

// Free is the space available to a non-privileged writer on dir's file
// system.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// FillTo writes (or grows) the filler file name in dir so that about leave
// bytes stay free on dir's file system (none when leave is 0), and returns
// its path. Removing the file frees the space again.
func FillTo(t testing.TB, dir, name string, leave int64) string {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := Free(t, dir) - leave; n > 0 {
		st, _ := f.Stat()
		if err := syscall.Fallocate(int(f.Fd()), 0, st.Size(), n); err != nil && !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("fallocate %d bytes: %v", n, err)
		}
	}
	if leave == 0 { // what fallocate left: page by page until ENOSPC
		if _, err := f.Seek(0, io.SeekEnd); err != nil {
			t.Fatal(err)
		}
		page := make([]byte, 4096)
		for i := 0; i < 1<<16; i++ {
			if _, err := f.Write(page); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling %s: %v", dir, err)
				}
				break
			}
		}
	}
	return path
}

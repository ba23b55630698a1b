//go:build linux

package badgerkv

import "syscall"

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

//go:build !linux

package vaultstore

// adviseRandomAccess is a Linux remedy (see madvise_linux.go).
func adviseRandomAccess(string) {}

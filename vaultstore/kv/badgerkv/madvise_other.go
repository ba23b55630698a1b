//go:build !linux

package badgerkv

// adviseRandomAccess is a Linux remedy (see madvise_linux.go).
func adviseRandomAccess(string) {}

//go:build !(linux && amd64)

package transforms

import "errors"

// confineSyscalls reports that this platform has no system call filter
// for workers: they run with their other limits only.
func confineSyscalls() error {
	return errors.New("no system call filter for this platform (Linux on amd64 only)")
}

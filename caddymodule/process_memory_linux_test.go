//go:build linux

package caddymodule

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestAppProtectsProcessMemory: once the vault app is provisioned, the
// process is not dumpable, so other processes of its user cannot read
// its memory or environment through /proc.
func TestAppProtectsProcessMemory(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TV_TEST_KEY", testKey(1))
	a := App{Storage: t.TempDir(), MasterKey: "{env.TV_TEST_KEY}"}
	if err := provisionApp(t, &a); err != nil {
		t.Fatal(err)
	}
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
		t.Errorf("dumpable = %d (%v) after provisioning, want 0", d, err)
	}
}

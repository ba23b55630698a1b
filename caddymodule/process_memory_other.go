//go:build !linux

package caddymodule

// protectProcessMemory has no equivalent outside Linux.
func protectProcessMemory() error { return nil }

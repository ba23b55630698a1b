package vaultstore

import (
	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// The storage interface lives in package kv; these names keep the
// vault's rules short to read.
type (
	// KV is the transactional store the vault is written against.
	KV = kv.KV
	// Reader reads inside a transaction.
	Reader = kv.Reader
	// Writer reads and writes inside a transaction.
	Writer = kv.Writer
)

// ErrStopScan ends a Scan early without an error.
var ErrStopScan = kv.ErrStopScan

// engineAs finds the first engine in the chain of kv and the engines it
// wraps (through their Unwrap() KV methods) that implements T.
func engineAs[T any](engine KV) (T, bool) {
	for engine != nil {
		if t, ok := engine.(T); ok {
			return t, true
		}
		u, ok := engine.(interface{ Unwrap() KV })
		if !ok {
			break
		}
		engine = u.Unwrap()
	}
	var zero T
	return zero, false
}

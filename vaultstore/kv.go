package vaultstore

import (
	"context"
	"errors"
	"time"
)

// KV is the narrow storage interface the vault is written against: point
// reads, writes with an optional time to live, deletes and prefix scans,
// grouped in transactions. Badger implements it for a single node; a
// distributed store can implement it for scale-out without touching the
// vault's rules.
type KV interface {
	// View runs fn in a read-only, consistent snapshot.
	View(ctx context.Context, fn func(Reader) error) error
	// Update runs fn in a read-write transaction and commits it atomically.
	// A transaction that loses a write conflict is retried, so fn must
	// be safe to run more than once.
	Update(ctx context.Context, fn func(Writer) error) error
	// DeletePrefix removes every key under prefix, in as many transactions
	// as it takes. It is not atomic; callers make the data unreachable first.
	DeletePrefix(ctx context.Context, prefix []byte) error
	// Close releases the store.
	Close() error
}

// Reader reads inside a transaction.
type Reader interface {
	// Get returns a copy of the value under key, or ErrNotFound.
	Get(key []byte) ([]byte, error)
	// Scan calls fn for every key under prefix in ascending order, starting
	// after the key after (nil to start at the beginning). fn gets copies;
	// returning ErrStopScan ends the scan without error.
	Scan(prefix, after []byte, fn func(key, value []byte) error) error
}

// Writer reads and writes inside a transaction.
type Writer interface {
	Reader
	// Put stores value under key; a positive ttl makes the entry vanish
	// after that long.
	Put(key, value []byte, ttl time.Duration) error
	// Delete removes key; deleting a missing key is not an error.
	Delete(key []byte) error
}

// ErrStopScan ends a Scan early without an error.
// engineAs finds the first engine in the chain of kv and the engines it
// wraps (through their Unwrap() KV methods) that implements T.
func engineAs[T any](kv KV) (T, bool) {
	for kv != nil {
		if t, ok := kv.(T); ok {
			return t, true
		}
		u, ok := kv.(interface{ Unwrap() KV })
		if !ok {
			break
		}
		kv = u.Unwrap()
	}
	var zero T
	return zero, false
}

var ErrStopScan = errors.New("stop scan")

// Package kv is the narrow storage interface the vault is written against:
// point reads, writes with an optional time to live, deletes and ordered
// prefix scans, grouped in transactions. Two engines implement it: embedded
// Badger for a single node (kv/badgerkv) and PostgreSQL for several nodes on
// one database (kv/postgres). Nothing but an engine imports an engine's
// library, and the vault's rules never see which engine runs below them.
//
// The package also holds the conformance suite every engine must pass
// (kvtest), so that both behave alike where the vault can tell.
package kv

import (
	"context"
	"errors"
	"time"
)

// KV is a transactional, ordered key-value store.
type KV interface {
	// View runs fn in a read-only, consistent snapshot, taken no later
	// than fn's first read (Badger takes it when View starts, PostgreSQL
	// at the first read).
	View(ctx context.Context, fn func(Reader) error) error
	// Update runs fn in a read-write, serializable transaction and commits
	// it atomically. A transaction that loses a conflict with another one
	// (a key it read or wrote was written by a transaction that committed
	// first) is run again, a bounded number of times, then fails with
	// ErrConflict; fn must be safe to run more than once. A nil return
	// means the writes are committed (and durable, where the engine is
	// configured to be).
	Update(ctx context.Context, fn func(Writer) error) error
	// DeletePrefix removes every key under prefix, in as many transactions
	// as it takes. It is not atomic; callers make the data unreachable first.
	DeletePrefix(ctx context.Context, prefix []byte) error
	// Close waits for running transactions and releases the store. Calls
	// after Close fail with ErrClosed.
	Close() error
}

// Reader reads inside a transaction.
type Reader interface {
	// Get returns a copy of the value under key, or ErrNotFound. An entry
	// whose time to live has run out is not found.
	Get(key []byte) ([]byte, error)
	// Scan calls fn for every live key under prefix in ascending byte
	// order, starting after the key after (nil to start at the beginning).
	// fn gets copies it may keep, and may read and write in the same
	// transaction; returning ErrStopScan ends the scan without error.
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

// Snapshotter is implemented by engines that can stream every live entry
// from one consistent view, for backups.
type Snapshotter interface {
	// Snapshot calls fn for every live key in key order, as of one moment
	// that concurrent writes do not change. expiresAt is the entry's expiry
	// (zero for none). key and value are valid only during the call.
	Snapshot(ctx context.Context, fn func(key, value []byte, expiresAt time.Time) error) error
}

// Loader is implemented by engines that can take a stream of entries
// faster than Update would, for restores into an empty store.
type Loader interface {
	// Load writes entries in batches; an entry whose expiresAt is past
	// is skipped. It is not atomic: a failed load leaves a store to be
	// discarded.
	Load(ctx context.Context, next func() (key, value []byte, expiresAt time.Time, err error)) error
}

// Watcher is implemented by engines shared by several processes. The vault
// says which keys hold records it caches; the engine tells every process,
// including the one that wrote, of each committed change to such a key, so
// that no process serves a cached record another one changed.
type Watcher interface {
	// Watch calls changed with each key for which watched reports true
	// that a committed transaction, in any process, wrote or deleted,
	// usually within milliseconds of the commit. When notices may have
	// been missed (the engine lost its connection), it calls changed with
	// a nil key: every cached record must be dropped. watched must be
	// cheap: Update calls it for every key it writes. Watch must be called
	// at most once, before any Update.
	Watch(watched func(key []byte) bool, changed func(key []byte)) error
	// Healthy reports whether change notices are flowing; while it is
	// false, callers must not trust their caches.
	Healthy() bool
}

// Pinger is implemented by engines behind a network connection, for
// health checks.
type Pinger interface {
	// Ping checks that the engine answers.
	Ping(ctx context.Context) error
}

var (
	// ErrNotFound reports a key that holds no live value.
	ErrNotFound = errors.New("not found")
	// ErrStopScan ends a Scan early without an error.
	ErrStopScan = errors.New("kv: stop scan")
	// ErrConflict reports a transaction that kept losing conflicts with
	// concurrent ones; the caller may retry later.
	ErrConflict = errors.New("busy: the transaction kept conflicting with concurrent ones")
	// ErrClosed answers a call after Close.
	ErrClosed = errors.New("kv: the storage is closed")
	// ErrUnavailable reports an engine that cannot be reached or refuses
	// work for now (a database restarting, a full disk); nothing was
	// committed, and the caller may retry later.
	ErrUnavailable = errors.New("kv: storage unavailable")
	// ErrNoSpace reports that the engine's disk has too little free space
	// for writes; nothing was committed. Reads go on working. It wraps
	// ErrUnavailable.
	ErrNoSpace = errNoSpace{}
)

type errNoSpace struct{}

func (errNoSpace) Error() string { return "kv: too little free disk space for writes" }

// Is makes ErrNoSpace match ErrUnavailable too.
func (errNoSpace) Is(target error) bool { return target == ErrUnavailable }

// PrefixEnd returns the smallest key greater than every key under prefix,
// or nil when there is none (a prefix of only 0xff bytes, or empty).
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

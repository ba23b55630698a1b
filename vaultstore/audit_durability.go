package vaultstore

import (
	"context"
	"sync/atomic"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// The audit records of reads and proxied calls (recordAccess) are
// durable in one of two tiers; the records of writes are always part of
// the write's own transaction, durable before its answer.
//
//   - Default: a record is committed to the engine's log before any data
//     leaves, so that a crash of the vault process cannot lose it, and is
//     synced to disk in the background within a bounded interval shared
//     by every record in flight (kv.WithDeferredSync): on Badger within
//     badgerkv.DeferredSyncDelay plus the sync's linger and the sync
//     itself, on PostgreSQL by its WAL writer (synchronous_commit off for
//     these transactions only). A power loss, or a crash of the
//     database server, can lose at most that interval of read records.
//   - Strict (StrictAuditSync, `audit_sync strict`): a record is synced
//     before any data leaves, as every write is.
//
// Either way a read whose record could not be committed returns nothing
// (fail closed).

// auditDurability is the storage under the audit batcher: it marks every
// batch transaction for a deferred sync unless the strict tier is on.
type auditDurability struct {
	KV
	strict atomic.Bool
}

// Update runs fn as KV.Update does, deferring the sync in the default
// tier.
func (k *auditDurability) Update(ctx context.Context, fn func(Writer) error) error {
	if !k.strict.Load() {
		ctx = kv.WithDeferredSync(ctx)
	}
	return k.KV.Update(ctx, fn)
}

// Unwrap returns the storage underneath.
func (k *auditDurability) Unwrap() KV { return k.KV }

// SetStrictAuditSync chooses the audit tier of reads and proxied calls
// from now on: strict syncs each record before data leaves; otherwise
// (the default) a record is committed to the engine's log before data
// leaves and synced within a few milliseconds. A reload applies it at
// once.
func (s *Store) SetStrictAuditSync(strict bool) {
	if d, ok := s.audits.kv.(*auditDurability); ok {
		d.strict.Store(strict)
	}
}

// StrictAuditSync reports whether the strict audit tier is on.
func (s *Store) StrictAuditSync() bool {
	d, ok := s.audits.kv.(*auditDurability)
	return !ok || d.strict.Load()
}

// withAuditDurability puts the audit tier under the audit batcher.
func (s *Store) withAuditDurability(strict bool) {
	d := &auditDurability{KV: s.audits.kv}
	d.strict.Store(strict)
	s.audits.kv = d
}

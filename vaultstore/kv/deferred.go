package kv

import "context"

type deferredSyncKey struct{}

// WithDeferredSync marks ctx for writes whose durability against power
// loss may follow their commit by a bounded interval: the audit records
// of reads and proxied calls in the vault's default audit tier. Update
// then returns once the commit is in the engine's log, where a crash of
// the calling process cannot lose it, and the engine makes it durable in
// the background, shared with every other commit in flight: Badger
// syncs within its DeferredSyncDelay (badgerkv), PostgreSQL commits the
// transaction with synchronous_commit off (its WAL writer flushes it
// within three wal_writer_delay). Engines configured without durable
// writes ignore the mark, and so does every write not marked: it is
// durable before Update returns.
func WithDeferredSync(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferredSyncKey{}, true)
}

// DeferredSync reports whether ctx was marked by WithDeferredSync.
func DeferredSync(ctx context.Context) bool {
	v, _ := ctx.Value(deferredSyncKey{}).(bool)
	return v
}

package kv

import "context"

type committedKey struct{}

// WithCommitted returns a context under which an engine's Update calls fn
// once its transaction has committed, before it waits for the commit to
// be synced, so a caller can let the next transaction in as soon as this
// one's writes are visible (the audit chain's locks). fn runs at most
// once, on the goroutine that called Update; it is not called when no
// run of the transaction commits. Engines that cannot tell the commit
// from the sync may ignore it; the caller then releases on return.
func WithCommitted(ctx context.Context, fn func()) context.Context {
	return context.WithValue(ctx, committedKey{}, fn)
}

// Committed returns the function WithCommitted set, or nil.
func Committed(ctx context.Context) func() {
	fn, _ := ctx.Value(committedKey{}).(func())
	return fn
}

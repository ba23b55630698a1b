package kv

import "context"

type spaceReserveKey struct{}

// WithSpaceReserve marks ctx for writes that keep reads working: the
// audit records of reads, which must be durable before a read answers. An
// engine that refuses writes with ErrNoSpace when its disk is nearly full
// admits these into a last reserve the others cannot use, so reads go on
// for a while after writes stop.
func WithSpaceReserve(ctx context.Context) context.Context {
	return context.WithValue(ctx, spaceReserveKey{}, true)
}

// SpaceReserve reports whether ctx was marked by WithSpaceReserve.
func SpaceReserve(ctx context.Context) bool {
	v, _ := ctx.Value(spaceReserveKey{}).(bool)
	return v
}

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
	"github.com/tokenvault/tokenvault/vaultstore/kv/badgerkv"
)

// syncProbeWrites is how many durable writes the sync-latency probe times.
const syncProbeWrites = 200

// syncLatency is the disk's sync latency as BenchmarkDurableWriteAlone
// (vaultstore/kv/badgerkv) measures it: one writer's 700-byte write to a
// fresh Badger store, then the sync that makes it durable (Badger's msync
// of the memtable log and fsync of the value log), timed alone. It is the
// least a durable request adds to the latency of a lone call, and what
// figures from different machines depend on most.
type syncLatency struct {
	dir            string
	p50, p90, mean time.Duration
	err            error
}

// measureSyncLatency times syncProbeWrites syncs in a new directory under
// parent, which must be on the vault storage's file system, and removes
// it.
func measureSyncLatency(parent string) syncLatency {
	dir, err := os.MkdirTemp(parent, "sync-probe-")
	if err != nil {
		return syncLatency{err: err}
	}
	defer os.RemoveAll(dir)
	res := syncLatency{dir: parent}
	store, err := badgerkv.Open(badgerkv.Options{Dir: dir, Logger: zap.NewNop()})
	if err != nil {
		res.err = err
		return res
	}
	defer store.Close()
	value := make([]byte, 700)
	times := make([]time.Duration, 0, syncProbeWrites)
	var total time.Duration
	for i := range syncProbeWrites {
		key := fmt.Appendf(nil, "probe/%016x", i)
		if err := store.Update(context.Background(), func(w kv.Writer) error { return w.Put(key, value, 0) }); err != nil {
			res.err = err
			return res
		}
		began := time.Now()
		if err := store.DB().Sync(); err != nil {
			res.err = err
			return res
		}
		d := time.Since(began)
		times = append(times, d)
		total += d
	}
	slices.Sort(times)
	res.p50, res.p90 = times[len(times)/2], times[len(times)*9/10]
	res.mean = total / time.Duration(len(times))
	return res
}

// String is the probe's line in the load benchmark's output.
func (l syncLatency) String() string {
	if l.err != nil {
		return fmt.Sprintf("disk sync latency: not measured (%v)", l.err)
	}
	return fmt.Sprintf("disk sync latency (BenchmarkDurableWriteAlone's sync-µs: a 700-byte Badger write then its sync, %d times, on the file system of %s): p50 %d µs, p90 %d µs, mean %d µs; load average %s",
		syncProbeWrites, filepath.Clean(l.dir), l.p50.Microseconds(), l.p90.Microseconds(), l.mean.Microseconds(), loadAverage())
}

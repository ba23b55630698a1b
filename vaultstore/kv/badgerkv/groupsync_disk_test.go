package badgerkv

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// writeBytes is what this process has written to disk so far.
func writeBytes() int64 {
	raw, _ := os.ReadFile("/proc/self/io")
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "write_bytes: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// BenchmarkGroupSyncDiskWrites reports the disk bytes written per durable
// 700-byte write (diskKB/op); run with -benchtime 150000x to span more
// than one memtable, where read-ahead on the memtable log used to
// multiply them (see adviseRandomAccess).
func BenchmarkGroupSyncDiskWrites(b *testing.B) {
	store, err := Open(Options{Dir: b.TempDir(), SyncWrites: true, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	value := make([]byte, 700)
	var n atomic.Int64
	b.SetParallelism(16)
	before := writeBytes()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := fmt.Appendf(nil, "bench/%016x", n.Add(1))
			if err := store.Update(b.Context(), func(w kv.Writer) error { return w.Put(key, value, 0) }); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(writeBytes()-before)/float64(b.N)/1024, "diskKB/op")
}

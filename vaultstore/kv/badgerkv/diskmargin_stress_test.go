package badgerkv

import (
	"context"
	"errors"
	"fmt"
	"github.com/tokenvault/tokenvault/internal/testfs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// TestDiskMarginStress measures how much of Badger's share of the margin
// Badger really uses: a write load of overwrites and deletes keeps a small
// file system at the line (the data it overwrites takes compactions to
// free) for a while, with many flushes and compactions,
// while the free space is sampled every half millisecond. It reports the
// deepest the free space went under Badger's share (the margin less the
// read reserve) as a fraction of it; past 1 the process would have died of
// SIGBUS. It runs only with TOKENVAULT_DISK_STRESS set, to the memtable
// size in MiB (64 for Badger's default; the file system is sized to fit).
func TestDiskMarginStress(t *testing.T) {
	memMiB, _ := strconv.Atoi(os.Getenv("TOKENVAULT_DISK_STRESS"))
	if memMiB <= 0 {
		t.Skip("a measurement, not a check: set TOKENVAULT_DISK_STRESS to a memtable size in MiB to run it")
	}
	memtable := int64(memMiB) << 20
	fsDir := testfs.MountTmpfs(t, 24*memtable+64<<20)
	dir := filepath.Join(fsDir, "db")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Options{Dir: dir, SyncWrites: false, memTableSize: memtable, readReserve: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	var (
		stop       atomic.Bool
		wg         sync.WaitGroup
		acked      atomic.Int64
		refused    atomic.Int64
		deepest    atomic.Int64 // permille of Badger's share used, at most
		minFree    atomic.Int64
		keys       = int64(12 * memtable / 1000) // live data about 12 memtables
		loadPeriod = 90 * time.Second
	)
	minFree.Store(1 << 62)
	// sampler
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			free, err := statfs(fsDir)
			if err == nil {
				d := s.Disk()
				share := d.MarginBytes - d.ReserveBytes
				if used := share - free; used > 0 && share > 0 {
					if pm := used * 1000 / share; pm > deepest.Load() {
						deepest.Store(pm)
					}
				}
				if free < minFree.Load() {
					minFree.Store(free)
				}
			}
			time.Sleep(500 * time.Microsecond)
		}
	}()
	// writers: overwrites and deletes over a bounded key space, batches of 50
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				err := s.Update(context.Background(), func(tx kv.Writer) error {
					for i := 0; i < 50; i++ {
						key := fmt.Sprintf("k/%012d", rand.Int64N(keys))
						if rand.IntN(10) == 0 {
							if err := tx.Delete([]byte(key)); err != nil {
								return err
							}
							continue
						}
						if err := tx.Put([]byte(key), valueFor(key, 1000), 0); err != nil {
							return err
						}
					}
					return nil
				})
				switch {
				case err == nil:
					acked.Add(1)
				case errors.Is(err, kv.ErrNoSpace):
					refused.Add(1)
					time.Sleep(time.Millisecond)
				case errors.Is(err, kv.ErrConflict):
				default:
					t.Error(err)
					return
				}
			}
		}()
	}
	// overwrites keep the file system at the line while compactions run
	time.Sleep(loadPeriod)
	stop.Store(true)
	wg.Wait()
	time.Sleep(5 * time.Second) // background work settles
	tr := treeOf(s.db, 7, dir)
	for i := range tr.levels {
		t.Logf("L%d: %d tables, %d MiB", i, len(tr.levels[i]), tr.levelSize(i)>>20)
	}
	t.Logf("memtable %d MiB: %d transactions committed, %d refused; free space went down to %d MiB; Badger used at most %.1f%% of its share of the margin (now %d MiB)",
		memMiB, acked.Load(), refused.Load(), minFree.Load()>>20, float64(deepest.Load())/10, (s.Disk().MarginBytes-s.Disk().ReserveBytes)>>20)
}

package badgerkv

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testfs"
	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// valueFor is the value stored under key: the check of a read after
// reopening needs no copy of what was written.
func valueFor(key string, n int) []byte {
	sum := sha256.Sum256([]byte(key))
	v := make([]byte, 0, n+len(sum))
	for len(v) < n {
		v = append(v, sum[:]...)
	}
	return v[:n]
}

// checkKeys fails the test for every key of keys that s lacks or holds
// another value under.
func checkKeys(t *testing.T, s *Store, keys []string, size int) {
	t.Helper()
	missing := 0
	err := s.View(context.Background(), func(r kv.Reader) error {
		for _, k := range keys {
			v, err := r.Get([]byte(k))
			if err != nil || string(v) != string(valueFor(k, size)) {
				if missing++; missing <= 5 {
					t.Errorf("acknowledged key %s: %v (value matches: %v)", k, err, err == nil && string(v) == string(valueFor(k, size)))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged keys are missing or wrong", missing, len(keys))
	}
}

// A store on a small file system filling up under a write load from
// several goroutines, with Badger's memtables made small so that many
// flushes and compactions run meanwhile: every Update either commits
// (and is there after reopening) or fails with kv.ErrNoSpace, reads go on,
// the audit records of reads still fit in their reserve, nothing crashes
// (Badger's mapped files would SIGBUS this process), the flushes and
// compactions that go on once writes are refused stay within Badger's
// share of the margin (the free space never reaches the read reserve),
// and once a filler file is deleted writes resume without reopening. (A
// margin worked out once a second, for the empty store the load started
// from, let a compaction die of SIGBUS here in every run.)
func TestDiskFillsUnderWriteLoad(t *testing.T) {
	fsDir := testfs.MountTmpfs(t, 128<<20)
	dir := filepath.Join(fsDir, "db")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	filler := testfs.FillTo(t, fsDir, "filler", testfs.Free(t, fsDir)-32<<20) // 32 MB to give back later
	logger, logs := observed()
	opts := Options{Dir: dir, SyncWrites: true, Logger: logger, memTableSize: 2 << 20, readReserve: 2 << 20}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	t.Logf("free at start: %d MiB, margin: %d MiB", testfs.Free(t, fsDir)>>20, s.Disk().MarginBytes>>20)

	const (
		workers   = 4
		valueSize = 2000
		maxWrites = 200_000           // bounds the load even if the disk never fills
		loadTime  = 150 * time.Second // and its time
		stopAfter = 20                // refusals in a row that end a worker
	)
	ctx := context.Background()
	var (
		mu       sync.Mutex
		acked    []string
		refused  int
		written  int
		wg       sync.WaitGroup
		deadline = time.Now().Add(loadTime)
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inARow := 0
			for {
				mu.Lock()
				done := written >= maxWrites
				written++
				mu.Unlock()
				if done || time.Now().After(deadline) {
					return
				}
				key := fmt.Sprintf("load/%016x", rand.Uint64())
				err := s.Update(ctx, func(w kv.Writer) error { return w.Put([]byte(key), valueFor(key, valueSize), 0) })
				switch {
				case err == nil:
					inARow = 0
					mu.Lock()
					acked = append(acked, key)
					mu.Unlock()
				case errors.Is(err, kv.ErrNoSpace):
					mu.Lock()
					refused++
					mu.Unlock()
					if inARow++; inARow >= stopAfter {
						return
					}
				default:
					t.Errorf("an Update failed with neither success nor kv.ErrNoSpace: %v", err)
					return
				}
			}
		}()
	}
	loadDone := make(chan struct{})
	go func() {
		wg.Wait()
		close(loadDone)
	}()
	// the free space, sampled until space is freed: Badger's own writes
	// (flushes and compactions, which go on after writes are refused) must
	// stay within its share of the margin, and so out of the read reserve,
	// which nothing here writes to
	stopSampling := make(chan struct{})
	sampled := make(chan int64, 1)
	go func() {
		lowest := int64(1 << 62)
		for {
			if free, err := statfs(fsDir); err == nil {
				lowest = min(lowest, free)
			}
			select {
			case <-stopSampling:
				sampled <- lowest
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	var stopOnce sync.Once
	lowestFree := func() int64 {
		stopOnce.Do(func() { close(stopSampling) })
		return <-sampled
	}
	defer stopOnce.Do(func() { close(stopSampling) })
	// reads go on throughout
	readsDone := make(chan struct{})
	var reads, readErrors int
	go func() {
		defer close(readsDone)
		for {
			mu.Lock()
			n := len(acked)
			var key string
			if n > 0 {
				key = acked[rand.IntN(n)]
			}
			over := written >= maxWrites || time.Now().After(deadline)
			mu.Unlock()
			if key != "" {
				err := s.View(ctx, func(r kv.Reader) error {
					v, err := r.Get([]byte(key))
					if err == nil && string(v) != string(valueFor(key, valueSize)) {
						err = errors.New("a different value")
					}
					return err
				})
				reads++
				if err != nil {
					readErrors++
				}
			}
			if over {
				return
			}
			select {
			case <-time.After(time.Millisecond):
			case <-loadDone:
				return
			}
		}
	}()
	<-loadDone
	<-readsDone
	t.Logf("%d writes acknowledged, %d refused for space, %d reads (%d failed); free now %d MiB, margin %d MiB",
		len(acked), refused, reads, readErrors, testfs.Free(t, fsDir)>>20, s.Disk().MarginBytes>>20)
	if t.Failed() {
		t.FailNow()
	}
	if refused == 0 {
		t.Fatalf("the load ended (%d writes, %v) before the disk refused any write", written, loadTime)
	}
	if readErrors > 0 {
		t.Errorf("%d of %d reads failed during the load", readErrors, reads)
	}
	if len(acked) < 1000 {
		t.Errorf("only %d writes were acknowledged before the disk filled", len(acked))
	}
	d := s.Disk()
	if d.Writable || d.FreeBytes >= d.MarginBytes+resumeSlack || d.RefusedWrites < int64(refused) {
		t.Errorf("disk after the load: %+v", d)
	}
	if logs.FilterMessageSnippet("nearly full").Len()+logs.FilterMessageSnippet("is full").Len() == 0 {
		t.Error("no log line says the file system is nearly full")
	}
	// a read's audit record still fits in the reserve, unless Badger's
	// share of the margin has grown past it (its tree grows as compactions
	// run, so the state is read again around each try)
	for try := 0; ; try++ {
		before := s.Disk().ReadsAudited
		err = s.Update(kv.WithSpaceReserve(ctx), func(w kv.Writer) error { return w.Put([]byte("audit/1"), []byte("a read's record"), 0) })
		after := s.Disk().ReadsAudited
		if before == after {
			if before && err != nil || !before && !errors.Is(err, kv.ErrNoSpace) {
				t.Errorf("a write marked for the reserve while reads are audited=%v: %v", before, err)
			}
			break
		}
		if try == 50 {
			t.Fatal("the reserve's state kept changing")
		}
		time.Sleep(100 * time.Millisecond)
	}
	checkKeys(t, s, acked, valueSize)
	lowest := lowestFree()
	t.Logf("the free space went down to %.1f MiB", float64(lowest)/(1<<20))
	if lowest < opts.readReserve {
		t.Errorf("the free space fell to %.1f MiB, into the read reserve (%d MiB): Badger wrote more than its share of the margin", float64(lowest)/(1<<20), opts.readReserve>>20)
	}

	// space freed: writes resume by themselves
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	resumeBy := time.Now().Add(30 * time.Second)
	for {
		key := fmt.Sprintf("load/%016x", rand.Uint64())
		err := s.Update(ctx, func(w kv.Writer) error { return w.Put([]byte(key), valueFor(key, valueSize), 0) })
		if err == nil {
			acked = append(acked, key)
			break
		}
		if !errors.Is(err, kv.ErrNoSpace) || time.Now().After(resumeBy) {
			t.Fatalf("writes did not resume after the filler was removed: %v (free %d MiB, disk %+v)", err, testfs.Free(t, fsDir)>>20, s.Disk())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d := s.Disk(); !d.Writable {
		t.Errorf("disk after freeing space: %+v", d)
	}
	if logs.FilterMessageSnippet("has room again").Len() == 0 {
		t.Error("no log line says writes resumed")
	}

	// every acknowledged write is there after reopening
	if err := s.Close(); err != nil {
		t.Fatalf("closing: %v", err)
	}
	s = nil
	s2, err := Open(opts)
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	defer s2.Close()
	checkKeys(t, s2, acked, valueSize)
}

// Open on a full file system refuses, with an error wrapping
// kv.ErrNoSpace, before Badger touches a file: neither after a clean
// close nor with memtable logs to replay (an image of a store taken while
// it was open, as a crash leaves it). Once space is freed it opens with
// every write.
func TestOpenRefusesOnAFullDisk(t *testing.T) {
	// less than a memtable (2 MB), so no flush runs while the image is
	// copied: the image is what a crash at that moment leaves
	const (
		entries   = 1200
		valueSize = 1000
	)
	for _, crashed := range []bool{false, true} {
		name := "after a clean close"
		if crashed {
			name = "with logs to replay"
		}
		t.Run(name, func(t *testing.T) {
			fsDir := testfs.MountTmpfs(t, 64<<20)
			src := filepath.Join(fsDir, "db")
			if err := os.Mkdir(src, 0o700); err != nil {
				t.Fatal(err)
			}
			opts := Options{Dir: src, SyncWrites: true, memTableSize: 2 << 20, readReserve: 2 << 20}
			s, err := Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() }) // before the unmount, whatever fails
			var keys []string
			for i := 0; i < entries; i++ {
				key := fmt.Sprintf("k/%06d", i)
				if err := s.Update(context.Background(), func(w kv.Writer) error { return w.Put([]byte(key), valueFor(key, valueSize), 0) }); err != nil {
					t.Fatal(err)
				}
				keys = append(keys, key)
			}
			dir := src
			if crashed {
				dir = filepath.Join(fsDir, "image")
				testfs.CopyDir(t, src, dir, "LOCK")
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if crashed && !hasMemLog(t, dir) {
				t.Fatal("the image holds no memtable log to replay")
			}
			before := listing(t, dir)
			filler := testfs.FillTo(t, fsDir, "filler", 0)

			opts.Dir = dir
			s2, err := Open(opts)
			if err == nil {
				s2.Close()
				t.Fatalf("Open on a full file system (%d bytes free) succeeded", testfs.Free(t, fsDir))
			}
			if !errors.Is(err, kv.ErrNoSpace) || !errors.Is(err, kv.ErrUnavailable) || !strings.Contains(err.Error(), "free space and start again") {
				t.Fatalf("Open on a full file system: %v", err)
			}
			t.Logf("refused: %v", err)
			if after := listing(t, dir); after != before {
				t.Errorf("the refused Open changed the directory:\nbefore:\n%s\nafter:\n%s", before, after)
			}

			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			s3, err := Open(opts)
			if err != nil {
				t.Fatalf("Open once space was freed: %v", err)
			}
			t.Cleanup(func() { s3.Close() })
			checkKeys(t, s3, keys, valueSize)
		})
	}
}

func hasMemLog(t *testing.T, dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".mem") {
			if info, err := e.Info(); err == nil && info.Size() > 0 {
				return true
			}
		}
	}
	return false
}

// listing names dir's files with their sizes.
func listing(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %d\n", e.Name(), info.Size())
	}
	return b.String()
}

package main

// The memory report (issue 7): the Caddy process's resident memory after
// loading a million small tokens, and the growth of its heap during a
// 60-second proxy run, which must be flat.
//
// Command (from the repository root; about 2.5 minutes on 2 cores for a
// million tokens, plus the build of the binary):
//
//	TV_MEMORY=1 go test ./caddymodule/caddy/ -run TestMemory -v -timeout 30m
//
// TV_MEMORY_TOKENS=<n> loads n tokens instead of 1,000,000 (20000 is a
// quick check, about 70 s). TV_MEMORY_CACHE="block_cache 64MiB; records
// 1000" puts those lines (separated by ;) in the vault's cache block;
// without it the caches have their defaults. TV_MEMORY_PROFILE=<dir>
// keeps the heap profile of every snapshot (heap-*.pprof; read one with
// `go tool pprof -top -sample_index=inuse_space <file>`). Without
// TV_MEMORY the test is skipped.
//
// What runs, all on 127.0.0.1: Caddy built from this tree with the vault
// (real Badger in a temporary directory, sync_writes on, rate limits off,
// an egress block allowing http to 127.0.0.0/8, as in the load
// benchmark), one tenant whose tokenize limit is raised to 100 (the
// largest) with `caddy vault tenant quotas`, and one application with
// token:create and token:use.
//
//  1. Load: memLoadClients goroutines, each with its own keep-alive
//     connection, send POST /tokenize with a JSON array of 100 distinct
//     13-byte strings (each becomes a token of type "token") until n
//     tokens exist, memLoadLimit has passed or memMaxLoadErrors requests
//     failed. Progress every 100,000 tokens; a poller records the peak RSS
//     and HeapInuse every 500 ms.
//  2. After the load, once the storage is quiet (see settle: Badger's
//     flushes and compactions hold hundreds of MiB while they run, and
//     wait on the disk without using CPU): a forced GC (the admin API's
//     /debug/pprof/heap?gc=1), then the Go heap from /debug/vars
//     (HeapAlloc after a GC is the live heap), VmRSS, RssAnon and RssFile
//     from /proc/<pid>/status, the resident part of each kind of Badger
//     file from /proc/<pid>/smaps, and the storage's size.
//  3. The proxy run: /proxy with a 1 KB JSON body holding one card number
//     reference, 16 connections, memProxyRun, to a destination in the test
//     process (the load benchmark's). Every memSampleEvery the test reads
//     HeapInuse as it is, forces a GC, and reads the live heap and RSS; the
//     peak poller runs too. After the run it settles again.
//  4. A summary block to paste into a note.
//
// The test fails when a request failed, or when the live heap after the
// proxy run (settled), less Badger's table-building buffers (see
// tableBuilderBytes), exceeds the same before it by more than
// memHeapBound: a leak detector, not a timing assertion. Badger's block
// cache is not in the live heap: its tables are uncompressed, so a cached
// block points into a memory-mapped file.

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// Memory report settings.
const (
	memDefaultTokens = 1_000_000
	memBatch         = 100 // tokens per POST /tokenize: the largest tokenize limit
	memLoadClients   = 8
	memLoadLimit     = 10 * time.Minute // the load stops by itself after this
	memMaxLoadErrors = 20               // the load stops after this many failed requests
	memProgressEvery = 100_000
	memProxyRun      = 60 * time.Second
	memProxyConns    = 16
	memSampleEvery   = 5 * time.Second
	memHeapBound     = 64 << 20 // allowed growth of the live heap over the proxy run
	memPeakEvery     = 500 * time.Millisecond
	memSettleEvery   = 2 * time.Second
	memSettleMax     = 60 * time.Second
	memQuietCPU      = 0.05    // of one CPU: no flush or compaction running
	memSettleDelta   = 4 << 20 // two live heaps this close: settled
)

const mib = 1 << 20

// memStats is what the test reads of the Go runtime's memory statistics
// (the memstats member of the admin API's /debug/vars).
type memStats struct {
	HeapAlloc    uint64
	HeapInuse    uint64
	HeapReleased uint64
	HeapSys      uint64
	StackInuse   uint64
	Sys          uint64
	NumGC        uint32
}

// memSnapshot is the process's memory at one moment.
type memSnapshot struct {
	at       time.Duration // since the start of the phase
	heap     memStats      // after the forced GC
	inuse    uint64        // HeapInuse before the forced GC
	gcTook   time.Duration // the forced GC's request
	rss      int64         // VmRSS, bytes
	rssAnon  int64
	rssFile  int64
	hwm      int64            // VmHWM
	mapped   map[string]int64 // resident bytes by kind of mapping (smaps)
	threads  string
	profile  []byte // the heap profile the forced GC answered
	builders int64  // of the live heap, Badger's table-building buffers (tableBuilderBytes)
	fetchErr error
}

func TestMemory(t *testing.T) {
	if os.Getenv("TV_MEMORY") == "" {
		t.Skip("the memory report runs only with TV_MEMORY=1 (TV_MEMORY_TOKENS=<n> for fewer tokens)")
	}
	n := memDefaultTokens
	if v := os.Getenv("TV_MEMORY_TOKENS"); v != "" {
		var err error
		if n, err = strconv.Atoi(strings.ReplaceAll(v, "_", "")); err != nil || n < memBatch {
			t.Fatalf("TV_MEMORY_TOKENS=%q: want a number of at least %d", v, memBatch)
		}
	}
	needBinary(t)
	began := time.Now()

	// The server: the load benchmark's vault, with the cache block if
	// TV_MEMORY_CACHE names one.
	vaultExtra := egressLoopback
	cacheDesc := "defaults"
	if c := strings.TrimSpace(os.Getenv("TV_MEMORY_CACHE")); c != "" {
		var lines []string
		for _, l := range strings.Split(c, ";") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, "\t\t\t"+l)
			}
		}
		vaultExtra += "\n\t\tcache {\n" + strings.Join(lines, "\n") + "\n\t\t}"
		cacheDesc = c
	}
	dest := newLoadDestination(t)
	s := startServer(t, serverOpts{VaultExtra: vaultExtra, RateLimits: false})
	pid := s.cmd.Process.Pid
	fmt.Printf("Tokenvault memory report: %d tokens\n%s\n", n, loadEnvironment())
	fmt.Printf("caddy pid %d, storage %s (sync_writes on), caches: %s\n", pid, s.opts.Storage, cacheDesc)

	// The tenant, its tokenize limit, the application, a card to
	// reference and the proxy.
	ct := s.createTenant("Memory")
	if out, errOut, err := s.runCLI("vault", "tenant", "quotas", ct.Tenant.ID, "--tokenize-limit", strconv.Itoa(memBatch), "--address", s.adminAddr); err != nil {
		t.Fatalf("caddy vault tenant quotas: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	_, appKey, _ := s.createApp(ct.Key, map[string]any{"name": "memory", "type": "private", "rules": []map[string]any{
		{"priority": 1, "container": "/", "transform": "reveal", "permissions": []string{"token:create", "token:use"}}}})
	cardID := createToken(t, s, appKey, fmt.Sprintf(`{"type":"card","data":{"number":%q,"expiration_month":12,"expiration_year":2031}}`, loadPANs[0]))
	_, proxyKey := createProxy(t, s, ct.Key, map[string]any{"name": "memory destination", "destination_url": dest.url})
	proxyCase := &loadCase{
		name:   "vault /proxy 1KB 1 ref",
		method: http.MethodPost,
		urls:   []string{s.baseURL + "/proxy/v1/charges"},
		body:   proxyBody(t, 1024, []string{cardID}),
		header: http.Header{
			"Svc-Api-Key":   {appKey},
			"Svc-Proxy-Key": {proxyKey},
			"Content-Type":  {"application/json"},
			"X-Load-Path":   {"vault"},
			"X-Load-Refs":   {"1"},
		},
	}
	setupClient := &http.Client{Timeout: requestTimeout}
	if status, body, err := loadOnce(setupClient, proxyCase, 0); err != nil || status != http.StatusOK {
		t.Fatalf("%s: status %d, error %v; body: %.300s", proxyCase.name, status, err, body)
	}

	profileDir := os.Getenv("TV_MEMORY_PROFILE")
	start := takeSnapshot(t, s, pid, 0)
	saveProfile(t, profileDir, "0-start", start)
	fmt.Printf("at start: %s\n", start.line())

	// 1. The load.
	fmt.Printf("\nloading %d tokens: POST /tokenize with %d strings each, %d clients, limit %v\n", n, memBatch, memLoadClients, memLoadLimit)
	loadPeak := peakPoller(s, pid)
	ld := loadTokens(t, s, pid, appKey, n)
	ld.peak = loadPeak()
	fmt.Printf("loaded %d tokens in %v: %.0f tokens/s, %d requests failed\n", ld.tokens, ld.took.Round(time.Second), ld.rate(), ld.failed)
	for _, e := range ld.errs {
		fmt.Printf("  error: %s\n", e)
	}
	fmt.Printf("peak during the load: %s\n", ld.peak)

	// 2. After the load.
	afterLoad, settled, quiet := settle(t, s, pid, 0)
	afterLoad.at = 0 // the proxy run's first sample
	saveProfile(t, profileDir, "1-loaded", afterLoad)
	loadedNote := settleNote(settled, quiet)
	storage := storageSizes(s.opts.Storage)
	fmt.Printf("after the load (%s): %s\nstorage: %s\n", loadedNote, afterLoad.line(), storage)

	// 3. The proxy run, sampled.
	fmt.Printf("\nproxy run: %s, %d connections, %v, a sample every %v (HeapInuse as it is, then a forced GC)\n",
		proxyCase.name, memProxyConns, memProxyRun, memSampleEvery)
	samples := []memSnapshot{afterLoad}
	fmt.Printf("  %s\n", samples[0].sampleLine())
	proxyBegan := time.Now()
	stop := make(chan struct{})
	var sampled sync.WaitGroup
	sampled.Add(1)
	go func() {
		defer sampled.Done()
		tick := time.NewTicker(memSampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				sn := takeSnapshot(t, s, pid, time.Since(proxyBegan))
				fmt.Printf("  %s\n", sn.sampleLine())
				saveProfile(t, profileDir, fmt.Sprintf("2-proxy-%02.0fs", sn.at.Seconds()), sn)
				samples = append(samples, sn) // read after sampled.Wait
			}
		}
	}()
	proxyPeakStop := peakPoller(s, pid)
	res := runLoad(proxyCase, memProxyConns, memProxyRun, pid)
	proxyPeak := proxyPeakStop()
	close(stop)
	sampled.Wait()
	last, settledAfter, quietAfter := settle(t, s, pid, time.Since(proxyBegan))
	fmt.Printf("  %s (after the run: %s)\n", last.sampleLine(), settleNote(settledAfter, quietAfter))
	saveProfile(t, profileDir, "3-after-proxy", last)
	samples = append(samples, last)
	p50, p99 := percentiles(res.lat)
	fmt.Printf("peak during the proxy run: %s\n", proxyPeak)
	fmt.Printf("proxy: %d requests, %.0f req/s, p50 %.2f ms, p99 %.2f ms, %d failed\n", res.ok, res.rate(), ms(p50), ms(p99), res.failed)
	for _, k := range sortedKeys(res.errs) {
		fmt.Printf("  %6d × %s\n", res.errs[k], k)
	}

	// 4. The summary. What must stay flat is the live heap less Badger's
	// table-building buffers, which a flush or compaction holds while it
	// runs and Badger's allocator pool keeps for a few seconds after
	// (tableBuilderBytes). The block cache is not in the heap: tables are
	// uncompressed, so a cached block points into its memory-mapped file.
	first := samples[0]
	heapGrowth := int64(last.heap.HeapAlloc) - int64(first.heap.HeapAlloc)
	growth := heapGrowth - (last.builders - first.builders)
	var sb strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&sb, format+"\n", args...) }
	w("---- memory report (TV_MEMORY_TOKENS=%d, caches: %s) ----", n, cacheDesc)
	w("%s", strings.ReplaceAll(loadEnvironment(), "\n", "; "))
	w("load:      %d small tokens (type token, 13-byte strings) by POST /tokenize of %d, %d clients, sync_writes on:", ld.tokens, memBatch, memLoadClients)
	w("           %v, %.0f tokens/s, %d failed requests", ld.took.Round(time.Second), ld.rate(), ld.failed)
	w("           peak during the load: %s", ld.peak)
	w("storage:   %s", storage)
	w("at start:  %s", start.line())
	w("loaded:    %s", afterLoad.line())
	w("           (snapshot %s)", loadedNote)
	w("           resident by mapping: %s", formatMapped(afterLoad.mapped))
	w("proxy run: %v, %d connections, 1 KB body, 1 reference: %d requests, %.0f req/s, p50 %.2f ms, p99 %.2f ms, %d failed",
		memProxyRun, memProxyConns, res.ok, res.rate(), ms(p50), ms(p99), res.failed)
	w("samples (live heap after a forced GC; in use before it; RSS):")
	for _, sn := range samples {
		w("  %s", sn.sampleLine())
	}
	w("peak during the run: %s", proxyPeak)
	w("growth over the run: live heap %+.1f MiB, of it Badger's table-building buffers %+.1f MiB (from %.1f to %.1f), the rest %+.1f MiB (bound %d MiB); HeapInuse %+.1f MiB, RSS %+.1f MiB (anon %+.1f, file %+.1f)",
		float64(heapGrowth)/mib, float64(last.builders-first.builders)/mib, float64(first.builders)/mib, float64(last.builders)/mib,
		float64(growth)/mib, memHeapBound/mib, (float64(last.inuse)-float64(first.inuse))/mib,
		float64(last.rss-first.rss)/mib, float64(last.rssAnon-first.rssAnon)/mib, float64(last.rssFile-first.rssFile)/mib)
	w("after:     %s", last.line())
	w("           (snapshot %s)", settleNote(settledAfter, quietAfter))
	w("           resident by mapping: %s", formatMapped(last.mapped))
	w("time:      load %v, proxy %v, total %v (with setup, without the build)",
		ld.took.Round(time.Second), memProxyRun, time.Since(began).Round(time.Second))
	w("caddy log: %s", summarizeLog(s.stderr()))
	fmt.Printf("\n%s", sb.String())

	s.stopClean()
	if ld.failed > 0 {
		t.Errorf("%d POST /tokenize requests failed during the load", ld.failed)
	}
	if ld.tokens < n {
		t.Errorf("loaded %d of %d tokens within %v", ld.tokens, n, memLoadLimit)
	}
	if res.failed > 0 {
		t.Errorf("%d proxy requests failed", res.failed)
	}
	if dest.failed() > 0 {
		t.Errorf("the destination refused %d requests whose bodies were not as expected", dest.failed())
	}
	for _, sn := range samples {
		if sn.fetchErr != nil {
			t.Errorf("sample at %v: %v", sn.at, sn.fetchErr)
		}
	}
	if growth > memHeapBound {
		t.Errorf("the live heap grew by %.1f MiB over the %v proxy run (from %.1f to %.1f MiB), %.1f MiB of it outside Badger's table-building buffers, more than %d MiB",
			float64(heapGrowth)/mib, memProxyRun, float64(first.heap.HeapAlloc)/mib, float64(last.heap.HeapAlloc)/mib, float64(growth)/mib, memHeapBound/mib)
	}
}

// memLoad is the outcome of the load.
type memLoad struct {
	tokens int
	failed int
	took   time.Duration
	errs   []string // the first few
	peak   memPeak
}

func (l memLoad) rate() float64 {
	if l.took <= 0 {
		return 0
	}
	return float64(l.tokens) / l.took.Seconds()
}

// loadTokens creates n tokens with POST /tokenize batches from
// memLoadClients connections; it stops at n, after memLoadLimit, or after
// memMaxLoadErrors failed requests.
func loadTokens(t *testing.T, s *server, pid int, key string, n int) memLoad {
	t.Helper()
	batches := (n + memBatch - 1) / memBatch
	var (
		next    atomic.Int64 // the next batch to send
		created atomic.Int64
		failed  atomic.Int64
		mu      sync.Mutex
		errs    []string
		wg      sync.WaitGroup
	)
	began := time.Now()
	deadline := began.Add(memLoadLimit)
	var lastMark atomic.Int64 // nanoseconds since began at the last progress line
	fail := func(msg string) {
		failed.Add(1)
		mu.Lock()
		if len(errs) < 5 {
			errs = append(errs, msg)
		}
		mu.Unlock()
	}
	for c := 0; c < memLoadClients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{
				Proxy:               nil,
				DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
				MaxIdleConnsPerHost: 1,
				IdleConnTimeout:     30 * time.Second,
				DisableCompression:  true,
			}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: loadReqTimeout}
			var body bytes.Buffer
			for time.Now().Before(deadline) && failed.Load() < memMaxLoadErrors {
				b := int(next.Add(1) - 1)
				if b >= batches {
					return
				}
				first, count := b*memBatch, min(memBatch, n-b*memBatch)
				body.Reset()
				body.WriteByte('[')
				for i := 0; i < count; i++ {
					if i > 0 {
						body.WriteByte(',')
					}
					fmt.Fprintf(&body, `"mem-%09d"`, first+i)
				}
				body.WriteByte(']')
				req, err := http.NewRequest(http.MethodPost, s.baseURL+"/tokenize", bytes.NewReader(body.Bytes()))
				if err != nil {
					fail(err.Error())
					continue
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("SVC-API-KEY", key)
				resp, err := client.Do(req)
				if err != nil {
					fail("transport: " + err.Error())
					continue
				}
				raw, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				var ids []string
				switch {
				case err != nil:
					fail("reading the answer: " + err.Error())
					continue
				case resp.StatusCode != http.StatusOK:
					fail(fmt.Sprintf("status %d: %.200s", resp.StatusCode, bytes.TrimSpace(raw)))
					continue
				case json.Unmarshal(raw, &ids) != nil || len(ids) != count || ids[0] == "":
					fail(fmt.Sprintf("want %d token ids: %.200s", count, raw))
					continue
				}
				total := created.Add(int64(count))
				if step := int64(min(memProgressEvery, max(memBatch, n/10))); (total-int64(count))/step != total/step {
					now := time.Since(began)
					prev := time.Duration(lastMark.Swap(int64(now)))
					rss := procStatusBytes(pid, "VmRSS")
					st, _ := fetchMemStats(s)
					fmt.Printf("  %9d tokens  %5.0fs  %6.0f tokens/s overall, %6.0f in the last %d  RSS %6.0f MiB (file %5.0f)  HeapInuse %6.0f MiB\n",
						total, now.Seconds(), float64(total)/now.Seconds(), float64(step)/(now-prev).Seconds(), step,
						float64(rss)/mib, float64(procStatusBytes(pid, "RssFile"))/mib, float64(st.HeapInuse)/mib)
				}
			}
		}()
	}
	wg.Wait()
	return memLoad{tokens: int(created.Load()), failed: int(failed.Load()), took: time.Since(began), errs: errs}
}

// settle takes a snapshot every memSettleEvery until the storage is
// quiet, or until memSettleMax has passed, and returns the snapshot with
// the smallest live heap, the time it took and whether it ended quiet.
// Quiet: between two snapshots the process used less than memQuietCPU of
// one CPU and none of its threads was seen waiting on the disk (state D:
// Badger syncs each table it flushes or compacts, holding the table's
// buffers, without using CPU), the two live heaps are within
// memSettleDelta, and the later holds no table-building buffers (Badger's
// pool frees them one per two idle seconds). A flush or compaction in
// progress, or just ended, holds hundreds of MiB that are not a leak.
func settle(t *testing.T, s *server, pid int, at time.Duration) (low memSnapshot, took time.Duration, quiet bool) {
	t.Helper()
	began := time.Now()
	prev := takeSnapshot(t, s, pid, at)
	low = prev
	for !quiet && time.Since(began) < memSettleMax {
		cpu0, t0 := procCPUTicks(pid), time.Now()
		diskWait := false
		for time.Since(t0) < memSettleEvery {
			time.Sleep(100 * time.Millisecond)
			diskWait = diskWait || waitingOnDisk(pid)
		}
		busy := float64(procCPUTicks(pid)-cpu0) / clockTicksPerSec / time.Since(t0).Seconds()
		sn := takeSnapshot(t, s, pid, at+time.Since(began))
		d := int64(sn.heap.HeapAlloc) - int64(prev.heap.HeapAlloc)
		quiet = busy < memQuietCPU && !diskWait && d < memSettleDelta && d > -memSettleDelta && sn.builders == 0
		if sn.heap.HeapAlloc <= low.heap.HeapAlloc {
			low = sn
		}
		prev = sn
	}
	return low, time.Since(began), quiet
}

// waitingOnDisk reports whether a thread of the process is in
// uninterruptible sleep (state D), as while it waits for a sync.
func waitingOnDisk(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false
	}
	for _, task := range tasks {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			continue
		}
		// the state follows the parenthesized command name
		if i := bytes.LastIndexByte(raw, ')'); i >= 0 && i+2 < len(raw) && raw[i+2] == 'D' {
			return true
		}
	}
	return false
}

// settleNote says how settle ended.
func settleNote(took time.Duration, quiet bool) string {
	if quiet {
		return fmt.Sprintf("quiet after %v", took.Round(time.Second))
	}
	return fmt.Sprintf("not quiet after %v: the smallest live heap seen (a flush or compaction may hold buffers)", took.Round(time.Second))
}

// takeSnapshot reads the process's memory: HeapInuse as it is, then,
// after a forced GC, the Go heap, the RSS and the resident mappings.
func takeSnapshot(t *testing.T, s *server, pid int, at time.Duration) memSnapshot {
	t.Helper()
	sn := memSnapshot{at: at}
	before, err := fetchMemStats(s)
	if err != nil {
		sn.fetchErr = err
	}
	sn.inuse = before.HeapInuse
	t0 := time.Now()
	if sn.profile, err = forceGC(s); err != nil && sn.fetchErr == nil {
		sn.fetchErr = err
	}
	sn.gcTook = time.Since(t0)
	if len(sn.profile) > 0 {
		if sn.builders, err = tableBuilderBytes(sn.profile); err != nil && sn.fetchErr == nil {
			sn.fetchErr = err
		}
	}
	if sn.heap, err = fetchMemStats(s); err != nil && sn.fetchErr == nil {
		sn.fetchErr = err
	}
	sn.rss = procStatusBytes(pid, "VmRSS")
	sn.rssAnon = procStatusBytes(pid, "RssAnon")
	sn.rssFile = procStatusBytes(pid, "RssFile")
	sn.hwm = procStatusBytes(pid, "VmHWM")
	sn.threads = procStatus(pid, "Threads")
	sn.mapped = residentMappings(pid)
	return sn
}

// line is a snapshot in one line.
func (sn memSnapshot) line() string {
	h := sn.heap
	return fmt.Sprintf("RSS %.0f MiB (anon %.0f, file %.0f; peak %.0f), Go heap live %.1f MiB (HeapInuse %.1f, HeapSys %.1f, released %.1f), Go Sys %.1f MiB, stacks %.1f MiB, %s threads, %d GCs",
		float64(sn.rss)/mib, float64(sn.rssAnon)/mib, float64(sn.rssFile)/mib, float64(sn.hwm)/mib,
		float64(h.HeapAlloc)/mib, float64(h.HeapInuse)/mib, float64(h.HeapSys)/mib, float64(h.HeapReleased)/mib,
		float64(h.Sys)/mib, float64(h.StackInuse)/mib, sn.threads, h.NumGC)
}

// sampleLine is a snapshot as one sample of the proxy run.
func (sn memSnapshot) sampleLine() string {
	return fmt.Sprintf("t=%3.0fs  live heap %7.1f MiB (table building %6.1f)  HeapInuse %7.1f MiB  RSS %7.1f MiB (anon %7.1f, file %7.1f)  forced GC %4.0f ms",
		sn.at.Seconds(), float64(sn.heap.HeapAlloc)/mib, float64(sn.builders)/mib, float64(sn.inuse)/mib,
		float64(sn.rss)/mib, float64(sn.rssAnon)/mib, float64(sn.rssFile)/mib, ms(sn.gcTook))
}

// fetchMemStats reads the runtime's memory statistics from the admin
// API's /debug/vars.
func fetchMemStats(s *server) (memStats, error) {
	r, err := doRequest(s.client, http.MethodGet, "http://"+s.adminAddr+"/debug/vars", "", nil)
	if err != nil {
		return memStats{}, fmt.Errorf("GET /debug/vars: %w", err)
	}
	var v struct {
		MemStats *memStats `json:"memstats"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Raw, &v) != nil || v.MemStats == nil {
		return memStats{}, fmt.Errorf("GET /debug/vars: status %d, no memstats: %.200s", r.Status, r.Raw)
	}
	return *v.MemStats, nil
}

// tableBuilderBytes sums the live bytes of a heap profile that Badger
// allocated through z.Calloc: the buffers its table builders write flushed
// memtables and compacted tables into, which it returns to a pool that
// frees one every two idle seconds. They are bounded by that pool and by
// the table sizes, but a snapshot taken during a flush or compaction, or
// just after, holds up to hundreds of MiB of them.
func tableBuilderBytes(raw []byte) (int64, error) {
	p, err := profile.Parse(bytes.NewReader(raw))
	if err != nil {
		return 0, fmt.Errorf("reading the heap profile: %w", err)
	}
	inuse := -1
	for i, st := range p.SampleType {
		if st.Type == "inuse_space" {
			inuse = i
		}
	}
	if inuse < 0 {
		return 0, fmt.Errorf("the heap profile has no inuse_space")
	}
	var total int64
	for _, s := range p.Sample {
		if sampleCalls(s, "ristretto/v2/z.Calloc") {
			total += s.Value[inuse]
		}
	}
	return total, nil
}

// sampleCalls reports whether a function whose name ends in fn is on the
// sample's stack.
func sampleCalls(s *profile.Sample, fn string) bool {
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function != nil && strings.HasSuffix(line.Function.Name, fn) {
				return true
			}
		}
	}
	return false
}

// forceGC runs a garbage collection in the Caddy process (the admin API's
// heap profile collects first when asked to: gc=1) and returns the heap
// profile it answers.
func forceGC(s *server) ([]byte, error) {
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Get("http://" + s.adminAddr + "/debug/pprof/heap?gc=1")
	if err != nil {
		return nil, fmt.Errorf("forcing a GC: %w", err)
	}
	defer resp.Body.Close()
	profile, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	if err != nil {
		return nil, fmt.Errorf("forcing a GC: GET /debug/pprof/heap?gc=1: %w", err)
	}
	return profile, nil
}

// saveProfile writes a snapshot's heap profile to dir/heap-<name>.pprof
// when dir is set (TV_MEMORY_PROFILE).
func saveProfile(t *testing.T, dir, name string, sn memSnapshot) {
	if dir == "" || len(sn.profile) == 0 {
		return
	}
	path := filepath.Join(dir, "heap-"+name+".pprof")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("writing a heap profile: %v", err)
	} else if err := os.WriteFile(path, sn.profile, 0o644); err != nil {
		t.Errorf("writing a heap profile: %v", err)
	}
}

// procStatusBytes is a "<n> kB" line of /proc/<pid>/status in bytes; 0
// when it cannot be read.
func procStatusBytes(pid int, name string) int64 {
	v := strings.TrimSuffix(procStatus(pid, name), " kB")
	kb, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0
	}
	return kb << 10
}

// residentMappings sums the resident size (Rss of /proc/<pid>/smaps) of
// the process's mappings by kind: Badger's table (.sst), value log
// (.vlog) and memtable (.mem) files, other files, and anonymous memory.
func residentMappings(pid int) map[string]int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]int64{}
	kind := "anonymous"
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if strings.HasSuffix(fields[0], ":") {
			if fields[0] == "Rss:" && len(fields) >= 2 {
				kb, _ := strconv.ParseInt(fields[1], 10, 64)
				out[kind] += kb << 10
			}
			continue
		}
		// a mapping's header: address perms offset dev inode [path]
		kind = "anonymous"
		if len(fields) >= 6 {
			path := strings.Join(fields[5:], " ")
			switch {
			case strings.HasSuffix(path, ".sst"):
				kind = "sst"
			case strings.HasSuffix(path, ".vlog"):
				kind = "vlog"
			case strings.HasSuffix(path, ".mem"):
				kind = "mem"
			case strings.HasPrefix(path, "/"):
				kind = "other files"
			}
		}
	}
	return out
}

// formatMapped prints residentMappings' sums in MiB, in a fixed order.
func formatMapped(m map[string]int64) string {
	if m == nil {
		return "?"
	}
	var parts []string
	for _, k := range []string{"anonymous", "sst", "vlog", "mem", "other files"} {
		parts = append(parts, fmt.Sprintf("%s %.0f MiB", k, float64(m[k])/mib))
	}
	return strings.Join(parts, ", ")
}

// storageSizes describes the storage directory: its space on disk (du)
// and, by kind of file, the count, the length and the allocated space
// (Badger preallocates sparse files).
func storageSizes(dir string) string {
	type agg struct {
		files          int
		length, onDisk int64
	}
	kinds := map[string]*agg{}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		k := filepath.Ext(path)
		if k == "" {
			k = "other"
		}
		a := kinds[k]
		if a == nil {
			a = &agg{}
			kinds[k] = a
		}
		a.files++
		a.length += info.Size()
		a.onDisk += allocatedBytes(info)
		return nil
	})
	var names []string
	for k := range kinds {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(kinds[b].onDisk, kinds[a].onDisk) })
	var parts []string
	for _, k := range names {
		a := kinds[k]
		if a.onDisk < 1<<20 && a.length < 1<<20 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d files %.0f MiB on disk (length %.0f MiB)", k, a.files, float64(a.onDisk)/mib, float64(a.length)/mib))
	}
	return fmt.Sprintf("%s on disk (du): %s", dirSize(dir), strings.Join(parts, "; "))
}

// allocatedBytes is the space a file takes on disk; its length when that
// is not known.
func allocatedBytes(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return info.Size()
}

// memPeak is the highest RSS and HeapInuse a peakPoller saw, and when.
type memPeak struct {
	rss, rssAnon, rssFile int64
	rssAt                 time.Duration
	inuse                 uint64
	inuseAt               time.Duration
	polls                 int
}

func (p memPeak) String() string {
	return fmt.Sprintf("RSS %.0f MiB at %.0fs (anon %.0f, file %.0f), HeapInuse %.0f MiB at %.0fs (%d polls every %v, no forced GC)",
		float64(p.rss)/mib, p.rssAt.Seconds(), float64(p.rssAnon)/mib, float64(p.rssFile)/mib,
		float64(p.inuse)/mib, p.inuseAt.Seconds(), p.polls, memPeakEvery)
}

// peakPoller reads the RSS and HeapInuse every memPeakEvery, without
// forcing a GC, until the returned function is called; that function
// returns the highest values seen. Peaks between two snapshots, such as
// a memtable flush, show here.
func peakPoller(s *server, pid int) func() memPeak {
	stop := make(chan struct{})
	result := make(chan memPeak, 1)
	began := time.Now()
	go func() {
		var p memPeak
		tick := time.NewTicker(memPeakEvery)
		defer tick.Stop()
		for {
			at := time.Since(began)
			if rss := procStatusBytes(pid, "VmRSS"); rss > p.rss {
				p.rss, p.rssAt = rss, at
				p.rssAnon, p.rssFile = procStatusBytes(pid, "RssAnon"), procStatusBytes(pid, "RssFile")
			}
			if st, err := fetchMemStats(s); err == nil && st.HeapInuse > p.inuse {
				p.inuse, p.inuseAt = st.HeapInuse, at
			}
			p.polls++
			select {
			case <-stop:
				result <- p
				return
			case <-tick.C:
			}
		}
	}()
	return func() memPeak {
		close(stop)
		return <-result
	}
}

// tableBuilderBytes counts the samples with z.Calloc on their stack and
// no others.
func TestTableBuilderBytes(t *testing.T) {
	fn := func(id uint64, name string) *profile.Function { return &profile.Function{ID: id, Name: name} }
	calloc, arena, build := fn(1, "github.com/dgraph-io/ristretto/v2/z.Calloc"), fn(2, "github.com/dgraph-io/badger/v4/skl.newArena"), fn(3, "github.com/dgraph-io/badger/v4/table.NewTableBuilder")
	loc := func(id uint64, f *profile.Function) *profile.Location {
		return &profile.Location{ID: id, Line: []profile.Line{{Function: f}}}
	}
	lCalloc, lArena, lBuild := loc(1, calloc), loc(2, arena), loc(3, build)
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}, {Type: "inuse_space", Unit: "bytes"}},
		Sample: []*profile.Sample{
			{Location: []*profile.Location{lCalloc, lBuild}, Value: []int64{900, 100}},
			{Location: []*profile.Location{lArena}, Value: []int64{900, 1000}},
			{Location: []*profile.Location{lCalloc}, Value: []int64{900, 20}},
		},
		Location: []*profile.Location{lCalloc, lArena, lBuild},
		Function: []*profile.Function{calloc, arena, build},
	}
	var raw bytes.Buffer
	if err := p.Write(&raw); err != nil {
		t.Fatal(err)
	}
	if got, err := tableBuilderBytes(raw.Bytes()); err != nil || got != 120 {
		t.Errorf("tableBuilderBytes = %d, %v; want 120", got, err)
	}
	if _, err := tableBuilderBytes([]byte("not a profile")); err == nil {
		t.Error("tableBuilderBytes accepted bytes that are not a profile")
	}
}

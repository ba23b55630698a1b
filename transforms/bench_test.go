package transforms

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dop251/goja"
)

// trivialJob is a request transform that masks a card number: the work of
// a typical proxy transform, small next to the cost of running it.
func trivialJob(realm RealmScope) Job {
	return Job{Kind: JobRequest, Realm: realm,
		Args: json.RawMessage(`{"body":{"card":{"number":"4242424242424242"}},"headers":{"Content-Type":"application/json"}}`),
		Code: `module.exports = async function (req) { const b = req.args.body; b.card.number = b.card.number.slice(-4); return { body: b, headers: req.args.headers }; };`}
}

// BenchmarkPoolTrivialTransform measures runs per second through the pool
// (pipe round trip, realm, run, result check), with 1 and 4 callers at
// once, in a fresh realm per run (no RealmScope) and in warm realms (one
// scope: after the first run of each worker, every run reuses a realm).
// cpu-µs/op is the CPU time of the whole run, parent and workers (the
// benchmark's own goroutines included), per job: what bounds throughput
// on a busy machine.
func BenchmarkPoolTrivialTransform(b *testing.B) {
	for _, realm := range []struct {
		name  string
		scope RealmScope
	}{{"fresh", RealmScope{}}, {"warm", RealmScope{Tenant: "t1", Principal: "app1"}}} {
		for _, conc := range []int{1, 4} {
			b.Run(fmt.Sprintf("realm=%s/concurrent=%d", realm.name, conc), func(b *testing.B) {
				// one tenant on the whole pool: the pool's own throughput
				p := newTestPool(b, func(o *Options) { o.MinWorkers, o.MaxWorkers, o.MaxWorkersPerTenant = conc, conc, conc })
				job := trivialJob(realm.scope)
				warmUp(b, p, job, conc)
				b.ResetTimer()
				start := time.Now()
				cpu0 := cpuTime()
				var wg sync.WaitGroup
				var failed error
				var mu sync.Mutex
				for g := 0; g < conc; g++ {
					wg.Add(1)
					go func(g int) {
						defer wg.Done()
						for i := g; i < b.N; i += conc {
							if _, err := p.Run(context.Background(), job); err != nil {
								mu.Lock()
								failed = err
								mu.Unlock()
								return
							}
						}
					}(g)
				}
				wg.Wait()
				if failed != nil {
					b.Fatal(failed)
				}
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
				p.Close() // its workers' CPU time counts once they have been waited for
				b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}

// warmUp runs job 20 times on each of conc callers, so that every worker
// has started and has a realm for it.
func warmUp(b *testing.B, p *Pool, job Job, conc int) {
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				if _, err := p.Run(context.Background(), job); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// cpuTime is the CPU time (user and system) of this process and of its
// children that have ended.
func cpuTime() time.Duration {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	total := time.Duration(0)
	for _, r := range []syscall.Rusage{self, children} {
		total += time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	return total
}

// BenchmarkPoolProxyLoad is a proxy's request transform under load: 64
// callers of one tenant, 2 or 4 workers, a service client, the args of a
// proxied 1 KB JSON POST like the load benchmark's. The tenant's share is
// the whole pool, or the default half of it (what a lone tenant gets,
// its runs pipelined behind its own).
// It reports the CPU time of the parent and of the workers per run.
func BenchmarkPoolProxyLoad(b *testing.B) {
	for _, tc := range []struct{ workers, share int }{{2, 2}, {2, 1}, {4, 4}, {4, 2}} {
		b.Run(fmt.Sprintf("workers=%d/share=%d", tc.workers, tc.share), func(b *testing.B) {
			benchmarkPoolProxyLoad(b, tc.workers, tc.share)
		})
	}
}

func benchmarkPoolProxyLoad(b *testing.B, workers, share int) {
	p := newTestPool(b, func(o *Options) { o.MinWorkers, o.MaxWorkers, o.MaxWorkersPerTenant = workers, workers, share })
	job := Job{Kind: JobRequest, Svc: benchSvc{}, Realm: RealmScope{Tenant: "tenant", Principal: "app"},
		Meta: map[string]string{"tenant_id": "tenant", "entity": "proxy", "entity_id": "p1"},
		Args: json.RawMessage(`{"body":{"amount":1000,"currency":"usd","description":"load test charge","card_0":{"number":"4242424242424242","exp":"12/31"},"f0000":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz","f0001":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz","f0002":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz","f0003":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz","f0004":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz","f0005":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz","f0006":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz","f0007":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz","f0008":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz","f0009":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz","f0010":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"},"headers":{"Content-Length":"1024",` +
			`"Content-Type":"application/json","User-Agent":"Go-http-client/1.1"},"method":"POST","path":"","query":""}`),
		Code: `module.exports = async (req) => ({ body: req.args.body, headers: req.args.headers })`}
	warmUp(b, p, job, 64)
	b.ResetTimer()
	var self0, children0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children0)
	start := time.Now()
	var failed atomic.Pointer[error]
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := p.Run(context.Background(), job); err != nil {
				failed.CompareAndSwap(nil, &err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	var self1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
	p.Close()
	var children1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children1)
	cpu := func(r syscall.Rusage) int64 { return r.Utime.Nano() + r.Stime.Nano() }
	b.ReportMetric(float64(cpu(self1)-cpu(self0))/1e3/float64(b.N), "parent-cpu-µs/op")
	b.ReportMetric(float64(cpu(children1)-cpu(children0))/1e3/float64(b.N), "worker-cpu-µs/op")
}

type benchSvc struct{}

func (benchSvc) Call(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{}`), nil
}

// BenchmarkPoolLatency measures one run when its worker had time to set
// up the next realm in advance (a 10 ms pause, not timed, between runs):
// the latency of a request at moderate load, fresh and warm.
func BenchmarkPoolLatency(b *testing.B) {
	for _, realm := range []struct {
		name  string
		scope RealmScope
	}{{"fresh", RealmScope{}}, {"warm", RealmScope{Tenant: "t1"}}} {
		b.Run("realm="+realm.name, func(b *testing.B) {
			p := newTestPool(b, func(o *Options) { o.MinWorkers, o.MaxWorkers = 1, 1 })
			job := Job{Kind: JobRequest, Args: json.RawMessage(`{"body":{"a":1},"headers":{}}`), Realm: realm.scope,
				Code: `module.exports = async function (req) { return { body: req.args.body, headers: req.args.headers }; };`}
			if _, err := p.Run(context.Background(), job); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				time.Sleep(10 * time.Millisecond)
				b.StartTimer()
				if _, err := p.Run(context.Background(), job); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRuntimeSetup measures, in process, the per-run cost of a fresh
// runtime (goja.New, Buffer and URL, bootstrap: taming, freezing the
// intrinsics), of one set up for reuse (everything reachable frozen), and
// of a run in a warm realm (start, run, reset).
func BenchmarkRuntimeSetup(b *testing.B) {
	cfg := &runtimeConfig{maxCallStackSize: 1024, maxLogLines: 10, maxSvcCalls: 10}
	cache := newModuleFileCache(4)
	emit := func(*frame) error { return nil }
	b.Run("bare goja.New", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			vm := goja.New()
			if _, err := vm.RunString(`1`); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, deep := range []bool{false, true} {
		b.Run(fmt.Sprintf("fresh frozen runtime/deep=%v", deep), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := newJobRuntime(cfg, 1, emit, cache, deep); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	prog, cerr := compileCode("t.js", `module.exports = (req) => ({ body: req.args.body, headers: {} })`, nil)
	if cerr != nil {
		b.Fatal(cerr)
	}
	j := &jobFrame{Kind: JobRequest, Args: json.RawMessage(`{"body":{"a":1}}`)}
	stop := make(chan struct{})
	sig := jobSignals{stop: stop, gone: stop, reason: func() string { return "" }}
	b.Run("fresh runtime and a trivial run", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			rt, err := newJobRuntime(cfg, 1, emit, cache, false)
			if err != nil {
				b.Fatal(err)
			}
			rt.startRun(1)
			if o := rt.run(prog, j, sig); o.err != nil {
				b.Fatal(o.err.Message)
			}
		}
	})
	b.Run("warm realm: a trivial run", func(b *testing.B) {
		rt, err := newJobRuntime(cfg, 1, emit, cache, true)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < b.N; i++ {
			rt.startRun(uint64(i + 1))
			if o := rt.run(prog, j, sig); o.err != nil || o.discard {
				b.Fatal(o.err, o.discard)
			}
			if !rt.finishRun() {
				b.Fatal("the realm is not clean after a trivial run")
			}
		}
	})
}

// BenchmarkOperatorModuleRequire measures a run that requires an operator
// package of three files (main, a relative require, a JSON file): the
// worker asks the parent for each file (module_files.go).
func BenchmarkOperatorModuleRequire(b *testing.B) {
	dir := b.TempDir()
	for name, content := range map[string]string{
		"leftpad/package.json": `{"main": "lib/index.js"}`,
		"leftpad/lib/index.js": `const util = require('./util'); const data = require('../data.json'); module.exports = (s, n) => util.pad(String(s), n, data.char);`,
		"leftpad/lib/util.js":  `exports.pad = (s, n, c) => c.repeat(Math.max(0, n - s.length)) + s;`,
		"leftpad/data.json":    `{"char": "0"}`,
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	p := newTestPool(b, func(o *Options) {
		o.MinWorkers, o.MaxWorkers, o.ModulesDir, o.AllowModules = 1, 1, dir, []string{"leftpad"}
	})
	job := Job{Kind: JobReactor, Realm: RealmScope{Tenant: "t1", Principal: "app1"},
		Code: `const lp = require('leftpad'); module.exports = () => ({ raw: lp(7, 3) })`}
	if _, err := p.Run(context.Background(), job); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.Run(context.Background(), job); err != nil {
			b.Fatal(err)
		}
	}
}

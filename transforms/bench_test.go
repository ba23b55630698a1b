package transforms

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dop251/goja"
)

// BenchmarkPoolTrivialTransform measures runs per second through the pool
// (pipe round trip, fresh runtime, freeze, run, result check), with 1 and
// 4 callers at once.
func BenchmarkPoolTrivialTransform(b *testing.B) {
	for _, conc := range []int{1, 4} {
		b.Run(fmt.Sprintf("concurrent=%d", conc), func(b *testing.B) {
			p := newTestPool(b, func(o *Options) { o.MinWorkers, o.MaxWorkers = conc, conc })
			args := json.RawMessage(`{"body":{"card":{"number":"4242424242424242"}},"headers":{"Content-Type":"application/json"}}`)
			job := Job{Kind: JobRequest, Args: args,
				Code: `module.exports = async function (req) { const b = req.args.body; b.card.number = b.card.number.slice(-4); return { body: b, headers: req.args.headers }; };`}
			if _, err := p.Run(context.Background(), job); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
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
		})
	}
}

// BenchmarkPoolLatency measures one run when its worker had time to set
// up the next realm in advance (a 10 ms pause, not timed, between runs):
// the latency of a request at moderate load.
func BenchmarkPoolLatency(b *testing.B) {
	p := newTestPool(b, func(o *Options) { o.MinWorkers, o.MaxWorkers = 1, 1 })
	job := Job{Kind: JobRequest, Args: json.RawMessage(`{"body":{"a":1},"headers":{}}`),
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
}

// BenchmarkRuntimeSetup measures the per-run cost of a fresh runtime:
// goja.New, Buffer and URL, bootstrap (taming, freezing the intrinsics).
func BenchmarkRuntimeSetup(b *testing.B) {
	cfg := &runtimeConfig{maxCallStackSize: 1024, maxLogLines: 10, maxSvcCalls: 10}
	cache := newLRU[moduleKey, *goja.Program](4)
	emit := func(*frame) error { return nil }
	b.Run("bare goja.New", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			vm := goja.New()
			if _, err := vm.RunString(`1`); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fresh frozen runtime", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := newJobRuntime(cfg, 1, emit, cache); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fresh runtime and a trivial run", func(b *testing.B) {
		prog, cerr := compileCode("t.js", `module.exports = (req) => ({ body: req.args.body, headers: {} })`, nil)
		if cerr != nil {
			b.Fatal(cerr)
		}
		j := &jobFrame{Kind: JobRequest, Args: json.RawMessage(`{"body":{"a":1}}`)}
		stop := make(chan struct{})
		sig := jobSignals{stop: stop, gone: stop, reason: func() string { return "" }}
		for i := 0; i < b.N; i++ {
			rt, err := newJobRuntime(cfg, 1, emit, cache)
			if err != nil {
				b.Fatal(err)
			}
			if o := rt.run(prog, j, sig); o.err != nil {
				b.Fatal(o.err.Message)
			}
		}
	})
}

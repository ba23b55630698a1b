package caddymodule

import (
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenvault/tokenvault/internal/version"
	"github.com/tokenvault/tokenvault/transforms"
	"github.com/tokenvault/tokenvault/vaultstore"
)

// The vault's metrics live for the process, across config reloads, and
// are registered in each config's registry, which Caddy serves on its
// admin endpoint's /metrics and through the metrics handler. No label
// carries tenant data; tenant ids appear only when the operator sets
// metrics_per_tenant.
var vaultMetrics = struct {
	requests          *prometheus.CounterVec
	requestTime       *prometheus.HistogramVec
	tokens            *prometheus.CounterVec
	detokenized       prometheus.Counter
	destinationTime   prometheus.Histogram
	destinationStatus *prometheus.CounterVec
	rateLimited       *prometheus.CounterVec
	transformRuns     *prometheus.CounterVec
	transformFailures *prometheus.CounterVec
}{
	requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "tokenvault", Name: "requests_total",
		Help: "API and proxy requests by operation and status code.",
	}, []string{"operation", "code", "tenant"}),
	requestTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "tokenvault", Name: "request_duration_seconds",
		Help:    "Time the vault_api handler took to answer, by operation (a proxy's includes its destination's).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
	}, []string{"operation"}),
	tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "tokenvault", Name: "tokens_total",
		Help: "Tokens created, deleted and expired, by token type.",
	}, []string{"event", "type"}),
	detokenized: prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "tokenvault", Name: "detokenized_tokens_total",
		Help: "Tokens detokenized (each distinct token of a request counts once).",
	}),
	destinationTime: prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "tokenvault", Name: "proxy_destination_seconds",
		Help:    "Time from sending a proxied request to the destination's response headers.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
	}),
	destinationStatus: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "tokenvault", Name: "proxy_destination_responses_total",
		Help: "Destination responses by status class (1xx..5xx), and failures to get one.",
	}, []string{"class"}),
	rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "tokenvault", Name: "rate_limited_total",
		Help: "Requests refused by a rate limit, by the limit's scope.",
	}, []string{"scope"}),
	transformRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "tokenvault", Name: "transform_runs_total",
		Help: "Runs of tenant code, by kind (request, response, reactor).",
	}, []string{"kind"}),
	transformFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "tokenvault", Name: "transform_failures_total",
		Help: "Failed runs of tenant code, by cause (timeout, memory, crash, busy, runtime, ...).",
	}, []string{"cause"}),
}

// rateLimitRedisMetrics say whether the rate limits are shared through
// Redis. They are registered only when rate_limit_redis is configured, so a
// single node does not report a Redis that is "down".
var rateLimitRedisMetrics = struct {
	up        prometheus.Gauge
	fallbacks prometheus.Counter
}{
	up: prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "tokenvault", Name: "ratelimit_redis_up",
		Help: "1 while rate limits are decided in the cluster's Redis, 0 while this node decides them alone because Redis does not answer.",
	}),
	fallbacks: prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "tokenvault", Name: "ratelimit_fallback_decisions_total",
		Help: "Rate limit decisions this node made with its local limiter because Redis did not answer.",
	}),
}

// buildInfo is 1, labelled with Tokenvault's version.
var buildInfo = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
	Namespace: "tokenvault", Name: "build_info",
	Help:        "Always 1; the version label is Tokenvault's release.",
	ConstLabels: prometheus.Labels{"version": version.Version},
}, func() float64 { return 1 })

// lastBackup is when the admin API last sent a backup whole (GET
// /vault/backup, behind `caddy vault backup`), in Unix milliseconds; 0
// before the first one of this process.
var lastBackup atomic.Int64

// backupCollector reports lastBackup once there is one: a process that
// has sent no backup reports nothing rather than 1970, so an alert on the
// backup's age reads the last one across restarts (max_over_time).
type backupCollector struct{}

var backupDesc = prometheus.NewDesc("tokenvault_backup_last_success_timestamp_seconds",
	"Unix time of the last backup this process sent whole through the admin API (caddy vault backup); absent before the first.", nil, nil)

// Describe implements prometheus.Collector.
func (backupCollector) Describe(ch chan<- *prometheus.Desc) { ch <- backupDesc }

// Collect implements prometheus.Collector.
func (backupCollector) Collect(ch chan<- prometheus.Metric) {
	if ms := lastBackup.Load(); ms != 0 {
		ch <- prometheus.MustNewConstMetric(backupDesc, prometheus.GaugeValue, float64(ms)/1000)
	}
}

// registerRateLimitRedisMetrics adds the Redis rate limit metrics to a
// config's registry.
func registerRateLimitRedisMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{rateLimitRedisMetrics.up, rateLimitRedisMetrics.fallbacks} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return err
			}
		}
	}
	return nil
}

// registerMetrics adds the vault's collectors and the store's to a
// config's registry.
func registerMetrics(reg prometheus.Registerer, store *vaultstore.Store, workers *transforms.Pool) error {
	collectors := []prometheus.Collector{
		vaultMetrics.requests, vaultMetrics.requestTime, vaultMetrics.tokens, vaultMetrics.detokenized,
		vaultMetrics.destinationTime, vaultMetrics.destinationStatus, vaultMetrics.rateLimited,
		vaultMetrics.transformRuns, vaultMetrics.transformFailures,
		storeCollector{store},
		poolCollector{workers},
		backupCollector{}, buildInfo,
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return err
			}
		}
	}
	return nil
}

// countStoreEvent turns a store event into metrics.
func countStoreEvent(e vaultstore.Event) {
	switch e.Kind {
	case vaultstore.EventTokenCreated:
		vaultMetrics.tokens.WithLabelValues("created", e.TokenType).Add(float64(e.Count))
	case vaultstore.EventTokenDeleted:
		vaultMetrics.tokens.WithLabelValues("deleted", e.TokenType).Add(float64(e.Count))
	case vaultstore.EventTokenExpired:
		vaultMetrics.tokens.WithLabelValues("expired", e.TokenType).Add(float64(e.Count))
	case vaultstore.EventDetokenized:
		vaultMetrics.detokenized.Add(float64(e.Count))
	}
}

// statusClass is "2xx" for 204.
func statusClass(code int) string {
	if code < 100 || code > 599 {
		return "other"
	}
	return strconv.Itoa(code/100) + "xx"
}

// storeCollector reports the store's size and garbage collection, and
// its disk's free space, on every scrape.
type storeCollector struct{ store *vaultstore.Store }

var (
	storeSizeDesc  = prometheus.NewDesc("tokenvault_store_size_bytes", "Size of the store on disk, by part (lsm: keys, vlog: values).", []string{"part"}, nil)
	storeGCDesc    = prometheus.NewDesc("tokenvault_store_gc_runs_total", "Value-log garbage collection passes that rewrote a file.", nil, nil)
	storeCacheDesc = prometheus.NewDesc("tokenvault_store_block_cache_bytes", "Bytes of table blocks the storage engine's block cache refers to (pages of the memory-mapped tables, not heap), bounded by block_cache.", nil, nil)

	diskFreeDesc     = prometheus.NewDesc("tokenvault_storage_free_bytes", "Free space on the storage's file system, for the vault.", nil, nil)
	diskMarginDesc   = prometheus.NewDesc("tokenvault_storage_margin_bytes", "Free space under which writes are refused (507): what the storage engine may write on its own, plus the read reserve.", nil, nil)
	diskRefusingDesc = prometheus.NewDesc("tokenvault_storage_writes_refused", "1 while writes are refused because the storage's file system is too full, else 0.", nil, nil)
	diskRefusedDesc  = prometheus.NewDesc("tokenvault_storage_refused_writes_total", "Writes refused because the storage's file system was too full.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- storeSizeDesc
	ch <- storeGCDesc
	ch <- storeCacheDesc
	ch <- diskFreeDesc
	ch <- diskMarginDesc
	ch <- diskRefusingDesc
	ch <- diskRefusedDesc
}

// Collect implements prometheus.Collector.
func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.store.Stats()
	ch <- prometheus.MustNewConstMetric(storeSizeDesc, prometheus.GaugeValue, float64(st.LSMBytes), "lsm")
	ch <- prometheus.MustNewConstMetric(storeSizeDesc, prometheus.GaugeValue, float64(st.VLogBytes), "vlog")
	ch <- prometheus.MustNewConstMetric(storeGCDesc, prometheus.CounterValue, float64(st.GCRuns))
	ch <- prometheus.MustNewConstMetric(storeCacheDesc, prometheus.GaugeValue, float64(st.BlockCacheHeld))
	if d, ok := c.store.Disk(); ok { // an engine on a local disk
		refusing := 0.0
		if !d.Writable {
			refusing = 1
		}
		ch <- prometheus.MustNewConstMetric(diskFreeDesc, prometheus.GaugeValue, float64(d.FreeBytes))
		ch <- prometheus.MustNewConstMetric(diskMarginDesc, prometheus.GaugeValue, float64(d.MarginBytes))
		ch <- prometheus.MustNewConstMetric(diskRefusingDesc, prometheus.GaugeValue, refusing)
		ch <- prometheus.MustNewConstMetric(diskRefusedDesc, prometheus.CounterValue, float64(d.RefusedWrites))
	}
}

// poolCollector reports the transform pool's workers and runs on every
// scrape.
type poolCollector struct{ pool *transforms.Pool }

var (
	poolWorkersDesc = prometheus.NewDesc("tokenvault_transform_workers", "Transform worker processes alive.", nil, nil)
	poolStartsDesc  = prometheus.NewDesc("tokenvault_transform_worker_starts_total", "Transform worker processes started.", nil, nil)
	poolRunsDesc    = prometheus.NewDesc("tokenvault_transform_worker_runs_total", "Runs of tenant code that reached a worker.", nil, nil)
	poolWarmDesc    = prometheus.NewDesc("tokenvault_transform_warm_runs_total", "Runs that reused a warm realm instead of building one (about 2 ms of CPU each).", nil, nil)
)

// Describe implements prometheus.Collector.
func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- poolWorkersDesc
	ch <- poolStartsDesc
	ch <- poolRunsDesc
	ch <- poolWarmDesc
}

// Collect implements prometheus.Collector.
func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.pool.Stats()
	ch <- prometheus.MustNewConstMetric(poolWorkersDesc, prometheus.GaugeValue, float64(st.Alive))
	ch <- prometheus.MustNewConstMetric(poolStartsDesc, prometheus.CounterValue, float64(st.Started))
	ch <- prometheus.MustNewConstMetric(poolRunsDesc, prometheus.CounterValue, float64(st.Runs))
	ch <- prometheus.MustNewConstMetric(poolWarmDesc, prometheus.CounterValue, float64(st.WarmRuns))
}

// statusRecorder remembers the status a handler sent.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

package caddymodule

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// Where the monitoring files live, from this package.
const (
	dashboardFile = "../docs/monitoring/grafana-dashboard.json"
	alertsFile    = "../docs/monitoring/alerts.yml"
)

// recordingRegisterer keeps what the vault registers.
type recordingRegisterer struct{ collectors []prometheus.Collector }

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
}

func (r *recordingRegisterer) Unregister(prometheus.Collector) bool { return false }

var fqNamePattern = regexp.MustCompile(`fqName: "([^"]+)"`)

// exportedSeries is every series name the vault exports, derived from
// what it registers (the app's registerMetrics, and rate_limit_redis's
// metrics) rather than copied: each collector's descriptors, with _bucket,
// _sum and _count for histograms and summaries.
func exportedSeries(t *testing.T) map[string]bool {
	t.Helper()
	store, err := vaultstore.Open(vaultstore.Options{Dir: t.TempDir(), MasterKey: make([]byte, vaultstore.MasterKeySize)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	rec := &recordingRegisterer{}
	if err := registerMetrics(rec, store, sharedTestWorkers(t)); err != nil {
		t.Fatal(err)
	}
	if err := registerRateLimitRedisMetrics(rec); err != nil {
		t.Fatal(err)
	}
	// the registry Caddy gives each config is a pedantic one: everything
	// registered must pass it
	if err := registerMetrics(prometheus.NewPedanticRegistry(), store, sharedTestWorkers(t)); err != nil {
		t.Fatalf("registering into a pedantic registry: %v", err)
	}

	names := map[string]bool{}
	for _, c := range rec.collectors {
		var suffixes []string
		switch c.(type) {
		case prometheus.Histogram, *prometheus.HistogramVec: // the vault exports no summary
			suffixes = []string{"_bucket", "_sum", "_count"}
		}
		ch := make(chan *prometheus.Desc, 32)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fqNamePattern.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no name in descriptor %s", d)
			}
			if suffixes == nil {
				names[m[1]] = true
			}
			for _, s := range suffixes {
				names[m[1]+s] = true
			}
		}
	}
	if len(names) < 20 {
		t.Fatalf("only %d series found: %v", len(names), names)
	}
	return names
}

// promQLNames returns the metric names an expression selects. It drops
// string literals, label matchers, ranges and grouping clauses, then
// takes every identifier that is not a function, an aggregation or a
// keyword.
func promQLNames(expr string) []string {
	for _, strip := range []*regexp.Regexp{
		regexp.MustCompile(`"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|` + "`[^`]*`"),
		regexp.MustCompile(`\{[^{}]*\}`),
		regexp.MustCompile(`\[[^\[\]]*\]`),
		regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`),
		regexp.MustCompile(`\$\{?\w+\}?`),
	} {
		expr = strip.ReplaceAllString(expr, " ")
	}
	keywords := map[string]bool{"and": true, "or": true, "unless": true, "offset": true, "bool": true,
		"group_left": true, "group_right": true, "inf": true, "nan": true, "Inf": true, "NaN": true}
	var names []string
	token := regexp.MustCompile(`\d[\w.]*|[A-Za-z_:][A-Za-z0-9_:]*`)
	for _, loc := range token.FindAllStringIndex(expr, -1) {
		word := expr[loc[0]:loc[1]]
		if word[0] >= '0' && word[0] <= '9' || keywords[word] {
			continue
		}
		if rest := strings.TrimLeft(expr[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function or an aggregation
		}
		names = append(names, word)
	}
	return names
}

// TestPromQLNames checks the extraction on the shapes the files use.
func TestPromQLNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`sum by (code) (rate(tokenvault_requests_total{instance=~"$instance"}[$__rate_interval]))`, []string{"tokenvault_requests_total"}},
		{`histogram_quantile(0.95, sum by (le) (rate(x_bucket{a="b"}[5m]))) > 1`, []string{"x_bucket"}},
		{`predict_linear(a[6h], 24 * 3600) < on (instance) b`, []string{"a", "b"}},
		{`a > 1.5 * a offset 1d and a > 1e9`, []string{"a", "a", "a"}},
		{`(time() - max(max_over_time(b[8d])) > 26 * 3600) or absent_over_time(b[26h])`, []string{"b", "b"}},
		{`topk(5, histogram_quantile(0.95, sum by (le, operation) (rate(c{x="{y}"}[1m]))))`, []string{"c"}},
	}
	for _, tt := range tests {
		if got := promQLNames(tt.expr); !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.expr, got, tt.want)
		}
	}
}

// alertRules is the part of a Prometheus rules file the test reads.
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// monitoringExprs reads every PromQL expression of the dashboard and the
// alert rules, keyed by where it is.
func monitoringExprs(t *testing.T) map[string]string {
	t.Helper()
	exprs := map[string]string{}

	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules alertRules
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	seen := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			switch {
			case r.Alert == "" || r.Expr == "":
				t.Errorf("%s: a rule without alert or expr: %+v", alertsFile, r)
			case seen[r.Alert]:
				t.Errorf("%s: alert %s appears twice", alertsFile, r.Alert)
			case r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "":
				t.Errorf("%s: alert %s needs a severity, a summary and a description", alertsFile, r.Alert)
			}
			seen[r.Alert] = true
			exprs["alert "+r.Alert] = r.Expr
		}
	}
	if len(seen) == 0 {
		t.Fatalf("%s holds no rules", alertsFile)
	}

	raw, err = os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	ids := map[float64]bool{}
	panels, _ := dash["panels"].([]any)
	for _, p := range panels {
		panel, _ := p.(map[string]any)
		title, _ := panel["title"].(string)
		id, _ := panel["id"].(float64)
		if ids[id] {
			t.Errorf("%s: panel id %v appears twice", dashboardFile, id)
		}
		ids[id] = true
		if panel["type"] == "row" {
			continue
		}
		targets, _ := panel["targets"].([]any)
		if len(targets) == 0 {
			t.Errorf("%s: panel %q has no query", dashboardFile, title)
		}
		for i, tg := range targets {
			expr, _ := tg.(map[string]any)["expr"].(string)
			if expr == "" {
				t.Errorf("%s: panel %q query %d has no expr", dashboardFile, title, i)
			}
			exprs["panel "+title+" #"+string(rune('A'+i))] = expr
		}
	}
	templating, _ := dash["templating"].(map[string]any)
	vars, _ := templating["list"].([]any)
	labelValues := regexp.MustCompile(`^label_values\(\s*([^,()]+)\s*,\s*\w+\s*\)$`)
	for _, v := range vars {
		variable, _ := v.(map[string]any)
		if variable["type"] != "query" {
			continue
		}
		def, _ := variable["definition"].(string)
		m := labelValues.FindStringSubmatch(def)
		if m == nil {
			t.Errorf("%s: variable %v: query %q is not label_values(metric, label)", dashboardFile, variable["name"], def)
			continue
		}
		exprs["variable "+variable["name"].(string)] = m[1]
	}
	if len(panels) == 0 {
		t.Fatalf("%s holds no panels", dashboardFile)
	}
	return exprs
}

// TestMonitoringNamesExportedMetrics: every metric the Grafana dashboard
// and the alert rules name is one the vault exports, every expression
// names at least one, and together they watch what an operator must see:
// errors, latency, rate limits, Redis, transforms, store size, disk and
// backups.
func TestMonitoringNamesExportedMetrics(t *testing.T) {
	exported := exportedSeries(t)
	used := map[string]bool{}
	where := make([]string, 0)
	exprs := monitoringExprs(t)
	for w := range exprs {
		where = append(where, w)
	}
	sort.Strings(where)
	for _, w := range where {
		names := promQLNames(exprs[w])
		if len(names) == 0 {
			t.Errorf("%s: %q names no metric", w, exprs[w])
		}
		for _, n := range names {
			if !exported[n] {
				t.Errorf("%s names %s, which the vault does not export", w, n)
			}
			used[n] = true
		}
	}
	for _, must := range []string{
		"tokenvault_requests_total",                        // error rate
		"tokenvault_request_duration_seconds_bucket",       // latency
		"tokenvault_proxy_destination_seconds_bucket",      // destinations' latency
		"tokenvault_rate_limited_total",                    // rate limiting
		"tokenvault_ratelimit_redis_up",                    // Redis fallback
		"tokenvault_transform_failures_total",              // transform failures
		"tokenvault_store_size_bytes",                      // store size
		"tokenvault_storage_free_bytes",                    // disk
		"tokenvault_storage_writes_refused",                // disk full
		"tokenvault_backup_last_success_timestamp_seconds", // backup age
	} {
		if !used[must] {
			t.Errorf("neither the dashboard nor the alerts use %s", must)
		}
	}
	if t.Failed() {
		var all []string
		for n := range exported {
			all = append(all, n)
		}
		sort.Strings(all)
		t.Logf("the vault exports: %s", strings.Join(all, " "))
	}
}

// TestBackupMetricFollowsBackups: tokenvault_backup_last_success_timestamp_seconds
// is absent until the admin API has sent a backup whole, then the time
// it did.
func TestBackupMetricFollowsBackups(t *testing.T) {
	t.Setenv("TV_TEST_KEY", testKey(1))
	a := &App{Storage: t.TempDir(), MasterKey: "{env.TV_TEST_KEY}"}
	if err := provisionApp(t, a); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(backupCollector{}); err != nil {
		t.Fatal(err)
	}
	value := func() (float64, bool) {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "tokenvault_backup_last_success_timestamp_seconds" && len(f.GetMetric()) == 1 {
				return f.GetMetric()[0].GetGauge().GetValue(), true
			}
		}
		return 0, false
	}
	prev := lastBackup.Swap(0)
	t.Cleanup(func() { lastBackup.Store(prev) })
	if v, ok := value(); ok {
		t.Fatalf("before any backup the metric is %v, want none", v)
	}
	before := time.Now()
	w := httptest.NewRecorder()
	if err := (AdminAPI{vault: a}).handleBackup(w, httptest.NewRequest(http.MethodGet, "/vault/backup", nil)); err != nil || w.Code != http.StatusOK {
		t.Fatalf("backup: %v %d", err, w.Code)
	}
	v, ok := value()
	if !ok || v < float64(before.UnixMilli())/1000 || v > float64(time.Now().UnixMilli())/1000 {
		t.Errorf("after the backup: %v %v, want a time from %v on", v, ok, before)
	}
}

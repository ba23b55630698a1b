package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/internal/testjson"
	"github.com/tokenvault/tokenvault/vaultstore"
)

// destination is a proxy destination on 127.0.0.1 that records what it
// receives.
type destination struct {
	srv      *httptest.Server
	mu       sync.Mutex
	requests []destRequest
	conns    atomic.Int32
}

type destRequest struct {
	method, path, query string
	header              http.Header
	body                string
}

func newDestination(tb testing.TB) *destination {
	d := &destination{}
	d.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d.mu.Lock()
		d.requests = append(d.requests, destRequest{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), string(body)})
		d.mu.Unlock()
		w.Header().Set("X-Dest", "yes")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"charged":true}`)
	}))
	d.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			d.conns.Add(1)
		}
	}
	d.srv.Start()
	tb.Cleanup(d.srv.Close)
	return d
}

func (d *destination) received() []destRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]destRequest(nil), d.requests...)
}

// failingAudit fails every write of an audit record while on.
type failingAudit struct {
	vaultstore.KV
	on atomic.Bool
}

func (f *failingAudit) Update(ctx context.Context, fn func(vaultstore.Writer) error) error {
	return f.KV.Update(ctx, func(w vaultstore.Writer) error { return fn(auditFailingWriter{w, f}) })
}

type auditFailingWriter struct {
	vaultstore.Writer
	f *failingAudit
}

func (w auditFailingWriter) Put(key, value []byte, ttl time.Duration) error {
	if w.f.on.Load() && strings.Contains(string(key), "/log/") {
		return errors.New("injected: audit sink unavailable")
	}
	return w.Writer.Put(key, value, ttl)
}

// newProxyEnv is the tokens test environment with proxies allowed to
// reach 127.0.0.1 over http, a "user" role holding token:use on every
// container, and a card token.
func newProxyEnv(t testing.TB, faults *failingAudit) (*tokenEnv, string) {
	t.Helper()
	store, err := vaultstore.Open(vaultstore.Options{
		Dir: t.TempDir(), MasterKey: make([]byte, vaultstore.MasterKeySize),
		WrapKV: func(kv vaultstore.KV) vaultstore.KV {
			if faults == nil {
				return kv
			}
			faults.KV = kv
			return faults
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	h := &API{}
	h.wire(newTestApp(t, store, &EgressConfig{AllowHTTP: true, AllowNetworks: []string{"127.0.0.0/8"}}), zap.NewNop())
	e := setupTokenEnv(t, h, store, false)
	h.proxy.logger = h.logger
	e.keys["user"] = e.createApp(tvRoleMgmt, "user", []map[string]any{{
		"priority": 1, "container": "/", "transform": "reveal",
		"permissions": []string{"token:create", "token:read", "token:use"},
	}})
	r := e.create("user", tvCardBody())
	tvWantStatus(t, r, http.StatusCreated, "create card")
	return e, testjson.Str(r.body, "id")
}

// createTestProxy creates a proxy to destination and returns its id and key.
func createTestProxy(t testing.TB, e *tokenEnv, name, destination string) (id, key string) {
	t.Helper()
	r := e.do(tvRoleMgmt, http.MethodPost, "/proxies", map[string]any{"name": name, "destination_url": destination})
	tvWantStatus(t, r, http.StatusCreated, "create proxy")
	return testjson.Str(r.body, "id"), testjson.Str(r.body, "key")
}

// TestProxyAuditBeforeForward: a detokenizing call writes its audit
// record before the destination is called; when the record cannot be
// written the caller gets 503 and the destination nothing.
func TestProxyAuditBeforeForward(t *testing.T) {
	faults := &failingAudit{}
	e, cardID := newProxyEnv(t, faults)
	dest := newDestination(t)
	proxyID, proxyKey := createTestProxy(t, e, "pay", dest.srv.URL+"/base")
	body := `{"number":"{{ ` + cardID + ` | json: '$.number' }}"}`

	faults.on.Store(true)
	r := e.do("user", http.MethodPost, "/proxy/charges", body, "SVC-PROXY-KEY", proxyKey)
	if r.status != http.StatusServiceUnavailable || testjson.Field(r.body, "proxy_error", "status") == nil {
		t.Fatalf("audit sink down: want 503 with proxy_error, got %s", r)
	}
	if r.header.Get("Retry-After") == "" || r.header.Get("Svc-Proxy-Destination-Status") != "" {
		t.Errorf("audit sink down: headers %v", r.header)
	}
	if n := dest.conns.Load(); n != 0 {
		t.Fatalf("audit sink down: the destination got %d connections", n)
	}
	records, _, err := e.store.ListAudit(context.Background(), e.tenantID, vaultstore.AuditFilter{EntityType: "proxy", EntityID: proxyID, Operation: "detokenize"}, "", 10)
	if err != nil || len(records) != 0 {
		t.Fatalf("audit sink down: records %v, %v", records, err)
	}

	faults.on.Store(false)
	r = e.do("user", http.MethodPost, "/proxy/charges", body, "SVC-PROXY-KEY", proxyKey)
	if r.status != http.StatusCreated || r.header.Get("Svc-Proxy-Destination-Status") != "201" {
		t.Fatalf("audit sink up: %s", r)
	}
	got := dest.received()
	if len(got) != 1 || got[0].body != `{"number":"`+tvCard+`"}` || got[0].path != "/base/charges" {
		t.Fatalf("destination received %+v", got)
	}
	records, _, err = e.store.ListAudit(context.Background(), e.tenantID, vaultstore.AuditFilter{EntityType: "proxy", EntityID: proxyID, Operation: "detokenize"}, "", 10)
	if err != nil || len(records) != 1 {
		t.Fatalf("audit records %v, %v", records, err)
	}
	rec := records[0]
	if rec.EntityType != "proxy" || rec.EntityID != proxyID || rec.Operation != "detokenize" ||
		rec.Destination != "127.0.0.1" || len(rec.TokenIDs) != 1 || rec.TokenIDs[0] != cardID || rec.ActorID == "" {
		t.Errorf("audit record %+v", rec)
	}
	if strings.Contains(tvJSON(t, rec), tvCard) {
		t.Errorf("audit record holds the card number")
	}
}

// TestProxyFormBody: form values are detokenized; names, order and the
// encoding of untouched pairs stay as sent.
func TestProxyFormBody(t *testing.T) {
	e, cardID := newProxyEnv(t, nil)
	dest := newDestination(t)
	_, key := createTestProxy(t, e, "form", dest.srv.URL)
	body := "z=1&card%5Bnumber%5D=" + url.QueryEscape("{{ "+cardID+" | json: '$.number' }}") + "&a=x+y&card=" + url.QueryEscape("{{ "+cardID+" | json: '$.expiration_month' }}")
	r := e.do("user", http.MethodPost, "/proxy", body, "SVC-PROXY-KEY", key, "Content-Type", "application/x-www-form-urlencoded")
	tvWantStatus(t, r, http.StatusCreated, "form proxy")
	got := dest.received()
	want := "z=1&card%5Bnumber%5D=" + tvCard + "&a=x+y&card=12"
	if len(got) != 1 || got[0].body != want {
		t.Fatalf("destination body %+v, want %q", got, want)
	}
}

func TestTargetURL(t *testing.T) {
	f := &forwarder{headers: newVaultHeaders("SVC")}
	tests := []struct {
		dest, suffix, query, want, wantErr string
	}{
		{"https://api.example.com", "", "", "https://api.example.com", ""},
		{"https://api.example.com/", "/v1/charges", "", "https://api.example.com/v1/charges", ""},
		{"https://api.example.com/base/", "/x", "a=1", "https://api.example.com/base/x?a=1", ""},
		{"https://api.example.com/base?k=v", "/x", "a=1&svc-proxy-key=secret&b=2", "https://api.example.com/base/x?k=v&a=1&b=2", ""},
		{"https://api.example.com", "/a%2Fb", "SVC-Proxy-Key=s", "https://api.example.com/a%2Fb", ""},
		{"https://api.example.com/base", "/../admin", "", "", "path"},
		{"https://api.example.com/base", "/a/%2e%2e/admin", "", "", "path"},
		{"https://api.example.com/base", "/./x", "", "", "path"},
	}
	for _, tt := range tests {
		dest, _ := url.Parse(tt.dest)
		got, err := f.targetURL(dest, tt.suffix, tt.query)
		if tt.wantErr != "" {
			var ae *apiError
			if !errors.As(err, &ae) || ae.fields[tt.wantErr] == nil {
				t.Errorf("%s + %s: want an error on %s, got %v", tt.dest, tt.suffix, tt.wantErr, err)
			}
			continue
		}
		if err != nil || got.String() != tt.want {
			t.Errorf("%s + %s ? %s = %v, %v; want %s", tt.dest, tt.suffix, tt.query, got, err, tt.want)
		}
	}
}

func TestOutboundHeaders(t *testing.T) {
	f := &forwarder{headers: newVaultHeaders("BT")}
	in := http.Header{
		"Bt-Api-Key":          {"key_test_x"},
		"Bt-Proxy-Key":        {"pk"},
		"Bt-Proxy-Url":        {"https://x"},
		"Bt-Trace-Id":         {"t"},
		"Bt-Proxy-Keep-Alive": {"timeout=5"},
		"Bt-Proxy-Connection": {"close"},
		"Authorization":       {"Bearer dest"},
		"Connection":          {"X-Hop"},
		"X-Hop":               {"1"},
		"Te":                  {"trailers"},
		"Content-Length":      {"10"},
		"X-Custom":            {"kept"},
	}
	out := f.outboundHeaders(in)
	want := http.Header{
		"Authorization": {"Bearer dest"},
		"X-Custom":      {"kept"},
		"Keep-Alive":    {"timeout=5"},
		"Connection":    {"close"},
	}
	if len(out) != len(want) {
		t.Fatalf("outbound headers %v, want %v", out, want)
	}
	for k, v := range want {
		if out.Get(k) != v[0] {
			t.Errorf("%s = %q, want %q", k, out.Get(k), v[0])
		}
	}
}

func TestBodyKindOf(t *testing.T) {
	tests := map[string]bodyKind{
		"":                                  bodyText,
		"application/json":                  bodyJSON,
		"application/json; charset=utf-8":   bodyJSON,
		"application/vnd.api+json":          bodyJSON,
		"application/x-www-form-urlencoded": bodyForm,
		"text/plain":                        bodyText,
		"text/xml; charset=utf-8":           bodyText,
		"application/octet-stream":          bodyOpaque,
		"multipart/form-data; boundary=x":   bodyOpaque,
		"not a media type;;":                bodyOpaque,
	}
	for ct, want := range tests {
		if got := bodyKindOf(ct); got != want {
			t.Errorf("bodyKindOf(%q) = %v, want %v", ct, got, want)
		}
	}
}

func TestNameMatcher(t *testing.T) {
	tests := []struct {
		filter, name string
		want         bool
	}{
		{"pay", "Payments", true},
		{"pay", "other", false},
		{"pay*", "Payments", true},
		{"pay*", "my payments", false},
		{"*ment?", "payment?", true},
		{"*ment?", "payments", false},
		{"a[b", "a[b", true},
		{"*/*", "a/b", true},
	}
	for _, tt := range tests {
		if got := nameMatcher(tt.filter)(tt.name); got != tt.want {
			t.Errorf("nameMatcher(%q)(%q) = %v, want %v", tt.filter, tt.name, got, tt.want)
		}
	}
}

func TestDropQueryParam(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"a=1", "a=1"},
		{"svc-proxy-key=x", ""},
		{"a=1&svc-proxy-key=x&b=%20", "a=1&b=%20"},
		{"svc%2Dproxy%2Dkey=x&a", "a"},
		{"a=1&SVC-PROXY-KEY=x&svc-proxy-key", "a=1"},
	}
	for _, tt := range tests {
		if got := dropQueryParam(tt.in, "svc-proxy-key"); got != tt.want {
			t.Errorf("dropQueryParam(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestProxyBodiesUnderBufferReuse: concurrent calls with bodies of many
// sizes and kinds, detokenized or sent as read, each reach the
// destination exactly as they should: request buffers are reused between
// calls, and no call may see another's bytes.
func TestProxyBodiesUnderBufferReuse(t *testing.T) {
	e, cardID := newProxyEnv(t, nil)
	dest := newDestination(t)
	_, key := createTestProxy(t, e, "pay", dest.srv.URL)
	ref := "{{ " + cardID + " | json: '$.number' }}"
	type call struct{ contentType, body, want string }
	calls := make([]call, 120)
	for i := range calls {
		pad := strings.Repeat(string(rune('a'+i%26)), []int{10, 900, 5000, 70000, 200000}[i%5])
		switch i % 4 {
		case 0: // JSON, detokenized
			calls[i] = call{"application/json", `{"i":` + fmt.Sprint(i) + `,"card":"` + ref + `","pad":"` + pad + `"}`,
				`{"i":` + fmt.Sprint(i) + `,"card":"` + tvCard + `","pad":"` + pad + `"}`}
		case 1: // JSON without an expression: sent as read
			b := `{"i":` + fmt.Sprint(i) + `,"pad":"` + pad + `"}`
			calls[i] = call{"application/json", b, b}
		case 2: // form, detokenized
			calls[i] = call{"application/x-www-form-urlencoded", "i=" + fmt.Sprint(i) + "&card=" + url.QueryEscape(ref) + "&pad=" + pad,
				"i=" + fmt.Sprint(i) + "&card=" + tvCard + "&pad=" + pad}
		default: // text, detokenized
			calls[i] = call{"text/plain", fmt.Sprint(i) + " " + ref + " " + pad, fmt.Sprint(i) + " " + tvCard + " " + pad}
		}
	}
	var wg sync.WaitGroup
	statuses := make([]int, len(calls))
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(calls); i += 8 {
				r := e.do("user", http.MethodPost, "/proxy", calls[i].body, "SVC-PROXY-KEY", key,
					"Content-Type", calls[i].contentType, "X-Call", fmt.Sprint(i))
				statuses[i] = r.status
			}
		}()
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusCreated {
			t.Fatalf("call %d: status %d", i, s)
		}
	}
	got := dest.received()
	if len(got) != len(calls) {
		t.Fatalf("the destination got %d calls, want %d", len(got), len(calls))
	}
	for _, req := range got {
		var i int
		if _, err := fmt.Sscan(req.header.Get("X-Call"), &i); err != nil {
			t.Fatalf("a call without X-Call: %v", err)
		}
		if req.body != calls[i].want {
			t.Errorf("call %d (%s, %d bytes): the destination got %d bytes that differ from the %d expected",
				i, calls[i].contentType, len(calls[i].body), len(req.body), len(calls[i].want))
		}
	}
}

// TestProxyRelaysResponsesWhole: responses of every size up to the limit,
// around the relay's 32 KB copy buffer, reach the caller byte for byte,
// also when calls run at once and share the pooled buffers.
func TestProxyRelaysResponsesWhole(t *testing.T) {
	e, _ := newProxyEnv(t, nil)
	// answer is a JSON document of n bytes (n = 0 or n >= 8) whose
	// contents depend on n
	answer := func(n int) string {
		if n == 0 {
			return ""
		}
		b := make([]byte, n-8)
		for i := range b {
			b[i] = byte('a' + (i*7+n)%26)
		}
		return `{"p":"` + string(b) + `"}`
	}
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscan(r.URL.Query().Get("n"), &n)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer(n))
	}))
	t.Cleanup(dest.Close)
	_, key := createTestProxy(t, e, "echo", dest.URL)
	sizes := []int{0, 8, 9, 32<<10 - 1, 32 << 10, 32<<10 + 1, 300_000, maxProxyResponseBytes}
	var wg sync.WaitGroup
	errs := make([]string, len(sizes)*4)
	for k := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := sizes[k%len(sizes)]
			r := e.do("user", http.MethodGet, "/proxy?n="+fmt.Sprint(n), nil, "SVC-PROXY-KEY", key)
			if r.status != http.StatusOK || string(r.raw) != answer(n) {
				errs[k] = fmt.Sprintf("%d bytes: status %d, got %d bytes that differ", n, r.status, len(r.raw))
			}
		}()
	}
	wg.Wait()
	for _, msg := range errs {
		if msg != "" {
			t.Error(msg)
		}
	}
}

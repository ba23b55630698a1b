package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// stubResolver answers from a table and records every query. A host's
// answers are used in turn, the last one repeating, which is how the
// tests rebind a name.
type stubResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	err     error
	calls   []string
	seen    map[string]int
}

func newStub(answers map[string][]string) *stubResolver {
	r := &stubResolver{answers: map[string][][]netip.Addr{}, seen: map[string]int{}}
	for host, addrs := range answers {
		r.answers[host] = [][]netip.Addr{parseAddrs(addrs...)}
	}
	return r
}

func parseAddrs(ss ...string) []netip.Addr {
	as := make([]netip.Addr, 0, len(ss))
	for _, s := range ss {
		as = append(as, netip.MustParseAddr(s))
	}
	return as
}

func (r *stubResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, network+" "+host)
	if r.err != nil {
		return nil, r.err
	}
	seq, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	i := min(r.seen[host], len(seq)-1)
	r.seen[host]++
	return seq[i], nil
}

func (r *stubResolver) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// countingListener counts accepted connections.
type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// testServer is an httptest server on 127.0.0.1 that counts connections
// and requests, and records the last request's headers.
type testServer struct {
	*httptest.Server
	conns    *countingListener
	requests atomic.Int64
	mu       sync.Mutex
	header   http.Header
}

func newTestServer(t *testing.T, tlsOn bool, h http.HandlerFunc) *testServer {
	t.Helper()
	s := &testServer{}
	if h == nil {
		h = func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }
	}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		s.mu.Lock()
		s.header = r.Header.Clone()
		s.mu.Unlock()
		h(w, r)
	}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	s.conns = &countingListener{Listener: s.Listener}
	s.Listener = s.conns
	if tlsOn {
		s.EnableHTTP2 = true
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

func (s *testServer) port() string {
	return strconv.Itoa(s.conns.Addr().(*net.TCPAddr).Port)
}

// pool returns a pool with the server's certificate, nil for plain http.
func (s *testServer) pool() *x509.CertPool {
	if s.Certificate() == nil {
		return nil
	}
	p := x509.NewCertPool()
	p.AddCert(s.Certificate())
	return p
}

func (s *testServer) lastHeader() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.header
}

// roundTrip sends a GET for rawURL through tr and returns the response
// with its body read, or the error.
func roundTrip(t *testing.T, tr http.RoundTripper, rawURL string) (*http.Response, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		if resp != nil {
			t.Errorf("RoundTrip returned both a response and %v", err)
		}
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return resp, string(body), nil
}

// wantRefused fails unless err is a policy refusal whose reason mentions
// each of names.
func wantRefused(t *testing.T, err error, names ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("request succeeded, want refused")
	}
	var e *Error
	if !errors.Is(err, ErrRefused) || !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a policy refusal", err, err)
	}
	for _, n := range names {
		if !strings.Contains(e.Reason, n) {
			t.Errorf("reason %q does not name %q", e.Reason, n)
		}
	}
}

func newTransport(t *testing.T, p *Policy) *http.Transport {
	tr := p.Transport()
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// TestTransportRefusesAtDialTime: whatever a name resolves to, a forbidden
// address is never dialled, and the refusal survives net/http's wrapping.
func TestTransportRefusesAtDialTime(t *testing.T) {
	srv := newTestServer(t, false, nil)
	port := srv.port()
	for _, tc := range []struct {
		name      string
		answers   []string // what dest.example resolves to
		url       string   // default http://dest.example:<port>/
		wantCalls int
		wantNamed string
	}{
		{name: "loopback", answers: []string{"127.0.0.1"}},
		{name: "metadata", answers: []string{"169.254.169.254"}},
		{name: "private", answers: []string{"10.0.0.1"}},
		{name: "carrier-grade NAT metadata", answers: []string{"100.100.100.200"}},
		{name: "NAT64 metadata", answers: []string{"64:ff9b::a9fe:a9fe"}},
		{name: "mapped loopback", answers: []string{"::ffff:127.0.0.1"}},
		{name: "IPv6 loopback", answers: []string{"::1"}},
		{name: "unspecified", answers: []string{"0.0.0.0"}},
		{name: "all answers forbidden", answers: []string{"10.0.0.1", "127.0.0.1", "fe80::1"}},
		{name: "no answers", answers: []string{}},
		{name: "IPv4 literal", url: "http://127.0.0.1:" + port + "/", wantCalls: -1, wantNamed: "127.0.0.1"},
		{name: "IPv6 literal", url: "http://[::1]:" + port + "/", wantCalls: -1, wantNamed: "::1"},
		{name: "mapped literal", url: "http://[::ffff:127.0.0.1]:" + port + "/", wantCalls: -1, wantNamed: "::ffff:127.0.0.1"},
		{name: "localhost", url: "http://localhost:" + port + "/", answers: []string{"127.0.0.1"}, wantNamed: "localhost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := "dest.example"
			if tc.url == "" {
				tc.url = "http://dest.example:" + port + "/"
			} else if u, _ := url.Parse(tc.url); u != nil {
				host = u.Hostname()
			}
			if tc.wantNamed == "" {
				tc.wantNamed = host
			}
			stub := newStub(map[string][]string{host: tc.answers})
			tr := newTransport(t, &Policy{AllowHTTP: true, Resolver: stub})
			before := srv.conns.n.Load()
			_, _, err := roundTrip(t, tr, tc.url)
			wantRefused(t, err, tc.wantNamed)
			if n := srv.conns.n.Load() - before; n != 0 {
				t.Errorf("server accepted %d connections, want 0", n)
			}
			wantCalls := 1
			if tc.wantCalls < 0 {
				wantCalls = 0
			}
			if got := stub.Calls(); len(got) != wantCalls || wantCalls == 1 && got[0] != "ip "+host {
				t.Errorf("resolver calls %q, want %d for %s", got, wantCalls, host)
			}
		})
	}
}

// TestTransportRefusalThroughClient: http.Client wraps the error once more
// in *url.Error; it still matches.
func TestTransportRefusalThroughClient(t *testing.T) {
	stub := newStub(map[string][]string{"dest.example": {"169.254.169.254"}})
	c := &http.Client{Transport: newTransport(t, &Policy{Resolver: stub})}
	_, err := c.Get("https://dest.example/latest/meta-data/")
	var ue *url.Error
	if !errors.As(err, &ue) {
		t.Fatalf("error %v is not a *url.Error", err)
	}
	wantRefused(t, err, "dest.example")
}

// TestTransportResolverErrors: a failed lookup is not a policy refusal.
func TestTransportResolverErrors(t *testing.T) {
	stub := newStub(nil)
	stub.err = errors.New("resolver down")
	_, _, err := roundTrip(t, newTransport(t, &Policy{Resolver: stub}), "https://dest.example/")
	if !errors.Is(err, stub.err) || errors.Is(err, ErrRefused) {
		t.Errorf("error %v: want the resolver's error, not a refusal", err)
	}
}

// TestTransportReachesAllowed is the positive control for the refusals:
// with 127.0.0.0/8 allowed the same server is reached.
func TestTransportReachesAllowed(t *testing.T) {
	srv := newTestServer(t, false, nil)
	for _, tc := range []struct {
		name    string
		allow   []netip.Prefix
		answers []string
	}{
		{"loopback", loopback, []string{"127.0.0.1"}},
		{"mapped loopback", loopback, []string{"::ffff:127.0.0.1"}},
		{"forbidden answers are skipped", loopback, []string{"169.254.169.254", "10.0.0.1", "127.0.0.1"}},
		// Nothing listens on 127.0.0.3: the dial is refused and the
		// next address is tried.
		{"unreachable answer falls through", loopback, []string{"127.0.0.3", "127.0.0.1"}},
		{"single address", []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, []string{"127.0.0.2", "127.0.0.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub := newStub(map[string][]string{"dest.example": tc.answers})
			tr := newTransport(t, &Policy{AllowHTTP: true, AllowNetworks: tc.allow, Resolver: stub})
			before := srv.conns.n.Load()
			resp, body, err := roundTrip(t, tr, "http://dest.example:"+srv.port()+"/")
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			if resp.StatusCode != http.StatusOK || body != "ok" {
				t.Errorf("got %d %q, want 200 ok", resp.StatusCode, body)
			}
			if n := srv.conns.n.Load() - before; n != 1 {
				t.Errorf("server accepted %d connections, want 1", n)
			}
			// DisableCompression: the transport adds no Accept-Encoding.
			if ae := srv.lastHeader().Get("Accept-Encoding"); ae != "" {
				t.Errorf("request carried Accept-Encoding %q", ae)
			}
		})
	}
}

// TestTransportTLS: https to a name mapped to 127.0.0.1, verified against
// the test server's certificate (SANs example.com and 127.0.0.1).
func TestTransportTLS(t *testing.T) {
	srv := newTestServer(t, true, nil)
	stub := newStub(map[string][]string{"example.com": {"127.0.0.1"}, "other.example": {"127.0.0.1"}})
	for _, tc := range []struct {
		name    string
		host    string
		rootCAs *x509.CertPool
		ok      bool
	}{
		{"verified", "example.com", srv.pool(), true},
		{"system roots do not know the test CA", "example.com", nil, false},
		{"host name checked", "other.example", srv.pool(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTransport(t, &Policy{AllowNetworks: loopback, Resolver: stub, RootCAs: tc.rootCAs})
			resp, body, err := roundTrip(t, tr, "https://"+tc.host+":"+srv.port()+"/")
			if !tc.ok {
				var cve *tls.CertificateVerificationError
				if !errors.As(err, &cve) || errors.Is(err, ErrRefused) {
					t.Fatalf("error %v, want a certificate verification error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			if body != "ok" || resp.ProtoMajor != 2 {
				t.Errorf("got %s %q, want HTTP/2 ok", resp.Proto, body)
			}
			if resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
				t.Errorf("connection state %+v, want TLS 1.2 or later", resp.TLS)
			}
		})
	}
	t.Run("default policy refuses", func(t *testing.T) {
		tr := newTransport(t, &Policy{Resolver: stub, RootCAs: srv.pool()})
		before := srv.conns.n.Load()
		_, _, err := roundTrip(t, tr, "https://example.com:"+srv.port()+"/")
		wantRefused(t, err, "example.com")
		if n := srv.conns.n.Load() - before; n != 0 {
			t.Errorf("server accepted %d connections, want 0", n)
		}
	})
}

// TestTransportIgnoresProxyEnvironment: with HTTP_PROXY and HTTPS_PROXY
// pointing at another local listener, that listener receives nothing and
// the policy still applies. net/http reads the proxy variables once per
// process, so a regression only shows in the behavioural part when no
// earlier test consulted them; the check of tr.Proxy catches it regardless.
func TestTransportIgnoresProxyEnvironment(t *testing.T) {
	proxy := newTestServer(t, false, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "proxied", http.StatusBadGateway)
	})
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("HTTPS_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	t.Setenv("https_proxy", proxy.URL)
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")

	for _, tlsOn := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tlsOn), func(t *testing.T) {
			srv := newTestServer(t, tlsOn, nil)
			scheme := "http"
			if tlsOn {
				scheme = "https"
			}
			target := scheme + "://example.com:" + srv.port() + "/"
			stub := newStub(map[string][]string{"example.com": {"127.0.0.1"}})
			allowed := &Policy{AllowHTTP: true, AllowNetworks: loopback, Resolver: stub, RootCAs: srv.pool()}
			tr := newTransport(t, allowed)
			if tr.Proxy != nil {
				t.Error("Transport().Proxy is set")
			}

			// Positive control for the proxy's counter: a transport that
			// does use the proxy is seen by it.
			viaProxy := tr.Clone()
			u, _ := url.Parse(proxy.URL)
			viaProxy.Proxy = http.ProxyURL(u)
			t.Cleanup(viaProxy.CloseIdleConnections)
			before := proxy.conns.n.Load()
			roundTrip(t, viaProxy, target)
			if proxy.conns.n.Load() == before {
				t.Fatal("positive control: the proxy saw no connection")
			}

			before = proxy.conns.n.Load()
			resp, body, err := roundTrip(t, tr, target)
			if err != nil || resp.StatusCode != http.StatusOK || body != "ok" {
				t.Fatalf("allowed request: %v %v %q", err, resp, body)
			}
			_, _, err = roundTrip(t, newTransport(t, &Policy{AllowHTTP: true, Resolver: stub, RootCAs: srv.pool()}), target)
			wantRefused(t, err, "example.com")
			if n := proxy.conns.n.Load() - before; n != 0 {
				t.Errorf("proxy accepted %d connections, want 0", n)
			}
		})
	}
}

// TestTransportDoesNotFollowRedirects: a redirect to the metadata address
// comes back as it is, and nothing else is requested.
func TestTransportDoesNotFollowRedirects(t *testing.T) {
	const location = "http://169.254.169.254/latest/meta-data/"
	srv := newTestServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, location, http.StatusFound)
	})
	stub := newStub(map[string][]string{"dest.example": {"127.0.0.1"}})
	tr := newTransport(t, &Policy{AllowHTTP: true, AllowNetworks: loopback, Resolver: stub})
	resp, _, err := roundTrip(t, tr, "http://dest.example:"+srv.port()+"/")
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != location {
		t.Errorf("got %d Location %q, want 302 %s", resp.StatusCode, resp.Header.Get("Location"), location)
	}
	if n := srv.requests.Load(); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
	if got := stub.Calls(); len(got) != 1 {
		t.Errorf("resolver calls %q, want 1", got)
	}
}

// TestTransportDNSRebinding: a name that resolved to a public address when
// someone looked is refused when it resolves to loopback at dial time.
func TestTransportDNSRebinding(t *testing.T) {
	srv := newTestServer(t, false, nil)
	stub := newStub(nil)
	stub.answers["dest.example"] = [][]netip.Addr{parseAddrs("93.184.216.34"), parseAddrs("127.0.0.1")}
	p := &Policy{AllowHTTP: true, Resolver: stub}
	target := "http://dest.example:" + srv.port() + "/"

	if _, err := p.CheckURL(target); err != nil {
		t.Fatalf("CheckURL: %v", err)
	}
	if got := stub.Calls(); len(got) != 0 {
		t.Fatalf("CheckURL queried the resolver: %q", got)
	}
	// A naive validator resolves the name and sees a public address; this
	// uses up the first answer, so the transport itself never gets it (and
	// never dials out to the Internet).
	addrs, _ := stub.LookupNetIP(context.Background(), "ip", "dest.example")
	if len(addrs) != 1 || !p.Allowed(addrs[0]) {
		t.Fatalf("first answer %v is not an allowed public address", addrs)
	}
	_, _, err := roundTrip(t, newTransport(t, p), target)
	wantRefused(t, err, "dest.example")
	if n := srv.conns.n.Load(); n != 0 {
		t.Errorf("server accepted %d connections, want 0", n)
	}
	if got := stub.Calls(); len(got) != 2 {
		t.Errorf("resolver calls %q, want 2 (the transport resolves for itself)", got)
	}
}

// TestTransportRebindingBetweenConnections: every new connection resolves
// and checks again. The name first points at an allowed server on
// 127.0.0.2, then at a forbidden one on 127.0.0.1 with the same port.
func TestTransportRebindingBetweenConnections(t *testing.T) {
	good := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "good") }))
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	good.Listener.Close()
	good.Listener = l
	good.Start()
	defer good.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)

	bad := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "bad") }))
	l2, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.1:%s: %v", port, err)
	}
	bad.Listener.Close()
	badConns := &countingListener{Listener: l2}
	bad.Listener = badConns
	bad.Start()
	defer bad.Close()

	stub := newStub(nil)
	stub.answers["dest.example"] = [][]netip.Addr{parseAddrs("127.0.0.2"), parseAddrs("127.0.0.1")}
	tr := newTransport(t, &Policy{
		AllowHTTP:     true,
		AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")},
		Resolver:      stub,
	})
	target := "http://dest.example:" + port + "/"
	if _, body, err := roundTrip(t, tr, target); err != nil || body != "good" {
		t.Fatalf("first request: %v %q", err, body)
	}
	tr.CloseIdleConnections()
	_, _, err = roundTrip(t, tr, target)
	wantRefused(t, err, "dest.example")
	if n := badConns.n.Load(); n != 0 {
		t.Errorf("forbidden server accepted %d connections", n)
	}
}

// TestDialerControl: the Control hook refuses a forbidden address even
// when the resolution step let it through.
func TestDialerControl(t *testing.T) {
	srv := newTestServer(t, false, nil)
	def := &Policy{}
	for _, tc := range []struct {
		policy  *Policy
		address string
		ok      bool
	}{
		{def, "127.0.0.1:80", false},
		{def, "[::ffff:169.254.169.254]:80", false},
		{def, "[fe80::1%eth0]:80", false},
		{def, "8.8.8.8:443", true},
		{def, "[2606:4700::1111]:443", true},
		{def, "example.com:443", false},
		{def, "garbage", false},
		{&Policy{AllowNetworks: loopback}, "127.0.0.1:80", true},
	} {
		err := tc.policy.control("tcp", tc.address, nil)
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrRefused) {
			t.Errorf("control(%q) = %v, want ok=%v", tc.address, err, tc.ok)
		}
	}

	// Resolution allows loopback but the dialer's Control does not: the
	// dial is refused before connecting.
	d := &net.Dialer{Timeout: time.Second, Control: def.control}
	dial := (&Policy{AllowNetworks: loopback, Resolver: newStub(map[string][]string{"dest.example": {"127.0.0.1"}})}).dialContext(d)
	c, err := dial(context.Background(), "tcp", "dest.example:"+srv.port())
	if err == nil {
		c.Close()
	}
	wantRefused(t, err, "127.0.0.1")
	var oe *net.OpError
	if !errors.As(err, &oe) {
		t.Errorf("error %T is not from the dialer", err)
	}
	if n := srv.conns.n.Load(); n != 0 {
		t.Errorf("server accepted %d connections, want 0", n)
	}
}

// TestTransportCopiesPolicy: changing the policy afterwards does not
// change a transport already made.
func TestTransportCopiesPolicy(t *testing.T) {
	srv := newTestServer(t, false, nil)
	p := &Policy{
		AllowHTTP:     true,
		AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Resolver:      newStub(map[string][]string{"dest.example": {"127.0.0.1"}}),
	}
	tr := newTransport(t, p)
	p.AllowNetworks[0] = netip.MustParsePrefix("10.0.0.0/8")
	p.AllowHTTP = false
	if _, body, err := roundTrip(t, tr, "http://dest.example:"+srv.port()+"/"); err != nil || body != "ok" {
		t.Errorf("request after changing the policy: %v %q", err, body)
	}
}

func TestTransportSettings(t *testing.T) {
	pool := x509.NewCertPool()
	tr := (&Policy{RootCAs: pool}).Transport()
	var nilPolicy *Policy
	nilTr := nilPolicy.Transport()
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"Proxy nil", tr.Proxy == nil && nilTr.Proxy == nil},
		{"DialContext set", tr.DialContext != nil && nilTr.DialContext != nil},
		//lint:ignore SA1019 the deprecated dialers must stay unset too: each would bypass the policy's DialContext
		{"no DialTLSContext", tr.DialTLSContext == nil && tr.DialTLS == nil && tr.Dial == nil},
		{"TLS 1.2 minimum", tr.TLSClientConfig.MinVersion == tls.VersionTLS12},
		{"verification on", !tr.TLSClientConfig.InsecureSkipVerify && tr.TLSClientConfig.VerifyPeerCertificate == nil},
		{"RootCAs", tr.TLSClientConfig.RootCAs == pool && nilTr.TLSClientConfig.RootCAs == nil},
		{"TLSHandshakeTimeout", tr.TLSHandshakeTimeout == 10*time.Second},
		{"ForceAttemptHTTP2", tr.ForceAttemptHTTP2},
		{"DisableCompression", tr.DisableCompression},
		{"MaxIdleConns", tr.MaxIdleConns == 512},
		{"MaxIdleConnsPerHost", tr.MaxIdleConnsPerHost == 256},
		{"IdleConnTimeout", tr.IdleConnTimeout == 90*time.Second},
		{"ResponseHeaderTimeout", tr.ResponseHeaderTimeout == 25*time.Second},
		{"ExpectContinueTimeout", tr.ExpectContinueTimeout == time.Second},
		{"MaxResponseHeaderBytes", tr.MaxResponseHeaderBytes == 64<<10},
		{"fresh transports", tr != (&Policy{}).Transport()},
	} {
		if !tc.ok {
			t.Errorf("%s: wrong", tc.name)
		}
	}
}

package main

// End-to-end tests of the detokenizing proxy: the real binary forwards
// to a destination inside the test process, which records what it got.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// egressLoopback lets proxies reach the test's destinations on loopback
// over plain http.
const egressLoopback = "\t\tegress {\n\t\t\tallow_http\n\t\t\tallow_network 127.0.0.0/8\n\t\t}"

// destBody is what the destination answers, byte for byte.
const destBody = `{"id":"ch_123","status":"created","amount":1000}`

// bigNumber does not fit a float64: it must reach the destination digit
// for digit.
const bigNumber = "12345678901234567890"

// destRequest is one request as the destination got it.
type destRequest struct {
	Method   string
	Path     string
	RawQuery string
	Host     string
	Header   http.Header
	Body     []byte
	Close    bool // the request asked to close the connection
}

// destination is an HTTP server on loopback that records every request
// and counts connections. It answers 201 with destBody and X-Dest: yes;
// a path ending in /redirect-out or /redirect-self answers 302, /fail
// 500, /huge a body over 1 MB, /spoof with the vault's trace header.
type destination struct {
	srv   *httptest.Server
	url   string
	mu    sync.Mutex
	reqs  []destRequest
	conns atomic.Int64
}

func newDestination(t *testing.T) *destination {
	t.Helper()
	d := &destination{}
	d.srv = httptest.NewUnstartedServer(http.HandlerFunc(d.serve))
	d.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			d.conns.Add(1)
		}
	}
	d.srv.Start()
	t.Cleanup(d.srv.Close)
	d.url = d.srv.URL
	return d
}

func (d *destination) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	d.mu.Lock()
	d.reqs = append(d.reqs, destRequest{
		Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery, Host: r.Host,
		Header: r.Header.Clone(), Body: body, Close: r.Close,
	})
	d.mu.Unlock()
	switch {
	case strings.HasSuffix(r.URL.Path, "/redirect-out"):
		w.Header().Set("Location", "http://169.254.169.254/latest")
		w.WriteHeader(http.StatusFound)
		return
	case strings.HasSuffix(r.URL.Path, "/redirect-self"):
		w.Header().Set("Location", d.url+"/base/landed")
		w.WriteHeader(http.StatusFound)
		return
	case strings.HasSuffix(r.URL.Path, "/fail"):
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "destination failure")
		return
	case strings.HasSuffix(r.URL.Path, "/huge"):
		w.Header().Set("Content-Length", strconv.Itoa(1<<20+1))
		w.WriteHeader(http.StatusOK)
		w.Write(bytes.Repeat([]byte("a"), 1<<20+1))
		return
	case strings.HasSuffix(r.URL.Path, "/spoof"):
		w.Header().Set("Svc-Trace-Id", "set-by-the-destination")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Dest", "yes")
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, destBody)
}

// count is the number of requests received so far.
func (d *destination) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.reqs)
}

// since returns the requests received after the first n.
func (d *destination) since(n int) []destRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]destRequest(nil), d.reqs[n:]...)
}

// one returns the single request received after the first n, failing the
// test unless there is exactly one.
func (d *destination) one(t *testing.T, n int) destRequest {
	t.Helper()
	got := d.since(n)
	if len(got) != 1 {
		t.Fatalf("the destination got %d requests, want 1", len(got))
	}
	return got[0]
}

// send makes one request with a raw body and header name/value pairs;
// host, when set, is the Host header. It fails the test on a transport
// error.
func send(t *testing.T, client *http.Client, method, rawURL, host string, body []byte, hdr ...string) apiResponse {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, rawURL, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if host != "" {
		req.Host = host
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, rawURL, err)
	}
	r := apiResponse{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	if len(bytes.TrimSpace(raw)) > 0 {
		var v any
		if json.Unmarshal(raw, &v) == nil {
			r.Body = v
		}
	}
	return r
}

// invoke calls a path of the server's API with send.
func invoke(t *testing.T, s *server, method, path string, body []byte, hdr ...string) apiResponse {
	t.Helper()
	return send(t, s.client, method, s.baseURL+path, "", body, hdr...)
}

// expectT is server.expect failing t rather than the server's test, for
// use in subtests.
func expectT(t *testing.T, s *server, want int, method, path, key string, body any, hdr ...string) apiResponse {
	t.Helper()
	r, err := s.request(method, path, key, body, hdr...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if r.Status != want {
		t.Fatalf("%s %s: status %d, want %d; body: %s", method, path, r.Status, want, r.Raw)
	}
	return r
}

// wantProxyError checks a failure of the proxy itself: the status, a
// proxy_error object carrying it with a detail or field errors, and no
// destination status header.
func wantProxyError(t *testing.T, r apiResponse, want int, what string) {
	t.Helper()
	if r.Status != want {
		t.Errorf("%s: status %d, want %d; body: %s", what, r.Status, want, r.Raw)
		return
	}
	if h := r.Header.Get("Svc-Proxy-Destination-Status"); h != "" {
		t.Errorf("%s: a proxy error with Svc-Proxy-Destination-Status %q", what, h)
	}
	pe, ok := testjson.Field(r.Body, "proxy_error").(map[string]any)
	if !ok {
		t.Errorf("%s: body without a proxy_error object: %s", what, r.Raw)
		return
	}
	if st, _ := pe["status"].(float64); int(st) != want {
		t.Errorf("%s: proxy_error.status %v, want %d", what, pe["status"], want)
	}
	if testjson.Str(pe, "detail") == "" && testjson.Field(pe, "errors") == nil {
		t.Errorf("%s: proxy_error without detail or errors: %s", what, r.Raw)
	}
}

// wantFieldError checks a 400 problem that names field in its errors,
// with a message containing each of mention.
func wantFieldError(t *testing.T, r apiResponse, name, what string, mention ...string) {
	t.Helper()
	wantProblem(t, r, http.StatusBadRequest, what)
	msgs, ok := testjson.Field(r.Body, "errors", name).([]any)
	if !ok || len(msgs) == 0 {
		t.Errorf("%s: errors do not name %s: %s", what, name, r.Raw)
		return
	}
	for _, m := range mention {
		if !strings.Contains(fmt.Sprint(msgs...), m) {
			t.Errorf("%s: errors.%s %v does not mention %q", what, name, msgs, m)
		}
	}
}

// createProxy creates a proxy and returns its id and key.
func createProxy(t *testing.T, s *server, mgmtKey string, body map[string]any) (id, key string) {
	t.Helper()
	r := s.expect(http.StatusCreated, http.MethodPost, "/proxies", mgmtKey, body)
	id, key = testjson.Str(r.Body, "id"), testjson.Str(r.Body, "key")
	if id == "" || key == "" {
		t.Fatalf("POST /proxies: no id or key: %s", r.Raw)
	}
	return id, key
}

// createToken creates a token from a raw JSON body and returns its id.
func createToken(t *testing.T, s *server, key, body string) string {
	t.Helper()
	r := s.expect(http.StatusCreated, http.MethodPost, "/tokens", key, body)
	id := testjson.Str(r.Body, "id")
	if id == "" {
		t.Fatalf("POST /tokens: no id: %s", r.Raw)
	}
	return id
}

// cardExpr is an expression for the card number of token id.
func cardExpr(id string) string { return "{{ " + id + " | json: '$.number' }}" }

// TestProxyEndToEnd drives proxy invocation through the binary: what the
// destination gets, what the caller gets, the failures that never reach
// the destination, the proxies API, whitelabel hosts, and that no secret
// lands in a file or log.
func TestProxyEndToEnd(t *testing.T) {
	t.Parallel()
	dest := newDestination(t)
	errDest := newDestination(t) // no request may ever reach it
	s := startServer(t, serverOpts{VaultExtra: egressLoopback})

	ct := s.createTenant("Proxy Co")
	mgmt := ct.Key
	appID, apiKey, _ := s.createApp(mgmt, map[string]any{"name": "payments", "type": "private",
		"permissions": []string{"token:create", "token:read", "token:use"}})
	_, readOnlyKey, _ := s.createApp(mgmt, map[string]any{"name": "reader", "type": "private",
		"permissions": []string{"token:create", "token:read"}})
	_, publicKey, _ := s.createApp(mgmt, map[string]any{"name": "browser", "type": "public",
		"permissions": []string{"token:create"}})
	cardID := createToken(t, s, apiKey, `{"type":"card","data":{"number":"`+e2ePAN+`","expiration_month":12,"expiration_year":2030,"cvc":"123"}}`)
	genericID := createToken(t, s, apiKey, `{"type":"token","data":{"n":`+bigNumber+`}}`)

	ct2 := s.createTenant("Other Co")
	_, otherKey, _ := s.createApp(ct2.Key, map[string]any{"name": "other payments", "type": "private",
		"permissions": []string{"token:create", "token:read", "token:use"}})
	otherCardID := createToken(t, s, otherKey, `{"type":"card","data":{"number":"4000056655665556","expiration_month":1,"expiration_year":2031}}`)

	r := s.expect(http.StatusCreated, http.MethodPost, "/proxies", mgmt, map[string]any{"name": "charges", "destination_url": dest.url + "/base"})
	mainID, mainKey := testjson.Str(r.Body, "id"), testjson.Str(r.Body, "key")
	if mainID == "" || mainKey == "" || testjson.Field(r.Body, "require_auth") != true {
		t.Fatalf("POST /proxies: want id, key and require_auth true: %s", r.Raw)
	}
	if testjson.Str(r.Body, "destination_url") != dest.url+"/base" || testjson.Str(r.Body, "name") != "charges" {
		t.Errorf("POST /proxies answer: %s", r.Raw)
	}
	_, errKey := createProxy(t, s, mgmt, map[string]any{"name": "errors", "destination_url": errDest.url + "/base"})
	_, openKey := createProxy(t, s, mgmt, map[string]any{"name": "open", "destination_url": dest.url + "/open",
		"require_auth": false, "application": map[string]any{"id": appID}})
	_, anonKey := createProxy(t, s, mgmt, map[string]any{"name": "anonymous", "destination_url": dest.url + "/anon", "require_auth": false})
	closedPort := freePorts(t, 1)[0]
	_, downKey := createProxy(t, s, mgmt, map[string]any{"name": "down", "destination_url": fmt.Sprintf("http://127.0.0.1:%d", closedPort)})

	chargeBody := `{"card":{"number":"` + cardExpr(cardID) + `"},` +
		`"whole":"{{ token: ` + cardID + ` | json: '$.data' }}",` +
		`"n":"{{ ` + genericID + ` | json: '$.n' }}",` +
		`"text":"last4 {{ ` + cardID + ` | json: '$.number' | last4 }}"}`

	// checkCharge checks what the destination and the caller saw of one
	// detokenizing call of the charges proxy.
	checkCharge := func(t *testing.T, r apiResponse, got destRequest) {
		t.Helper()
		if got.Method != http.MethodPost || got.Path != "/base/charges/1" || got.RawQuery != "x=1" {
			t.Errorf("destination got %s %s?%s, want POST /base/charges/1?x=1", got.Method, got.Path, got.RawQuery)
		}
		var body map[string]any
		dec := json.NewDecoder(bytes.NewReader(got.Body))
		dec.UseNumber()
		if err := dec.Decode(&body); err != nil {
			t.Fatalf("destination body is not JSON (%v): %s", err, got.Body)
		}
		if n := testjson.Str(body, "card", "number"); n != e2ePAN {
			t.Errorf("card.number = %q, want the card number", n)
		}
		whole, ok := body["whole"].(map[string]any)
		if !ok {
			t.Errorf("whole is not the embedded token data object: %s", got.Body)
		} else if testjson.Str(whole, "number") != e2ePAN || fmt.Sprint(whole["expiration_year"]) != "2030" {
			t.Errorf("whole = %v, want the card data", whole)
		}
		if !bytes.Contains(got.Body, []byte(`"n":`+bigNumber)) {
			t.Errorf("destination body does not carry n as the exact number %s: %s", bigNumber, got.Body)
		}
		if text := testjson.Str(body, "text"); text != "last4 4242" {
			t.Errorf("text = %q, want %q", text, "last4 4242")
		}
		if ct := got.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("destination Content-Type %q", ct)
		}
		for name, vv := range got.Header {
			if strings.HasPrefix(strings.ToLower(name), "svc-") {
				t.Errorf("the destination got the vault header %s", name)
			}
			for _, v := range vv {
				if strings.Contains(v, apiKey) || strings.Contains(v, mainKey) {
					t.Errorf("the destination got a vault key in header %s", name)
				}
			}
		}
		all := string(got.Body) + got.Path + "?" + got.RawQuery
		if strings.Contains(all, apiKey) || strings.Contains(all, mainKey) {
			t.Errorf("the destination got a vault key in the path, query or body")
		}
		if r.Status != http.StatusCreated || string(r.Raw) != destBody {
			t.Errorf("caller got %d %q, want 201 %q", r.Status, r.Raw, destBody)
		}
		if r.Header.Get("X-Dest") != "yes" {
			t.Errorf("caller did not get the destination's X-Dest header: %v", r.Header)
		}
		if h := r.Header.Get("Svc-Proxy-Destination-Status"); h != "201" {
			t.Errorf("Svc-Proxy-Destination-Status = %q, want 201", h)
		}
	}

	t.Run("round trip/query key", func(t *testing.T) {
		n := dest.count()
		r := invoke(t, s, http.MethodPost, "/proxy/charges/1?x=1&svc-proxy-key="+url.QueryEscape(mainKey), []byte(chargeBody),
			"SVC-API-KEY", apiKey, "Content-Type", "application/json", "SVC-TRACE-ID", "trace-e2e-1")
		checkCharge(t, r, dest.one(t, n))
	})
	t.Run("round trip/header key", func(t *testing.T) {
		n := dest.count()
		r := invoke(t, s, http.MethodPost, "/proxy/charges/1?x=1", []byte(chargeBody),
			"SVC-API-KEY", apiKey, "SVC-PROXY-KEY", mainKey, "Content-Type", "application/json")
		checkCharge(t, r, dest.one(t, n))
	})

	t.Run("bodies", func(t *testing.T) {
		n := dest.count()
		form := "card=" + url.QueryEscape(cardExpr(cardID)) + "&plain=a+b%21&n%C3%A4me=%7Bx%7D"
		r := invoke(t, s, http.MethodPost, "/proxy/form", []byte(form),
			"SVC-API-KEY", apiKey, "SVC-PROXY-KEY", mainKey, "Content-Type", "application/x-www-form-urlencoded")
		if r.Status != http.StatusCreated {
			t.Fatalf("form body: status %d: %s", r.Status, r.Raw)
		}
		if got := string(dest.one(t, n).Body); got != "card="+e2ePAN+"&plain=a+b%21&n%C3%A4me=%7Bx%7D" {
			t.Errorf("form body at the destination: %q", got)
		}

		n = dest.count()
		r = invoke(t, s, http.MethodPut, "/proxy/text", []byte("pay "+cardExpr(cardID)+" now"),
			"SVC-API-KEY", apiKey, "SVC-PROXY-KEY", mainKey, "Content-Type", "text/plain; charset=utf-8")
		if r.Status != http.StatusCreated {
			t.Fatalf("text body: status %d: %s", r.Status, r.Raw)
		}
		if got := dest.one(t, n); string(got.Body) != "pay "+e2ePAN+" now" || got.Method != http.MethodPut {
			t.Errorf("text body at the destination: %s %q", got.Method, got.Body)
		}

		n = dest.count()
		opaque := []byte("raw {{ " + cardID + " }} \x00\xff\xfe{{ unterminated")
		r = invoke(t, s, http.MethodPost, "/proxy/blob", opaque,
			"SVC-API-KEY", apiKey, "SVC-PROXY-KEY", mainKey, "Content-Type", "application/octet-stream")
		if r.Status != http.StatusCreated {
			t.Fatalf("opaque body: status %d: %s", r.Status, r.Raw)
		}
		if got := dest.one(t, n); !bytes.Equal(got.Body, opaque) {
			t.Errorf("opaque body changed on the way: %q, want %q", got.Body, opaque)
		}
	})

	// A JSON string is the same whether its braces are escaped or not;
	// vaultstore.DetokenizeJSON finds expressions in the decoded text.
	t.Run("json escaped braces", func(t *testing.T) {
		n := dest.count()
		body := `{"card":"\u007b\u007b ` + cardID + ` | json: '$.number' \u007d\u007d","ok":"{"}`
		r := invoke(t, s, http.MethodPost, "/proxy/escaped", []byte(body),
			"SVC-API-KEY", apiKey, "SVC-PROXY-KEY", mainKey, "Content-Type", "application/json")
		if r.Status != http.StatusCreated {
			t.Fatalf("status %d: %s", r.Status, r.Raw)
		}
		if got := dest.one(t, n); string(got.Body) != `{"card":"`+e2ePAN+`","ok":"{"}` {
			t.Errorf("an expression with JSON-escaped braces reached the destination undetokenized: %s", got.Body)
		}
	})

	t.Run("headers", func(t *testing.T) {
		n := dest.count()
		r := invoke(t, s, http.MethodGet, "/proxy/h", nil, "SVC-API-KEY", apiKey, "SVC-PROXY-KEY", mainKey,
			"SVC-PROXY-KEEP-ALIVE", "timeout=5, max=100", "Authorization", "Bearer dest-secret", "X-Custom", "kept")
		if r.Status != http.StatusCreated {
			t.Fatalf("status %d: %s", r.Status, r.Raw)
		}
		got := dest.one(t, n)
		if v := got.Header.Get("Keep-Alive"); v != "timeout=5, max=100" {
			t.Errorf("destination Keep-Alive = %q, want the SVC-PROXY-KEEP-ALIVE value", v)
		}
		if v := got.Header.Get("Authorization"); v != "Bearer dest-secret" {
			t.Errorf("destination Authorization = %q, want it forwarded", v)
		}
		if v := got.Header.Get("X-Custom"); v != "kept" {
			t.Errorf("destination X-Custom = %q", v)
		}

		n = dest.count()
		r = invoke(t, s, http.MethodGet, "/proxy/h", nil, "SVC-API-KEY", apiKey, "SVC-PROXY-KEY", mainKey,
			"SVC-PROXY-CONNECTION", "close")
		if r.Status != http.StatusCreated || string(r.Raw) != destBody {
			t.Fatalf("with SVC-PROXY-CONNECTION close: status %d: %s", r.Status, r.Raw)
		}
		if got := dest.one(t, n); !got.Close && !strings.EqualFold(got.Header.Get("Connection"), "close") {
			t.Errorf("the destination did not get Connection: close (headers %v)", got.Header)
		}
		// and the next call still works
		n = dest.count()
		if r := invoke(t, s, http.MethodGet, "/proxy/h", nil, "SVC-API-KEY", apiKey, "SVC-PROXY-KEY", mainKey); r.Status != http.StatusCreated {
			t.Errorf("after a closed connection: status %d: %s", r.Status, r.Raw)
		}
		dest.one(t, n)

		// hop-by-hop headers, and those the caller's Connection names, stay
		n = dest.count()
		invoke(t, s, http.MethodGet, "/proxy/h", nil, "SVC-API-KEY", apiKey, "SVC-PROXY-KEY", mainKey,
			"Connection", "X-Hop", "X-Hop", "1", "Te", "trailers")
		if got := dest.one(t, n); got.Header.Get("X-Hop") != "" || got.Header.Get("Te") != "" {
			t.Errorf("hop-by-hop headers reached the destination: %v", got.Header)
		}
	})

	// The vault's trace id identifies the call in its logs; a destination
	// header of the same name must not replace it.
	t.Run("trace id not replaced by the destination", func(t *testing.T) {
		r := invoke(t, s, http.MethodGet, "/proxy/spoof", nil, "SVC-API-KEY", apiKey, "SVC-PROXY-KEY", mainKey,
			"SVC-TRACE-ID", "trace-e2e-2")
		if r.Status != http.StatusCreated {
			t.Fatalf("status %d: %s", r.Status, r.Raw)
		}
		if got := r.Header.Values("Svc-Trace-Id"); len(got) != 1 || got[0] != "trace-e2e-2" {
			t.Errorf("Svc-Trace-Id = %q, want the caller's trace id %q", got, "trace-e2e-2")
		}
	})

	t.Run("errors", func(t *testing.T) {
		auth := []string{"SVC-API-KEY", apiKey, "SVC-PROXY-KEY", errKey, "Content-Type", "application/json"}
		withAuth := func(extra ...string) []string { return append(append([]string(nil), auth...), extra...) }
		var many strings.Builder
		many.WriteString(`{"refs":[`)
		for i := 0; i < 21; i++ {
			if i > 0 {
				many.WriteString(",")
			}
			fmt.Fprintf(&many, `"{{ %s }}"`, uuid.NewString())
		}
		many.WriteString(`]}`)
		big := []byte(`{"pad":"` + strings.Repeat("x", 1<<20) + `"}`)
		ephURL := errDest.url + "/eph"

		cases := []struct {
			name string
			path string
			body []byte
			hdr  []string
			want int
		}{
			{"unknown token", "/proxy/c", []byte(`{"n":"` + cardExpr(uuid.NewString()) + `"}`), auth, 400},
			{"token of another tenant", "/proxy/c", []byte(`{"n":"` + cardExpr(otherCardID) + `"}`), auth, 400},
			{"application without token:use", "/proxy/c", []byte(`{"a":1}`),
				[]string{"SVC-API-KEY", readOnlyKey, "SVC-PROXY-KEY", errKey, "Content-Type", "application/json"}, 403},
			{"application without token:use, detokenizing", "/proxy/c", []byte(`{"n":"` + cardExpr(cardID) + `"}`),
				[]string{"SVC-API-KEY", readOnlyKey, "SVC-PROXY-KEY", errKey, "Content-Type", "application/json"}, 403},
			{"require_auth without API key", "/proxy/c", []byte(`{"a":1}`),
				[]string{"SVC-PROXY-KEY", errKey, "Content-Type", "application/json"}, 401},
			{"API key of another tenant", "/proxy/c", []byte(`{"a":1}`),
				[]string{"SVC-API-KEY", otherKey, "SVC-PROXY-KEY", errKey, "Content-Type", "application/json"}, 401},
			{"unknown proxy key", "/proxy/c", []byte(`{"a":1}`),
				[]string{"SVC-API-KEY", apiKey, "SVC-PROXY-KEY", "nosuchproxykey0123456789", "Content-Type", "application/json"}, 401},
			{"unknown proxy key in the query", "/proxy/c?svc-proxy-key=nosuchproxykey0123456789", []byte(`{"a":1}`),
				[]string{"SVC-API-KEY", apiKey, "Content-Type", "application/json"}, 401},
			{"neither proxy key nor URL", "/proxy/c", []byte(`{"a":1}`),
				[]string{"SVC-API-KEY", apiKey, "Content-Type", "application/json"}, 400},
			{"more than 20 tokens", "/proxy/c", []byte(many.String()), auth, 400},
			{"empty expression", "/proxy/c", []byte(`{"a":"{{ }}"}`), auth, 400},
			{"unterminated expression", "/proxy/c", []byte(`{"a":"{{ ` + cardID + `"}`), auth, 400},
			{"unterminated expression in text", "/proxy/c", []byte(`pay {{ ` + cardID),
				withAuth("Content-Type", "text/plain"), 400},
			{"invalid JSON with an expression", "/proxy/c", []byte(`{"a":"{{ ` + cardID + ` }}",}`), auth, 400},
			{"body over 1 MB", "/proxy/c", big, auth, 413},
			{"opaque body over 1 MB", "/proxy/c", big, withAuth("Content-Type", "application/octet-stream"), 413},
			{"ephemeral with a public key", "/proxy/c", []byte(`{"a":1}`),
				[]string{"SVC-API-KEY", publicKey, "SVC-PROXY-URL", ephURL, "Content-Type", "application/json"}, 403},
			{"ephemeral without a key", "/proxy/c", []byte(`{"a":1}`),
				[]string{"SVC-PROXY-URL", ephURL, "Content-Type", "application/json"}, 401},
			{"ephemeral with a management key", "/proxy/c", []byte(`{"a":1}`),
				[]string{"SVC-API-KEY", mgmt, "SVC-PROXY-URL", ephURL, "Content-Type", "application/json"}, 403},
			{"ephemeral to a relative URL", "/proxy/c", []byte(`{"a":1}`),
				[]string{"SVC-API-KEY", apiKey, "SVC-PROXY-URL", "/eph", "Content-Type", "application/json"}, 400},
			{"dot-dot suffix", "/proxy/charges/../admin", []byte(`{"a":1}`), auth, 400},
			{"escaped dot-dot suffix", "/proxy/charges/%2e%2e/admin", []byte(`{"a":1}`), auth, 400},
			{"escaped slash dot-dot suffix", "/proxy/charges%2f..%2fadmin", []byte(`{"a":1}`), auth, 400},
		}
		for _, c := range cases {
			r := invoke(t, s, http.MethodPost, c.path, c.body, c.hdr...)
			wantProxyError(t, r, c.want, c.name)
		}

		// ephemeral proxies disabled for the tenant
		expectT(t, s, http.StatusOK, http.MethodPut, "/tenants/self", ct2.Key,
			map[string]any{"name": "Other Co", "settings": map[string]string{"disable_ephemeral_proxy": "true"}})
		r := invoke(t, s, http.MethodPost, "/proxy/c", []byte(`{"a":1}`),
			"SVC-API-KEY", otherKey, "SVC-PROXY-URL", ephURL, "Content-Type", "application/json")
		wantProxyError(t, r, http.StatusForbidden, "ephemeral with disable_ephemeral_proxy true")
		expectT(t, s, http.StatusOK, http.MethodPut, "/tenants/self", ct2.Key,
			map[string]any{"name": "Other Co", "settings": map[string]string{"disable_ephemeral_proxy": "false"}})
		n := dest.count()
		r = invoke(t, s, http.MethodPost, "/proxy/c", []byte(`{"a":1}`),
			"SVC-API-KEY", otherKey, "SVC-PROXY-URL", dest.url+"/eph", "Content-Type", "application/json")
		if r.Status != http.StatusCreated {
			t.Errorf("ephemeral after disable_ephemeral_proxy went back to false: status %d: %s", r.Status, r.Raw)
		}
		if len(dest.since(n)) != 1 {
			t.Errorf("ephemeral after re-enabling: the destination got %d requests", len(dest.since(n)))
		}

		if got, conns := errDest.count(), errDest.conns.Load(); got != 0 || conns != 0 {
			t.Errorf("refused invocations reached the destination: %d requests on %d connections", got, conns)
		}
	})

	t.Run("require_auth false", func(t *testing.T) {
		n := dest.count()
		r := invoke(t, s, http.MethodPost, "/proxy/pay", []byte(`{"n":"`+cardExpr(cardID)+`"}`),
			"SVC-PROXY-KEY", openKey, "Content-Type", "application/json")
		if r.Status != http.StatusCreated || r.Header.Get("Svc-Proxy-Destination-Status") != "201" {
			t.Fatalf("anonymous call of a proxy with an application: status %d: %s", r.Status, r.Raw)
		}
		if got := dest.one(t, n); got.Path != "/open/pay" || string(got.Body) != `{"n":"`+e2ePAN+`"}` {
			t.Errorf("destination got %s %q", got.Path, got.Body)
		}

		n = dest.count()
		r = invoke(t, s, http.MethodPost, "/proxy/pay", []byte(`{"n":"`+cardExpr(cardID)+`"}`),
			"SVC-PROXY-KEY", anonKey, "Content-Type", "application/json")
		wantProxyError(t, r, http.StatusUnauthorized, "expression through a proxy without application or API key")
		if got := dest.since(n); len(got) != 0 {
			t.Errorf("a refused call reached the destination")
		}

		n = dest.count()
		r = invoke(t, s, http.MethodPost, "/proxy/pay?svc-proxy-key="+url.QueryEscape(anonKey), []byte(`{"amount":5}`),
			"Content-Type", "application/json")
		if r.Status != http.StatusCreated || string(r.Raw) != destBody {
			t.Errorf("anonymous call without expressions: status %d: %s", r.Status, r.Raw)
		}
		if got := dest.one(t, n); got.Path != "/anon/pay" || string(got.Body) != `{"amount":5}` || got.RawQuery != "" {
			t.Errorf("destination got %s?%s %q", got.Path, got.RawQuery, got.Body)
		}
	})

	t.Run("ephemeral", func(t *testing.T) {
		n := dest.count()
		r := invoke(t, s, http.MethodPost, "/proxy/charges?y=2", []byte(`{"n":"`+cardExpr(cardID)+`"}`),
			"SVC-API-KEY", apiKey, "SVC-PROXY-URL", dest.url+"/eph", "Content-Type", "application/json")
		if r.Status != http.StatusCreated || string(r.Raw) != destBody || r.Header.Get("Svc-Proxy-Destination-Status") != "201" {
			t.Fatalf("ephemeral call: status %d, headers %v: %s", r.Status, r.Header, r.Raw)
		}
		got := dest.one(t, n)
		if got.Path != "/eph/charges" || got.RawQuery != "y=2" || string(got.Body) != `{"n":"`+e2ePAN+`"}` {
			t.Errorf("destination got %s?%s %q", got.Path, got.RawQuery, got.Body)
		}
		if got.Header.Get("Svc-Proxy-Url") != "" || got.Header.Get("Svc-Api-Key") != "" {
			t.Errorf("vault headers reached the destination: %v", got.Header)
		}
	})

	t.Run("redirects not followed", func(t *testing.T) {
		n := dest.count()
		r := invoke(t, s, http.MethodGet, "/proxy/redirect-out", nil, "SVC-API-KEY", apiKey, "SVC-PROXY-KEY", mainKey)
		if r.Status != http.StatusFound || r.Header.Get("Location") != "http://169.254.169.254/latest" ||
			r.Header.Get("Svc-Proxy-Destination-Status") != "302" {
			t.Errorf("redirect out: status %d, Location %q, destination status %q", r.Status, r.Header.Get("Location"), r.Header.Get("Svc-Proxy-Destination-Status"))
		}
		r = invoke(t, s, http.MethodGet, "/proxy/redirect-self", nil, "SVC-API-KEY", apiKey, "SVC-PROXY-KEY", mainKey)
		if r.Status != http.StatusFound || r.Header.Get("Location") != dest.url+"/base/landed" ||
			r.Header.Get("Svc-Proxy-Destination-Status") != "302" {
			t.Errorf("redirect to the destination: status %d, Location %q", r.Status, r.Header.Get("Location"))
		}
		got := dest.since(n)
		if len(got) != 2 || got[0].Path != "/base/redirect-out" || got[1].Path != "/base/redirect-self" {
			var paths []string
			for _, g := range got {
				paths = append(paths, g.Path)
			}
			t.Errorf("the destination got %v, want one request per call and no redirect followed", paths)
		}
	})

	t.Run("destination failures", func(t *testing.T) {
		r := invoke(t, s, http.MethodPost, "/proxy/x", []byte(`{"n":"`+cardExpr(cardID)+`"}`),
			"SVC-API-KEY", apiKey, "SVC-PROXY-KEY", downKey, "Content-Type", "application/json")
		wantProxyError(t, r, http.StatusBadGateway, "destination down")
		if strings.Contains(string(r.Raw), e2ePAN) {
			t.Errorf("the error carries the card number: %s", r.Raw)
		}

		// the destination's own 5xx is relayed as it is, with its status
		r = invoke(t, s, http.MethodGet, "/proxy/fail", nil, "SVC-API-KEY", apiKey, "SVC-PROXY-KEY", mainKey)
		if r.Status != http.StatusInternalServerError || string(r.Raw) != "destination failure" ||
			r.Header.Get("Svc-Proxy-Destination-Status") != "500" {
			t.Errorf("destination 500: caller got %d %q, destination status %q", r.Status, r.Raw, r.Header.Get("Svc-Proxy-Destination-Status"))
		}

		r = invoke(t, s, http.MethodGet, "/proxy/huge", nil, "SVC-API-KEY", apiKey, "SVC-PROXY-KEY", mainKey)
		wantProxyError(t, r, http.StatusBadGateway, "destination response over 1 MB")
	})

	t.Run("crud", func(t *testing.T) {
		r := expectT(t, s, http.StatusCreated, http.MethodPost, "/proxies", mgmt, map[string]any{"name": "pay-alpha", "destination_url": dest.url + "/alpha"})
		alphaID, alphaKey := testjson.Str(r.Body, "id"), testjson.Str(r.Body, "key")
		r = expectT(t, s, http.StatusCreated, http.MethodPost, "/proxies", mgmt, map[string]any{"name": "Pay-Beta", "destination_url": dest.url + "/beta"})
		betaID := testjson.Str(r.Body, "id")
		r = expectT(t, s, http.StatusCreated, http.MethodPost, "/proxies", mgmt, map[string]any{"name": "gateway", "destination_url": dest.url + "/gw"})
		gwID := testjson.Str(r.Body, "id")

		names := func(r apiResponse) []string {
			var out []string
			for _, p := range listData(r) {
				out = append(out, testjson.Str(p, "name"))
			}
			return out
		}
		for _, q := range []string{"pay*", "PAY*", "pay-*"} {
			r = expectT(t, s, http.StatusOK, http.MethodGet, "/proxies?name="+url.QueryEscape(q), mgmt, nil)
			if got := names(r); strings.Join(got, ",") != "pay-alpha,Pay-Beta" {
				t.Errorf("GET /proxies?name=%s: %v, want [pay-alpha Pay-Beta]", q, got)
			}
		}
		r = expectT(t, s, http.StatusOK, http.MethodGet, "/proxies?name=beta", mgmt, nil)
		if got := names(r); strings.Join(got, ",") != "Pay-Beta" {
			t.Errorf("GET /proxies?name=beta: %v", got)
		}
		r = expectT(t, s, http.StatusOK, http.MethodGet, "/proxies?id="+alphaID+"&id="+gwID, mgmt, nil)
		if got := names(r); strings.Join(got, ",") != "pay-alpha,gateway" {
			t.Errorf("GET /proxies?id=alpha&id=gateway: %v", got)
		}
		r = expectT(t, s, http.StatusOK, http.MethodGet, "/proxies", mgmt, nil)
		if len(listData(r)) < 8 {
			t.Errorf("GET /proxies lists %d proxies, want all 8: %v", len(listData(r)), names(r))
		}

		r = expectT(t, s, http.StatusOK, http.MethodGet, "/proxies/"+betaID, mgmt, nil)
		if testjson.Str(r.Body, "name") != "Pay-Beta" || testjson.Str(r.Body, "destination_url") != dest.url+"/beta" ||
			testjson.Field(r.Body, "require_auth") != true || testjson.Str(r.Body, "tenant_id") != ct.Tenant.ID {
			t.Errorf("GET /proxies/{id}: %s", r.Raw)
		}
		wantProblem(t, s.do(http.MethodGet, "/proxies/"+uuid.NewString(), mgmt, nil), http.StatusNotFound, "GET an unknown proxy")
		wantProblem(t, s.do(http.MethodGet, "/proxies", apiKey, nil), http.StatusForbidden, "GET /proxies with a private key")

		// PUT
		wantFieldError(t, s.do(http.MethodPut, "/proxies/"+betaID, mgmt, map[string]any{"destination_url": dest.url + "/beta2"}), "name", "PUT without name")
		wantFieldError(t, s.do(http.MethodPut, "/proxies/"+betaID, mgmt, map[string]any{"name": "Pay-Beta"}), "destination_url", "PUT without destination_url")
		r = expectT(t, s, http.StatusOK, http.MethodPut, "/proxies/"+betaID, mgmt, map[string]any{"name": "Pay-Beta", "destination_url": dest.url + "/beta2", "require_auth": false})
		if testjson.Str(r.Body, "destination_url") != dest.url+"/beta2" || testjson.Field(r.Body, "require_auth") != false || testjson.Str(r.Body, "id") != betaID {
			t.Errorf("PUT answer: %s", r.Raw)
		}

		// PATCH
		expectT(t, s, http.StatusNoContent, http.MethodPatch, "/proxies/"+gwID, mgmt,
			map[string]any{"name": "gateway-renamed", "destination_url": dest.url + "/gw2"}, "Content-Type", "application/merge-patch+json")
		r = expectT(t, s, http.StatusOK, http.MethodGet, "/proxies/"+gwID, mgmt, nil)
		if testjson.Str(r.Body, "name") != "gateway-renamed" || testjson.Str(r.Body, "destination_url") != dest.url+"/gw2" || testjson.Field(r.Body, "require_auth") != true {
			t.Errorf("after PATCH: %s", r.Raw)
		}
		wantProblem(t, s.do(http.MethodPatch, "/proxies/"+gwID, mgmt, map[string]any{"name": "x"}), http.StatusUnsupportedMediaType, "PATCH with application/json")
		wantFieldError(t, s.do(http.MethodPatch, "/proxies/"+gwID, mgmt, map[string]any{"destination_url": "http://169.254.169.254/latest"},
			"Content-Type", "application/merge-patch+json"), "destination_url", "PATCH to a metadata address")

		// validation of create
		wantFieldError(t, s.do(http.MethodPost, "/proxies", mgmt, map[string]any{"name": "old", "destination_url": dest.url, "request_reactor_id": uuid.NewString()}),
			"request_reactor_id", "request_reactor_id", "request_transform")
		wantFieldError(t, s.do(http.MethodPost, "/proxies", mgmt, map[string]any{"name": "code", "destination_url": dest.url,
			"request_transform": map[string]any{"code": "const cp = require('child_process'); module.exports = async function (req) { return req.args; };"}}),
			"request_transform.code", "request_transform requiring child_process", "child_process")
		wantFieldError(t, s.do(http.MethodPost, "/proxies", mgmt, map[string]any{"name": strings.Repeat("n", 201), "destination_url": dest.url}),
			"name", "name of 201 characters")
		r = expectT(t, s, http.StatusCreated, http.MethodPost, "/proxies", mgmt, map[string]any{"name": strings.Repeat("n", 200), "destination_url": dest.url})
		expectT(t, s, http.StatusNoContent, http.MethodDelete, "/proxies/"+testjson.Str(r.Body, "id"), mgmt, nil)
		wantFieldError(t, s.do(http.MethodPost, "/proxies", mgmt, map[string]any{"name": "x", "destination_url": dest.url, "application": map[string]any{"id": uuid.NewString()}}),
			"application.id", "unknown application")

		// DELETE
		n := dest.count()
		if r := invoke(t, s, http.MethodGet, "/proxy", nil, "SVC-API-KEY", apiKey, "SVC-PROXY-KEY", alphaKey); r.Status != http.StatusCreated {
			t.Errorf("invoking pay-alpha before DELETE: status %d: %s", r.Status, r.Raw)
		} else if got := dest.one(t, n); got.Path != "/alpha" {
			t.Errorf("pay-alpha with no suffix reached %s, want /alpha", got.Path)
		}
		expectT(t, s, http.StatusNoContent, http.MethodDelete, "/proxies/"+alphaID, mgmt, nil)
		wantProblem(t, s.do(http.MethodGet, "/proxies/"+alphaID, mgmt, nil), http.StatusNotFound, "GET a deleted proxy")
		n = dest.count()
		r = invoke(t, s, http.MethodGet, "/proxy", nil, "SVC-API-KEY", apiKey, "SVC-PROXY-KEY", alphaKey)
		wantProxyError(t, r, http.StatusUnauthorized, "the key of a deleted proxy")
		if len(dest.since(n)) != 0 {
			t.Errorf("a deleted proxy still forwarded")
		}
	})

	// Whitelabel: a second server on the same storage serves the charges
	// proxy at the root of a site pinned by its key, and a site serving
	// the proxy registered for the request's host.
	s.stopClean()
	ports := freePorts(t, 2)
	pinnedPort, hostPort := ports[0], ports[1]
	w := startServer(t, serverOpts{
		Storage:    s.opts.Storage,
		VaultExtra: egressLoopback,
		ExtraSites: fmt.Sprintf("\nhttp://127.0.0.1:%d {\n\tvault_proxy {env.PAY_PROXY_KEY}\n}\n\nhttp://:%d {\n\tvault_proxy\n}\n", pinnedPort, hostPort),
		Env:        []string{"PAY_PROXY_KEY=" + mainKey},
	})
	t.Run("whitelabel", func(t *testing.T) {
		n := dest.count()
		r := send(t, w.client, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/charges?x=1", pinnedPort), "",
			[]byte(`{"n":"`+cardExpr(cardID)+`"}`), "SVC-API-KEY", apiKey, "Content-Type", "application/json")
		if r.Status != http.StatusCreated || string(r.Raw) != destBody || r.Header.Get("Svc-Proxy-Destination-Status") != "201" {
			t.Fatalf("pinned whitelabel site: status %d: %s", r.Status, r.Raw)
		}
		if got := dest.one(t, n); got.Path != "/base/charges" || got.RawQuery != "x=1" || string(got.Body) != `{"n":"`+e2ePAN+`"}` {
			t.Errorf("destination got %s?%s %q", got.Path, got.RawQuery, got.Body)
		}
		r = send(t, w.client, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/charges", pinnedPort), "", []byte(`{"a":1}`), "Content-Type", "application/json")
		wantProxyError(t, r, http.StatusUnauthorized, "pinned whitelabel site without an API key")

		out, errOut, err := w.runCLI("vault", "hostname", "add", "--tenant", ct.Tenant.ID, "--proxy", mainID, "pay.example.test", "--address", w.adminAddr)
		if err != nil {
			t.Fatalf("caddy vault hostname add: %v\n%s\n%s", err, out, errOut)
		}
		out, errOut, err = w.runCLI("vault", "hostname", "list", "--tenant", ct.Tenant.ID, "--address", w.adminAddr)
		if err != nil {
			t.Fatalf("caddy vault hostname list: %v\n%s\n%s", err, out, errOut)
		}
		var list []map[string]any
		if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 ||
			testjson.Str(list[0], "hostname") != "pay.example.test" || testjson.Str(list[0], "proxy_id") != mainID {
			t.Errorf("caddy vault hostname list printed %s (%v)", out, err)
		}

		hostURL := fmt.Sprintf("http://127.0.0.1:%d/charges/7", hostPort)
		n = dest.count()
		r = send(t, w.client, http.MethodPost, hostURL, "pay.example.test", []byte(`{"n":"`+cardExpr(cardID)+`"}`),
			"SVC-API-KEY", apiKey, "Content-Type", "application/json")
		if r.Status != http.StatusCreated || string(r.Raw) != destBody {
			t.Fatalf("registered hostname: status %d: %s", r.Status, r.Raw)
		}
		if got := dest.one(t, n); got.Path != "/base/charges/7" || string(got.Body) != `{"n":"`+e2ePAN+`"}` {
			t.Errorf("destination got %s %q", got.Path, got.Body)
		}
		n = dest.count()
		r = send(t, w.client, http.MethodPost, hostURL, "other.example.test", []byte(`{"a":1}`),
			"SVC-API-KEY", apiKey, "Content-Type", "application/json")
		wantProxyError(t, r, http.StatusNotFound, "unregistered hostname")
		if len(dest.since(n)) != 0 {
			t.Errorf("an unregistered hostname reached the destination")
		}
	})
	w.stopClean()

	t.Run("audit", func(t *testing.T) {
		needles := map[string]string{"card number": e2ePAN, "API key": apiKey, "management key": mgmt,
			"proxy key": mainKey, "open proxy key": openKey, "anonymous proxy key": anonKey}
		for _, srv := range []*server{s, w} {
			logs := serverLogs(srv)
			for name, v := range needles {
				if strings.Contains(logs, v) {
					t.Errorf("the %s is in the logs of %s", name, srv.dir)
				}
			}
		}
		raw, err := os.ReadFile(s.accessLog)
		if err != nil || !strings.Contains(string(raw), "/proxy/charges/1") {
			t.Errorf("the access log does not record the proxy calls (%v)", err)
		}
		b := map[string][]byte{}
		for name, v := range needles {
			b[name] = []byte(v)
		}
		if found := scanTree(t, s.opts.Storage, b); len(found) > 0 {
			t.Errorf("secrets in clear in the data directory: %v", found)
		}
		// the servers' own directories: Caddyfiles, autosaved configs, logs
		for _, srv := range []*server{s, w} {
			if found := scanTree(t, srv.dir, b); len(found) > 0 {
				t.Errorf("secrets in clear in the server directory: %v", found)
			}
		}
	})
}

// TestProxyDefaultEgress: without an egress block, proxies reach only
// https destinations with public addresses; nothing reaches loopback.
func TestProxyDefaultEgress(t *testing.T) {
	t.Parallel()
	dest := newDestination(t)
	s := startServer(t, serverOpts{})
	ct := s.createTenant("Egress Co")
	_, apiKey, _ := s.createApp(ct.Key, map[string]any{"name": "payments", "type": "private",
		"permissions": []string{"token:create", "token:read", "token:use"}})
	port := dest.srv.Listener.Addr().(*net.TCPAddr).Port

	for _, u := range []string{
		fmt.Sprintf("http://127.0.0.1:%d", port),
		fmt.Sprintf("https://127.0.0.1:%d", port),
		"https://169.254.169.254",
		"https://169.254.169.254/latest/meta-data",
		"https://2130706433",
		"https://0x7f.1",
		"https://0177.0.0.1",
		"https://127.1",
		"https://[::1]",
		"https://[::ffff:127.0.0.1]",
		"https://user:pw@example.com",
	} {
		r := s.do(http.MethodPost, "/proxies", ct.Key, map[string]any{"name": "p", "destination_url": u})
		wantFieldError(t, r, "destination_url", "POST /proxies to "+u)
	}

	for _, u := range []string{fmt.Sprintf("https://127.0.0.1:%d", port), fmt.Sprintf("http://127.0.0.1:%d", port), "https://169.254.169.254", "https://2130706433"} {
		r := invoke(t, s, http.MethodPost, "/proxy/x", []byte(`{"a":1}`),
			"SVC-API-KEY", apiKey, "SVC-PROXY-URL", u, "Content-Type", "application/json")
		wantProxyError(t, r, http.StatusForbidden, "ephemeral to "+u)
	}

	// localhost is a DNS name, so it is saved, but the dialer refuses
	// every address it resolves to.
	_, key := createProxy(t, s, ct.Key, map[string]any{"name": "local", "destination_url": fmt.Sprintf("https://localhost:%d", port)})
	r := invoke(t, s, http.MethodPost, "/proxy/x", []byte(`{"a":1}`),
		"SVC-API-KEY", apiKey, "SVC-PROXY-KEY", key, "Content-Type", "application/json")
	wantProxyError(t, r, http.StatusForbidden, "proxy to https://localhost")
	r = invoke(t, s, http.MethodPost, "/proxy/x", []byte(`{"a":1}`),
		"SVC-API-KEY", apiKey, "SVC-PROXY-URL", fmt.Sprintf("https://localhost:%d/", port), "Content-Type", "application/json")
	wantProxyError(t, r, http.StatusForbidden, "ephemeral to https://localhost")

	if got, conns := dest.count(), dest.conns.Load(); got != 0 || conns != 0 {
		t.Errorf("the default egress policy let %d requests on %d connections reach loopback", got, conns)
	}
}

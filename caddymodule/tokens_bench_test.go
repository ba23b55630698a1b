package caddymodule

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// tvBenchCardBody is a card create with every member.
var tvBenchCardBody = []byte(`{"type":"card","data":{"number":"4242424242424242","expiration_month":12,"expiration_year":2030,"cvc":"123"},"metadata":{"order":"bench"}}`)

// tvBenchTokenize5 creates five tokens: three primitives, a card and a bank
// account.
var tvBenchTokenize5 = []byte(`{"a":"x","b":[1,{"type":"card","data":{"number":"4242424242424242","expiration_month":12,"expiration_year":2030}}],` +
	`"c":{"d":true,"e":{"type":"bank","data":{"routing_number":"110000000","account_number":"771206789"}}}}`)

// tvBenchServe sends one request through API.ServeHTTP and checks its status.
func tvBenchServe(b *testing.B, e *tokenEnv, key, method, path string, body []byte, want int) *httptest.ResponseRecorder {
	w := tvBenchDo(e, key, method, path, body)
	if w.Code != want {
		b.Fatalf("%s %s: status %d, want %d: %s\nhandler log:\n%s", method, path, w.Code, want, w.Body.Bytes(), tvTail(e.logs.String(), 5))
	}
	return w
}

// tvBenchWrite is tvBenchServe for parallel writes: a 500 from a write
// conflict the store gave up on (see TestTokenConcurrentWrites) is
// counted into failed instead of stopping the benchmark; any other
// unexpected status stops it.
func tvBenchWrite(b *testing.B, e *tokenEnv, key, path string, body []byte, want int, failed *atomic.Int64) {
	w := tvBenchDo(e, key, http.MethodPost, path, body)
	switch {
	case w.Code == want:
	case w.Code == http.StatusInternalServerError && strings.Contains(e.logs.String(), "transaction kept conflicting"):
		failed.Add(1)
	default:
		b.Fatalf("POST %s: status %d, want %d: %s\nhandler log:\n%s", path, w.Code, want, w.Body.Bytes(), tvTail(e.logs.String(), 5))
	}
}

// reportFailed reports the share of requests answered 500.
func tvReportFailed(b *testing.B, failed *atomic.Int64) {
	b.ReportMetric(float64(failed.Load())/float64(b.N), "http500/op")
}

func tvBenchDo(e *tokenEnv, key, method, path string, body []byte) *httptest.ResponseRecorder {
	var req *http.Request
	if body != nil {
		req = httptest.NewRequest(method, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	} else {
		req = httptest.NewRequest(method, path, nil)
	}
	req.Header.Set("SVC-API-KEY", key)
	w := httptest.NewRecorder()
	_ = e.h.ServeHTTP(w, req, nil)
	return w
}

// BenchmarkHTTPCreateCard measures POST /tokens of a card: decode,
// validation, CVC seal, encryption and one committed transaction.
func BenchmarkHTTPCreateCard(b *testing.B) {
	for _, tc := range []struct {
		name string
		sync bool
	}{{"syncWrites=false", false}, {"syncWrites=true", true}} {
		b.Run(tc.name, func(b *testing.B) {
			e := newTokenEnv(b, tc.sync, false)
			key := e.keys[tvRoleReveal]
			var failed atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					tvBenchWrite(b, e, key, "/tokens", tvBenchCardBody, http.StatusCreated, &failed)
				}
			})
			tvReportFailed(b, &failed)
		})
	}
}

// tvBenchCardID creates one card and returns its id.
func tvBenchCardID(b *testing.B, e *tokenEnv) string {
	w := tvBenchServe(b, e, e.keys[tvRoleReveal], http.MethodPost, "/tokens", tvBenchCardBody, http.StatusCreated)
	var tok struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &tok); err != nil || tok.ID == "" {
		b.Fatalf("create: %v: %s", err, w.Body.Bytes())
	}
	return tok.ID
}

// tvBenchGet measures GET /tokens/{id} of a card with the key of role.
func tvBenchGet(b *testing.B, role string) {
	e := newTokenEnv(b, false, false)
	path := "/tokens/" + tvBenchCardID(b, e)
	key := e.keys[role]
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tvBenchServe(b, e, key, http.MethodGet, path, nil, http.StatusOK)
		}
	})
}

// BenchmarkHTTPGetTokenRevealed measures a revealing read of a card:
// decryption, CVC unseal, encoding.
func BenchmarkHTTPGetTokenRevealed(b *testing.B) { tvBenchGet(b, tvRoleReveal) }

// BenchmarkHTTPGetTokenMasked measures a masking read of a card: the
// mask expressions are evaluated on every read.
func BenchmarkHTTPGetTokenMasked(b *testing.B) { tvBenchGet(b, tvRoleMask) }

// BenchmarkHTTPTokenize5 measures POST /tokenize creating five tokens in
// one transaction.
func BenchmarkHTTPTokenize5(b *testing.B) {
	e := newTokenEnv(b, false, false)
	key := e.keys[tvRoleReveal]
	var failed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tvBenchWrite(b, e, key, "/tokenize", tvBenchTokenize5, http.StatusOK, &failed)
		}
	})
	tvReportFailed(b, &failed)
}

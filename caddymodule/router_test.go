package caddymodule

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/redact"
)

func TestRouterMatch(t *testing.T) {
	noop := func(*call) error { return nil }
	r := newRouter([]route{
		{http.MethodGet, "/applications", "", noop},
		{http.MethodPost, "/applications", "", noop},
		{http.MethodGet, "/applications/{id}", "", noop},
		{http.MethodGet, "/applications/key", "", noop},
		{http.MethodDelete, "/applications/{id}/keys/{key_id}", "", noop},
	})
	tests := []struct {
		method, path string
		wantPattern  string
		wantParams   map[string]string
		wantStatus   int
		wantAllow    []string
	}{
		{"GET", "/applications", "/applications", nil, 0, nil},
		{"GET", "/applications/", "/applications", nil, 0, nil},
		{"POST", "/applications/", "/applications", nil, 0, nil},
		{"HEAD", "/applications", "/applications", nil, 0, nil},
		{"GET", "/applications/key", "/applications/key", nil, 0, nil},
		{"GET", "/applications/abc", "/applications/{id}", map[string]string{"id": "abc"}, 0, nil},
		{"DELETE", "/applications/a/keys/b", "/applications/{id}/keys/{key_id}", map[string]string{"id": "a", "key_id": "b"}, 0, nil},
		{"PATCH", "/applications", "", nil, http.StatusMethodNotAllowed, []string{"GET", "POST"}},
		{"GET", "/nope", "", nil, http.StatusNotFound, nil},
		{"GET", "/applications/a/keys", "", nil, http.StatusNotFound, nil},
		{"GET", "/", "", nil, http.StatusNotFound, nil},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			rt, params, err := r.match(tt.method, tt.path)
			if tt.wantStatus != 0 {
				var ae *apiError
				if !errors.As(err, &ae) || ae.status != tt.wantStatus {
					t.Fatalf("want status %d, got %v", tt.wantStatus, err)
				}
				if len(tt.wantAllow) != len(ae.allow) {
					t.Fatalf("allow = %v, want %v", ae.allow, tt.wantAllow)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rt.pattern != tt.wantPattern {
				t.Fatalf("matched %s, want %s", rt.pattern, tt.wantPattern)
			}
			for k, v := range tt.wantParams {
				if params[k] != v {
					t.Fatalf("param %s = %q, want %q", k, params[k], v)
				}
			}
		})
	}
}

// TestProblemScrubsDigits: a problem's detail, field paths and messages
// go through the redaction policy (internal/redact, whose tests hold the
// boundary cases), so a card number a caller sent as a member name does
// not come back.
func TestProblemScrubsDigits(t *testing.T) {
	p := problemFor(errField("metadata.4111111111111111", "bad 4111111111111111"))
	if msgs := p.Errors["metadata."+redact.Mark]; len(p.Errors) != 1 || len(msgs) != 1 || msgs[0] != "bad "+redact.Mark {
		t.Fatalf("problem errors %v, want metadata.%s: [bad %s]", p.Errors, redact.Mark, redact.Mark)
	}
	if strings.Contains(p.Detail, "4111111111111111") {
		t.Fatalf("problem detail keeps the digits: %q", p.Detail)
	}
}

package caddymodule

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// TestCLIPrintsServerProblems: `caddy vault` prints an admin API refusal
// as "title: detail" and one line per field error on standard error, never
// as JSON, and fails. The admin routes answer vault errors as problems
// (adminProblems); Caddy's own errors and other bodies are shown too.
func TestCLIPrintsServerProblems(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler caddy.AdminHandlerFunc
		want    string
	}{
		{"validation problem", func(http.ResponseWriter, *http.Request) error {
			v := &vaultstore.ValidationError{}
			v.Add("type", "type must be test or production")
			v.Add("name", "name is required")
			v.Add("name", "name must be at most 200 characters")
			return adminError(v)
		}, "One or more validation errors occurred: invalid name, type\n" +
			"  name: name is required\n" +
			"  name: name must be at most 200 characters\n" +
			"  type: type must be test or production\n"},
		{"not found", func(http.ResponseWriter, *http.Request) error {
			return adminError(vaultstore.ErrNotFound)
		}, "Not Found: not found\n"},
		{"store busy", func(http.ResponseWriter, *http.Request) error {
			return adminError(vaultstore.ErrUnavailable)
		}, "Service Unavailable: the vault's storage is unavailable, so nothing was written; retry the request\n"},
		{"caddy API error", func(http.ResponseWriter, *http.Request) error {
			return caddy.APIError{HTTPStatus: http.StatusConflict, Err: errors.New("a data key rotation is under way")}
		}, "Conflict: a data key rotation is under way\n"},
		{"caddy's own error body", func(w http.ResponseWriter, _ *http.Request) error {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"error":"host not allowed: evil.example"}` + "\n"))
			return nil
		}, "Forbidden: host not allowed: evil.example\n"},
		{"plain text", func(w http.ResponseWriter, _ *http.Request) error {
			http.Error(w, "upstream gone", http.StatusBadGateway)
			return nil
		}, "Bad Gateway: upstream gone\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := adminProblems(tc.handler)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if err := h(w, r); err != nil {
					t.Errorf("the handler returned %v; adminProblems should have answered it", err)
				}
			}))
			defer srv.Close()

			cmd := &cobra.Command{Use: "list", RunE: runVault(cmdTenantList)}
			addAdminFlags(cmd)
			var stdout, stderr bytes.Buffer
			cmd.SetOut(&stdout)
			cmd.SetErr(&stderr)
			cmd.SetArgs([]string{"--address", strings.TrimPrefix(srv.URL, "http://")})
			err := cmd.Execute()
			if err == nil {
				t.Fatal("the command succeeded, want a failure (a non-zero exit)")
			}
			if stderr.String() != tc.want {
				t.Errorf("stderr:\n%s\nwant:\n%s", stderr.String(), tc.want)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout: %q, want nothing", stdout.String())
			}
		})
	}
}

// TestAdminProblems: the admin routes answer problem+json bodies, leave a
// response already begun alone, and never show a digit run from an error.
func TestAdminProblems(t *testing.T) {
	rec := httptest.NewRecorder()
	_ = adminProblems(func(http.ResponseWriter, *http.Request) error {
		return adminError(vaultstore.ErrBusy)
	})(rec, httptest.NewRequest(http.MethodGet, "/vault/tenants", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Content-Type") != "application/problem+json" ||
		rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), `"title":"Service Unavailable"`) {
		t.Errorf("busy: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}

	rec = httptest.NewRecorder()
	_ = adminProblems(func(http.ResponseWriter, *http.Request) error {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: errors.New("bad key 4242424242424242")}
	})(rec, httptest.NewRequest(http.MethodPost, "/vault/master-key", nil))
	if rec.Code != http.StatusBadRequest || strings.Contains(rec.Body.String(), "4242424242424242") {
		t.Errorf("API error: %d %s", rec.Code, rec.Body)
	}

	begun := errors.New("the stream broke")
	rec = httptest.NewRecorder()
	err := adminProblems(func(w http.ResponseWriter, _ *http.Request) error {
		_, _ = w.Write([]byte("partial"))
		return begun
	})(rec, httptest.NewRequest(http.MethodGet, "/vault/backup", nil))
	if !errors.Is(err, begun) || rec.Body.String() != "partial" {
		t.Errorf("begun response: %v, %q; want the error back and the body untouched", err, rec.Body)
	}
}

// TestRunVaultKeepsOtherErrors: an error that is not a refusal of the
// server still fails the command, as caddycmd reports it.
func TestRunVaultKeepsOtherErrors(t *testing.T) {
	cmd := &cobra.Command{Use: "x", RunE: runVault(func(caddycmd.Flags) (int, error) {
		return caddy.ExitCodeFailedStartup, errors.New("--name is required")
	})}
	cmd.SilenceUsage = true // as Caddy's root command
	var stderr bytes.Buffer
	cmd.SetErr(&stderr)
	cmd.SetArgs(nil)
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--name is required") {
		t.Errorf("Execute = %v, want the error", err)
	}
}

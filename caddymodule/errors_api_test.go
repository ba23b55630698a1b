package caddymodule

import (
	"net/http"
	"strings"
	"testing"
)

// TestForbiddenNamesPermission: a 403 says which permission is missing,
// and on which container when access rules decided, on every kind of
// endpoint; it never shows token data. The 401 body stays the same
// whatever is wrong with the key.
func TestForbiddenNamesPermission(t *testing.T) {
	e := newTokenEnv(t, false, true)
	card := tvStr(e.create(tvRoleReveal, tvCardBody()).body, "id")
	text := tvStr(e.create(tvRoleReveal, map[string]any{"type": "token", "data": tvSecretText}).body, "id")

	for _, tc := range []struct {
		name, role, method, path string
		body                     any
		hdr                      []string
		detail                   string
		proxy                    bool // the problem is the proxy_error member
	}{
		{"route permission", tvRoleMgmt, http.MethodGet, "/tokens", nil, nil,
			"the application lacks the permission token:read", false},
		{"route permission of a private application", tvRoleReveal, http.MethodGet, "/logs", nil, nil,
			"the application lacks the permission log:read", false},
		{"search", tvRoleReveal, http.MethodPost, "/tokens/search", map[string]any{"query": "type:card"}, nil,
			"the application lacks the permission token:search", false},
		{"read outside the rules", tvRoleGeneral, http.MethodGet, "/tokens/" + card, nil, nil,
			"no access rule of the application gives token:read on container /pci/high/", false},
		{"create outside the rules", tvRoleGeneral, http.MethodPost, "/tokens", tvCardBody(), nil,
			"no access rule of the application gives token:create on container /pci/high/", false},
		{"update outside the rules", tvRoleGeneral, http.MethodPatch, "/tokens/" + card, map[string]any{"metadata": map[string]any{"k": "v"}}, nil,
			"no access rule of the application gives token:update on container /pci/high/", false},
		{"delete outside the rules", tvRoleGeneral, http.MethodDelete, "/tokens/" + card, nil, nil,
			"no access rule of the application gives token:delete on container /pci/high/", false},
		{"mask change without reveal", tvRoleMask, http.MethodPatch, "/tokens/" + text, map[string]any{"mask": "{{ data | reveal_last: 2 }}"}, nil,
			"changing a token's mask needs token:read with transform reveal on container /general/high/, which no access rule of the application gives", false},
		{"detokenize outside the rules", tvRoleGeneral, http.MethodPost, "/detokenize", map[string]any{"n": "{{ " + card + " }}"}, nil,
			"no access rule of the application gives token:read on container /pci/high/", false},
		{"react", tvRoleReveal, http.MethodPost, "/reactors/r1/react", map[string]any{"args": map[string]any{}}, nil,
			"the application lacks the permission reactor:invoke", false},
		{"proxy with a key lacking token:use", tvRoleReveal, http.MethodPost, "/proxy", map[string]any{"n": "{{ " + card + " }}"},
			[]string{"SVC-PROXY-URL", "https://example.com/"},
			"invoking a proxy with an API key needs the permission token:use, which the application lacks", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.role, tc.method, tc.path, tc.body, tc.hdr...)
			body := r.body
			if tc.proxy {
				body = tvField(r.body, "proxy_error")
			}
			if r.status != http.StatusForbidden || tvStr(body, "detail") != tc.detail {
				t.Errorf("%s %s: %s\nwant 403 with detail %q", tc.method, tc.path, r, tc.detail)
			}
		})
	}

	e.keys["malformed"] = "not-a-key"
	e.keys["unknown"] = "key_test_" + strings.Repeat("a", 32)
	var first string
	for _, role := range []string{"none", "malformed", "unknown"} {
		r := e.do(role, http.MethodGet, "/tokens", nil)
		if r.status != http.StatusUnauthorized {
			t.Errorf("%s key: %s, want 401", role, r)
		}
		if first == "" {
			first = string(r.raw)
		} else if string(r.raw) != first {
			t.Errorf("%s key: 401 body %s differs from %s", role, r.raw, first)
		}
	}
}

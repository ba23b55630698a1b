package caddymodule

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/egress"
	"github.com/tokenvault/tokenvault/internal/testjson"
)

// TestForbiddenNamesPermission: a 403 says which permission is missing,
// and on which container when access rules decided, on every kind of
// endpoint; it never shows token data. The 401 body stays the same
// whatever is wrong with the key.
func TestForbiddenNamesPermission(t *testing.T) {
	e := newTokenEnv(t, false, true)
	card := testjson.Str(e.create(tvRoleReveal, tvCardBody()).body, "id")
	text := testjson.Str(e.create(tvRoleReveal, map[string]any{"type": "token", "data": tvSecretText}).body, "id")

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
				body = testjson.Field(r.body, "proxy_error")
			}
			if r.status != http.StatusForbidden || testjson.Str(body, "detail") != tc.detail {
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

// TestBadQueryValues: a query value the API cannot use is a 400 naming
// the parameter in errors, on every endpoint that reads one, instead of a
// 200 that silently ignores it or matches nothing.
func TestBadQueryValues(t *testing.T) {
	e := newTokenEnv(t, false, true)
	e.create(tvRoleReveal, tvCardBody())
	for _, tc := range []struct {
		role, path, field string
	}{
		{tvRoleMgmt, "/logs?entity_type=bogus", "entity_type"},
		{tvRoleMgmt, "/logs?entity_type=Token", "entity_type"},
		{tvRoleMgmt, "/logs?start_date=yesterday", "start_date"},
		{tvRoleMgmt, "/logs?end_date=2024-13-45", "end_date"},
		{tvRoleMgmt, "/logs?start_date=2024-02-01&end_date=2024-01-01", "end_date"},
		{tvRoleMgmt, "/logs?size=-1", "size"},
		{tvRoleMgmt, "/logs?size=0", "size"},
		{tvRoleMgmt, "/logs?size=101", "size"},
		{tvRoleMgmt, "/logs?size=ten", "size"},
		{tvRoleMgmt, "/logs?page=0", "page"},
		{tvRoleMgmt, "/logs?start=not-a-cursor", "start"},
		{tvRoleMask, "/tokens?type=bogus", "type"},
		{tvRoleMask, "/tokens?container=pci", "container"},
		{tvRoleMask, "/tokens?container=/pci/h%20igh/", "container"},
		{tvRoleMask, "/tokens?page=-1", "page"},
		{tvRoleMask, "/tokens?size=1000", "size"},
		{tvRoleMask, "/tokens?metadata=%7Bbad", "metadata"},
		{tvRoleMask, "/tokens?metadata.=x", "metadata"},
		{tvRoleMask, "/tokens?size=%zz", "size"},
		{tvRoleMask, "/tokens?size=10;page=2", "size"},
		{tvRoleMask, "/v2/tokens?type=bogus", "type"},
		{tvRoleMask, "/v2/tokens?container=/pci", "container"},
		{tvRoleMask, "/v2/tokens?start=not-a-cursor", "start"},
		{tvRoleMask, "/v2/tokens?size=0", "size"},
		{tvRoleMgmt, "/applications?type=admin", "type"},
		{tvRoleMgmt, "/applications?size=-5", "size"},
		{tvRoleMgmt, "/proxies?page=abc", "page"},
		{tvRoleMgmt, "/reactors?size=-5", "size"},
		{tvRoleMgmt, "/permissions?application_type=admin", "application_type"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			tvWantProblem(t, e.do(tc.role, http.MethodGet, tc.path, nil), http.StatusBadRequest, tc.path, tc.field)
		})
	}

	// good values still work, an empty value is no filter
	for _, tc := range []struct {
		role, path string
		items      int // -1: not counted
	}{
		{tvRoleMgmt, "/logs?entity_type=token&start_date=2024-01-01&end_date=2999-01-01", -1},
		{tvRoleMask, "/tokens?type=card&container=/PCI/HIGH/", 1},
		{tvRoleMask, "/tokens?type=bank", 0},
		{tvRoleMask, "/tokens?type=&container=", 1},
		{tvRoleMask, "/v2/tokens?type=card", 1},
		{tvRoleMgmt, "/applications?type=private&type=", -1},
	} {
		r := e.do(tc.role, http.MethodGet, tc.path, nil)
		if r.status != http.StatusOK {
			t.Errorf("%s: %s, want 200", tc.path, r)
			continue
		}
		if data, _ := testjson.Field(r.body, "data").([]any); tc.items >= 0 && len(data) != tc.items {
			t.Errorf("%s: %d items, want %d: %s", tc.path, len(data), tc.items, r.raw)
		}
	}
}

// TestEgressRefusalHints: a destination the egress policy refuses says
// which setting of the vault global option would allow it, when saving a
// proxy and when invoking one; it names an address only where the caller
// wrote it, and never repeats credentials or the rest of the URL.
func TestEgressRefusalHints(t *testing.T) {
	e, cardID := newProxyEnv(t, nil)
	setEgress(t, e, &egress.Policy{Resolver: mapResolver{"internal.example": netip.MustParseAddr("10.0.0.5")}})
	body := map[string]any{"n": "{{ " + cardID + " }}"}
	for _, tc := range []struct {
		name, url, hint string
	}{
		{"http", "http://example.com/pay?card=" + tvCard, "egress { allow_http }"},
		{"loopback literal", "https://127.0.0.1:9/pay", "egress { allow_network 127.0.0.1/32 }"},
		{"IPv6 loopback literal", "https://[::1]:9/pay", "egress { allow_network ::1/128 }"},
		{"credentials", "https://user:sekrit-pass@example.com/", ""},
		{"embedded IPv4", "https://[64:ff9b::7f00:1]/", ""},
		{"private address by name", "https://internal.example/pay", "egress { allow_network <cidr> }"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(what, detail string) {
				t.Helper()
				if tc.hint != "" && !strings.Contains(detail, tc.hint) {
					t.Errorf("%s: %q does not hint %q", what, detail, tc.hint)
				}
				if tc.hint == "" && strings.Contains(detail, "egress {") {
					t.Errorf("%s: %q hints a setting, want none", what, detail)
				}
				for _, s := range []string{"sekrit", tvCard, "10.0.0.5", "/pay"} {
					if strings.Contains(detail, s) {
						t.Errorf("%s: %q repeats %q", what, detail, s)
					}
				}
			}
			if tc.name != "private address by name" { // a name passes the save-time check
				r := e.do(tvRoleMgmt, http.MethodPost, "/proxies", map[string]any{"name": "p", "destination_url": tc.url})
				tvWantProblem(t, r, http.StatusBadRequest, "save", "destination_url")
				msgs, _ := testjson.Field(r.body, "errors", "destination_url").([]any)
				if len(msgs) != 1 {
					t.Fatalf("save: %s", r)
				}
				check("save", msgs[0].(string))
			}
			r := e.do("user", http.MethodPost, "/proxy", body, "SVC-PROXY-URL", tc.url)
			wantEgressRefusal(t, r, "ephemeral")
			check("ephemeral", testjson.Str(r.body, "proxy_error", "detail"))
		})
	}
}

// TestScriptErrorPositions: a reactor's syntax error, when it is saved, and
// its runtime error, when it runs, give the line and column in the
// tenant's own code.
func TestScriptErrorPositions(t *testing.T) {
	e, _ := newProxyEnv(t, nil)
	r := e.do(tvRoleMgmt, http.MethodPost, "/reactors", map[string]any{"name": "bad", "code": "module.exports = async function (req) {"})
	tvWantProblem(t, r, http.StatusBadRequest, "one-line syntax error", "code")
	if got := testjson.Str(r.body, "errors", "code", 0); got != "SyntaxError: Unexpected end of input (line 1, column 40)" {
		t.Errorf("one-line syntax error: %q", got)
	}
	r = e.do(tvRoleMgmt, http.MethodPost, "/reactors", map[string]any{"name": "bad", "code": "module.exports = (req) => {\n  return req..args;\n};"})
	tvWantProblem(t, r, http.StatusBadRequest, "multi-line syntax error", "code")
	if got := testjson.Str(r.body, "errors", "code", 0); !strings.HasSuffix(got, "(line 2, column 13)") {
		t.Errorf("multi-line syntax error: %q", got)
	}

	r = e.do(tvRoleMgmt, http.MethodPost, "/applications", map[string]any{"name": "invoker", "type": "private", "permissions": []string{"reactor:invoke"}})
	tvWantStatus(t, r, http.StatusCreated, "invoker")
	e.keys["invoker"] = testjson.Str(r.body, "key")
	r = e.do(tvRoleMgmt, http.MethodPost, "/reactors", map[string]any{"name": "throws", "code": "module.exports = async (req) => {\n  const x = req.args.missing;\n  return x.field;\n};"})
	tvWantStatus(t, r, http.StatusCreated, "reactor")
	r = e.do("invoker", http.MethodPost, "/reactors/"+testjson.Str(r.body, "id")+"/react", map[string]any{"args": map[string]any{}})
	if !strings.HasSuffix(testjson.Str(r.body, "detail"), "TypeError: Cannot read property 'field' of undefined (line 3, column 12)") {
		t.Errorf("runtime error: %s", r)
	}
}

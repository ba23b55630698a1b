package ratelimit

import (
	"slices"
	"testing"
	"time"
)

// applicable returns the names of the rules that apply to r, in table order.
func applicable(rules []Rule, r *Request) []string {
	var names []string
	for _, rule := range rules {
		if !rule.Match(r) {
			continue
		}
		if _, ok := rule.Counter(r); ok {
			names = append(names, rule.Name)
		}
	}
	return names
}

// counterKey returns the counter key of the named default rule for r.
func counterKey(t *testing.T, name string, r *Request) (string, bool) {
	t.Helper()
	for _, rule := range DefaultRules() {
		if rule.Name == name {
			if !rule.Match(r) {
				return "", false
			}
			return rule.Counter(r)
		}
	}
	t.Fatalf("no default rule %q", name)
	return "", false
}

func TestDefaultRulesTable(t *testing.T) {
	// The Limits table of the interface spec, row by row.
	want := []struct {
		name  string
		limit int
		per   time.Duration
		block time.Duration
	}{
		{RuleTestTenant, 50, 10 * time.Second, 0},
		{RuleTokensSearch, 50, 10 * time.Second, 0},
		{RuleTokensList, 100, 10 * time.Second, 0},
		{RuleTokensCreate, 200, 10 * time.Second, 0},
		{RuleAccountUpdater, 10, 10 * time.Second, 0},
		{RulePrivateApp, 2000, 10 * time.Second, 0},
		{RulePublicApp, 50, time.Minute, 10 * time.Second},
		{RuleManagementApp, 200, time.Minute, 60 * time.Second},
		{RuleProxyKey, 50, 10 * time.Second, 0},
		{RuleProxyHostname, 50, 10 * time.Second, 0},
		{RuleGlobal, 2000, 10 * time.Second, 30 * time.Second},
		{RuleLegacyKey, 100, time.Minute, 0},
		{RuleDocuments, 10, time.Minute, 0}, // the vendor's row, beyond the spec
	}
	got := DefaultRules()
	if len(got) != len(want) {
		t.Fatalf("DefaultRules has %d rules, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.name || g.Limit != w.limit || g.Per != w.per || g.Block != w.block {
			t.Errorf("rule %d = %s %d/%v block %v, want %s %d/%v block %v",
				i, g.Name, g.Limit, g.Per, g.Block, w.name, w.limit, w.per, w.block)
		}
		if g.Match == nil || g.Counter == nil {
			t.Errorf("rule %s lacks Match or Counter", g.Name)
		}
	}
}

func TestDefaultRulesFreshSlice(t *testing.T) {
	a := DefaultRules()
	a[0].Limit = 1
	a[0].Name = "changed"
	if b := DefaultRules(); b[0].Limit != 50 || b[0].Name != RuleTestTenant {
		t.Fatalf("DefaultRules shares its slice: got %s %d", b[0].Name, b[0].Limit)
	}
}

func TestRuleMatching(t *testing.T) {
	const ip, key = "203.0.113.7", "key-id-1"
	api := func(tenant, app, method, path string) *Request {
		return &Request{IP: ip, APIKey: key, TenantType: tenant, AppType: app, Method: method, Path: path}
	}
	tests := []struct {
		name string
		req  *Request
		want []string
	}{
		{"test tenant private GET /tokens", api("test", "private", "GET", "/tokens"),
			[]string{RuleTestTenant, RuleTokensList, RulePrivateApp, RuleGlobal}},
		{"production private POST /tokens", api("production", "private", "POST", "/tokens"),
			[]string{RuleTokensCreate, RulePrivateApp, RuleGlobal}},
		{"trailing slash POST /tokens/", api("production", "private", "POST", "/tokens/"),
			[]string{RuleTokensCreate, RulePrivateApp, RuleGlobal}},
		{"POST /tokenize", api("production", "private", "POST", "/tokenize"),
			[]string{RuleTokensCreate, RulePrivateApp, RuleGlobal}},
		{"POST /tokenize/", api("production", "private", "POST", "/tokenize/"),
			[]string{RuleTokensCreate, RulePrivateApp, RuleGlobal}},
		{"POST /tokens/search", api("production", "private", "POST", "/tokens/search"),
			[]string{RuleTokensSearch, RulePrivateApp, RuleGlobal}},
		{"POST /tokens/search/", api("production", "private", "POST", "/tokens/search/"),
			[]string{RuleTokensSearch, RulePrivateApp, RuleGlobal}},
		{"GET /tokens/", api("production", "private", "GET", "/tokens/"),
			[]string{RuleTokensList, RulePrivateApp, RuleGlobal}},
		{"GET /tokens/search is no search", api("production", "private", "GET", "/tokens/search"),
			[]string{RulePrivateApp, RuleGlobal}},
		{"GET /tokens/{id} is no list", api("production", "private", "GET", "/tokens/abc"),
			[]string{RulePrivateApp, RuleGlobal}},
		{"PUT /tokens", api("production", "private", "PUT", "/tokens"),
			[]string{RulePrivateApp, RuleGlobal}},
		{"POST /tokenizer", api("production", "private", "POST", "/tokenizer"),
			[]string{RulePrivateApp, RuleGlobal}},
		{"lowercase method", api("production", "private", "post", "/tokens"),
			[]string{RulePrivateApp, RuleGlobal}},
		{"GET /account-updater/jobs", api("production", "private", "GET", "/account-updater/jobs"),
			[]string{RuleAccountUpdater, RulePrivateApp, RuleGlobal}},
		{"POST /account-updater/jobs/1/results", api("production", "private", "POST", "/account-updater/jobs/1/results"),
			[]string{RuleAccountUpdater, RulePrivateApp, RuleGlobal}},
		{"/account-updater", api("production", "private", "DELETE", "/account-updater"),
			[]string{RuleAccountUpdater, RulePrivateApp, RuleGlobal}},
		{"/account-updater/", api("production", "private", "GET", "/account-updater/"),
			[]string{RuleAccountUpdater, RulePrivateApp, RuleGlobal}},
		{"/account-updaters is another resource", api("production", "private", "GET", "/account-updaters"),
			[]string{RulePrivateApp, RuleGlobal}},
		{"POST /documents", api("production", "private", "POST", "/documents"),
			[]string{RulePrivateApp, RuleGlobal, RuleDocuments}},
		{"GET /documents/{id}/data", api("production", "private", "GET", "/documents/d1/data"),
			[]string{RulePrivateApp, RuleGlobal, RuleDocuments}},
		{"GET /documents/{id}/data/", api("production", "private", "GET", "/documents/d1/data/"),
			[]string{RulePrivateApp, RuleGlobal, RuleDocuments}},
		{"GET /documents/{id} reads metadata only", api("production", "private", "GET", "/documents/d1"),
			[]string{RulePrivateApp, RuleGlobal}},
		{"DELETE /documents/{id}", api("production", "private", "DELETE", "/documents/d1"),
			[]string{RulePrivateApp, RuleGlobal}},
		{"GET /documents/data has no id", api("production", "private", "GET", "/documents/data"),
			[]string{RulePrivateApp, RuleGlobal}},
		{"GET /documents/a/b/data is no document", api("production", "private", "GET", "/documents/a/b/data"),
			[]string{RulePrivateApp, RuleGlobal}},
		{"POST /documents/{id}/data", api("production", "private", "POST", "/documents/d1/data"),
			[]string{RulePrivateApp, RuleGlobal}},
		{"public app", api("production", "public", "POST", "/tokens"),
			[]string{RuleTokensCreate, RulePublicApp, RuleGlobal}},
		{"management app", api("production", "management", "GET", "/applications"),
			[]string{RuleManagementApp, RuleGlobal}},
		{"test tenant without key", &Request{IP: ip, TenantType: "test", Method: "GET", Path: "/tokens"},
			[]string{RuleTokensList, RuleGlobal}},
		{"legacy key", &Request{IP: ip, APIKey: key, LegacyKey: true, TenantType: "production", AppType: "private", Method: "GET", Path: "/x"},
			[]string{RulePrivateApp, RuleGlobal, RuleLegacyKey}},
		{"legacy flag without key", &Request{IP: ip, LegacyKey: true, Method: "GET", Path: "/x"},
			[]string{RuleGlobal}},
		{"unauthenticated proxy", &Request{IP: ip, ProxyKey: "pk", Unauthenticated: true, Method: "POST", Path: "/tokens"},
			[]string{RuleProxyKey, RuleGlobal}},
		{"whitelabel proxy with hostname", &Request{IP: ip, ProxyKey: "pk", Hostname: "pay.example.com", Whitelabel: true, Method: "GET", Path: "/tokens"},
			[]string{RuleProxyKey, RuleProxyHostname, RuleGlobal}},
		{"whitelabel proxy, hostname only", &Request{IP: ip, Hostname: "pay.example.com", Whitelabel: true, Method: "GET", Path: "/"},
			[]string{RuleProxyHostname, RuleGlobal}},
		{"unauthenticated proxy with hostname", &Request{IP: ip, Hostname: "pay.example.com", Unauthenticated: true, Method: "GET", Path: "/"},
			[]string{RuleProxyHostname, RuleGlobal}},
		{"whitelabel without hostname or proxy key", &Request{IP: ip, Whitelabel: true, Method: "GET", Path: "/"},
			[]string{RuleGlobal}},
		{"authenticated proxy: no proxy rules", &Request{IP: ip, APIKey: key, ProxyKey: "pk", TenantType: "production", AppType: "private", Method: "POST", Path: "/proxy"},
			[]string{RulePrivateApp, RuleGlobal}},
		{"authenticated test-tenant proxy via /proxy/tokens", &Request{IP: ip, APIKey: key, ProxyKey: "pk", TenantType: "test", AppType: "private", Method: "POST", Path: "/tokens"},
			[]string{RuleTestTenant, RulePrivateApp, RuleGlobal}},
		{"hostname alone is no open proxy", &Request{IP: ip, Hostname: "pay.example.com", Method: "GET", Path: "/"},
			[]string{RuleGlobal}},
		{"no IP, no key", &Request{Method: "GET", Path: "/tokens"}, nil},
		{"key without IP: pairs do not apply", &Request{APIKey: key, TenantType: "test", AppType: "public", LegacyKey: true, Method: "GET", Path: "/tokens"},
			nil},
		{"proxy key without IP", &Request{ProxyKey: "pk", Hostname: "pay.example.com", Unauthenticated: true, Method: "GET", Path: "/"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := applicable(DefaultRules(), tt.req); !slices.Equal(got, tt.want) {
				t.Errorf("rules = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCounterKeys(t *testing.T) {
	r := func(ip, key string) *Request {
		return &Request{IP: ip, APIKey: key, TenantType: "test", AppType: "public", Method: "GET", Path: "/x"}
	}
	distinct := []struct {
		rule string
		a, b *Request
	}{
		{RuleTestTenant, r("1.1.1.1", "k1"), r("1.1.1.1", "k2")},
		{RuleTestTenant, r("1.1.1.1", "k1"), r("2.2.2.2", "k1")},
		{RulePublicApp, r("1.1.1.1", "k1"), r("1.1.1.1", "k2")},
		{RulePublicApp, r("1.1.1.1", "k1"), r("2.2.2.2", "k1")},
		{RuleGlobal, r("1.1.1.1", "k1"), r("2.2.2.2", "k1")},
		{RuleProxyKey,
			&Request{IP: "1.1.1.1", ProxyKey: "p1", Unauthenticated: true},
			&Request{IP: "1.1.1.1", ProxyKey: "p2", Unauthenticated: true}},
		{RuleProxyKey,
			&Request{IP: "1.1.1.1", ProxyKey: "p1", Unauthenticated: true},
			&Request{IP: "2.2.2.2", ProxyKey: "p1", Unauthenticated: true}},
		{RuleProxyHostname,
			&Request{IP: "1.1.1.1", Hostname: "a.example", Whitelabel: true},
			&Request{IP: "1.1.1.1", Hostname: "b.example", Whitelabel: true}},
		{RuleProxyHostname,
			&Request{IP: "1.1.1.1", Hostname: "a.example", Whitelabel: true},
			&Request{IP: "2.2.2.2", Hostname: "a.example", Whitelabel: true}},
		// "API key or IP": a key id spelled like an IP is still another counter.
		{RulePrivateApp,
			&Request{IP: "1.1.1.1", AppType: "private"},
			&Request{IP: "2.2.2.2", APIKey: "1.1.1.1", AppType: "private"}},
	}
	for _, tt := range distinct {
		ka, oka := counterKey(t, tt.rule, tt.a)
		kb, okb := counterKey(t, tt.rule, tt.b)
		if !oka || !okb || ka == kb {
			t.Errorf("%s: keys %q (%v) and %q (%v) should be distinct", tt.rule, ka, oka, kb, okb)
		}
	}
	same := []struct {
		rule string
		a, b *Request
	}{
		{RuleTestTenant, r("1.1.1.1", "k1"), r("1.1.1.1", "k1")},
		// Per key, whatever the IP.
		{RulePrivateApp,
			&Request{IP: "1.1.1.1", APIKey: "k1", AppType: "private"},
			&Request{IP: "2.2.2.2", APIKey: "k1", AppType: "private"}},
		{RuleManagementApp,
			&Request{IP: "1.1.1.1", APIKey: "k1", AppType: "management"},
			&Request{IP: "2.2.2.2", APIKey: "k1", AppType: "management"}},
		// Without a key, per IP.
		{RulePrivateApp,
			&Request{IP: "1.1.1.1", AppType: "private"},
			&Request{IP: "1.1.1.1", AppType: "private", TenantType: "test"}},
		{RuleGlobal, r("1.1.1.1", "k1"), r("1.1.1.1", "k2")},
	}
	for _, tt := range same {
		ka, oka := counterKey(t, tt.rule, tt.a)
		kb, okb := counterKey(t, tt.rule, tt.b)
		if !oka || !okb || ka != kb {
			t.Errorf("%s: keys %q (%v) and %q (%v) should be equal", tt.rule, ka, oka, kb, okb)
		}
	}
	// "API key or IP" falls back to the IP only without a key.
	withKey, _ := counterKey(t, RulePrivateApp, &Request{IP: "1.1.1.1", APIKey: "k1", AppType: "private"})
	withoutKey, _ := counterKey(t, RulePrivateApp, &Request{IP: "1.1.1.1", AppType: "private"})
	if withKey == withoutKey {
		t.Errorf("private-application counts a keyed request on its IP: %q", withKey)
	}
	if _, ok := counterKey(t, RuleManagementApp, &Request{IP: "1.1.1.1", AppType: "management"}); ok {
		t.Error("management-application applies without an API key")
	}
}

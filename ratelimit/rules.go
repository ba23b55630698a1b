package ratelimit

import (
	"strings"
	"time"
)

// Request describes one request as the limiter sees it. Empty fields do not
// apply: a rule whose counter needs an empty field does not apply to the
// request.
type Request struct {
	// IP is the client IP, already resolved honoring trusted proxies.
	IP string
	// APIKey identifies the API key: the caller passes a key id or digest,
	// never the secret.
	APIKey string
	// ProxyKey identifies the proxy key (a digest), when invoking a proxy.
	ProxyKey string
	// Hostname is the custom (whitelabel) hostname, when invoking a
	// whitelabel proxy.
	Hostname string
	// TenantType is "test" or "production", once authenticated.
	TenantType string
	// AppType is "private", "public" or "management", once authenticated.
	AppType string
	// Method is the HTTP method, as sent ("GET", "POST", ...).
	Method string
	// Path is the request path relative to the API root, e.g. "/tokens",
	// "/tokens/search", "/tokenize", "/account-updater/jobs". A trailing
	// slash is ignored.
	Path string
	// Unauthenticated marks a proxy invoked without an API key.
	Unauthenticated bool
	// Whitelabel marks a request that came through a whitelabel host.
	Whitelabel bool
	// LegacyKey marks a legacy-format API key. Tokenvault issues none today;
	// the rule exists for completeness.
	LegacyKey bool
}

// Rule is one row of the Limits table.
type Rule struct {
	// Name identifies the rule in metrics and logs and is the scope label,
	// e.g. "test-tenant". Names are unique within a Limiter.
	Name string
	// Match reports whether the rule applies to a request (scope and
	// resource).
	Match func(*Request) bool
	// Counter returns the key of the counter the request is charged to;
	// ok=false means the rule does not apply (e.g. the request has no API
	// key).
	Counter func(*Request) (key string, ok bool)
	// Limit is the number of requests allowed per Per: a token bucket with
	// rate Limit/Per and burst Limit. At least 1.
	Limit int
	// Per is the period of Limit. Positive.
	Per time.Duration
	// Block is 0 for a throttle, which rejects only the requests over the
	// rate; when positive, a counter that exceeds the rate is blocked, every
	// request on it rejected, for Block.
	Block time.Duration
}

// Names of the rules returned by DefaultRules, in table order.
const (
	RuleTestTenant     = "test-tenant"
	RuleTokensSearch   = "api-tokens-search"
	RuleTokensList     = "api-tokens-list"
	RuleTokensCreate   = "api-tokens-create"
	RuleAccountUpdater = "api-account-updater"
	RulePrivateApp     = "private-application"
	RulePublicApp      = "public-application"
	RuleManagementApp  = "management-application"
	RuleProxyKey       = "proxy-key"
	RuleProxyHostname  = "proxy-hostname"
	RuleGlobal         = "global"
	RuleLegacyKey      = "legacy-api-key"
	RuleDocuments      = "api-documents"
)

// DefaultRules returns the Limits table of the interface spec, one Rule per
// row in table order (a fresh slice each call):
//
//	test-tenant             test tenant, any resource, per IP and API key      50 / 10 s  throttle
//	api-tokens-search       API, POST /tokens/search, per IP                    50 / 10 s  throttle
//	api-tokens-list         API, GET /tokens, per IP                           100 / 10 s  throttle
//	api-tokens-create       API, POST /tokens, /tokenize or /token-intents, per IP  200 / 10 s  throttle
//	api-account-updater     API, any /account-updater/*, per IP                 10 / 10 s  throttle
//	private-application     private application, per API key, else IP        2000 / 10 s  throttle
//	public-application      public application, per IP and API key             50 / 1 min block 10 s
//	management-application  management application, per API key              200 / 1 min block 60 s
//	proxy-key               unauthenticated or whitelabel proxy, per proxy key and IP      50 / 10 s throttle
//	proxy-hostname          unauthenticated or whitelabel proxy, per custom hostname and IP 50 / 10 s throttle
//	global                  any request, per IP                              2000 / 10 s  block 30 s
//	legacy-api-key          legacy API keys, per IP and API key               100 / 1 min throttle
//	api-documents           API, POST /documents or GET /documents/{id}/data, per IP and API key  10 / 1 min throttle
//
// api-documents is not in the interface spec's table: it is the vendor's
// current row for documents, which move up to 25 MB each, and it applies
// to uploads and content downloads, not to reading a document's metadata.
//
// The API rules apply only to requests to the API itself, not to proxy
// invocations (a request with a proxy key or hostname, or marked
// Unauthenticated or Whitelabel), whose paths belong to the destination.
func DefaultRules() []Rule {
	//lint:ignore ST1011 the name reads as the table's period, "10 s", not as a unit
	const tenSeconds, minute = 10 * time.Second, time.Minute
	return []Rule{
		{Name: RuleTestTenant, Match: isTestTenant, Counter: byIPAndKey, Limit: 50, Per: tenSeconds},
		{Name: RuleTokensSearch, Match: isTokensSearch, Counter: byIP, Limit: 50, Per: tenSeconds},
		{Name: RuleTokensList, Match: isTokensList, Counter: byIP, Limit: 100, Per: tenSeconds},
		{Name: RuleTokensCreate, Match: isTokensCreate, Counter: byIP, Limit: 200, Per: tenSeconds},
		{Name: RuleAccountUpdater, Match: isAccountUpdater, Counter: byIP, Limit: 10, Per: tenSeconds},
		{Name: RulePrivateApp, Match: isApp("private"), Counter: byKeyOrIP, Limit: 2000, Per: tenSeconds},
		{Name: RulePublicApp, Match: isApp("public"), Counter: byIPAndKey, Limit: 50, Per: minute, Block: 10 * time.Second},
		{Name: RuleManagementApp, Match: isApp("management"), Counter: byKey, Limit: 200, Per: minute, Block: 60 * time.Second},
		{Name: RuleProxyKey, Match: isOpenProxy, Counter: byProxyKeyAndIP, Limit: 50, Per: tenSeconds},
		{Name: RuleProxyHostname, Match: isOpenProxy, Counter: byHostnameAndIP, Limit: 50, Per: tenSeconds},
		{Name: RuleGlobal, Match: always, Counter: byIP, Limit: 2000, Per: tenSeconds, Block: 30 * time.Second},
		{Name: RuleLegacyKey, Match: isLegacyKey, Counter: byIPAndKey, Limit: 100, Per: minute},
		{Name: RuleDocuments, Match: isDocumentTransfer, Counter: byIPAndKey, Limit: 10, Per: minute},
	}
}

func always(*Request) bool { return true }

func isTestTenant(r *Request) bool { return r.TenantType == "test" }

func isLegacyKey(r *Request) bool { return r.LegacyKey }

func isApp(appType string) func(*Request) bool {
	return func(r *Request) bool { return r.AppType == appType }
}

// isOpenProxy reports a proxy invoked without an API key or through a
// whitelabel host.
func isOpenProxy(r *Request) bool { return r.Unauthenticated || r.Whitelabel }

// apiPath returns the request's path without trailing slashes, or ok=false for
// a proxy invocation, whose path is not an API resource.
func apiPath(r *Request) (path string, ok bool) {
	if r.Unauthenticated || r.Whitelabel || r.ProxyKey != "" || r.Hostname != "" {
		return "", false
	}
	return strings.TrimRight(r.Path, "/"), true
}

func isTokensSearch(r *Request) bool {
	p, ok := apiPath(r)
	return ok && r.Method == "POST" && p == "/tokens/search"
}

func isTokensList(r *Request) bool {
	p, ok := apiPath(r)
	return ok && r.Method == "GET" && p == "/tokens"
}

func isTokensCreate(r *Request) bool {
	p, ok := apiPath(r)
	return ok && r.Method == "POST" && (p == "/tokens" || p == "/tokenize" || p == "/token-intents")
}

// isDocumentTransfer reports a document upload or a download of a
// document's content: POST /documents or GET /documents/{id}/data.
func isDocumentTransfer(r *Request) bool {
	p, ok := apiPath(r)
	if !ok {
		return false
	}
	if r.Method == "POST" && p == "/documents" {
		return true
	}
	id, found := strings.CutPrefix(p, "/documents/")
	id, found2 := strings.CutSuffix(id, "/data")
	return r.Method == "GET" && found && found2 && id != "" && !strings.Contains(id, "/")
}

func isAccountUpdater(r *Request) bool {
	p, ok := apiPath(r)
	return ok && (p == "/account-updater" || strings.HasPrefix(p, "/account-updater/"))
}

// sep joins the parts of a compound counter key. It cannot occur in an IP, so
// (IP, X) pairs never collide however X is spelled.
const sep = "\x00"

func byIP(r *Request) (string, bool) { return r.IP, r.IP != "" }

func byKey(r *Request) (string, bool) { return r.APIKey, r.APIKey != "" }

// byKeyOrIP counts per API key when the request has one, else per IP. The two
// spaces are kept apart so a key id can never share a counter with an IP.
func byKeyOrIP(r *Request) (string, bool) {
	if r.APIKey != "" {
		return "k" + sep + r.APIKey, true
	}
	if r.IP != "" {
		return "i" + sep + r.IP, true
	}
	return "", false
}

func byIPAndKey(r *Request) (string, bool) { return pair(r.IP, r.APIKey) }

func byProxyKeyAndIP(r *Request) (string, bool) { return pair(r.IP, r.ProxyKey) }

func byHostnameAndIP(r *Request) (string, bool) { return pair(r.IP, r.Hostname) }

// pair is the counter key of an (IP, x) pair; both must be present.
func pair(ip, x string) (string, bool) {
	if ip == "" || x == "" {
		return "", false
	}
	return ip + sep + x, true
}

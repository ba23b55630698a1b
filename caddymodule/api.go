package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore"
	"github.com/tokenvault/tokenvault/vaultstore/strictjson"
)

func init() {
	caddy.RegisterModule(API{})
}

// maxBodyBytes is the largest request body the API reads (the
// interface's 1 MB payload limit).
const maxBodyBytes = 1 << 20

// API serves the vault's REST interface: tenants, applications and keys,
// and in later layers tokens, proxies and reactors. It answers every
// request it receives; mount it where the API should live.
type API struct {
	// HealthPath, when set, answers GET on this path without a key with
	// the vault's health: 200 when the store answers a write and a read
	// (and transform workers start), else 503 naming the failing part.
	// For load balancers; the admin API serves the same at /vault/health.
	HealthPath string `json:"health_path,omitempty"`

	// RateLimits changes or switches off the interface's rate limits for
	// this handler. Default: the interface's table.
	RateLimits *RateLimits `json:"rate_limits,omitempty"`

	limits  limits
	app     *App
	headers vaultHeaders
	routes  *router
	proxy   *forwarder
	logger  *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (API) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.vault_api",
		New: func() caddy.Module { return new(API) },
	}
}

// Provision connects the handler to the vault app.
func (h *API) Provision(ctx caddy.Context) error {
	appIface, err := ctx.App("vault")
	if err != nil {
		return err
	}
	if err := h.limits.provision(h.RateLimits, appIface.(*App)); err != nil {
		return err
	}
	h.wire(appIface.(*App), ctx.Logger())
	return nil
}

// Validate checks the configuration, JSON or adapted from a Caddyfile
// alike; Caddy calls it after Provision.
func (h *API) Validate() error {
	if h.HealthPath != "" && !strings.HasPrefix(h.HealthPath, "/") {
		return fmt.Errorf("health_path must start with /, got %q", h.HealthPath)
	}
	return h.RateLimits.validate()
}

// Cleanup releases the handler's share of the limiter state.
func (h *API) Cleanup() error { return h.limits.cleanup() }

// wire connects the handler to a provisioned vault app, whose store it
// reaches at request time: the app opens it in Start.
func (h *API) wire(app *App, logger *zap.Logger) {
	h.app, h.logger = app, logger
	h.headers = newVaultHeaders(app.HeaderPrefix)
	h.routes = newRouter(append(h.apiRoutes(), deprecatedRoutes()...))
	h.proxy = &forwarder{app: app, headers: h.headers, logger: logger, limits: &h.limits}
}

// vaultHeaders are the vault's header names under the configured prefix.
type vaultHeaders struct {
	prefix            string // canonical, with the dash: "Svc-"
	apiKey            string
	traceID           string
	proxyKey          string
	proxyURL          string
	keepAlive         string
	connection        string
	destinationStatus string
	proxyKeyQuery     string // the proxy key's query parameter: "svc-proxy-key"
	idempotencyKey    string
}

func newVaultHeaders(prefix string) vaultHeaders {
	canon := http.CanonicalHeaderKey(prefix + "-X")
	return vaultHeaders{
		prefix:            canon[:len(canon)-1],
		apiKey:            http.CanonicalHeaderKey(prefix + "-API-KEY"),
		traceID:           http.CanonicalHeaderKey(prefix + "-TRACE-ID"),
		proxyKey:          http.CanonicalHeaderKey(prefix + "-PROXY-KEY"),
		proxyURL:          http.CanonicalHeaderKey(prefix + "-PROXY-URL"),
		keepAlive:         http.CanonicalHeaderKey(prefix + "-PROXY-KEEP-ALIVE"),
		connection:        http.CanonicalHeaderKey(prefix + "-PROXY-CONNECTION"),
		destinationStatus: http.CanonicalHeaderKey(prefix + "-PROXY-DESTINATION-STATUS"),
		proxyKeyQuery:     strings.ToLower(prefix) + "-proxy-key",
		idempotencyKey:    http.CanonicalHeaderKey(prefix + "-IDEMPOTENCY-KEY"),
	}
}

// call is one request on its way through a route.
type call struct {
	w         http.ResponseWriter
	r         *http.Request
	params    map[string]string
	principal *vaultstore.Principal
	store     *vaultstore.Store
	api       *API
}

func (c *call) ctx() context.Context { return c.r.Context() }

func (c *call) tenantID() string { return c.principal.Tenant.ID }

func (c *call) actorID() string { return c.principal.Application.ID }

// decode reads the JSON body into v under the vault's input rules.
func (c *call) decode(v any) error {
	body, err := strictjson.ReadBodyOfLength(c.r.Body, maxBodyBytes, c.r.ContentLength)
	if err != nil {
		return err
	}
	return strictjson.Decode(body, v, strictjson.DefaultLimits)
}

// decodeValue reads the JSON body as a free-form value (numbers exact)
// under the vault's input rules.
func (c *call) decodeValue() (any, error) {
	body, err := strictjson.ReadBodyOfLength(c.r.Body, maxBodyBytes, c.r.ContentLength)
	if err != nil {
		return nil, err
	}
	return strictjson.DecodeValue(body, strictjson.DefaultLimits)
}

var traceIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// ServeHTTP routes, authenticates, authorizes and runs one API call.
// Every failure becomes an application/problem+json response here.
func (h *API) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	traceID := r.Header.Get(h.headers.traceID)
	if !traceIDPattern.MatchString(traceID) {
		traceID = uuid.NewString()
	}
	w.Header().Set(h.headers.traceID, traceID)
	if extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
		extra.Add(zap.String("trace_id", traceID))
	}
	rec := &statusRecorder{ResponseWriter: w}
	start := time.Now()
	op, tenant := h.serve(rec, r)
	vaultMetrics.requestTime.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if !h.app.MetricsPerTenant {
		tenant = ""
	}
	vaultMetrics.requests.WithLabelValues(op, strconv.Itoa(rec.status), tenant).Inc()
	return nil
}

// serve answers one request, writing any failure as a problem, and
// returns the operation (for metrics: the route, "proxy" or "unmatched")
// and the caller's tenant id once known.
func (h *API) serve(w http.ResponseWriter, r *http.Request) (operation, tenantID string) {
	readOnly := r.Method == http.MethodGet || r.Method == http.MethodHead
	if h.HealthPath != "" && r.URL.Path == h.HealthPath && readOnly {
		_ = h.app.serveHealth(w, r)
		return "health", ""
	}
	if r.URL.Path == "/openapi.json" && readOnly {
		serveOpenAPI(w, h.app.HeaderPrefix)
		return "openapi", ""
	}
	if suffix, ok := proxyPath(r.URL.EscapedPath()); ok {
		// a proxy may be invoked without an API key; the forwarder decides
		h.proxy.serve(w, r, suffix, "")
		return "proxy", ""
	}
	operation = "unmatched"
	fail := func(err error) (string, string) {
		writeProblem(w, h.logger, w.Header().Get(h.headers.traceID), err)
		return operation, tenantID
	}
	store, err := h.app.waitStore(r.Context())
	if err != nil {
		return fail(err)
	}
	// authentication comes first: without a valid key every path is 401,
	// once the address's rate limits have counted the attempt
	p, authErr := h.authenticate(r, store)
	rt, params, routeErr := h.routes.match(r.Method, r.URL.Path)
	if routeErr == nil {
		operation = rt.method + " " + rt.pattern
	}
	if err := h.limits.check(w, limitRequest(r, r.URL.Path, p)); err != nil {
		return fail(err)
	}
	if authErr != nil {
		return fail(authErr)
	}
	tenantID = p.Tenant.ID
	if routeErr != nil {
		return fail(routeErr)
	}
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Set("http.auth.user.id", p.Application.ID) // the access log's user_id
	}
	if rt.perm != "" && !p.Application.Can(rt.perm) {
		return fail(&vaultstore.PermissionError{Permission: rt.perm})
	}
	if err := checkQuery(r.URL.RawQuery); err != nil {
		return fail(err)
	}
	r.Body = http.MaxBytesReader(w, r.Body, h.bodyLimit(rt))
	c := &call{w: w, r: r, params: params, principal: p, store: store, api: h}
	run := rt.handle
	// a document upload is streamed, never buffered: it takes no idempotency key
	if key := r.Header.Get(h.headers.idempotencyKey); key != "" && (r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch) && h.bodyLimit(rt) == maxBodyBytes {
		run = func(c *call) error { return h.idempotent(c, key, rt.handle) }
	}
	if err := run(c); err != nil {
		return fail(err)
	}
	return operation, tenantID
}

// proxyPath reports whether an escaped request path invokes a proxy, and
// the suffix after /proxy ("" or starting with "/").
func proxyPath(escapedPath string) (string, bool) {
	rest, ok := strings.CutPrefix(escapedPath, "/proxy")
	if !ok || (rest != "" && rest[0] != '/') {
		return "", false
	}
	return rest, true
}

// authenticate resolves the request's API key.
func (h *API) authenticate(r *http.Request, store *vaultstore.Store) (*vaultstore.Principal, error) {
	key := r.Header.Get(h.headers.apiKey)
	if key == "" {
		return nil, vaultstore.ErrUnauthenticated
	}
	return store.Authenticate(r.Context(), key)
}

// apiRoutes is the API's route table.
func (h *API) apiRoutes() []route {
	return []route{
		{http.MethodGet, "/tenants/self", "tenant:read", getTenant},
		{http.MethodPut, "/tenants/self", "tenant:update", updateTenant},
		{http.MethodDelete, "/tenants/self", "tenant:delete", deleteTenant},

		{http.MethodGet, "/applications", "application:read", listApplications},
		{http.MethodPost, "/applications", "application:create", createApplication},
		{http.MethodGet, "/applications/key", "", getCallingApplication},
		{http.MethodGet, "/applications/{id}", "application:read", getApplication},
		{http.MethodPut, "/applications/{id}", "application:update", updateApplication},
		{http.MethodDelete, "/applications/{id}", "application:delete", deleteApplication},
		{http.MethodGet, "/applications/{id}/keys", "application:read", listKeys},
		{http.MethodPost, "/applications/{id}/keys", "application:update", createKey},
		{http.MethodGet, "/applications/{id}/keys/{key_id}", "application:read", getKey},
		{http.MethodDelete, "/applications/{id}/keys/{key_id}", "application:update", deleteKey},

		{http.MethodGet, "/permissions", "", listPermissions},
		{http.MethodGet, "/roles", "", listRoles},
		{http.MethodGet, "/application-templates", "", listApplicationTemplates},
		{http.MethodGet, "/application-templates/{id}", "", getApplicationTemplate},

		{http.MethodPost, "/sessions", "", createSession},
		{http.MethodPost, "/sessions/authorize", "", authorizeSession},

		{http.MethodPost, "/tokens", "token:create", createToken},
		{http.MethodGet, "/tokens", "token:read", listTokens},
		{http.MethodGet, "/tokens/{id}", "token:read", getToken},
		{http.MethodPatch, "/tokens/{id}", "token:update", updateToken},
		{http.MethodDelete, "/tokens/{id}", "token:delete", deleteToken},
		{http.MethodPost, "/tokens/search", "token:search", searchTokens},
		{http.MethodGet, "/v2/tokens", "token:read", listTokensV2},
		{http.MethodPost, "/v2/tokens/search", "token:search", searchTokensV2},
		{http.MethodPost, "/detokenize", "token:read", detokenize},
		{http.MethodPost, "/tokenize", "token:create", tokenize},
		{http.MethodGet, "/tenants/self/reports/usage", "report:read", usageReport},

		{http.MethodPost, "/token-intents", "token-intent:create", createTokenIntent},
		{http.MethodGet, "/token-intents/{id}", "token-intent:read", getTokenIntent},
		{http.MethodDelete, "/token-intents/{id}", "token-intent:delete", deleteTokenIntent},
		{http.MethodGet, "/enrichments/card-details", "", getCardDetails},

		{http.MethodGet, "/logs", "log:read", listLogs},
		{http.MethodGet, "/logs/entity-types", "log:read", listLogEntityTypes},

		{http.MethodPost, "/reactors", "reactor:create", createReactor},
		{http.MethodGet, "/reactors", "reactor:read", listReactors},
		{http.MethodGet, "/reactors/{id}", "reactor:read", getReactor},
		{http.MethodPut, "/reactors/{id}", "reactor:update", updateReactor},
		{http.MethodPatch, "/reactors/{id}", "reactor:update", patchReactor},
		{http.MethodDelete, "/reactors/{id}", "reactor:delete", deleteReactor},
		{http.MethodPost, "/reactors/{id}/react", "reactor:invoke", react},
		{http.MethodPost, "/reactors/{id}/react-async", "reactor:invoke", reactAsync},
		{http.MethodGet, "/reactors/{id}/results/{request_id}", "reactor:invoke", reactionResult},

		{http.MethodPost, "/keys", "keys:create", createClientKey},
		{http.MethodGet, "/keys", "keys:read", listClientKeys},
		{http.MethodGet, "/keys/{id}", "keys:read", getClientKey},
		{http.MethodDelete, "/keys/{id}", "keys:delete", deleteClientKey},

		{http.MethodPost, "/documents", "documents:create", uploadDocument},
		{http.MethodGet, "/documents/{id}", "documents:read", getDocument},
		{http.MethodGet, "/documents/{id}/data", "documents:reveal", getDocumentData},
		{http.MethodDelete, "/documents/{id}", "documents:delete", deleteDocument},

		{http.MethodPost, "/proxies", "proxy:create", createProxy},
		{http.MethodGet, "/proxies", "proxy:read", listProxies},
		{http.MethodGet, "/proxies/{id}", "proxy:read", getProxy},
		{http.MethodPut, "/proxies/{id}", "proxy:update", updateProxy},
		{http.MethodPatch, "/proxies/{id}", "proxy:update", patchProxy},
		{http.MethodDelete, "/proxies/{id}", "proxy:delete", deleteProxy},

		{http.MethodGet, "/webhooks/event-types", "webhooks:read", listWebhookEventTypes},
		{http.MethodGet, "/webhooks/signing-key", "webhooks:read", getWebhookSigningKey},
		{http.MethodPost, "/webhooks", "webhooks:create", createWebhook},
		{http.MethodGet, "/webhooks", "webhooks:read", listWebhooks},
		{http.MethodGet, "/webhooks/{id}", "webhooks:read", getWebhook},
		{http.MethodPut, "/webhooks/{id}", "webhooks:update", updateWebhook},
		{http.MethodDelete, "/webhooks/{id}", "webhooks:delete", deleteWebhook},
	}
}

// Interface guards
var (
	_ caddy.Provisioner           = (*API)(nil)
	_ caddy.Validator             = (*API)(nil)
	_ caddy.CleanerUpper          = (*API)(nil)
	_ caddyhttp.MiddlewareHandler = (*API)(nil)
)

package caddymodule

import (
	"errors"
	"net"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore"
)

func init() {
	caddy.RegisterModule(ProxyHandler{})
}

// ProxyHandler serves one proxy at the root of a whitelabel host
// (pay.example.com): every request that reaches it invokes the proxy,
// with the whole path as the suffix appended to the destination.
type ProxyHandler struct {
	// ProxyKey pins the handler to one proxy. It must be a placeholder
	// such as {env.PAY_PROXY_KEY}: with require_auth false the key is a
	// credential. Empty: the proxy registered for the request's host
	// (POST /vault/tenants/{id}/hostnames on the admin API).
	ProxyKey string `json:"proxy_key,omitempty"`

	// RateLimits changes or switches off the rate limits; default the
	// interface's table, whose whitelabel rows count by host and address.
	RateLimits *RateLimits `json:"rate_limits,omitempty"`

	key     string
	limits  limits
	forward *forwarder
}

// CaddyModule returns the Caddy module information.
func (ProxyHandler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.vault_proxy",
		New: func() caddy.Module { return new(ProxyHandler) },
	}
}

// Provision connects the handler to the vault app.
func (h *ProxyHandler) Provision(ctx caddy.Context) error {
	appIface, err := ctx.App("vault")
	if err != nil {
		return err
	}
	app := appIface.(*App)
	if h.ProxyKey != "" {
		if h.key = caddy.NewReplacer().ReplaceAll(h.ProxyKey, ""); h.key == "" {
			return errors.New("proxy_key: the placeholder resolved to nothing")
		}
	}
	if err := h.limits.provision(h.RateLimits, app); err != nil {
		return err
	}
	h.forward = &forwarder{app: app, headers: newVaultHeaders(app.HeaderPrefix), logger: ctx.Logger(),
		limits: &h.limits, whitelabel: true}
	return nil
}

// Cleanup releases the handler's share of the limiter state.
func (h *ProxyHandler) Cleanup() error { return h.limits.cleanup() }

// Validate checks the configuration without side effects; Caddy calls it
// after Provision, and the Caddyfile adapter too, so that a key written
// out never reaches the JSON.
func (h *ProxyHandler) Validate() error {
	if h.ProxyKey != "" && !isPlaceholder(h.ProxyKey) {
		return errors.New("proxy_key must be a placeholder such as {env.PAY_PROXY_KEY}, never the key itself")
	}
	return h.RateLimits.validate()
}

// ServeHTTP invokes the host's proxy.
func (h *ProxyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	f := h.forward
	traceID := r.Header.Get(f.headers.traceID)
	if !traceIDPattern.MatchString(traceID) {
		traceID = uuid.NewString()
	}
	w.Header().Set(f.headers.traceID, traceID)
	if extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
		extra.Add(zap.String("trace_id", traceID))
	}
	key := h.key
	if key == "" {
		var err error
		if key, err = h.hostProxyKey(r); err != nil {
			f.writeProxyError(w, r, err)
			return nil
		}
	}
	f.serve(w, r, r.URL.EscapedPath(), key)
	return nil
}

// hostProxyKey finds the key of the proxy registered for the request's
// host.
func (h *ProxyHandler) hostProxyKey(r *http.Request) (string, error) {
	store, err := h.forward.app.waitStore(r.Context())
	if err != nil {
		return "", err
	}
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	reg, err := store.LookupHostname(r.Context(), host)
	if errors.Is(err, vaultstore.ErrNotFound) {
		return "", errStatus(http.StatusNotFound, "no proxy is registered for this host")
	} else if err != nil {
		return "", err
	}
	p, err := store.GetProxy(r.Context(), reg.TenantID, reg.ProxyID)
	if errors.Is(err, vaultstore.ErrNotFound) {
		return "", errStatus(http.StatusNotFound, "no proxy is registered for this host")
	} else if err != nil {
		return "", err
	}
	return p.Key, nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*ProxyHandler)(nil)
	_ caddy.CleanerUpper          = (*ProxyHandler)(nil)
	_ caddy.Validator             = (*ProxyHandler)(nil)
	_ caddyhttp.MiddlewareHandler = (*ProxyHandler)(nil)
	_ caddyfile.Unmarshaler       = (*ProxyHandler)(nil)
)

package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/tokenvault/tokenvault/internal/version"
	"github.com/tokenvault/tokenvault/vaultstore"
	"github.com/tokenvault/tokenvault/vaultstore/strictjson"
)

func init() {
	caddy.RegisterModule(AdminAPI{})
}

// AdminAPI is the operator plane, mounted under /vault/ on Caddy's admin
// endpoint (local by default): tenants are created, listed and deleted
// here, never through the public API.
type AdminAPI struct {
	ctx   caddy.Context
	vault *App // this config's vault app; nil when it has none
}

// CaddyModule returns the Caddy module information.
func (AdminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.vault",
		New: func() caddy.Module { return new(AdminAPI) },
	}
}

// Provision keeps the config's context and its vault app, as Caddy's PKI
// admin API does. Caddy provisions the admin routers with each config it
// loads, before that config's apps start: a request waits for the vault's
// Start (see vaultApp). An app that fails to load is not an error here:
// the config's own load reports it.
func (a *AdminAPI) Provision(ctx caddy.Context) error {
	a.ctx = ctx
	if app, err := ctx.AppIfConfigured("vault"); err == nil {
		a.vault = app.(*App)
	}
	return nil
}

// Routes returns the admin routes.
func (a AdminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: "/vault/tenants", Handler: adminProblems(a.handleTenants)},
		{Pattern: "/vault/tenants/", Handler: adminProblems(a.handleTenant)},
		{Pattern: "/vault/health", Handler: adminProblems(a.handleHealth)},
		{Pattern: "/vault/master-key", Handler: adminProblems(a.handleMasterKey)},
		{Pattern: "/vault/backup", Handler: adminProblems(a.handleBackup)},
		{Pattern: "/vault/audit/", Handler: adminProblems(a.handleAudit)},
	}
}

// vaultApp returns the config's vault app once its Start has opened the
// store, waiting for it as the API does (see App.waitStore): 503 when the
// config has no vault app, or it failed, stopped or does not start in
// time.
func (a AdminAPI) vaultApp(ctx context.Context) (*App, error) {
	if a.vault == nil {
		return nil, caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: errors.New("the vault app is not configured")}
	}
	if _, err := a.vault.waitStore(ctx); err != nil {
		return nil, err
	}
	return a.vault, nil
}

// store returns the store of the config's vault app (see vaultApp).
func (a AdminAPI) store(r *http.Request) (*vaultstore.Store, error) {
	app, err := a.vaultApp(r.Context())
	if err != nil {
		return nil, err
	}
	return app.Store(), nil
}

// adminHealthReport is the health report with Tokenvault's version, for
// the operator (the public health_path leaves the version out).
type adminHealthReport struct {
	// Version is Tokenvault's release (internal/version).
	Version string `json:"version"`
	healthReport
}

// handleHealth: GET /vault/health, 200 when every part of the vault
// works, else 503 naming the failing part, with Tokenvault's version.
func (a AdminAPI) handleHealth(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return methodNotAllowed(r)
	}
	app, err := a.vaultApp(r.Context())
	if err != nil {
		return err
	}
	status, rep := app.checkHealth(r.Context())
	return writeJSON(w, status, adminHealthReport{Version: version.Version, healthReport: rep})
}

// handleTenants: POST /vault/tenants creates a tenant with a management
// application and its key (shown once); GET lists tenants.
func (a AdminAPI) handleTenants(w http.ResponseWriter, r *http.Request) error {
	store, err := a.store(r)
	if err != nil {
		return err
	}
	switch r.Method {
	case http.MethodPost:
		var in vaultstore.NewTenant
		if err := decodeAdminBody(w, r, &in); err != nil {
			return err
		}
		created, err := store.CreateTenant(r.Context(), in)
		if err != nil {
			return adminError(err)
		}
		return writeJSON(w, http.StatusCreated, created)
	case http.MethodGet:
		tenants, err := store.ListTenants(r.Context())
		if err != nil {
			return adminError(err)
		}
		if tenants == nil {
			tenants = []*vaultstore.Tenant{}
		}
		return writeJSON(w, http.StatusOK, tenants)
	}
	return methodNotAllowed(r)
}

// handleTenant: GET or DELETE /vault/tenants/{id}, PUT
// /vault/tenants/{id}/quotas (the quotas named change), and the tenant's
// whitelabel hostnames under /vault/tenants/{id}/hostnames.
func (a AdminAPI) handleTenant(w http.ResponseWriter, r *http.Request) error {
	store, err := a.store(r)
	if err != nil {
		return err
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/vault/tenants/"), "/")
	id := parts[0]
	switch {
	case id == "":
	case len(parts) == 1:
		return a.tenant(w, r, store, id)
	case parts[1] == "quotas" && len(parts) == 2:
		if r.Method != http.MethodPut {
			return methodNotAllowed(r)
		}
		var in vaultstore.QuotasUpdate
		if err := decodeAdminBody(w, r, &in); err != nil {
			return err
		}
		t, err := store.UpdateQuotas(r.Context(), id, in)
		if err != nil {
			return adminError(err)
		}
		return writeJSON(w, http.StatusOK, t)
	case parts[1] == "data-keys" && len(parts) == 2:
		switch r.Method {
		case http.MethodGet:
			st, err := store.DataKeyStatus(r.Context(), id)
			if err != nil {
				return adminError(err)
			}
			return writeJSON(w, http.StatusOK, st)
		case http.MethodPost:
			st, err := store.RotateDataKey(r.Context(), id)
			if err != nil {
				return adminError(err)
			}
			return writeJSON(w, http.StatusAccepted, st)
		}
		return methodNotAllowed(r)
	case parts[1] == "hostnames" && len(parts) == 2:
		return a.hostnames(w, r, store, id)
	case parts[1] == "hostnames" && len(parts) == 3:
		if r.Method != http.MethodDelete {
			return methodNotAllowed(r)
		}
		if err := store.DeleteHostname(r.Context(), id, parts[2]); err != nil {
			return adminError(err)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: errors.New("not found")}
}

func (a AdminAPI) tenant(w http.ResponseWriter, r *http.Request, store *vaultstore.Store, id string) error {
	switch r.Method {
	case http.MethodGet:
		t, err := store.GetTenant(r.Context(), id)
		if err != nil {
			return adminError(err)
		}
		return writeJSON(w, http.StatusOK, t)
	case http.MethodDelete:
		if err := store.DeleteTenant(r.Context(), id); err != nil {
			return adminError(err)
		}
		store.ExportOperatorEvent("tenant", id, "delete", "tenant deleted")
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return methodNotAllowed(r)
}

// hostnames: POST /vault/tenants/{id}/hostnames registers a hostname for
// a proxy of the tenant ({"hostname", "proxy_id"}); GET lists them.
func (a AdminAPI) hostnames(w http.ResponseWriter, r *http.Request, store *vaultstore.Store, tenantID string) error {
	switch r.Method {
	case http.MethodPost:
		var in struct {
			Hostname string `json:"hostname"`
			ProxyID  string `json:"proxy_id"`
		}
		if err := decodeAdminBody(w, r, &in); err != nil {
			return err
		}
		h, err := store.RegisterHostname(r.Context(), tenantID, in.ProxyID, in.Hostname)
		if err != nil {
			return adminError(err)
		}
		return writeJSON(w, http.StatusCreated, h)
	case http.MethodGet:
		list, err := store.ListHostnames(r.Context(), tenantID)
		if err != nil {
			return adminError(err)
		}
		if list == nil {
			list = []*vaultstore.Hostname{}
		}
		return writeJSON(w, http.StatusOK, list)
	}
	return methodNotAllowed(r)
}

// handleMasterKey: POST /vault/master-key {"master_key": "<placeholder>"}
// rewraps every wrapped key under the master key the placeholder names
// (resolved in the server's environment) while the vault keeps serving.
func (a AdminAPI) handleMasterKey(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		return methodNotAllowed(r)
	}
	store, err := a.store(r)
	if err != nil {
		return err
	}
	var in struct {
		MasterKey string `json:"master_key"`
	}
	if err := decodeAdminBody(w, r, &in); err != nil {
		return err
	}
	if !isPlaceholder(in.MasterKey) {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: errors.New("master_key must be a placeholder such as {env.NEW_MASTER_KEY}, never the key itself")}
	}
	key, err := decodeMasterKey(caddy.NewReplacer().ReplaceAll(in.MasterKey, ""))
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: err}
	}
	defer clear(key)
	if err := store.RotateMasterKey(r.Context(), key); err != nil {
		return adminError(err)
	}
	store.ExportOperatorEvent("master_key", "", "update", "master key rotated")
	return writeJSON(w, http.StatusOK, map[string]string{
		"status":    "rotated",
		"next_step": "set master_key to " + in.MasterKey + " in the configuration before the next start or reload",
	})
}

// decodeAdminBody reads a JSON body under the vault's input rules.
func decodeAdminBody(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := strictjson.ReadBody(http.MaxBytesReader(w, r.Body, maxBodyBytes), maxBodyBytes)
	if err != nil {
		return adminError(err)
	}
	if err := strictjson.Decode(body, v, strictjson.DefaultLimits); err != nil {
		return adminError(err)
	}
	return nil
}

func methodNotAllowed(r *http.Request) error {
	return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
}

// adminError maps a vault error to the problem the admin routes answer
// (see adminProblems), with the status, detail and field errors the
// public API would give it.
func adminError(err error) error {
	return &adminFailure{problem: problemFor(err), cause: err}
}

// Interface guards
// Interface guards
var (
	_ caddy.Provisioner = (*AdminAPI)(nil)
	_ caddy.AdminRouter = (*AdminAPI)(nil)
)

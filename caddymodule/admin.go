package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/tokenvault/tokenvault/vaultstore"
	"github.com/tokenvault/tokenvault/vaultstore/strictjson"
)

func init() {
	caddy.RegisterModule(AdminAPI{})
}

// AdminAPI is the operator plane, mounted under /vault/ on Caddy's admin
// endpoint (local by default): tenants are created, listed and deleted
// here, never through the public API.
type AdminAPI struct{}

// CaddyModule returns the Caddy module information.
func (AdminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.vault",
		New: func() caddy.Module { return new(AdminAPI) },
	}
}

// Routes returns the admin routes.
func (a AdminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: "/vault/tenants", Handler: caddy.AdminHandlerFunc(a.handleTenants)},
		{Pattern: "/vault/tenants/", Handler: caddy.AdminHandlerFunc(a.handleTenant)},
	}
}

// runningStore returns the store of the running vault app.
func runningStore() (*vaultstore.Store, error) {
	appIface, err := caddy.ActiveContext().AppIfConfigured("vault")
	if err != nil || appIface == nil {
		return nil, caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: errors.New("the vault app is not running")}
	}
	store := appIface.(*App).Store()
	if store == nil {
		return nil, caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: errors.New("the vault store is not open")}
	}
	return store, nil
}

// handleTenants: POST /vault/tenants creates a tenant with a management
// application and its key (shown once); GET lists tenants.
func (a AdminAPI) handleTenants(w http.ResponseWriter, r *http.Request) error {
	store, err := runningStore()
	if err != nil {
		return err
	}
	switch r.Method {
	case http.MethodPost:
		body, err := strictjson.ReadBody(http.MaxBytesReader(w, r.Body, maxBodyBytes), maxBodyBytes)
		if err != nil {
			return adminError(err)
		}
		var in vaultstore.NewTenant
		if err := strictjson.Decode(body, &in, strictjson.DefaultLimits); err != nil {
			return adminError(err)
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
	return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
}

// handleTenant: GET or DELETE /vault/tenants/{id}.
func (a AdminAPI) handleTenant(w http.ResponseWriter, r *http.Request) error {
	store, err := runningStore()
	if err != nil {
		return err
	}
	id := strings.TrimPrefix(r.URL.Path, "/vault/tenants/")
	if id == "" || strings.Contains(id, "/") {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: errors.New("no such tenant")}
	}
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
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
}

// adminError maps a vault error to the admin API's error type, with the
// same status the public API would use.
func adminError(err error) error {
	p := problemFor(err)
	msg := p.Detail
	if len(p.Errors) > 0 {
		raw, _ := json.Marshal(p.Errors)
		msg += ": " + string(raw)
	}
	return caddy.APIError{HTTPStatus: p.Status, Err: errors.New(msg)}
}

// Interface guards
var _ caddy.AdminRouter = AdminAPI{}

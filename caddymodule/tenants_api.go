package caddymodule

import (
	"net/http"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// getTenant: GET /tenants/self.
func getTenant(c *call) error {
	return writeJSON(c.w, http.StatusOK, c.principal.Tenant)
}

// updateTenant: PUT /tenants/self.
func updateTenant(c *call) error {
	var in vaultstore.TenantUpdate
	if err := c.decode(&in); err != nil {
		return err
	}
	t, err := c.store.UpdateTenant(c.ctx(), c.tenantID(), c.actorID(), in)
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, t)
}

// deleteTenant: DELETE /tenants/self. The tenant's data and keys are
// destroyed; the calling key stops working with it.
func deleteTenant(c *call) error {
	if err := c.store.DeleteTenant(c.ctx(), c.tenantID()); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

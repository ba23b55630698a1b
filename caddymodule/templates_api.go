package caddymodule

import (
	"net/http"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// listRoles: GET /roles, the permission groups management users hold.
func listRoles(c *call) error {
	return writeJSON(c.w, http.StatusOK, vaultstore.Roles())
}

// listApplicationTemplates: GET /application-templates, the ready-made
// applications the vault ships with. Create one by sending a template's
// application_type (as type), permissions and rules to POST
// /applications, as the vendor's clients do.
func listApplicationTemplates(c *call) error {
	return writeJSON(c.w, http.StatusOK, vaultstore.ApplicationTemplates())
}

// getApplicationTemplate: GET /application-templates/{id}.
func getApplicationTemplate(c *call) error {
	t, err := vaultstore.GetApplicationTemplate(c.params["id"])
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, t)
}

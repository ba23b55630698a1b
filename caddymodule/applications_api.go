package caddymodule

import (
	"net/http"
	"slices"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// createdApplication is an application as POST /applications returns it:
// with its first key both as key and as keys[0] (clients read either).
type createdApplication struct {
	*vaultstore.Application
	Key  string                  `json:"key,omitempty"`
	Keys []*vaultstore.IssuedKey `json:"keys,omitempty"`
}

// createApplication: POST /applications.
func createApplication(c *call) error {
	var in vaultstore.ApplicationInput
	if err := c.decode(&in); err != nil {
		return err
	}
	app, key, err := c.store.CreateApplication(c.ctx(), c.tenantID(), c.actorID(), in)
	if err != nil {
		return err
	}
	out := createdApplication{Application: app}
	if key != nil {
		out.Key, out.Keys = key.Key, []*vaultstore.IssuedKey{key}
	}
	return writeJSON(c.w, http.StatusCreated, out)
}

// listApplications: GET /applications, filtered by id (repeated) and type.
func listApplications(c *call) error {
	q := c.r.URL.Query()
	number, size, err := pageParams(q)
	if err != nil {
		return err
	}
	ids := q["id"]
	types := slices.DeleteFunc(q["type"], func(t string) bool { return t == "" }) // an empty type= is no filter
	for _, t := range types {
		if vaultstore.PermissionsFor(t) == nil {
			return errField("type", "type must be private, public or management")
		}
	}
	apps, err := c.store.ListApplications(c.ctx(), c.tenantID())
	if err != nil {
		return err
	}
	apps = slices.DeleteFunc(apps, func(a *vaultstore.Application) bool {
		return (len(ids) > 0 && !slices.Contains(ids, a.ID)) || (len(types) > 0 && !slices.Contains(types, a.Type))
	})
	return writeJSON(c.w, http.StatusOK, paginate(apps, number, size))
}

// getCallingApplication: GET /applications/key, the application of the
// calling key.
func getCallingApplication(c *call) error {
	return writeJSON(c.w, http.StatusOK, c.principal.Application)
}

// getApplication: GET /applications/{id}.
func getApplication(c *call) error {
	app, err := c.store.GetApplication(c.ctx(), c.tenantID(), c.params["id"])
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, app)
}

// updateApplication: PUT /applications/{id}.
func updateApplication(c *call) error {
	var in vaultstore.ApplicationInput
	if err := c.decode(&in); err != nil {
		return err
	}
	app, err := c.store.UpdateApplication(c.ctx(), c.tenantID(), c.params["id"], c.actorID(), in)
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, app)
}

// deleteApplication: DELETE /applications/{id}; its keys stop working.
func deleteApplication(c *call) error {
	if err := c.store.DeleteApplication(c.ctx(), c.tenantID(), c.params["id"], c.actorID()); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// listKeys: GET /applications/{id}/keys, without the secrets.
func listKeys(c *call) error {
	keys, err := c.store.ListKeys(c.ctx(), c.tenantID(), c.params["id"])
	if err != nil {
		return err
	}
	if keys == nil {
		keys = []vaultstore.APIKey{}
	}
	return writeJSON(c.w, http.StatusOK, keys)
}

// getKey: GET /applications/{id}/keys/{key_id}, without the secret.
func getKey(c *call) error {
	keys, err := c.store.ListKeys(c.ctx(), c.tenantID(), c.params["id"])
	if err != nil {
		return err
	}
	for _, k := range keys {
		if k.ID == c.params["key_id"] {
			return writeJSON(c.w, http.StatusOK, k)
		}
	}
	return vaultstore.ErrNotFound
}

// createKey: POST /applications/{id}/keys; the key is shown only here.
func createKey(c *call) error {
	key, err := c.store.CreateKey(c.ctx(), c.tenantID(), c.params["id"], c.actorID())
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusCreated, key)
}

// deleteKey: DELETE /applications/{id}/keys/{key_id}.
func deleteKey(c *call) error {
	if err := c.store.DeleteKey(c.ctx(), c.tenantID(), c.params["id"], c.params["key_id"], c.actorID()); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// permissionInfo describes one permission for GET /permissions.
type permissionInfo struct {
	Type             string   `json:"type"`
	Description      string   `json:"description"`
	ApplicationTypes []string `json:"application_types"`
}

// listPermissions: GET /permissions, optionally ?application_type=.
func listPermissions(c *call) error {
	want := c.r.URL.Query().Get("application_type")
	byPerm := map[string][]string{}
	var names []string
	for _, t := range []string{vaultstore.AppManagement, vaultstore.AppPrivate, vaultstore.AppPublic} {
		if want != "" && want != t {
			continue
		}
		for _, p := range vaultstore.PermissionsFor(t) {
			if byPerm[p] == nil {
				names = append(names, p)
			}
			byPerm[p] = append(byPerm[p], t)
		}
	}
	if want != "" && names == nil {
		return errField("application_type", "application_type must be private, public or management")
	}
	slices.Sort(names)
	out := make([]permissionInfo, 0, len(names))
	for _, n := range names {
		out = append(out, permissionInfo{Type: n, Description: vaultstore.PermissionDescription(n), ApplicationTypes: byPerm[n]})
	}
	return writeJSON(c.w, http.StatusOK, out)
}

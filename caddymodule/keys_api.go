package caddymodule

import (
	"bytes"
	"net/http"

	"github.com/tokenvault/tokenvault/vaultstore"
	"github.com/tokenvault/tokenvault/vaultstore/strictjson"
)

// createClientKey: POST /keys. The official Node SDK sends its body as
// application/json-patch+json; like every JSON body here, it is read for
// what it holds whatever its content type says. An empty body makes a
// key with the default lifetime.
func createClientKey(c *call) error {
	body, err := strictjson.ReadBodyOfLength(c.r.Body, maxBodyBytes, c.r.ContentLength)
	if err != nil {
		return err
	}
	var in vaultstore.ClientKeyInput
	if len(bytes.TrimSpace(body)) > 0 {
		if err := strictjson.Decode(body, &in, strictjson.DefaultLimits); err != nil {
			return err
		}
	}
	key, err := c.store.CreateClientKey(c.ctx(), c.tenantID(), c.actorID(), in)
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusCreated, key)
}

// listClientKeys: GET /keys, metadata only, oldest first.
func listClientKeys(c *call) error {
	keys, err := c.store.ListClientKeys(c.ctx(), c.tenantID())
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, keys)
}

// getClientKey: GET /keys/{id}, metadata only.
func getClientKey(c *call) error {
	key, err := c.store.GetClientKey(c.ctx(), c.tenantID(), c.params["id"])
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, key)
}

// deleteClientKey: DELETE /keys/{id}.
func deleteClientKey(c *call) error {
	if err := c.store.DeleteClientKey(c.ctx(), c.tenantID(), c.params["id"], c.actorID()); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

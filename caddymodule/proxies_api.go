package caddymodule

import (
	"context"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// createProxy: POST /proxies.
func createProxy(c *call) error {
	var in vaultstore.ProxyInput
	if err := c.decode(&in); err != nil {
		return err
	}
	p, err := c.store.CreateProxy(c.ctx(), c.tenantID(), c.actorID(), in, c.api.checkProxy(c.tenantID()))
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusCreated, p)
}

// listProxies: GET /proxies, filtered by id (repeated) and name (a
// case-insensitive wildcard pattern: * matches any run of characters;
// without * it matches names containing it).
func listProxies(c *call) error {
	q := c.r.URL.Query()
	number, size, err := pageParams(q)
	if err != nil {
		return err
	}
	proxies, err := c.store.ListProxies(c.ctx(), c.tenantID())
	if err != nil {
		return err
	}
	ids, name := q["id"], q.Get("name")
	pattern := nameMatcher(name)
	proxies = slices.DeleteFunc(proxies, func(p *vaultstore.Proxy) bool {
		return (len(ids) > 0 && !slices.Contains(ids, p.ID)) || (name != "" && !pattern(p.Name))
	})
	return writeJSON(c.w, http.StatusOK, paginate(proxies, number, size))
}

// nameMatcher returns a case-insensitive matcher for a name filter.
func nameMatcher(filter string) func(string) bool {
	filter = strings.ToLower(filter)
	if !strings.Contains(filter, "*") {
		return func(name string) bool { return strings.Contains(strings.ToLower(name), filter) }
	}
	// path.Match treats only *, ? and [ specially; escape the latter two
	filter = strings.NewReplacer(`\`, `\\`, "?", `\?`, "[", `\[`, "/", "\x00").Replace(filter)
	return func(name string) bool {
		ok, _ := path.Match(filter, strings.ReplaceAll(strings.ToLower(name), "/", "\x00"))
		return ok
	}
}

// getProxy: GET /proxies/{id}.
func getProxy(c *call) error {
	p, err := c.store.GetProxy(c.ctx(), c.tenantID(), c.params["id"])
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, p)
}

// updateProxy: PUT /proxies/{id}.
func updateProxy(c *call) error {
	var in vaultstore.ProxyInput
	if err := c.decode(&in); err != nil {
		return err
	}
	p, err := c.store.UpdateProxy(c.ctx(), c.tenantID(), c.params["id"], c.actorID(), in, c.api.checkProxy(c.tenantID()))
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, p)
}

// patchProxy: PATCH /proxies/{id}, a JSON merge patch (RFC 7386).
func patchProxy(c *call) error {
	patch, err := c.mergePatch()
	if err != nil {
		return err
	}
	if _, err := c.store.PatchProxy(c.ctx(), c.tenantID(), c.params["id"], c.actorID(), patch, c.api.checkProxy(c.tenantID())); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// mergePatch reads a JSON merge patch body (RFC 7386), which must be an
// object sent as application/merge-patch+json.
func (c *call) mergePatch() (map[string]any, error) {
	if mt, _, _ := mime.ParseMediaType(c.r.Header.Get("Content-Type")); mt != "application/merge-patch+json" {
		return nil, errStatus(http.StatusUnsupportedMediaType, "PATCH takes Content-Type application/merge-patch+json")
	}
	v, err := c.decodeValue()
	if err != nil {
		return nil, err
	}
	patch, ok := v.(map[string]any)
	if !ok {
		return nil, errField("body", "a merge patch must be a JSON object")
	}
	return patch, nil
}

// deleteProxy: DELETE /proxies/{id}.
func deleteProxy(c *call) error {
	if err := c.store.DeleteProxy(c.ctx(), c.tenantID(), c.params["id"], c.actorID()); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// checkProxy refuses what this deployment cannot run: a destination the
// egress policy forbids, and transform code the sandbox refuses (checked
// in the tenant's share of the transform workers).
func (h *API) checkProxy(tenantID string) func(in *vaultstore.ProxyInput, v *vaultstore.ValidationError) {
	return func(in *vaultstore.ProxyInput, v *vaultstore.ValidationError) {
		if _, err := h.app.egress.CheckURL(in.DestinationURL); err != nil {
			v.Add("destination_url", egressReason(err))
		}
		ctx, cancel := context.WithTimeout(context.Background(), codeCheckTimeout)
		defer cancel()
		for field, t := range map[string]*vaultstore.ProxyTransform{"request_transform": in.RequestTransform, "response_transform": in.ResponseTransform} {
			if t != nil && t.Code != "" {
				h.app.checkCode(ctx, tenantID, field+".code", t.Code, v)
			}
		}
	}
}

// codeCheckTimeout bounds checking tenant code when it is saved.
const codeCheckTimeout = 10 * time.Second

package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/tokenvault/tokenvault/transforms"
	"github.com/tokenvault/tokenvault/vaultstore"
)

// checkReactorCode refuses reactor code the sandbox will not run, checked
// in the tenant's share of the transform workers.
func (h *API) checkReactorCode(tenantID string) func(field, code string, v *vaultstore.ValidationError) {
	return func(field, code string, v *vaultstore.ValidationError) {
		ctx, cancel := context.WithTimeout(context.Background(), codeCheckTimeout)
		defer cancel()
		h.app.checkCode(ctx, tenantID, field, code, v)
	}
}

// createReactor: POST /reactors.
func createReactor(c *call) error {
	var in vaultstore.ReactorInput
	if err := c.decode(&in); err != nil {
		return err
	}
	r, err := c.store.CreateReactor(c.ctx(), c.tenantID(), c.actorID(), in, c.api.checkReactorCode(c.tenantID()))
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusCreated, r)
}

// listReactors: GET /reactors, filtered by id (repeated) and name.
func listReactors(c *call) error {
	q := c.r.URL.Query()
	number, size, err := pageParams(q)
	if err != nil {
		return err
	}
	reactors, err := c.store.ListReactors(c.ctx(), c.tenantID())
	if err != nil {
		return err
	}
	ids, name := q["id"], q.Get("name")
	match := nameMatcher(name)
	reactors = slices.DeleteFunc(reactors, func(r *vaultstore.Reactor) bool {
		return (len(ids) > 0 && !slices.Contains(ids, r.ID)) || (name != "" && !match(r.Name))
	})
	return writeJSON(c.w, http.StatusOK, paginate(reactors, number, size))
}

// getReactor: GET /reactors/{id}.
func getReactor(c *call) error {
	r, err := c.store.GetReactor(c.ctx(), c.tenantID(), c.params["id"])
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, r)
}

// updateReactor: PUT /reactors/{id}.
func updateReactor(c *call) error {
	var in vaultstore.ReactorInput
	if err := c.decode(&in); err != nil {
		return err
	}
	r, err := c.store.UpdateReactor(c.ctx(), c.tenantID(), c.params["id"], c.actorID(), in, c.api.checkReactorCode(c.tenantID()))
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, r)
}

// patchReactor: PATCH /reactors/{id}, a JSON merge patch.
func patchReactor(c *call) error {
	patch, err := c.mergePatch()
	if err != nil {
		return err
	}
	if _, err := c.store.PatchReactor(c.ctx(), c.tenantID(), c.params["id"], c.actorID(), patch, c.api.checkReactorCode(c.tenantID())); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// deleteReactor: DELETE /reactors/{id}.
func deleteReactor(c *call) error {
	if err := c.store.DeleteReactor(c.ctx(), c.tenantID(), c.params["id"], c.actorID()); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// reactResult is the answer of POST /reactors/{id}/react.
type reactResult struct {
	Tokens any             `json:"tokens"`
	Raw    json.RawMessage `json:"raw"`
}

// react: POST /reactors/{id}/react {args}: expressions in args are
// detokenized with the caller's token:use, the code runs, and a tokenize
// object it returns is tokenized with the reactor's application.
func react(c *call) error {
	body, err := c.decodeValue()
	if err != nil {
		return err
	}
	in, ok := body.(map[string]any)
	if !ok {
		return errField("body", "the body must be an object with args")
	}
	if _, ok := in["callback_url"]; ok {
		return errField("callback_url", "asynchronous reactions are not supported; call react and wait for the result")
	}
	r, err := c.store.GetReactor(c.ctx(), c.tenantID(), c.params["id"])
	if err != nil {
		return err
	}
	args, _, err := c.store.Detokenize(c.ctx(), c.tokenRequest(), vaultstore.DetokenizeOptions{
		Permission: "token:use",
		Limit:      maxProxyTokens,
		Audit: &vaultstore.AuditRecord{
			ActorID: c.actorID(), ActorType: vaultstore.ActorApplication,
			EntityType: "reactor", EntityID: r.ID, Operation: "detokenize",
			Message: "reactor arguments detokenized",
		},
	}, in["args"])
	if err != nil {
		return err
	}
	argsJSON, err := json.Marshal(args)
	if err != nil {
		return err
	}
	vaultMetrics.transformRuns.WithLabelValues(transforms.JobReactor).Inc()
	res, err := c.api.app.workers.Run(c.ctx(), transforms.Job{
		Kind:          transforms.JobReactor,
		Code:          r.Code,
		Args:          argsJSON,
		Configuration: r.Configuration,
		Svc:           newServiceClient(c.ctx(), c.store, c.principal.Tenant, r.ApplicationID(), "reactor", r.ID),
		Meta:          map[string]string{"tenant_id": r.TenantID, "entity": "reactor", "entity_id": r.ID},
		Realm:         transforms.RealmScope{Tenant: r.TenantID, Principal: r.ApplicationID() + "/" + c.principal.Application.ID},
	})
	if err != nil {
		if te := (*transforms.Error)(nil); errors.As(err, &te) && te.Custom && res != nil {
			(&customResponse{status: te.Status, result: res}).write(c.w)
			return nil
		}
		return transformProblem("the reactor", err)
	}
	out := reactResult{Raw: res.Raw}
	if len(res.Tokenize) > 0 {
		app, err := c.store.ServiceApplication(c.ctx(), r.TenantID, r.ApplicationID())
		if err != nil {
			return errField("tokenize", "the reactor returned tokenize, but it has no application to tokenize with")
		}
		var v any
		if err := json.Unmarshal(res.Tokenize, &v); err != nil {
			return err
		}
		if out.Tokens, err = c.store.Tokenize(c.ctx(), vaultstore.TokenRequest{Tenant: c.principal.Tenant, Application: app}, v); err != nil {
			return err
		}
	}
	return writeJSON(c.w, http.StatusOK, out)
}

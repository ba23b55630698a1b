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
	r, argsJSON, err := reactionArgs(c)
	if err != nil {
		return err
	}
	return c.api.app.runReaction(c.ctx(), c.w, c.store, c.principal.Tenant, c.principal.Application.ID, r, argsJSON)
}

// reactionArgs reads the body of react or react-async, finds the reactor
// and detokenizes the args with the caller's token:use (audited), giving
// their JSON.
func reactionArgs(c *call) (*vaultstore.Reactor, []byte, error) {
	body, err := c.decodeValue()
	if err != nil {
		return nil, nil, err
	}
	in, ok := body.(map[string]any)
	if !ok {
		return nil, nil, errField("body", "the body must be an object with args")
	}
	if _, ok := in["callback_url"]; ok {
		return nil, nil, errField("callback_url", "callbacks are not supported; use POST /reactors/{id}/react-async and read the outcome from GET /reactors/{id}/results/{request_id}")
	}
	r, err := c.store.GetReactor(c.ctx(), c.tenantID(), c.params["id"])
	if err != nil {
		return nil, nil, err
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
		return nil, nil, err
	}
	argsJSON, err := json.Marshal(args)
	if err != nil {
		return nil, nil, err
	}
	return r, argsJSON, nil
}

// runReaction runs reactor r with args for callerID of tenant and writes
// the answer of react to w; a failure it returns is for the caller to
// write as a problem.
func (a *App) runReaction(ctx context.Context, w http.ResponseWriter, store *vaultstore.Store, tenant *vaultstore.Tenant, callerID string, r *vaultstore.Reactor, argsJSON []byte) error {
	vaultMetrics.transformRuns.WithLabelValues(transforms.JobReactor).Inc()
	res, err := a.workers.Run(ctx, transforms.Job{
		Kind:          transforms.JobReactor,
		Code:          r.Code,
		Args:          argsJSON,
		Configuration: r.Configuration,
		Svc:           newServiceClient(ctx, store, tenant, r.ApplicationID(), "reactor", r.ID),
		Meta:          map[string]string{"tenant_id": r.TenantID, "entity": "reactor", "entity_id": r.ID},
		Realm:         transforms.RealmScope{Tenant: r.TenantID, Principal: r.ApplicationID() + "/" + callerID},
	})
	if err != nil {
		if te := (*transforms.Error)(nil); errors.As(err, &te) && te.Custom && res != nil {
			(&customResponse{status: te.Status, result: res}).write(w)
			return nil
		}
		return transformProblem("the reactor", err)
	}
	out := reactResult{Raw: res.Raw}
	if len(res.Tokenize) > 0 {
		app, err := store.ServiceApplication(ctx, r.TenantID, r.ApplicationID())
		if err != nil {
			return errField("tokenize", "the reactor returned tokenize, but it has no application to tokenize with")
		}
		var v any
		if err := json.Unmarshal(res.Tokenize, &v); err != nil {
			return err
		}
		if out.Tokens, err = store.Tokenize(ctx, vaultstore.TokenRequest{Tenant: tenant, Application: app}, v); err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

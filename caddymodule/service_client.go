package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/tokenvault/tokenvault/transforms"
	"github.com/tokenvault/tokenvault/vaultstore"
	"github.com/tokenvault/tokenvault/vaultstore/strictjson"
)

// serviceClient backs req.svc in tenant code: each call runs in the vault
// with exactly the permissions and access rules of the proxy's or
// reactor's application, through the same store operations as the API.
type serviceClient struct {
	store  *vaultstore.Store
	req    vaultstore.TokenRequest
	entity string // "proxy" or "reactor", for audit records
	id     string
}

// newServiceClient returns the client for code acting as appID, or nil
// when there is no such application (req.svc is then absent).
func newServiceClient(ctx context.Context, store *vaultstore.Store, tenant *vaultstore.Tenant, appID, entity, id string) transforms.Svc {
	app, err := store.ServiceApplication(ctx, tenant.ID, appID)
	if err != nil {
		return nil
	}
	return &serviceClient{store: store, req: vaultstore.TokenRequest{Tenant: tenant, Application: app}, entity: entity, id: id}
}

// Call runs one req.svc method.
func (c *serviceClient) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	out, err := c.call(ctx, method, params)
	if err != nil {
		p := problemFor(err)
		if p.Status >= 500 {
			return nil, err // a generic failure reaches the code, the details only the log
		}
		return nil, &transforms.SvcError{Status: p.Status, Message: p.Detail}
	}
	return json.Marshal(out)
}

func (c *serviceClient) call(ctx context.Context, method string, params json.RawMessage) (any, error) {
	var ref struct {
		ID    string         `json:"id"`
		Patch map[string]any `json:"patch"`
	}
	switch method {
	case transforms.SvcTokenize:
		v, err := strictjson.DecodeValue(params, strictjson.DefaultLimits)
		if err != nil {
			return nil, err
		}
		return c.store.Tokenize(ctx, c.req, v)
	case transforms.SvcTokensCreate:
		var in vaultstore.TokenInput
		if err := strictjson.Decode(params, &in, strictjson.DefaultLimits); err != nil {
			return nil, err
		}
		return c.store.CreateToken(ctx, c.req, in)
	case transforms.SvcTokensRetrieve, transforms.SvcTokensDelete, transforms.SvcTokensUpdate:
		if err := strictjson.Decode(params, &ref, strictjson.DefaultLimits); err != nil {
			return nil, err
		}
		switch method {
		case transforms.SvcTokensRetrieve:
			return c.store.GetToken(ctx, c.req, ref.ID)
		case transforms.SvcTokensDelete:
			return map[string]any{}, c.store.DeleteToken(ctx, c.req, ref.ID)
		}
		return c.store.UpdateToken(ctx, c.req, ref.ID, ref.Patch)
	case transforms.SvcTokensList:
		var q struct {
			ID       []string          `json:"id"`
			Metadata map[string]string `json:"metadata"`
			Page     int               `json:"page"`
			Size     int               `json:"size"`
		}
		if err := strictjson.Decode(params, &q, strictjson.DefaultLimits); err != nil {
			return nil, err
		}
		number, size := max(q.Page, 1), q.Size
		if size < 1 || size > maxPageSize {
			size = defaultPageSize
		}
		toks, total, err := c.store.ListTokens(ctx, c.req, vaultstore.TokenFilter{IDs: q.ID, Metadata: q.Metadata}, pageOffset(number, size), size)
		if err != nil {
			return nil, err
		}
		return tokenPage(toks, total, number, size), nil
	case transforms.SvcDetokenize:
		v, err := strictjson.DecodeValue(params, strictjson.DefaultLimits)
		if err != nil {
			return nil, err
		}
		out, _, err := c.store.Detokenize(ctx, c.req, vaultstore.DetokenizeOptions{
			Permission: "token:use",
			Limit:      maxProxyTokens,
			Audit: &vaultstore.AuditRecord{
				ActorID: c.req.Application.ID, ActorType: vaultstore.ActorApplication,
				EntityType: c.entity, EntityID: c.id, Operation: "detokenize",
				Message: c.entity + " code detokenized through its service client",
			},
		}, v)
		return out, err
	}
	return nil, errors.New("unknown service method " + strconv.Quote(method))
}

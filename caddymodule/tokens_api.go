package caddymodule

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/tokenvault/tokenvault/vaultstore"
)

func (c *call) tokenRequest() vaultstore.TokenRequest {
	return vaultstore.TokenRequest{Tenant: c.principal.Tenant, Application: c.principal.Application}
}

// createToken: POST /tokens.
func createToken(c *call) error {
	var in vaultstore.TokenInput
	if err := c.decode(&in); err != nil {
		return err
	}
	tok, err := c.store.CreateToken(c.ctx(), c.tokenRequest(), in)
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusCreated, tok)
}

// getToken: GET /tokens/{id}.
func getToken(c *call) error {
	tok, err := c.store.GetToken(c.ctx(), c.tokenRequest(), c.params["id"])
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, tok)
}

// listTokens: GET /tokens, filtered by id (repeated) and metadata, oldest
// first, offset-paginated.
func listTokens(c *call) error {
	q := c.r.URL.Query()
	number, size, err := pageParams(q)
	if err != nil {
		return err
	}
	filter := vaultstore.TokenFilter{IDs: q["id"], Metadata: metadataFilter(c.r.URL.RawQuery)}
	toks, total, err := c.store.ListTokens(c.ctx(), c.tokenRequest(), filter, pageOffset(number, size), size)
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, tokenPage(toks, total, number, size))
}

// metadataFilter reads metadata.<key>=<value> query parameters (and the
// metadata[<key>] form); a key given twice is ignored after its first use.
func metadataFilter(rawQuery string) map[string]string {
	var out map[string]string
	for _, pair := range strings.Split(rawQuery, "&") {
		k, v, _ := strings.Cut(pair, "=")
		k, err1 := url.QueryUnescape(k)
		v, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			continue
		}
		var key string
		switch {
		case strings.HasPrefix(k, "metadata."):
			key = k[len("metadata."):]
		case strings.HasPrefix(k, "metadata[") && strings.HasSuffix(k, "]"):
			key = k[len("metadata[") : len(k)-1]
		default:
			continue
		}
		if key == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		if _, seen := out[key]; !seen {
			out[key] = v
		}
	}
	return out
}

// updateToken: PATCH /tokens/{id}, a JSON merge patch (RFC 7386).
func updateToken(c *call) error {
	patch, err := c.mergePatch()
	if err != nil {
		return err
	}
	tok, err := c.store.UpdateToken(c.ctx(), c.tokenRequest(), c.params["id"], patch)
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, tok)
}

// deleteToken: DELETE /tokens/{id}.
func deleteToken(c *call) error {
	if err := c.store.DeleteToken(c.ctx(), c.tokenRequest(), c.params["id"]); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// tokenize: POST /tokenize.
func tokenize(c *call) error {
	v, err := c.decodeValue()
	if err != nil {
		return err
	}
	out, err := c.store.Tokenize(c.ctx(), c.tokenRequest(), v)
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, out)
}

// usageReport: GET /tenants/self/reports/usage.
func usageReport(c *call) error {
	rep, err := c.store.Usage(c.ctx(), c.principal.Tenant)
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, rep)
}

// searchRequest is the body of POST /tokens/search.
type searchRequest struct {
	Query string `json:"query"`
	Page  *int   `json:"page"`
	Size  *int   `json:"size"`
}

// searchTokens: POST /tokens/search, offset-paginated.
func searchTokens(c *call) error {
	var in searchRequest
	if err := c.decode(&in); err != nil {
		return err
	}
	number, size := 1, defaultPageSize
	if in.Page != nil {
		if number = *in.Page; number < 1 {
			return errField("page", "page must be a whole number of at least 1")
		}
	}
	if in.Size != nil {
		if size = *in.Size; size < 1 || size > maxPageSize {
			return errField("size", "size must be a whole number from 1 to 100")
		}
	}
	if strings.TrimSpace(in.Query) == "" {
		return errField("query", "query is required")
	}
	toks, total, err := c.store.SearchTokens(c.ctx(), c.tokenRequest(), in.Query, pageOffset(number, size), size)
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, tokenPage(toks, total, number, size))
}

// tokenPage is one offset page of tokens out of total.
func tokenPage(toks []*vaultstore.Token, total, number, size int) page[*vaultstore.Token] {
	return page[*vaultstore.Token]{
		Pagination: pagination{TotalItems: total, PageNumber: number, PageSize: size, TotalPages: (total + size - 1) / size},
		Data:       toks,
	}
}

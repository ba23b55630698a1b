package caddymodule

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tokenvault/tokenvault/vaultstore"
	"github.com/tokenvault/tokenvault/vaultstore/strictjson"
)

func (c *call) tokenRequest() vaultstore.TokenRequest {
	return vaultstore.TokenRequest{Tenant: c.principal.Tenant, Application: c.principal.Application}
}

// createToken: POST /tokens.
func createToken(c *call) error {
	body, err := strictjson.ReadBodyOfLength(c.r.Body, maxBodyBytes, c.r.ContentLength)
	if err != nil {
		return err
	}
	var in vaultstore.TokenInput
	if err := strictjson.Decode(body, &in, strictjson.DefaultLimits); err != nil {
		return err
	}
	if err := c.decryptTokenBody(body, &in.Data); err != nil {
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
	metadata, err := metadataFilter(c.r.URL.RawQuery)
	if err != nil {
		return err
	}
	filter, err := tokenFilter(q, metadata)
	if err != nil {
		return err
	}
	toks, total, err := c.store.ListTokens(c.ctx(), c.tokenRequest(), filter, pageOffset(number, size), size)
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, tokenPage(toks, total, number, size))
}

// tokenFilter reads the list filters: id (repeated), type, container,
// fingerprint and metadata. An unknown type or a malformed container is
// refused rather than matching nothing, or everything.
func tokenFilter(q url.Values, metadata map[string]string) (vaultstore.TokenFilter, error) {
	f := vaultstore.TokenFilter{IDs: q["id"], Metadata: metadata, Type: q.Get("type"), Fingerprint: q.Get("fingerprint")}
	if _, ok := vaultstore.LookupTokenType(f.Type); f.Type != "" && !ok {
		return f, errField("type", "type must be token, card or bank")
	}
	if c := q.Get("container"); c != "" {
		var ok bool
		if f.Container, ok = vaultstore.NormalizeContainer(c); !ok {
			return f, errField("container", "container must start and end with / and use only a-z, 0-9, _ and -")
		}
	}
	return f, nil
}

// listTokensV2: GET /v2/tokens, as GET /tokens with cursor pagination.
func listTokensV2(c *call) error {
	start, size, err := cursorParams(c)
	if err != nil {
		return err
	}
	offset, err := decodeCursor(start)
	if err != nil {
		return err
	}
	metadata, err := metadataFilter(c.r.URL.RawQuery)
	if err != nil {
		return err
	}
	filter, err := tokenFilter(c.r.URL.Query(), metadata)
	if err != nil {
		return err
	}
	toks, total, err := c.store.ListTokens(c.ctx(), c.tokenRequest(), filter, offset, size)
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, tokenCursorPage(toks, offset, size, total))
}

// searchTokensV2: POST /v2/tokens/search {query, start, size}, cursor
// pagination.
func searchTokensV2(c *call) error {
	var in struct {
		Query string `json:"query"`
		Start string `json:"start"`
		Size  *int   `json:"size"`
	}
	if err := c.decode(&in); err != nil {
		return err
	}
	size := defaultPageSize
	if in.Size != nil {
		if size = *in.Size; size < 1 || size > maxPageSize {
			return errField("size", "size must be a whole number from 1 to 100")
		}
	}
	if strings.TrimSpace(in.Query) == "" {
		return errField("query", "query is required")
	}
	offset, err := decodeCursor(in.Start)
	if err != nil {
		return err
	}
	toks, total, err := c.store.SearchTokens(c.ctx(), c.tokenRequest(), in.Query, offset, size)
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, tokenCursorPage(toks, offset, size, total))
}

// tokenCursorPage is a cursor page of tokens found at offset, with the
// cursor of the next page when there is one.
func tokenCursorPage(toks []*vaultstore.Token, offset, size, total int) cursorPage[*vaultstore.Token] {
	p := cursorPage[*vaultstore.Token]{Pagination: cursorPagination{PageSize: size}, Data: toks}
	if offset+len(toks) < total && len(toks) > 0 {
		p.Pagination.Next = encodeCursor(offset + len(toks))
	}
	return p
}

// detokenize: POST /detokenize, the body with every expression replaced
// by token data, as the caller's token:read rules show it; at most the
// tenant's detokenize limit of distinct tokens.
func detokenize(c *call) error {
	v, err := c.decodeValue()
	if err != nil {
		return err
	}
	out, _, err := c.store.Detokenize(c.ctx(), c.tokenRequest(), vaultstore.DetokenizeOptions{
		Permission: "token:read",
		Limit:      c.principal.Tenant.Quotas.DetokenizeLimit,
		Audit: &vaultstore.AuditRecord{
			ActorID: c.actorID(), ActorType: vaultstore.ActorApplication,
			EntityType: "token", Operation: "detokenize", Message: "tokens detokenized through /detokenize",
		},
	}, v)
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, out)
}

// metadataFilter reads metadata.<key>=<value> query parameters, the
// metadata[<key>] form and metadata=<JSON object of strings>; a key given
// twice is ignored after its first use.
func metadataFilter(rawQuery string) (map[string]string, error) {
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
		case k == "metadata":
			var obj map[string]string
			if err := json.Unmarshal([]byte(v), &obj); err != nil {
				return nil, errField("metadata", "metadata must be a JSON object of string values")
			}
			for mk, mv := range obj {
				if out == nil {
					out = map[string]string{}
				}
				if _, seen := out[mk]; !seen && mk != "" {
					out[mk] = mv
				}
			}
			continue
		case strings.HasPrefix(k, "metadata."):
			key = k[len("metadata."):]
		case strings.HasPrefix(k, "metadata[") && strings.HasSuffix(k, "]"):
			key = k[len("metadata[") : len(k)-1]
		default:
			continue
		}
		if key == "" {
			return nil, errField("metadata", "a metadata filter needs a key: metadata.<key>=<value>")
		}
		if out == nil {
			out = map[string]string{}
		}
		if _, seen := out[key]; !seen {
			out[key] = v
		}
	}
	return out, nil
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
	if err := c.decryptTokenizeData(v, "", 0); err != nil {
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

// appendTokenPage appends p as json.Marshal encodes it, each token
// encoding itself.
func appendTokenPage(dst []byte, p page[*vaultstore.Token]) ([]byte, error) {
	dst = append(dst, `{"pagination":{"total_items":`...)
	dst = strconv.AppendInt(dst, int64(p.Pagination.TotalItems), 10)
	dst = append(dst, `,"page_number":`...)
	dst = strconv.AppendInt(dst, int64(p.Pagination.PageNumber), 10)
	dst = append(dst, `,"page_size":`...)
	dst = strconv.AppendInt(dst, int64(p.Pagination.PageSize), 10)
	dst = append(dst, `,"total_pages":`...)
	dst = strconv.AppendInt(dst, int64(p.Pagination.TotalPages), 10)
	dst = append(dst, `},"data":`...)
	if p.Data == nil {
		return append(dst, "null}"...), nil
	}
	dst = append(dst, '[')
	for i, t := range p.Data {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = t.AppendJSON(dst); err != nil {
			return nil, err
		}
	}
	return append(dst, "]}"...), nil
}

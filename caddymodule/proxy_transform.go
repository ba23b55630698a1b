package caddymodule

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/tokenvault/tokenvault/transforms"
	"github.com/tokenvault/tokenvault/vaultstore"
	"github.com/tokenvault/tokenvault/vaultstore/strictjson"
)

// requestTransform is the proxy's request transform, nil without one.
func (inv *invocation) requestTransform() *vaultstore.ProxyTransform {
	if inv.proxy == nil {
		return nil
	}
	return inv.proxy.RequestTransform
}

// responseTransform is the proxy's response transform, nil without one.
func (inv *invocation) responseTransform() *vaultstore.ProxyTransform {
	if inv.proxy == nil {
		return nil
	}
	return inv.proxy.ResponseTransform
}

// transformRequest runs the request transform on the detokenized request:
// its {body, headers} is what the destination gets.
func (f *forwarder) transformRequest(r *http.Request, inv *invocation, suffix string, body io.Reader, headers http.Header) (io.Reader, int64, http.Header, error) {
	raw, err := io.ReadAll(body)
	closeBody(body)
	if err != nil {
		return nil, 0, nil, err
	}
	query := ""
	if q := dropQueryParam(r.URL.RawQuery, f.headers.proxyKeyQuery); q != "" {
		query = "?" + q
	}
	args, err := transformArgs(headers.Get("Content-Type"), raw, headers, "method", r.Method, "path", suffix, "query", query)
	if err != nil {
		return nil, 0, nil, err
	}
	res, err := f.runTransform(r, inv, transforms.JobRequest, inv.proxy.RequestTransform.Code, args)
	if err != nil {
		return nil, 0, nil, err
	}
	out := resultBody(res.Body)
	if res.Headers != nil {
		headers = f.outboundHeaders(toHeader(res.Headers))
	}
	return bytes.NewReader(out), int64(len(out)), headers, nil
}

// transformResponse runs the response transform on a 2xx response and
// sends its {body, headers} with the destination's status.
func (f *forwarder) transformResponse(w http.ResponseWriter, r *http.Request, inv *invocation, resp *http.Response) error {
	raw, err := strictjson.ReadBodyOfLength(resp.Body, maxProxyResponseBytes, resp.ContentLength)
	if errors.Is(err, strictjson.ErrTooLarge) {
		return errStatus(http.StatusBadGateway, "the destination's response is larger than 1 MB")
	} else if err != nil {
		return &apiError{status: http.StatusBadGateway, detail: "reading the destination's response failed", cause: err}
	}
	removeHopHeaders(resp.Header)
	args, err := transformArgs(resp.Header.Get("Content-Type"), raw, resp.Header)
	if err != nil {
		return err
	}
	res, err := f.runTransform(r, inv, transforms.JobResponse, inv.proxy.ResponseTransform.Code, args)
	if err != nil {
		return err
	}
	out := resultBody(res.Body)
	h := w.Header()
	for k, v := range toHeader(res.Headers) {
		if !strings.HasPrefix(k, f.headers.prefix) {
			h[k] = v
		}
	}
	removeHopHeaders(h)
	h.Del("Content-Encoding")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	h.Set(f.headers.destinationStatus, strconv.Itoa(resp.StatusCode))
	w.WriteHeader(resp.StatusCode)
	_, err = w.Write(out)
	return err
}

// runTransform runs one transform for the invocation, with a service
// client acting as the proxy's application. A CustomHttpResponseError the
// code throws is sent as the response it describes.
func (f *forwarder) runTransform(r *http.Request, inv *invocation, kind, code string, args []byte) (*transforms.Result, error) {
	p := inv.proxy
	vaultMetrics.transformRuns.WithLabelValues(kind).Inc()
	res, err := f.app.workers.Run(r.Context(), transforms.Job{
		Kind:          kind,
		Code:          code,
		Args:          args,
		Configuration: p.Configuration,
		Svc:           newServiceClient(r.Context(), f.store(), inv.tenant, p.ApplicationID, "proxy", p.ID),
		Meta:          map[string]string{"tenant_id": p.TenantID, "entity": "proxy", "entity_id": p.ID},
		Realm:         transforms.RealmScope{Tenant: p.TenantID, Principal: p.ApplicationID + "/" + inv.callerID()},
	})
	if err != nil {
		var te *transforms.Error
		if errors.As(err, &te) && te.Custom && res != nil {
			return nil, &customResponse{status: te.Status, result: res}
		}
		return nil, transformProblem("the "+kind+" transform", err)
	}
	return res, nil
}

// customResponse is a response tenant code asked for verbatim.
type customResponse struct {
	status int
	result *transforms.Result
}

func (c *customResponse) Error() string { return "custom response " + strconv.Itoa(c.status) }

// write sends the response.
func (c *customResponse) write(w http.ResponseWriter) {
	for k, v := range toHeader(c.result.Headers) {
		w.Header()[k] = v
	}
	out := resultBody(c.result.Body)
	if w.Header().Get("Content-Type") == "" && json.Valid(out) {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(c.status)
	_, _ = w.Write(out)
}

// transformArgs is the JSON of a transform's req.args: "body", the body
// as code sees it, "headers", one string per name, and the string fields
// given as name, value pairs. A JSON body that strictjson accepts is
// passed as its own text, so code gets its members in the order they
// came and the vault neither decodes nor re-encodes it; any other body is
// a string.
func transformArgs(contentType string, raw []byte, headers http.Header, fields ...string) ([]byte, error) {
	h, err := json.Marshal(flatHeaders(headers))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(len(raw) + len(h) + 64)
	b.WriteString(`{"body":`)
	if bodyKindOf(contentType) == bodyJSON && strictjson.Validate(raw, strictjson.DefaultLimits) == nil {
		b.Write(raw)
	} else if err := writeJSONString(&b, string(raw)); err != nil {
		return nil, err
	}
	b.WriteString(`,"headers":`)
	b.Write(h)
	for i := 0; i+1 < len(fields); i += 2 {
		b.WriteByte(',')
		if err := writeJSONString(&b, fields[i]); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		if err := writeJSONString(&b, fields[i+1]); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// writeJSONString writes s as a JSON string (invalid UTF-8 as U+FFFD, as
// encoding/json does).
func writeJSONString(b *bytes.Buffer, s string) error {
	q, err := json.Marshal(s)
	b.Write(q)
	return err
}

// resultBody is the bytes to send for a returned body: a JSON string is
// sent as its text, anything else as JSON.
func resultBody(body json.RawMessage) []byte {
	if len(body) == 0 {
		return nil
	}
	var text string
	if body[0] == '"' && json.Unmarshal(body, &text) == nil {
		return []byte(text)
	}
	return body
}

// flatHeaders is a header map for code: one string per name.
func flatHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[k] = strings.Join(v, ", ")
	}
	return out
}

// toHeader turns returned headers into an http.Header.
func toHeader(m map[string]string) http.Header {
	h := make(http.Header, len(m))
	for k, v := range m {
		h.Set(k, v)
	}
	return h
}

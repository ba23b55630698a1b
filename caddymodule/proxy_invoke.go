package caddymodule

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/egress"
	"github.com/tokenvault/tokenvault/ratelimit"
	"github.com/tokenvault/tokenvault/vaultstore"
	"github.com/tokenvault/tokenvault/vaultstore/strictjson"
)

// Proxy invocation limits.
const (
	// maxProxyTokens bounds the distinct tokens one proxied request may
	// detokenize.
	maxProxyTokens = 20
	// destinationTimeout bounds the wait for a destination's response
	// headers; past it the caller gets 408.
	destinationTimeout = 25 * time.Second
	// maxProxyResponseBytes bounds a destination's response body, as the
	// interface's 1 MB payload limit bounds the request.
	maxProxyResponseBytes = 1 << 20
)

// forwarder invokes proxies: it finds the proxy and the caller,
// detokenizes the request body, forwards the request under the egress
// policy and returns the destination's answer. vault_api serves it on
// /proxy, vault_proxy at the root of a whitelabel host.
type forwarder struct {
	app     *App
	headers vaultHeaders
	logger  *zap.Logger
	limits  *limits
	// whitelabel: invoked at the root of a host of its own (vault_proxy)
	whitelabel bool
}

// invocation is one resolved proxy call.
type invocation struct {
	proxy     *vaultstore.Proxy     // nil for an ephemeral proxy
	principal *vaultstore.Principal // the API key's, nil without one
	tenant    *vaultstore.Tenant
	// app detokenizes: the API key's application, or without a key the
	// proxy's application; nil when neither is there.
	app  *vaultstore.Application
	dest *url.URL
}

// callerID is the id of the application whose key called the proxy, ""
// without a key.
func (inv *invocation) callerID() string {
	if inv.principal == nil {
		return ""
	}
	return inv.principal.Application.ID
}

// serve runs one invocation. suffix is the path after the proxy's
// mount point ("" or starting with "/"); pinnedKey, when set, is the only
// proxy this call may reach. Every failure before the destination answers
// is a proxy_error.
func (f *forwarder) serve(w http.ResponseWriter, r *http.Request, suffix, pinnedKey string) {
	err := f.forward(w, r, suffix, pinnedKey)
	var custom *customResponse
	switch {
	case errors.As(err, &custom):
		custom.write(w)
	case err != nil:
		f.writeProxyError(w, r, err)
	}
}

// store is the vault's store; non-nil once forward has waited for it.
func (f *forwarder) store() *vaultstore.Store { return f.app.Store() }

func (f *forwarder) forward(w http.ResponseWriter, r *http.Request, suffix, pinnedKey string) error {
	if _, err := f.app.waitStore(r.Context()); err != nil {
		return err
	}
	inv, err := f.resolve(r, pinnedKey)
	if lerr := f.limits.check(w, f.limitRequest(r, inv)); lerr != nil {
		return lerr
	}
	if err != nil {
		return err
	}
	target, err := f.targetURL(inv.dest, suffix, r.URL.RawQuery)
	if err != nil {
		return err
	}
	headers := f.outboundHeaders(r.Header)
	if inv.responseTransform() != nil {
		headers.Del("Accept-Encoding") // the transform reads the body as sent
	}
	body, length, err := f.requestBody(r, inv, target)
	if err != nil {
		return err
	}
	if sb, ok := body.(*sharedBodyReader); ok {
		defer sb.body.release() // the forwarder's reference
	}
	if t := inv.requestTransform(); t != nil {
		if body, length, headers, err = f.transformRequest(r, inv, suffix, body, headers); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), destinationTimeout)
	defer cancel()
	out, err := http.NewRequestWithContext(ctx, r.Method, target.String(), body)
	if err != nil {
		return fmt.Errorf("building the destination request: %w", err)
	}
	out.ContentLength = length
	if sb, ok := body.(*sharedBodyReader); ok {
		out.GetBody = func() (io.ReadCloser, error) { return sb.body.open(), nil }
	}
	if length == 0 {
		closeBody(body)
		out.Body, out.GetBody = http.NoBody, nil
	}
	out.Header = headers
	sent := time.Now()
	resp, err := f.app.transport.RoundTrip(out)
	if err != nil {
		vaultMetrics.destinationStatus.WithLabelValues("failed").Inc()
		return f.roundTripError(r.Context(), ctx, body, err)
	}
	vaultMetrics.destinationTime.Observe(time.Since(sent).Seconds())
	vaultMetrics.destinationStatus.WithLabelValues(statusClass(resp.StatusCode)).Inc()
	defer resp.Body.Close()
	if t := inv.responseTransform(); t != nil && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return f.transformResponse(w, r, inv, resp)
	}
	return f.relay(w, resp)
}

// resolve finds the proxy (by key, or the ephemeral destination header)
// and the caller, and checks the caller may invoke it.
func (f *forwarder) resolve(r *http.Request, pinnedKey string) (*invocation, error) {
	ctx := r.Context()
	var principal *vaultstore.Principal
	if apiKey := r.Header.Get(f.headers.apiKey); apiKey != "" {
		p, err := f.store().Authenticate(ctx, apiKey)
		if err != nil {
			return nil, err
		}
		principal = p
	}
	key := pinnedKey
	if key == "" {
		key = r.Header.Get(f.headers.proxyKey)
	}
	if key == "" {
		key = r.URL.Query().Get(f.headers.proxyKeyQuery)
	}
	if key == "" {
		return f.resolveEphemeral(r, principal)
	}
	p, t, err := f.store().ProxyByKey(ctx, key)
	if errors.Is(err, vaultstore.ErrNotFound) {
		return nil, errStatus(http.StatusUnauthorized, "a valid proxy key is required")
	} else if err != nil {
		return nil, err
	}
	inv := &invocation{proxy: p, tenant: t, principal: principal}
	switch {
	case principal != nil && principal.Tenant.ID != t.ID:
		return nil, vaultstore.ErrUnauthenticated
	case principal != nil:
		inv.app = principal.Application
	case p.RequireAuth:
		return nil, vaultstore.ErrUnauthenticated
	default:
		app, err := f.store().ServiceApplication(ctx, p.TenantID, p.ApplicationID)
		if err != nil && !errors.Is(err, vaultstore.ErrNotFound) {
			return nil, err
		}
		inv.app = app
	}
	if principal != nil && !principal.Application.Can("token:use") {
		return nil, &vaultstore.PermissionError{Permission: "token:use", Action: "invoking a proxy with an API key"}
	}
	if inv.dest, err = f.app.egress.CheckURL(p.DestinationURL); err != nil {
		return nil, err
	}
	return inv, nil
}

// resolveEphemeral resolves a call naming its destination in the
// PROXY-URL header: only a private application's key may, and only in a
// tenant that has not disabled ephemeral proxies.
func (f *forwarder) resolveEphemeral(r *http.Request, principal *vaultstore.Principal) (*invocation, error) {
	raw := r.Header.Get(f.headers.proxyURL)
	if raw == "" {
		return nil, errField(f.headers.proxyURL, fmt.Sprintf("a proxy key (%s header or %s query parameter) or a %s header is required", f.headers.proxyKey, f.headers.proxyKeyQuery, f.headers.proxyURL))
	}
	if principal == nil {
		return nil, vaultstore.ErrUnauthenticated
	}
	if principal.Application.Type != vaultstore.AppPrivate {
		return nil, errStatus(http.StatusForbidden, "ephemeral proxies need the key of a private application")
	}
	if principal.Tenant.Settings["disable_ephemeral_proxy"] == "true" {
		return nil, errStatus(http.StatusForbidden, "ephemeral proxies are disabled for this tenant")
	}
	if !principal.Application.Can("token:use") {
		return nil, &vaultstore.PermissionError{Permission: "token:use", Action: "invoking a proxy with an API key"}
	}
	if u, err := url.Parse(raw); err != nil || !u.IsAbs() || u.Host == "" {
		return nil, errField(f.headers.proxyURL, "must be an absolute https URL")
	}
	dest, err := f.app.egress.CheckURL(raw)
	if err != nil {
		return nil, err
	}
	return &invocation{tenant: principal.Tenant, principal: principal, app: principal.Application, dest: dest}, nil
}

// limitRequest describes a proxy call to the limiter: a call without an
// API key, or at a whitelabel host, counts by proxy and host too.
func (f *forwarder) limitRequest(r *http.Request, inv *invocation) *ratelimit.Request {
	if inv == nil {
		return limitRequest(r, r.URL.Path, nil)
	}
	req := limitRequest(r, r.URL.Path, inv.principal)
	req.Unauthenticated = inv.principal == nil
	if inv.proxy != nil {
		req.ProxyKey = inv.proxy.ID // an identifier, not the key itself
	}
	if f.whitelabel {
		req.Whitelabel = true
		req.Hostname, _, _ = strings.Cut(r.Host, ":")
	}
	return req
}

// targetURL appends the path suffix and the query (without the proxy key
// parameter) to the destination. A suffix with dot segments is refused:
// it could climb above the destination's path.
func (f *forwarder) targetURL(dest *url.URL, suffix, rawQuery string) (*url.URL, error) {
	if suffix != "" {
		unescaped, err := url.PathUnescape(suffix)
		if err != nil {
			return nil, errField("path", "the path after /proxy is not a valid path")
		}
		for _, seg := range strings.Split(unescaped, "/") {
			if seg == "." || seg == ".." {
				return nil, errField("path", "the path after /proxy must not contain . or .. segments")
			}
		}
	}
	t := *dest
	base := strings.TrimSuffix(dest.EscapedPath(), "/")
	escaped := base + suffix
	path, err := url.PathUnescape(escaped)
	if err != nil {
		return nil, errField("path", "the path after /proxy is not a valid path")
	}
	t.Path, t.RawPath = path, escaped
	if t.EscapedPath() != escaped { // RawPath is only kept when it is a valid encoding of Path
		t.RawPath = ""
	}
	q := dropQueryParam(rawQuery, f.headers.proxyKeyQuery)
	switch {
	case t.RawQuery == "":
		t.RawQuery = q
	case q != "":
		t.RawQuery += "&" + q
	}
	return &t, nil
}

// dropQueryParam removes every occurrence of name from a raw query,
// leaving the rest byte for byte.
func dropQueryParam(rawQuery, name string) string {
	if rawQuery == "" || !strings.Contains(strings.ToLower(rawQuery), strings.ToLower(name[:1])) {
		return rawQuery
	}
	parts := strings.Split(rawQuery, "&")
	kept := parts[:0]
	for _, p := range parts {
		k, _, _ := strings.Cut(p, "=")
		if uk, err := url.QueryUnescape(k); err == nil && strings.EqualFold(uk, name) {
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, "&")
}

// requestBody reads and detokenizes the request body when its content
// type can hold expressions (JSON, form, text); any other body streams
// through unread. It returns the body to send and its length (-1 when
// unknown). A body it read is a *sharedBodyReader over a pooled buffer,
// whose forwarder reference the caller releases when the call is over.
func (f *forwarder) requestBody(r *http.Request, inv *invocation, target *url.URL) (io.Reader, int64, error) {
	kind := bodyKindOf(r.Header.Get("Content-Type"))
	if kind == bodyOpaque && inv.requestTransform() == nil {
		if r.ContentLength > maxBodyBytes {
			return nil, 0, strictjson.ErrTooLarge
		}
		return &limitedBody{r: r.Body, max: maxBodyBytes}, r.ContentLength, nil
	}
	in := getBodyBuffer()
	raw, err := strictjson.AppendBody(*in, r.Body, maxBodyBytes, r.ContentLength)
	if err != nil {
		putBodyBuffer(in)
		return nil, 0, err
	}
	*in = raw[:0] // raw is in *in, or in a larger buffer the pool may keep instead
	out := raw
	if kind != bodyOpaque {
		dst := getBodyBuffer()
		if out, err = f.detokenize(r.Context(), inv, target, kind, raw, *dst); err != nil {
			putBodyBuffer(in)
			putBodyBuffer(dst)
			return nil, 0, err
		}
		if !sameArray(out, raw) { // out is in *dst, or new: either way the pool may keep it
			putBodyBuffer(in)
			in = dst
		} else {
			putBodyBuffer(dst)
		}
	}
	return newSharedBody(in, out).open(), int64(len(out)), nil
}

// sameArray reports whether a and b share their backing array: the last
// element of their capacity is the same.
func sameArray(a, b []byte) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:cap(a)][cap(a)-1] == &b[:cap(b)][cap(b)-1]
}

// detokenize replaces the expressions of a body, writing the audit
// record before anything is forwarded. A body without "{{" is returned
// as it is, with no storage access. A JSON body's output is written into
// dst, when large enough.
func (f *forwarder) detokenize(ctx context.Context, inv *invocation, target *url.URL, kind bodyKind, raw, dst []byte) ([]byte, error) {
	if !mayHoldExpressions(kind, raw) {
		return raw, nil
	}
	if inv.app == nil {
		return nil, errStatus(http.StatusUnauthorized, "detokenizing needs an API key, or an application set on the proxy")
	}
	entityID := "ephemeral"
	if inv.proxy != nil {
		entityID = inv.proxy.ID
	}
	opts := vaultstore.DetokenizeOptions{
		Permission: "token:use",
		Limit:      maxProxyTokens,
		Audit: &vaultstore.AuditRecord{
			ActorID:     inv.app.ID,
			ActorType:   vaultstore.ActorApplication,
			EntityType:  "proxy",
			EntityID:    entityID,
			Operation:   "detokenize",
			Message:     "proxy request detokenized for " + target.Hostname(),
			Destination: target.Hostname(),
		},
	}
	req := vaultstore.TokenRequest{Tenant: inv.tenant, Application: inv.app}
	var (
		out []byte
		err error
	)
	switch kind {
	case bodyJSON:
		out, _, err = f.store().DetokenizeJSON(ctx, req, opts, raw, dst)
	case bodyForm:
		out, err = detokenizeForm(ctx, f.store(), req, opts, raw)
	default:
		var s string
		s, _, err = f.store().DetokenizeString(ctx, req, opts, string(raw))
		out = []byte(s)
	}
	if err != nil {
		return nil, detokenizeError(err)
	}
	return out, nil
}

// mayHoldExpressions reports whether a body may hold an expression: it
// holds "{{", or a brace in the body's escaping (percent-encoding in a
// form, \u007b in JSON).
func mayHoldExpressions(kind bodyKind, raw []byte) bool {
	if bytes.Contains(raw, []byte("{{")) {
		return true
	}
	switch kind {
	case bodyForm:
		return bytes.Contains(raw, []byte("%7B")) || bytes.Contains(raw, []byte("%7b"))
	case bodyJSON:
		return bytes.Contains(raw, []byte(`\u007b`)) || bytes.Contains(raw, []byte(`\u007B`))
	}
	return false
}

// detokenizeError keeps the caller's errors (bad expression, unknown
// token, permission) and turns any other failure, such as an audit record
// that could not be written, into 503: nothing was forwarded.
func detokenizeError(err error) error {
	var ve *vaultstore.ValidationError
	var je *strictjson.Error
	if errors.As(err, &ve) || errors.As(err, &je) || errors.Is(err, vaultstore.ErrForbidden) ||
		errors.Is(err, strictjson.ErrTooLarge) {
		return err
	}
	return &apiError{status: http.StatusServiceUnavailable, detail: "the vault could not record the detokenization; nothing was sent", cause: err}
}

// roundTripError maps a failed exchange with the destination.
func (f *forwarder) roundTripError(callerCtx, ctx context.Context, body io.Reader, err error) error {
	if lb, ok := body.(*limitedBody); ok && lb.exceeded || errors.Is(err, strictjson.ErrTooLarge) {
		return strictjson.ErrTooLarge
	}
	switch {
	case errors.Is(err, egress.ErrRefused):
		return err
	case callerCtx.Err() != nil:
		return &apiError{status: 499, detail: "the caller went away", cause: err}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return errStatus(http.StatusRequestTimeout, "the destination did not answer within 25 seconds")
	}
	return &apiError{status: http.StatusBadGateway, detail: "the destination could not be reached", cause: err}
}

// relay sends the destination's response back unchanged, with its status
// in the PROXY-DESTINATION-STATUS header.
func (f *forwarder) relay(w http.ResponseWriter, resp *http.Response) error {
	if resp.ContentLength > maxProxyResponseBytes {
		return errStatus(http.StatusBadGateway, "the destination's response is larger than 1 MB")
	}
	removeHopHeaders(resp.Header)
	h := w.Header()
	for k, vv := range resp.Header {
		if !strings.HasPrefix(k, f.headers.prefix) { // the vault's own headers are the vault's to set
			h[k] = vv
		}
	}
	h.Set(f.headers.destinationStatus, strconv.Itoa(resp.StatusCode))
	w.WriteHeader(resp.StatusCode)
	n, err := copyResponse(w, io.LimitReader(resp.Body, maxProxyResponseBytes+1))
	if n > maxProxyResponseBytes || err != nil {
		// the status is sent; all that is left is to cut the response short
		if c := f.logger.Check(zap.DebugLevel, "destination response cut short"); c != nil {
			c.Write(zap.Int64("bytes", n), scrubbedError(err))
		}
		panic(http.ErrAbortHandler)
	}
	return nil
}

// outboundHeaders are the caller's headers as the destination gets them:
// without the vault's own headers and hop-by-hop headers, with the
// PROXY-KEEP-ALIVE and PROXY-CONNECTION headers as Keep-Alive and
// Connection.
func (f *forwarder) outboundHeaders(in http.Header) http.Header {
	out := make(http.Header, len(in))
	for k, vv := range in {
		if strings.HasPrefix(k, f.headers.prefix) {
			continue
		}
		out[k] = vv
	}
	removeHopHeaders(out)
	out.Del("Host")
	out.Del("Content-Length")
	if v := in.Get(f.headers.keepAlive); v != "" {
		out.Set("Keep-Alive", v)
	}
	if v := in.Get(f.headers.connection); v != "" {
		out.Set("Connection", v)
	}
	return out
}

// hopHeaders are meaningful for one connection only (RFC 9110 7.6.1).
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// removeHopHeaders deletes hop-by-hop headers, including those the
// Connection header names.
func removeHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// writeProxyError sends a proxy's own failure as {"proxy_error": problem},
// without the destination-status header.
func (f *forwarder) writeProxyError(w http.ResponseWriter, r *http.Request, err error) {
	p := problemFor(err)
	if p.Status >= 500 && p.Status != http.StatusBadGateway {
		f.logger.Error("proxy request failed", zap.String("trace_id", w.Header().Get(f.headers.traceID)), scrubbedError(err))
	} else if c := f.logger.Check(zap.DebugLevel, "proxy request refused"); c != nil {
		c.Write(zap.String("trace_id", w.Header().Get(f.headers.traceID)), zap.Int("status", p.Status), zap.String("detail", p.Detail), scrubbedError(err))
	}
	if p.retryLater() {
		w.Header().Set("Retry-After", "1")
	}
	_ = writeJSON(w, p.Status, struct {
		ProxyError problem `json:"proxy_error"`
	}{p})
}

// closeBody closes a body that implements io.Closer.
func closeBody(body io.Reader) {
	if c, ok := body.(io.Closer); ok {
		_ = c.Close()
	}
}

// limitedBody streams a request body, failing past max bytes.
type limitedBody struct {
	r        io.Reader
	max      int64
	n        int64
	exceeded bool
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.n > b.max {
		b.exceeded = true
		return 0, strictjson.ErrTooLarge
	}
	return n, err
}

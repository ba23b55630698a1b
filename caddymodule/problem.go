package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/egress"
	"github.com/tokenvault/tokenvault/internal/redact"
	"github.com/tokenvault/tokenvault/vaultstore"
	"github.com/tokenvault/tokenvault/vaultstore/strictjson"
)

// problem is an RFC 7807 error body. Errors lists the failing request
// fields on 400.
type problem struct {
	Type   string              `json:"type"`
	Title  string              `json:"title"`
	Status int                 `json:"status"`
	Detail string              `json:"detail,omitempty"`
	Errors map[string][]string `json:"errors,omitempty"`
}

// retryLater reports a failure the same request may get past later (the
// vault busy, its storage away or full): it carries Retry-After.
func (p problem) retryLater() bool {
	return p.Status == http.StatusServiceUnavailable || p.Status == http.StatusInsufficientStorage
}

// apiError is an error the API layer itself decides the status of
// (unknown route, wrong method, bad query parameter).
type apiError struct {
	status int
	detail string
	fields map[string][]string
	allow  []string // methods, on 405
	cause  error    // logged, never shown
}

func (e *apiError) Error() string {
	if e.cause != nil {
		return e.detail + ": " + e.cause.Error()
	}
	return e.detail
}

func (e *apiError) Unwrap() error { return e.cause }

func errStatus(status int, detail string) error { return &apiError{status: status, detail: detail} }

func errField(field, msg string) error {
	return &apiError{status: http.StatusBadRequest, detail: "invalid " + field, fields: map[string][]string{field: {msg}}}
}

// unauthenticatedDetail is the one body every authentication failure
// gets, whatever the reason.
const unauthenticatedDetail = "a valid API key is required"

// problemFor maps an error to its HTTP problem, with any long run of
// digits scrubbed from it. This is the only place errors become status
// codes.
func problemFor(err error) problem {
	p := rawProblemFor(err)
	p.Detail = redact.Text(p.Detail)
	if len(p.Errors) > 0 {
		scrubbed := make(map[string][]string, len(p.Errors))
		for field, msgs := range p.Errors {
			out := make([]string, len(msgs))
			for i, m := range msgs {
				out[i] = redact.Text(m)
			}
			f := redact.Text(field)
			scrubbed[f] = append(scrubbed[f], out...)
		}
		p.Errors = scrubbed
	}
	return p
}

func rawProblemFor(err error) problem {
	var (
		ve *vaultstore.ValidationError
		je *strictjson.Error
		ae *apiError
		ee *egress.Error
		pe *vaultstore.PermissionError
	)
	switch {
	case errors.As(err, &ae):
		p := newProblem(ae.status, ae.detail)
		p.Errors = ae.fields
		return p
	case errors.As(err, &ee):
		return newProblem(http.StatusForbidden, "the egress policy refuses the destination: "+egressReason(ee))
	case errors.Is(err, strictjson.ErrTooLarge):
		return newProblem(http.StatusRequestEntityTooLarge, "the request body is larger than 1 MB")
	case errors.As(err, &je):
		p := newProblem(http.StatusBadRequest, je.Error())
		p.Title = validationTitle
		p.Errors = map[string][]string{je.Field: {je.Message}}
		return p
	case errors.As(err, &ve):
		p := newProblem(http.StatusBadRequest, ve.Error())
		p.Title = validationTitle
		p.Errors = ve.Fields
		return p
	case errors.Is(err, vaultstore.ErrUnauthenticated):
		return newProblem(http.StatusUnauthorized, unauthenticatedDetail)
	case errors.As(err, &pe):
		return newProblem(http.StatusForbidden, pe.Error())
	case errors.Is(err, vaultstore.ErrForbidden):
		return newProblem(http.StatusForbidden, "the application is not permitted to do this")
	case errors.Is(err, vaultstore.ErrNotFound):
		return newProblem(http.StatusNotFound, "not found")
	case errors.Is(err, vaultstore.ErrConflict):
		return newProblem(http.StatusConflict, "the resource already exists")
	case errors.Is(err, vaultstore.ErrAuditUnavailable):
		return newProblem(http.StatusServiceUnavailable, "the audit record could not be written, so nothing was done or returned; retry the request")
	case errors.Is(err, vaultstore.ErrBusy):
		return newProblem(http.StatusServiceUnavailable, "the vault is busy with concurrent changes; retry the request")
	case errors.Is(err, vaultstore.ErrNoSpace):
		return newProblem(http.StatusInsufficientStorage, "the vault's storage is too full to accept writes, so nothing was written; reads still work; retry once the operator has freed space")
	case errors.Is(err, vaultstore.ErrUnavailable):
		return newProblem(http.StatusServiceUnavailable, "the vault's storage is unavailable, so nothing was written; retry the request")
	}
	return newProblem(http.StatusInternalServerError, "the vault could not complete the request")
}

const validationTitle = "One or more validation errors occurred."

func newProblem(status int, detail string) problem {
	return problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail}
}

// writeProblem sends err as application/problem+json; server-side
// failures are logged with the request's trace id.
func writeProblem(w http.ResponseWriter, logger *zap.Logger, traceID string, err error) {
	p := problemFor(err)
	// a disk too full for writes (507) is logged by the storage once, when
	// it fills and when it has room again, not on every refused request
	if p.Status >= 500 && p.Status != http.StatusInsufficientStorage {
		logger.Error("request failed", zap.String("trace_id", traceID), scrubbedError(err))
	} else if c := logger.Check(zap.DebugLevel, "request refused"); c != nil {
		c.Write(zap.String("trace_id", traceID), zap.Int("status", p.Status), zap.String("detail", p.Detail))
	}
	if p.retryLater() {
		w.Header().Set("Retry-After", "1")
	}
	var ae *apiError
	if errors.As(err, &ae) && len(ae.allow) > 0 {
		w.Header().Set("Allow", strings.Join(ae.allow, ", "))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// scrubbedError is err as a log field, redacted (internal/redact):
// errors can carry tenant-controlled text (a transform's thrown message).
func scrubbedError(err error) zap.Field {
	return zap.String("error", redact.Text(err.Error()))
}

// writeJSON sends v with status, as a json.Encoder writes it; a token and
// a page of tokens encode themselves, byte for byte the same, without
// reflection.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	var (
		b   []byte
		err error
	)
	// the types themselves: a type embedding one would lose its own fields
	switch v := v.(type) {
	case *vaultstore.Token:
		b, err = v.AppendJSON(make([]byte, 0, 1024))
	case page[*vaultstore.Token]:
		b, err = appendTokenPage(make([]byte, 0, 1024*(1+len(v.Data))), v)
	default:
		return json.NewEncoder(w).Encode(v)
	}
	if err != nil {
		return fmt.Errorf("encoding response: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// egressReason is the policy's reason for refusing a destination, with
// the setting of the vault global option that would allow it. It names
// the destination's address only where the caller wrote it in the URL.
func egressReason(err error) string {
	var ee *egress.Error
	if !errors.As(err, &ee) {
		return "the destination is not allowed"
	}
	switch ee.Remedy {
	case egress.RemedyAllowHTTP:
		return ee.Reason + "; the vault's operator can allow http destinations with egress { allow_http }"
	case egress.RemedyAllowNetwork:
		network := "<cidr>"
		if ee.Network.IsValid() {
			network = ee.Network.String()
		}
		return ee.Reason + "; the vault's operator can allow it with egress { allow_network " + network + " }"
	}
	return ee.Reason
}

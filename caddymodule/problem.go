package caddymodule

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"go.uber.org/zap"

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

// apiError is an error the API layer itself decides the status of
// (unknown route, wrong method, bad query parameter).
type apiError struct {
	status int
	detail string
	fields map[string][]string
	allow  []string // methods, on 405
}

func (e *apiError) Error() string { return e.detail }

func errStatus(status int, detail string) error { return &apiError{status: status, detail: detail} }

func errField(field, msg string) error {
	return &apiError{status: http.StatusBadRequest, detail: "invalid " + field, fields: map[string][]string{field: {msg}}}
}

// unauthenticatedDetail is the one body every authentication failure
// gets, whatever the reason.
const unauthenticatedDetail = "a valid API key is required"

// problemFor maps an error to its HTTP problem. This is the only place
// errors become status codes.
func problemFor(err error) problem {
	var (
		ve *vaultstore.ValidationError
		je *strictjson.Error
		ae *apiError
	)
	switch {
	case errors.As(err, &ae):
		p := newProblem(ae.status, ae.detail)
		p.Errors = ae.fields
		return p
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
	case errors.Is(err, vaultstore.ErrForbidden):
		return newProblem(http.StatusForbidden, "the application is not permitted to do this")
	case errors.Is(err, vaultstore.ErrNotFound):
		return newProblem(http.StatusNotFound, "not found")
	case errors.Is(err, vaultstore.ErrConflict):
		return newProblem(http.StatusConflict, "the resource already exists")
	case errors.Is(err, vaultstore.ErrBusy):
		return newProblem(http.StatusServiceUnavailable, "the vault is busy with concurrent changes; retry the request")
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
	if p.Status >= 500 {
		logger.Error("request failed", zap.String("trace_id", traceID), zap.Error(err))
	} else if c := logger.Check(zap.DebugLevel, "request refused"); c != nil {
		c.Write(zap.String("trace_id", traceID), zap.Int("status", p.Status), zap.String("detail", p.Detail))
	}
	if p.Status == http.StatusServiceUnavailable {
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

// writeJSON sends v with status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

package caddymodule

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/internal/redact"
)

// adminFailure is a vault error on an admin route, mapped to the problem
// the public API would answer (see adminError).
type adminFailure struct {
	problem problem
	cause   error // logged, never shown
}

func (e *adminFailure) Error() string { return e.cause.Error() }

func (e *adminFailure) Unwrap() error { return e.cause }

// adminProblems answers a failed admin route with an RFC 7807 problem
// (application/problem+json), as the public API answers, so that
// `caddy vault` can show its title, detail and field errors: a vault error
// keeps the status, detail and errors problemFor gives it, and a
// caddy.APIError its status and message. A route that has begun its
// answer (a backup under way) is left to Caddy.
func adminProblems(h caddy.AdminHandlerFunc) caddy.AdminHandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		rec := &statusRecorder{ResponseWriter: w}
		err := h(rec, r)
		if err == nil || rec.status != 0 {
			return err
		}
		var (
			p  problem
			af *adminFailure
			ae caddy.APIError
		)
		switch {
		case errors.As(err, &af):
			p = af.problem
		case errors.As(err, &ae):
			status := ae.HTTPStatus
			if status == 0 {
				status = http.StatusInternalServerError
			}
			msg := ae.Message
			if msg == "" && ae.Err != nil {
				msg = ae.Err.Error()
			}
			p = newProblem(status, redact.Text(msg))
		default:
			p = problemFor(err)
		}
		if p.Status >= 500 && p.Status != http.StatusInsufficientStorage {
			caddy.Log().Named("admin.api.vault").Error("request failed",
				zap.String("method", r.Method), zap.String("uri", r.RequestURI), zap.Int("status", p.Status), scrubbedError(err))
		}
		if p.retryLater() {
			w.Header().Set("Retry-After", "1")
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(p.Status)
		_ = json.NewEncoder(w).Encode(p)
		return nil
	}
}

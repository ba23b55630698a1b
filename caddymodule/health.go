package caddymodule

import (
	"context"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/transforms"
)

// healthTimeout bounds one health check.
const healthTimeout = 5 * time.Second

// healthReport is the answer of a health check: "ok" or "unavailable",
// and each part's state. It names failing parts, never their errors
// (those go to the log).
type healthReport struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

// checkHealth checks every part of the vault: the store answers a write
// and a read, and a transform worker runs code. It returns 200 or 503
// and the report.
func (a *App) checkHealth(ctx context.Context) (int, healthReport) {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	rep := healthReport{Status: "ok", Checks: map[string]string{}}
	checks := map[string]func(context.Context) error{
		"store":      a.store.CheckHealth,
		"transforms": a.checkWorkers,
	}
	for part, check := range checks {
		if err := check(ctx); err != nil {
			a.logger.Error("health check failed", zap.String("part", part), scrubbedError(err))
			rep.Status, rep.Checks[part] = "unavailable", "failing"
			continue
		}
		rep.Checks[part] = "ok"
	}
	if rep.Status != "ok" {
		return http.StatusServiceUnavailable, rep
	}
	return http.StatusOK, rep
}

// serveHealth answers a health check request.
func (a *App) serveHealth(w http.ResponseWriter, r *http.Request) error {
	status, rep := a.checkHealth(r.Context())
	return writeJSON(w, status, rep)
}

// healthCode is the trivial reactor the health check runs.
const healthCode = "module.exports = () => ({ raw: { ok: true } })"

// checkWorkers runs trivial code in a worker: workers start and answer.
func (a *App) checkWorkers(ctx context.Context) error {
	_, err := a.workers.Run(ctx, transforms.Job{Kind: transforms.JobReactor, Code: healthCode})
	return err
}

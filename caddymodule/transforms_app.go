package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/internal/redact"
	"github.com/tokenvault/tokenvault/transforms"
	"github.com/tokenvault/tokenvault/vaultstore"
)

// TransformsConfig sizes the worker processes that run tenant
// JavaScript (proxy transforms and reactors).
type TransformsConfig struct {
	// MinWorkers are started at once and kept warm (default 1; at most
	// MaxWorkers).
	MinWorkers int `json:"min_workers,omitempty"`
	// MaxWorkers bounds the runs in parallel (default 4).
	MaxWorkers int `json:"max_workers,omitempty"`
	// QueueTimeout is how long a run waits for a free worker before it
	// fails with 503 (default 5 s).
	QueueTimeout caddy.Duration `json:"queue_timeout,omitempty"`
	// MaxWorkersPerTenant bounds the workers one tenant's runs hold at
	// once (default: half of MaxWorkers, rounded up; from 1 to
	// MaxWorkers). A tenant's further runs wait for its own, and waiting
	// tenants are served in turn, so a tenant that keeps its share busy
	// (endless loops, say) slows only itself.
	MaxWorkersPerTenant int `json:"max_workers_per_tenant,omitempty"`
	// Timeout bounds one run (default and most 30 s).
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// MemoryLimit caps each worker's memory in bytes (default 256 MiB).
	MemoryLimit int64 `json:"memory_limit,omitempty"`
	// ModulesDir holds operator-installed, pure-JavaScript npm packages.
	ModulesDir string `json:"modules_dir,omitempty"`
	// AllowModules names the packages of ModulesDir that code may
	// require; no other can be.
	AllowModules []string `json:"allow_modules,omitempty"`
}

// pools holds each worker pool once per process, keyed by its
// configuration, so a reload keeps warm workers.
var pools = caddy.NewUsagePool()

type pooledWorkers struct{ *transforms.Pool }

func (p pooledWorkers) Destruct() error { return p.Close() }

// workerProgram is how a transform worker starts: this binary, as
// "caddy vault transform-worker", with an empty environment (the server's
// may hold secrets). Tests start their own binary instead.
var workerProgram = func() (command, env []string, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	return []string{exe, "vault", "transform-worker"}, nil, nil
}

// Validate checks the transforms settings that depend on each other.
func (c *TransformsConfig) Validate() error {
	if c == nil {
		return nil
	}
	if c.MinWorkers < 0 || c.MaxWorkers < 0 {
		return fmt.Errorf("transforms: min_workers (%d) and max_workers (%d) cannot be negative", c.MinWorkers, c.MaxWorkers)
	}
	maxWorkers := c.MaxWorkers
	if maxWorkers == 0 {
		maxWorkers = transforms.DefaultMaxWorkers
	}
	minWorkers := c.MinWorkers
	if minWorkers == 0 {
		minWorkers = transforms.DefaultMinWorkers
	}
	if minWorkers > maxWorkers {
		return fmt.Errorf("transforms: min_workers (%d) must not exceed max_workers (%d)", minWorkers, maxWorkers)
	}
	if c.MaxWorkersPerTenant < 0 || c.MaxWorkersPerTenant > maxWorkers {
		return fmt.Errorf("transforms: max_workers_per_tenant (%d) must be from 1 to max_workers (%d)", c.MaxWorkersPerTenant, maxWorkers)
	}
	switch {
	case c.Timeout < 0:
		return errors.New("transforms: timeout must not be negative")
	case c.QueueTimeout < 0:
		return errors.New("transforms: queue_timeout must not be negative")
	case c.MemoryLimit < 0:
		return errors.New("transforms: memory_limit must not be negative")
	}
	return nil
}

// startTransforms loads (or shares) the worker pool, whose warm workers
// start at once: part of the app's Start.
func (a *App) startTransforms() error {
	cfg := a.Transforms
	if cfg == nil {
		cfg = &TransformsConfig{}
	}
	raw, _ := json.Marshal(cfg)
	key := "transforms:" + string(raw)
	logger := a.logger.Named("transforms")
	val, _, err := pools.LoadOrNew(key, func() (caddy.Destructor, error) {
		command, env, err := workerProgram()
		if err != nil {
			return nil, fmt.Errorf("finding the worker program: %w", err)
		}
		p, err := transforms.NewPool(transforms.Options{
			Command:             command,
			Env:                 env,
			MinWorkers:          cfg.MinWorkers,
			MaxWorkers:          cfg.MaxWorkers,
			MaxWorkersPerTenant: cfg.MaxWorkersPerTenant,
			Timeout:             time.Duration(cfg.Timeout),
			QueueTimeout:        time.Duration(cfg.QueueTimeout),
			MemoryLimit:         cfg.MemoryLimit,
			ModulesDir:          cfg.ModulesDir,
			AllowModules:        cfg.AllowModules,
			Logger: func(meta map[string]string, line string) {
				if c := logger.Check(zap.DebugLevel, "console"); c != nil {
					c.Write(zap.String("tenant_id", meta["tenant_id"]), zap.String("entity", meta["entity"]),
						zap.String("entity_id", meta["entity_id"]), zap.String("line", redact.Text(line)))
				}
			},
		})
		if err != nil {
			return nil, err
		}
		maxWorkers, perTenant := cfg.MaxWorkers, cfg.MaxWorkersPerTenant
		if maxWorkers == 0 {
			maxWorkers = transforms.DefaultMaxWorkers
		}
		if perTenant == 0 {
			perTenant = transforms.DefaultMaxWorkersPerTenant(maxWorkers)
		}
		logger.Info("transform workers started", zap.Int("max_workers", maxWorkers), zap.Int("max_workers_per_tenant", perTenant))
		if reason := p.Stats().Unconfined; reason != "" {
			logger.Warn("transform workers run without their system call filter: tenant code that escaped the JavaScript engine could open files and connections",
				zap.String("reason", reason))
		}
		return pooledWorkers{p}, nil
	})
	if err != nil {
		return fmt.Errorf("starting transform workers: %w", err)
	}
	a.workersKey, a.workers = key, val.(pooledWorkers).Pool
	return nil
}

// checkCode refuses tenant code the sandbox will not run, under field. The
// check runs in the tenant's share of the workers, so a tenant saving code
// in a flood waits on itself.
func (a *App) checkCode(ctx context.Context, tenantID, field, code string, v *vaultstore.ValidationError) {
	err := a.workers.ValidateTenantCode(ctx, tenantID, code)
	if err == nil {
		return
	}
	var te *transforms.Error
	if errors.As(err, &te) && (te.Kind == transforms.KindInvalidCode || te.Kind == transforms.KindModule) {
		v.Add(field, redact.Text(te.Message))
		return
	}
	v.Add(field, "the code could not be checked: "+transformErrorText(err))
}

// transformErrorText is a failed run's cause, safe to show.
func transformErrorText(err error) string {
	var te *transforms.Error
	if errors.As(err, &te) {
		return te.Kind + ": " + redact.Text(te.Message)
	}
	return "the sandbox failed"
}

// transformProblem maps a failed run to the caller's status: a reactor
// error type keeps its status, a deadline is 408, no free worker 503, a
// worker that died or broke its limits 500, bad code 400.
func transformProblem(what string, err error) error {
	var te *transforms.Error
	if !errors.As(err, &te) {
		return fmt.Errorf("%s: %w", what, err)
	}
	vaultMetrics.transformFailures.WithLabelValues(te.Kind).Inc()
	msg := what + " failed (" + te.Kind + ")"
	if te.Message != "" {
		msg += ": " + te.Message
	}
	status := http.StatusInternalServerError
	switch {
	case te.Status != 0:
		status = te.Status
	case te.Kind == transforms.KindTimeout:
		status = http.StatusRequestTimeout
	case te.Kind == transforms.KindBusy || te.Kind == transforms.KindClosed:
		status = http.StatusServiceUnavailable
	case te.Kind == transforms.KindInvalidCode || te.Kind == transforms.KindModule || te.Kind == transforms.KindInvalidInput:
		status = http.StatusBadRequest
	}
	return &apiError{status: status, detail: msg, fields: te.Errors, cause: err}
}

package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/transforms"
	"github.com/tokenvault/tokenvault/vaultstore"
)

// AsyncReactionsConfig tunes asynchronous reactions (POST
// /reactors/{id}/react-async).
type AsyncReactionsConfig struct {
	// MaxQueuedPerTenant bounds the reactions a tenant may have queued or
	// running at once; beyond it react-async answers 429. Default: 100.
	MaxQueuedPerTenant int `json:"max_queued_per_tenant,omitempty"`
	// ResultTTL is how long a reaction and its result are kept, counted
	// from queueing. Default: 24h.
	ResultTTL caddy.Duration `json:"result_ttl,omitempty"`
	// Concurrency bounds the reactions one node runs at once, in the same
	// transform workers (and under the same per-tenant share and limits)
	// as synchronous calls. Default: 4.
	Concurrency int `json:"concurrency,omitempty"`
}

const defaultAsyncConcurrency = 4

func (c *AsyncReactionsConfig) limit() int {
	if c == nil {
		return vaultstore.DefaultAsyncQueuePerTenant
	}
	return c.MaxQueuedPerTenant
}

func (c *AsyncReactionsConfig) ttl() time.Duration {
	if c == nil {
		return 0
	}
	return time.Duration(c.ResultTTL)
}

func (c *AsyncReactionsConfig) concurrency() int {
	if c == nil || c.Concurrency <= 0 {
		return defaultAsyncConcurrency
	}
	return c.Concurrency
}

// validate checks the configuration.
func (c *AsyncReactionsConfig) validate() error {
	if c == nil {
		return nil
	}
	if c.MaxQueuedPerTenant < 0 || c.Concurrency < 0 || c.ResultTTL < 0 {
		return errors.New("async_reactions: max_queued_per_tenant, concurrency and result_ttl cannot be negative")
	}
	if c.ResultTTL != 0 && time.Duration(c.ResultTTL) < time.Minute {
		return errors.New("async_reactions: result_ttl must be at least 1m")
	}
	return nil
}

// unmarshalAsyncReactions reads the vault option:
//
//	async_reactions {
//	    max_queued_per_tenant <n>
//	    result_ttl            <duration>
//	    concurrency           <n>
//	}
func (a *App) unmarshalAsyncReactions(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	cfg := &AsyncReactionsConfig{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		option := d.Val()
		var value string
		if !d.Args(&value) || d.NextArg() {
			return d.ArgErr()
		}
		var err error
		switch option {
		case "max_queued_per_tenant":
			cfg.MaxQueuedPerTenant, err = strconv.Atoi(value)
		case "concurrency":
			cfg.Concurrency, err = strconv.Atoi(value)
		case "result_ttl":
			var dur time.Duration
			dur, err = caddy.ParseDuration(value)
			cfg.ResultTTL = caddy.Duration(dur)
		default:
			return d.Errf("unrecognized async_reactions option %q", option)
		}
		if err != nil {
			return d.Errf("async_reactions %s: %v", option, err)
		}
	}
	if err := cfg.validate(); err != nil {
		return d.Err(err.Error())
	}
	a.AsyncReactions = cfg
	return nil
}

// asyncReactResponse is the answer of react-async: the request's id, under
// the wire name the official SDK reads.
type asyncReactResponse struct {
	AsyncReactorRequestID string `json:"asyncReactorRequestId"`
}

// reactAsync: POST /reactors/{id}/react-async {args}. The args are
// detokenized now, with the caller's token:use, as react does; the
// reaction is queued and its id answered at once (202).
func reactAsync(c *call) error {
	r, argsJSON, err := reactionArgs(c)
	if err != nil {
		return err
	}
	cfg := c.api.app.AsyncReactions
	a, err := c.store.EnqueueAsyncReaction(c.ctx(), c.tenantID(), r.ID, c.principal.Application, argsJSON, cfg.limit(), cfg.ttl())
	if errors.Is(err, vaultstore.ErrQueueFull) {
		c.w.Header().Set("Retry-After", "5")
		return errStatus(http.StatusTooManyRequests, "the tenant has as many asynchronous reactions queued or running as it may; retry when some have finished")
	}
	if err != nil {
		return err
	}
	if d := c.api.app.asyncs; d != nil {
		d.poke()
	}
	return writeJSON(c.w, http.StatusAccepted, asyncReactResponse{AsyncReactorRequestID: a.ID})
}

// reactionResult: GET /reactors/{id}/results/{request_id}, for the
// application that queued the reaction (any other gets 404). It answers the
// reaction's status (pending, running, completed or failed) and, once it
// has run, what react would have answered: the members of its body (raw
// and tokens) on success, or under error the problem (or the body of the
// code's custom error) with its HTTP status as error_status.
func reactionResult(c *call) error {
	a, err := c.store.GetAsyncReaction(c.ctx(), c.tenantID(), c.params["id"], c.params["request_id"], c.principal.Application)
	if err != nil {
		return err
	}
	out := map[string]any{
		"id": a.ID, "reactor_id": a.ReactorID, "status": a.Status,
		"created_at": a.CreatedAt, "expires_at": a.ExpiresAt,
	}
	if a.StartedAt != nil {
		out["started_at"] = a.StartedAt
	}
	if a.CompletedAt != nil {
		out["completed_at"] = a.CompletedAt
	}
	switch a.Status {
	case vaultstore.AsyncCompleted:
		var members map[string]json.RawMessage
		if err := json.Unmarshal(a.Result, &members); err == nil {
			for k, v := range members {
				if string(v) != "null" { // absent reads as null
					out[k] = v
				}
			}
		}
	case vaultstore.AsyncFailed:
		out["error"], out["error_status"] = a.Result, a.ResultStatus
	}
	return writeJSON(c.w, http.StatusOK, out)
}

// asyncDispatcher claims this node's share of queued reactions and runs
// them: when one is queued here, and every second for those queued
// elsewhere or before a restart.
type asyncDispatcher struct {
	app    *App
	store  *vaultstore.Store
	logger *zap.Logger
	wake   chan struct{}
	slots  chan struct{} // one per reaction running
	cancel context.CancelFunc
	done   chan struct{}
	runs   sync.WaitGroup
}

// asyncPollInterval is how often a node looks for reactions queued by
// others.
const asyncPollInterval = time.Second

// startAsyncReactions starts the node's dispatcher. fresh says the store
// was opened by this start, not shared with a running configuration: then
// no reaction of this process can be running, and (on a store no other
// process shares) any left running died with the previous process.
func (a *App) startAsyncReactions(store *vaultstore.Store, fresh bool) {
	logger := a.logger.Named("async_reactions")
	if fresh {
		if n, err := store.RecoverAsyncReactions(context.Background()); err != nil {
			logger.Warn("failing the reactions of a previous process failed; their leases will", zap.Error(err))
		} else if n > 0 {
			logger.Info("reactions interrupted by the previous process marked failed", zap.Int("reactions", n))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &asyncDispatcher{app: a, store: store, logger: logger, wake: make(chan struct{}, 1),
		slots: make(chan struct{}, a.AsyncReactions.concurrency()), cancel: cancel, done: make(chan struct{})}
	a.asyncs = d
	go d.loop(ctx)
}

// stopAsyncReactions stops claiming reactions and waits for those
// running to finish and record their outcome (a run is bounded by the
// workers' timeout). Stop calls it before Cleanup releases the workers:
// closing the pool under a run would cut the run short, and the reaction
// would then fail, since a run that started is never run again.
func (a *App) stopAsyncReactions() {
	if a.asyncs != nil {
		a.asyncs.cancel()
		<-a.asyncs.done
		a.asyncs.runs.Wait()
	}
}

// poke asks the dispatcher to look at the queue now.
func (d *asyncDispatcher) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *asyncDispatcher) loop(ctx context.Context) {
	defer close(d.done)
	tick := time.NewTicker(asyncPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-d.wake:
		}
		free := cap(d.slots) - len(d.slots)
		if free == 0 {
			continue
		}
		jobs, err := d.store.ClaimAsyncReactions(ctx, free)
		if err != nil && ctx.Err() == nil {
			d.logger.Warn("claiming queued reactions failed", zap.Error(err))
		}
		for _, job := range jobs {
			d.slots <- struct{}{}
			d.runs.Add(1)
			go func() {
				defer func() { <-d.slots; d.runs.Done(); d.poke() }()
				d.run(job)
			}()
		}
	}
}

// run runs one claimed reaction and records what react would have
// answered.
func (d *asyncDispatcher) run(job *vaultstore.AsyncJob) {
	ctx, cancel := context.WithTimeout(context.Background(), vaultstore.AsyncLease)
	defer cancel()
	w := &bufferedResponse{header: http.Header{}}
	err := d.runReaction(ctx, w, job)
	var te *transforms.Error
	if errors.As(err, &te) && te.Kind == transforms.KindBusy {
		// the workers refused it before it started: it goes back in line.
		// A run the pool cut short (KindClosed) started, so it is failed
		// below like any other failure, never queued again.
		if err := d.store.ReleaseAsyncReaction(context.Background(), job); err != nil {
			d.logger.Warn("putting a reaction back in the queue failed; its lease will", zap.String("reaction", job.ID), zap.Error(err))
		}
		return
	}
	if err != nil {
		writeProblem(w, d.logger, job.ID, err)
	}
	body := w.body.Bytes()
	if !json.Valid(body) {
		body, _ = json.Marshal(string(body))
	}
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	if err := d.store.FinishAsyncReaction(context.Background(), job, status, body); err != nil {
		d.logger.Error("recording a reaction's outcome failed", zap.String("reaction", job.ID), zap.Error(err))
	}
}

func (d *asyncDispatcher) runReaction(ctx context.Context, w http.ResponseWriter, job *vaultstore.AsyncJob) error {
	tenant, err := d.store.GetTenant(ctx, job.TenantID)
	if err != nil {
		return err
	}
	r, err := d.store.GetReactor(ctx, job.TenantID, job.ReactorID)
	if errors.Is(err, vaultstore.ErrNotFound) {
		return errStatus(http.StatusNotFound, "the reactor was deleted before the reaction ran")
	}
	if err != nil {
		return err
	}
	return d.app.runReaction(ctx, w, d.store, tenant, job.CallerID, r, job.Args)
}

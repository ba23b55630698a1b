package caddymodule

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// The vault app's store is opened in Start, not Provision, and Caddy
// starts a config's apps in no fixed order: the HTTP app may be serving
// (and the admin API answering) a moment before the vault's Start has
// opened the store. Requests that arrive in that moment wait for it here,
// for storeStartWait at most, instead of finding no store.

// storeStartWait bounds how long a request waits for the vault's Start,
// which replays the storage engine's logs and may take a while after a
// crash. A request still waiting then gets 503 with Retry-After.
const storeStartWait = 10 * time.Second

// errVaultStarting is the answer of a request that waited storeStartWait
// for the vault's Start; errVaultNotRunning, of one whose config's vault
// failed to start or was stopped.
var (
	errVaultStarting   = errStatus(http.StatusServiceUnavailable, "the vault is starting; retry the request")
	errVaultNotRunning = errStatus(http.StatusServiceUnavailable, "the vault is not running")
)

// opened records the open store and wakes the requests waiting for it.
// Start calls it once; tests call it on an app they assemble by hand.
func (a *App) opened(s *vaultstore.Store) {
	a.store = s
	if a.ready == nil {
		a.ready = make(chan struct{})
	}
	close(a.ready)
}

// waitStore returns the store once Start has opened it: at once when it
// has, else when Start is done, failing when Start fails, the config is
// cleaned up, ctx ends or storeStartWait passes.
func (a *App) waitStore(ctx context.Context) (*vaultstore.Store, error) {
	if s := a.Store(); s != nil {
		return s, nil
	}
	if a.ready == nil { // never provisioned
		return nil, errVaultNotRunning
	}
	var cleanedUp <-chan struct{}
	if a.ctx.Context != nil {
		cleanedUp = a.ctx.Done()
	}
	timer := time.NewTimer(storeStartWait)
	defer timer.Stop()
	select {
	case <-a.ready:
		return a.store, nil
	case <-a.failed:
		return nil, errVaultNotRunning
	case <-cleanedUp:
		return nil, errVaultNotRunning
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
		return nil, errVaultStarting
	}
}

// started reports whether Start opened the store and Stop has not been
// called since.
func (a *App) started() bool { return a.Store() != nil && !isClosed(a.stopped) }

// starting reports whether the app is provisioned and its Start has not
// run or not finished, nor failed.
func (a *App) starting() bool {
	if a.ready == nil || a.Store() != nil || isClosed(a.failed) {
		return false
	}
	return a.ctx.Context == nil || a.ctx.Err() == nil
}

// isClosed reports whether ch is closed; a nil channel is not.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// vaultApps are this process's vault apps that are provisioned and not
// yet cleaned up, oldest first: one, or during a reload the running
// config's and the next one's. The admin API finds its app here rather
// than in caddy.ActiveContext(), which names a new config only once every
// one of its apps has started.
var vaultApps struct {
	sync.Mutex
	list []*App
}

// trackApp adds a provisioned app to vaultApps.
func trackApp(a *App) {
	vaultApps.Lock()
	defer vaultApps.Unlock()
	vaultApps.list = append(vaultApps.list, a)
}

// untrackApp removes a cleaned-up app from vaultApps.
func untrackApp(a *App) {
	vaultApps.Lock()
	defer vaultApps.Unlock()
	vaultApps.list = slices.DeleteFunc(vaultApps.list, func(x *App) bool { return x == a })
}

// currentApps returns the newest started app and the newest one still
// starting (either may be nil).
func currentApps() (started, starting *App) {
	vaultApps.Lock()
	defer vaultApps.Unlock()
	for _, a := range slices.Backward(vaultApps.list) {
		switch {
		case started == nil && a.started():
			started = a
		case starting == nil && a.starting():
			starting = a
		}
	}
	return started, starting
}

// runningApp returns the running vault app for the admin API: the newest
// started one, or, while none has started yet, the one starting once its
// Start is done. 503 when there is none, or it does not start in time.
func runningApp(ctx context.Context) (*App, error) {
	for {
		started, starting := currentApps()
		if started != nil {
			return started, nil
		}
		if starting == nil {
			return nil, caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: errors.New("the vault app is not running")}
		}
		if _, err := starting.waitStore(ctx); err != nil && !errors.Is(err, errVaultNotRunning) {
			return nil, caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: errors.New("the vault app is starting; retry the request")}
		}
		// started, or failed: look again
	}
}

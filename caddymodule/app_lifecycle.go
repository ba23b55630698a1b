package caddymodule

import (
	"context"
	"net/http"
	"time"

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

// isClosed reports whether ch is closed; a nil channel is not.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

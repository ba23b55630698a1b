package caddymodule

import (
	"errors"
	"net/http"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// createSession: POST /sessions, by a public application's key. It answers
// a session key that has no rights until a back end authorizes it, the
// nonce the back end authorizes it with, and when it expires.
func createSession(c *call) error {
	app := c.principal.Application
	if app.IsSession() || app.Type != vaultstore.AppPublic {
		return errStatus(http.StatusForbidden, "only a public application's key creates sessions")
	}
	cs, err := c.store.CreateSession(c.ctx(), c.principal)
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusCreated, cs)
}

// authorizeSession: POST /sessions/authorize {nonce, permissions | rules,
// expires_at}, by a private or management application's key, which may
// grant only what it holds itself. It answers 204.
func authorizeSession(c *call) error {
	app := c.principal.Application
	if app.IsSession() || (app.Type != vaultstore.AppPrivate && app.Type != vaultstore.AppManagement) {
		return errStatus(http.StatusForbidden, "only a private or management application's key authorizes sessions")
	}
	var in vaultstore.SessionAuthorization
	if err := c.decode(&in); err != nil {
		return err
	}
	err := c.store.AuthorizeSession(c.ctx(), c.principal, in)
	switch {
	case errors.Is(err, vaultstore.ErrNotFound):
		return errStatus(http.StatusNotFound, "no session has this nonce: it is unknown, of another tenant, or expired")
	case errors.Is(err, vaultstore.ErrConflict):
		return errStatus(http.StatusConflict, "the session is already authorized")
	case err != nil:
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

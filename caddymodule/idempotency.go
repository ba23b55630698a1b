package caddymodule

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"

	"github.com/tokenvault/tokenvault/vaultstore"
	"github.com/tokenvault/tokenvault/vaultstore/strictjson"
)

// maxIdempotencyKey bounds the idempotency header.
const maxIdempotencyKey = 255

// idempotent runs a POST, PUT or PATCH that carries an idempotency key at
// most once per application and key: a repeat of the same request gets the
// first successful response again, a repeat while it runs 409, and the
// key with a different request 400. Failures are not kept.
func (h *API) idempotent(c *call, key string, run func(*call) error) error {
	if len(key) > maxIdempotencyKey {
		return errField(h.headers.idempotencyKey, "the idempotency key must be at most 255 characters")
	}
	body, err := strictjson.ReadBodyOfLength(c.r.Body, maxBodyBytes, c.r.ContentLength)
	if err != nil {
		return err
	}
	c.r.Body = readCloser{bytes.NewReader(body)}
	sum := sha256.New()
	sum.Write([]byte(c.r.Method + " " + c.r.URL.Path + "\n"))
	sum.Write(body)
	hash := hex.EncodeToString(sum.Sum(nil))
	tenantID := c.tenantID()
	// a key belongs to the application that used it: another application
	// of the tenant reusing it must neither see the first answer (it may
	// hold data that application may not read) nor be refused by it
	key = c.actorID() + "\x00" + key
	kept, err := c.store.BeginIdempotent(c.ctx(), tenantID, key, hash)
	switch {
	case errors.Is(err, vaultstore.ErrIdempotencyInFlight):
		return errStatus(http.StatusConflict, "a request with this idempotency key is still in progress")
	case errors.Is(err, vaultstore.ErrIdempotencyMismatch):
		return errField(h.headers.idempotencyKey, "this idempotency key was already used with a different request")
	case err != nil:
		return err
	case kept != nil:
		if kept.ContentType != "" {
			c.w.Header().Set("Content-Type", kept.ContentType)
		}
		c.w.Header().Set("Cache-Control", "no-store")
		c.w.Header().Set("Content-Length", strconv.Itoa(len(kept.Body)))
		c.w.WriteHeader(kept.Status)
		_, err := c.w.Write(kept.Body)
		return err
	}
	rec := &bufferedResponse{header: http.Header{}}
	w := c.w
	c.w = rec
	runErr := run(c)
	c.w = w
	if runErr == nil && rec.status >= 200 && rec.status < 300 {
		if err := c.store.FinishIdempotent(c.ctx(), tenantID, key, &vaultstore.IdempotentResponse{
			RequestHash: hash, Status: rec.status, ContentType: rec.header.Get("Content-Type"), Body: rec.body.Bytes(),
		}); err != nil {
			h.logger.Warn("keeping an idempotent response failed; a repeat will run again", scrubbedError(err))
			_ = c.store.AbandonIdempotent(c.ctx(), tenantID, key)
		}
	} else if err := c.store.AbandonIdempotent(c.ctx(), tenantID, key); err != nil {
		h.logger.Warn("releasing an idempotency key failed", scrubbedError(err))
	}
	if runErr != nil {
		return runErr
	}
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.status)
	_, err = w.Write(rec.body.Bytes())
	return err
}

// bufferedResponse holds a handler's response until it is kept.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// readCloser gives a reader a no-op Close.
type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

package vaultstore

import (
	"context"
	"errors"
	"time"
)

// Idempotency: a POST, PUT or PATCH carrying an idempotency key is done
// once per tenant and key; its first successful response is kept (sealed:
// it can hold token data) for a day and replayed to a repeat of the same
// request.

// Errors of BeginIdempotent.
var (
	// ErrIdempotencyInFlight: a request with the same key is still running.
	ErrIdempotencyInFlight = errors.New("a request with this idempotency key is in progress")
	// ErrIdempotencyMismatch: the key was used with a different request.
	ErrIdempotencyMismatch = errors.New("this idempotency key was used with a different request")
)

const (
	// idempotencyTTL is how long a first response is kept.
	idempotencyTTL = 24 * time.Hour
	// idempotencyInFlightTTL bounds how long a request that never
	// finished (its process died) holds its key.
	idempotencyInFlightTTL = 2 * time.Minute
)

// IdempotentResponse is a kept first response, or the marker of a
// request in progress (Done false).
type IdempotentResponse struct {
	RequestHash string `json:"request_hash"`
	Done        bool   `json:"done"`
	Status      int    `json:"status,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	Body        []byte `json:"body,omitempty"`
}

// BeginIdempotent claims an idempotency key for a request (requestHash
// identifies its method, path and body). It returns nil when the key is
// new and now held; the kept response to replay when the same request
// finished before; ErrIdempotencyInFlight or ErrIdempotencyMismatch.
func (s *Store) BeginIdempotent(ctx context.Context, tenantID, key, requestHash string) (*IdempotentResponse, error) {
	id := keyDigest(key)
	var replay *IdempotentResponse
	err := s.kv.Update(ctx, func(w Writer) error {
		replay = nil
		tk, _, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		var kept IdempotentResponse
		err = s.getSealed(w, tk, "idempotency", tenantID, id, idempotencyKey(tenantID, id), &kept)
		switch {
		case err == nil && !kept.Done:
			return ErrIdempotencyInFlight
		case err == nil && kept.RequestHash != requestHash:
			return ErrIdempotencyMismatch
		case err == nil:
			replay = &kept
			return nil
		case !errors.Is(err, ErrNotFound):
			return err
		}
		sealed, err := tk.sealRecord("idempotency", tenantID, id, &IdempotentResponse{RequestHash: requestHash})
		if err != nil {
			return err
		}
		return w.Put(idempotencyKey(tenantID, id), sealed, idempotencyInFlightTTL)
	})
	return replay, err
}

// FinishIdempotent keeps a request's successful response for replays.
func (s *Store) FinishIdempotent(ctx context.Context, tenantID, key string, resp *IdempotentResponse) error {
	id := keyDigest(key)
	resp.Done = true
	return s.kv.Update(ctx, func(w Writer) error {
		tk, err := s.tenantKeysFor(w, tenantID)
		if err != nil {
			return err
		}
		sealed, err := tk.sealRecord("idempotency", tenantID, id, resp)
		if err != nil {
			return err
		}
		return w.Put(idempotencyKey(tenantID, id), sealed, idempotencyTTL)
	})
}

// AbandonIdempotent releases a key whose request failed: failures are not
// kept, so the request may be retried with the same key.
func (s *Store) AbandonIdempotent(ctx context.Context, tenantID, key string) error {
	id := keyDigest(key)
	return s.kv.Update(ctx, func(w Writer) error { return w.Delete(idempotencyKey(tenantID, id)) })
}

package vaultstore

import (
	"errors"
	"sort"
	"strings"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
	"github.com/tokenvault/tokenvault/vaultstore/kv/badgerkv"
)

// Errors the vault's operations return; the HTTP edge maps each to one
// status code.
var (
	// ErrNotFound: no such record in the caller's tenant (the storage
	// engine's own not-found, so a missing key needs no translation).
	ErrNotFound = kv.ErrNotFound
	// ErrUnauthenticated: a missing, malformed, unknown or revoked API key.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden: the caller's application lacks a permission.
	ErrForbidden = errors.New("forbidden")
	// ErrConflict: the record already exists.
	ErrConflict = errors.New("conflict")
	// ErrBusy: concurrent writes kept colliding; the request may be retried.
	ErrBusy = kv.ErrConflict
	// ErrUnavailable: the storage cannot be reached or refuses writes for
	// now (a database restarting, a full disk); nothing was committed.
	ErrUnavailable = kv.ErrUnavailable
	// ErrNoSpace: the storage's disk is too full for writes; reads go on.
	// It is also an ErrUnavailable.
	ErrNoSpace = kv.ErrNoSpace
	// ErrLocked: another process holds the storage directory.
	ErrLocked = badgerkv.ErrLocked
)

// ValidationError lists the request fields that failed validation, each
// with its messages. Messages never quote submitted values.
type ValidationError struct {
	Fields map[string][]string
}

// Error names the fields that failed.
func (e *ValidationError) Error() string {
	names := make([]string, 0, len(e.Fields))
	for f := range e.Fields {
		names = append(names, f)
	}
	sort.Strings(names)
	return "invalid " + strings.Join(names, ", ")
}

// Add records a message for field.
func (e *ValidationError) Add(field, msg string) {
	if e.Fields == nil {
		e.Fields = make(map[string][]string)
	}
	e.Fields[field] = append(e.Fields[field], msg)
}

// OrNil returns e when it holds any failure, else nil.
func (e *ValidationError) OrNil() error {
	if len(e.Fields) == 0 {
		return nil
	}
	return e
}

// invalid returns a ValidationError for one field.
func invalid(field, msg string) error {
	e := &ValidationError{}
	e.Add(field, msg)
	return e
}

package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// handleBackup: GET /vault/backup streams a sealed, consistent snapshot of
// the store (see vaultstore.Store.Backup), flushing each frame as it is
// written, so a store of any size passes through without being held in
// memory. Caddy's admin server sets no write timeout, and its read timeout
// does not reach a handler once a body-less request has been read; both
// deadlines are lifted here all the same, so a long backup is never cut
// off by them.
//
// Once the first byte is sent the status can no longer change: a backup
// that fails then aborts the connection, and the client sees a stream
// without its last frame, which it and Restore refuse.
func (a AdminAPI) handleBackup(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return methodNotAllowed(r)
	}
	app, err := a.vaultApp(r.Context())
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{}) // best effort: not every writer supports deadlines
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", `attachment; filename="tokenvault-`+time.Now().UTC().Format("20060102T150405Z")+`.backup"`)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	fw := &flushWriter{w: w, rc: rc}
	start := time.Now()
	var bytes, records int64
	err = app.Store().Backup(r.Context(), fw, func(b, n int64) { bytes, records = b, n })
	if err == nil {
		lastBackup.Store(time.Now().UnixMilli())
		app.Store().ExportOperatorEvent("backup", "", "create", fmt.Sprintf("backup sent: %d records, %d bytes", records, bytes))
		app.logger.Info("backup sent", zap.Int64("bytes", bytes), zap.Int64("records", records), zap.Duration("took", time.Since(start)))
		return nil
	}
	if !fw.wrote {
		if errors.Is(err, vaultstore.ErrBackupRotating) {
			return caddy.APIError{HTTPStatus: http.StatusConflict, Err: err}
		}
		return adminError(err)
	}
	app.logger.Error("backup failed after it began; aborting the response", zap.Int64("bytes", bytes), zap.Error(err))
	panic(http.ErrAbortHandler) // the documented way to cut a response short
}

// flushWriter sends every write to the client at once.
type flushWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	wrote bool
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.wrote = true
	n, err := f.w.Write(p)
	if err != nil {
		return n, fmt.Errorf("sending: %w", err)
	}
	if err := f.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return n, fmt.Errorf("sending: %w", err)
	}
	return n, nil
}

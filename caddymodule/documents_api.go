package caddymodule

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"

	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore"
	"github.com/tokenvault/tokenvault/vaultstore/strictjson"
)

// documentEnvelopeBytes is what a document upload's body may hold beside
// the document itself: the multipart framing and the "request" part.
const documentEnvelopeBytes = 1 << 20

// maxDocumentRequestBytes bounds the "request" part (the metadata JSON).
const maxDocumentRequestBytes = 64 << 10

// documentCopyBuffer is the buffer content is streamed through.
const documentCopyBuffer = 32 << 10

// documentMaxBytes is the largest document the vault accepts.
func (a *App) documentMaxBytes() int64 {
	if a.DocumentMaxSize > 0 {
		return a.DocumentMaxSize
	}
	return vaultstore.DefaultDocumentMaxBytes
}

// bodyLimit is the largest request body a route reads: the interface's
// 1 MB, but a document upload's own limit for POST /documents.
func (h *API) bodyLimit(rt *route) int64 {
	if rt.method == http.MethodPost && rt.pattern == "/documents" {
		return h.app.documentMaxBytes() + documentEnvelopeBytes
	}
	return maxBodyBytes
}

// documentRequest is the "request" part of an upload.
type documentRequest struct {
	Metadata map[string]string `json:"metadata"`
}

// uploadDocument: POST /documents, multipart/form-data with a "document"
// file part and an optional "request" part holding {"metadata": {...}},
// in either order (the official Node SDK sends the document first). The
// document streams into the store as it arrives.
func uploadDocument(c *call) error {
	mediaType, _, err := mime.ParseMediaType(c.r.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/form-data" {
		return &apiError{status: http.StatusUnsupportedMediaType, detail: "the body must be multipart/form-data with a document part"}
	}
	mr, err := c.r.MultipartReader()
	if err != nil {
		return errField("document", "the multipart body has no boundary")
	}
	var (
		upload  *vaultstore.DocumentUpload
		in      vaultstore.DocumentInput
		request bool
	)
	defer func() {
		if upload != nil {
			upload.Abort() // does nothing once committed
		}
	}()
	buf := make([]byte, documentCopyBuffer)
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return uploadReadError(err, "document")
		}
		switch part.FormName() {
		case "document":
			if upload != nil {
				return errField("document", "only one document may be uploaded at a time")
			}
			in.ContentType = part.Header.Get("Content-Type")
			if upload, err = c.store.BeginDocument(c.ctx(), c.tokenRequest(), c.api.app.documentMaxBytes()); err != nil {
				return err
			}
			if _, err := io.CopyBuffer(upload, part, buf); err != nil {
				return uploadReadError(err, "document")
			}
		case "request":
			if request {
				return errField("request", "the request part may appear once")
			}
			request = true
			body, err := io.ReadAll(io.LimitReader(part, maxDocumentRequestBytes+1))
			if err != nil {
				return uploadReadError(err, "request")
			}
			if len(body) > maxDocumentRequestBytes {
				return errField("request", "the request part is too long")
			}
			var req documentRequest
			if err := strictjson.Decode(body, &req, strictjson.DefaultLimits); err != nil {
				return errField("request", "the request part must be a JSON object such as {\"metadata\": {}}")
			}
			in.Metadata = req.Metadata
		default:
			return errField(part.FormName(), "unknown part; an upload has a document part and an optional request part")
		}
	}
	if upload == nil {
		return errField("document", "a document part is required")
	}
	doc, err := upload.Commit(in)
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusCreated, doc)
}

// uploadReadError maps a failure while reading an upload's body: the
// document over its limit or the body over its own is 413, a body that
// breaks off or does not parse is 400 on field.
func uploadReadError(err error, field string) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, vaultstore.ErrDocumentTooLarge), errors.As(err, &mbe):
		return errStatus(http.StatusRequestEntityTooLarge, "the document is over the vault's size limit")
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errField(field, "the multipart body ends too soon")
	}
	var ve *vaultstore.ValidationError
	if errors.As(err, &ve) {
		return err
	}
	if isStoreError(err) {
		return err
	}
	return errField(field, "the multipart body does not parse")
}

// isStoreError reports whether err comes from the store (and is mapped
// as the store's), not from reading the body.
func isStoreError(err error) bool {
	return errors.Is(err, vaultstore.ErrUnavailable) || errors.Is(err, vaultstore.ErrBusy) ||
		errors.Is(err, vaultstore.ErrNotFound) || errors.Is(err, vaultstore.ErrIntegrity)
}

// getDocument: GET /documents/{id}, the metadata.
func getDocument(c *call) error {
	doc, err := c.store.GetDocument(c.ctx(), c.tokenRequest(), c.params["id"])
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, doc)
}

// getDocumentData: GET /documents/{id}/data streams the content, as an
// attachment, never to be rendered from the vault's origin. A failure
// once bytes are out cuts the answer short of its Content-Length, which
// every client sees as a failed download.
func getDocumentData(c *call) error {
	doc, content, err := c.store.OpenDocument(c.ctx(), c.tokenRequest(), c.params["id"])
	if err != nil {
		return err
	}
	h := c.w.Header()
	h.Set("Content-Type", doc.ContentType)
	h.Set("Content-Length", strconv.FormatInt(doc.Size, 10))
	h.Set("Content-Disposition", "attachment")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	c.w.WriteHeader(http.StatusOK)
	if c.r.Method == http.MethodHead {
		return nil
	}
	if _, err := io.CopyBuffer(c.w, content, make([]byte, documentCopyBuffer)); err != nil && c.ctx().Err() == nil {
		c.api.logger.Error("streaming a document failed", zap.String("tenant_id", c.tenantID()), zap.String("document_id", doc.ID), zap.Error(err))
	}
	return nil
}

// deleteDocument: DELETE /documents/{id}.
func deleteDocument(c *call) error {
	if err := c.store.DeleteDocument(c.ctx(), c.tokenRequest(), c.params["id"]); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

package vaultstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"go.uber.org/zap"
)

// Documents tokenize files. A document's content is cut into chunks of
// DocumentChunkSize bytes, each sealed under the tenant's data key and
// bound to its document and position, and stored as an entry of its own
// (a PostgreSQL row stays far below its size limits); its metadata record
// names how many chunks and bytes there are, so a chunk that is missing,
// moved or swapped fails the read. Content is streamed in and out a batch
// of chunks at a time, never held whole in memory.
//
// An upload writes its chunks in several transactions (Badger bounds the
// size of one), under a marker that makes them garbage until the metadata
// record commits; the marker goes in the same transaction. The sweep
// removes what a marker older than documentUploadAbandoned left, so an
// upload cut by a crash leaves nothing for good. A delete removes the
// metadata record and leaves such a marker in one transaction, then
// removes the chunks.
//
//	v1/t/{tenant}/doc/{document}               document record, sealed
//	v1/t/{tenant}/docc/{document}:{index hex}  one chunk of content, sealed
//	v1/docup/{tenant}/{document}               chunks not (or no longer) owned by a record; value: since (ns)

// DocumentChunkSize is the plaintext size of one stored chunk.
const DocumentChunkSize = 64 << 10

// DefaultDocumentMaxBytes is the largest document accepted unless the
// operator sets another limit.
const DefaultDocumentMaxBytes = 25 << 20

// documentBatchChunks is how many chunks go in one transaction, written or
// read (a megabyte).
const documentBatchChunks = 16

// documentUploadAbandoned is how old an upload's marker must be before
// the sweep takes its chunks for abandoned.
const documentUploadAbandoned = 24 * time.Hour

// Limits on a document's metadata.
const (
	maxDocumentMetadata      = 50
	maxDocumentMetadataBytes = 1000
	maxContentTypeLength     = 255
)

// ErrDocumentTooLarge reports content over the upload's size limit.
var ErrDocumentTooLarge = errors.New("document is over the size limit")

// Document is a stored file as the API shows it.
type Document struct {
	ID          string            `json:"id"`
	TenantID    string            `json:"tenant_id"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	ContentType string            `json:"content_type"`
	CreatedBy   string            `json:"created_by,omitempty"`
	CreatedAt   *Timestamp        `json:"created_at,omitempty"`
	// Size is the content's length in bytes.
	Size int64 `json:"-"`
}

// DocumentInput is what an upload says about its content.
type DocumentInput struct {
	Metadata    map[string]string `json:"metadata"`
	ContentType string            `json:"-"`
}

// documentRecord is what is stored, sealed.
type documentRecord struct {
	Document
	Size   int64 `json:"size"`
	Chunks int   `json:"chunks"`
}

func documentKey(tenantID, id string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/doc/" + id)
}

func documentChunkKey(tenantID, id string, index int) []byte {
	return fmt.Appendf(nil, "%st/%s/docc/%s:%08x", keyVersion, tenantID, id, index)
}

func documentChunksPrefix(tenantID, id string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/docc/" + id + ":")
}

func documentUploadKey(tenantID, id string) []byte {
	return []byte(keyVersion + "docup/" + tenantID + "/" + id)
}

func documentUploadPrefix() []byte { return []byte(keyVersion + "docup/") }

// chunkID is what a chunk's seal binds besides the tenant: its document
// and place (the key's last segment, as a re-seal reads it back).
func chunkID(id string, index int) string { return fmt.Sprintf("%s:%08x", id, index) }

func (in *DocumentInput) validate() error {
	v := &ValidationError{}
	if len(in.Metadata) > maxDocumentMetadata {
		v.Add("metadata", fmt.Sprintf("metadata may hold at most %d entries", maxDocumentMetadata))
	}
	for k, val := range in.Metadata {
		if k == "" || len(k) > maxDocumentMetadataBytes || len(val) > maxDocumentMetadataBytes || !utf8.ValidString(k) || !utf8.ValidString(val) {
			v.Add("metadata", fmt.Sprintf("metadata keys and values must be UTF-8 of at most %d bytes, keys not empty", maxDocumentMetadataBytes))
			break
		}
	}
	if in.ContentType == "" {
		in.ContentType = "application/octet-stream"
	}
	if len(in.ContentType) > maxContentTypeLength {
		v.Add("document", "the document's content type is too long")
	} else if _, _, err := mime.ParseMediaType(in.ContentType); err != nil {
		v.Add("document", "the document's content type is not a media type")
	}
	return v.OrNil()
}

// DocumentUpload is a document being written. Write its content, then
// Commit it, or Abort; an upload neither committed nor aborted is swept
// away after a day.
type DocumentUpload struct {
	s       *Store
	ctx     context.Context
	req     TokenRequest
	id      string
	limit   int64
	size    int64
	chunks  int
	buf     []byte   // the chunk being filled
	pending [][]byte // whole chunks not yet written, in clear (a batch at most)
	done    bool
	err     error
}

// BeginDocument starts an upload to the caller's tenant of at most limit
// bytes of content.
func (s *Store) BeginDocument(ctx context.Context, req TokenRequest, limit int64) (*DocumentUpload, error) {
	u := &DocumentUpload{s: s, ctx: ctx, req: req, id: uuid.NewString(), limit: limit, buf: make([]byte, 0, DocumentChunkSize)}
	err := s.kv.Update(ctx, func(w Writer) error {
		if _, _, err := s.tenantForWrite(w, req.Tenant.ID); err != nil {
			return err
		}
		return w.Put(documentUploadKey(req.Tenant.ID, u.id), binary.BigEndian.AppendUint64(nil, uint64(s.now().UnixNano())), 0)
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// Write adds content. Past the limit it fails with ErrDocumentTooLarge.
func (u *DocumentUpload) Write(p []byte) (int, error) {
	if u.err != nil {
		return 0, u.err
	}
	if u.done {
		return 0, errors.New("document upload is finished")
	}
	if u.size+int64(len(p)) > u.limit {
		u.err = ErrDocumentTooLarge
		return 0, u.err
	}
	n := 0
	for len(p) > 0 {
		take := min(len(p), DocumentChunkSize-len(u.buf))
		u.buf = append(u.buf, p[:take]...)
		p, n, u.size = p[take:], n+take, u.size+int64(take)
		if len(u.buf) == DocumentChunkSize {
			u.pending = append(u.pending, u.buf)
			u.buf = make([]byte, 0, DocumentChunkSize)
			if len(u.pending) == documentBatchChunks {
				if err := u.flush(); err != nil {
					u.err = err
					return n, err
				}
			}
		}
	}
	return n, nil
}

// flush seals and writes the chunks held, in one transaction.
func (u *DocumentUpload) flush() error {
	err := u.s.kv.Update(u.ctx, func(w Writer) error {
		tk, _, err := u.s.tenantForWrite(w, u.req.Tenant.ID)
		if err != nil {
			return err
		}
		return u.putChunks(w, tk)
	})
	if err != nil {
		return err
	}
	u.written()
	return nil
}

// putChunks seals the chunks held under the tenant's current data key
// and writes them. Sealing inside the transaction that read the tenant
// record (tenantForWrite) means a data key rotation that destroys an old
// key version conflicts with it and it seals again with the keys stored
// then: a chunk is never written under a destroyed key.
func (u *DocumentUpload) putChunks(w Writer, tk *tenantKeys) error {
	// the marker must still be there: a sweep that took this upload
	// for abandoned would not see chunks written after it
	if _, err := w.Get(documentUploadKey(u.req.Tenant.ID, u.id)); err != nil {
		return fmt.Errorf("document upload marker: %w", err)
	}
	first := u.chunks
	for i, plain := range u.pending {
		sealed, err := tk.Seal(plain, recordAAD("docchunk", u.req.Tenant.ID, chunkID(u.id, first+i)))
		if err != nil {
			return err
		}
		if err := w.Put(documentChunkKey(u.req.Tenant.ID, u.id, first+i), sealed, 0); err != nil {
			return err
		}
	}
	return nil
}

// written forgets the chunks held once they are committed.
func (u *DocumentUpload) written() {
	for _, c := range u.pending {
		clear(c)
	}
	u.chunks += len(u.pending)
	u.pending = u.pending[:0]
}

// Commit validates in, writes what content is left and the document's
// record, in one transaction, and returns the document.
func (u *DocumentUpload) Commit(in DocumentInput) (*Document, error) {
	if u.err != nil {
		return nil, u.err
	}
	if u.done {
		return nil, errors.New("document upload is finished")
	}
	if err := in.validate(); err != nil {
		return nil, err
	}
	if len(u.buf) > 0 {
		u.pending = append(u.pending, u.buf)
		u.buf = nil
	}
	s, tenantID := u.s, u.req.Tenant.ID
	rec := &documentRecord{Document: Document{ID: u.id, TenantID: tenantID, Metadata: in.Metadata, ContentType: in.ContentType,
		CreatedBy: u.req.Application.ID, CreatedAt: s.stampNow()}, Size: u.size, Chunks: u.chunks + len(u.pending)}
	err := s.kv.Update(u.ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		if err := u.putChunks(w, tk); err != nil {
			return err
		}
		if err := w.Delete(documentUploadKey(tenantID, u.id)); err != nil {
			return err
		}
		if err := s.writeAudit(w, tk, t, byApp(u.req.Application, "document", u.id, "create", "document created")); err != nil {
			return err
		}
		return putSealed(w, tk, "document", tenantID, u.id, documentKey(tenantID, u.id), rec)
	})
	if err != nil {
		return nil, err
	}
	u.written()
	u.done = true
	return rec.view(), nil
}

// Abort removes what the upload wrote. It is safe to call after Commit,
// which it then leaves alone.
func (u *DocumentUpload) Abort() {
	if u.done {
		return
	}
	u.done = true
	for _, c := range u.pending {
		clear(c)
	}
	u.pending = nil
	// the request's context may be what ended the upload
	ctx, cancel := context.WithTimeout(context.WithoutCancel(u.ctx), time.Minute)
	defer cancel()
	if err := u.s.removeDocumentChunks(ctx, u.req.Tenant.ID, u.id); err != nil {
		u.s.logger.Warn("removing an aborted document upload failed; the sweep removes it", zap.String("tenant_id", u.req.Tenant.ID), zap.Error(err))
	}
}

// ID is the id the document will have.
func (u *DocumentUpload) ID() string { return u.id }

// removeDocumentChunks deletes a document's chunks a batch at a time,
// then its upload marker.
func (s *Store) removeDocumentChunks(ctx context.Context, tenantID, id string) error {
	prefix := documentChunksPrefix(tenantID, id)
	for {
		var keys [][]byte
		err := s.kv.Update(ctx, func(w Writer) error {
			keys = keys[:0]
			if err := w.Scan(prefix, nil, func(key, _ []byte) error {
				if len(keys) == 4*documentBatchChunks {
					return ErrStopScan
				}
				keys = append(keys, append([]byte(nil), key...))
				return nil
			}); err != nil {
				return err
			}
			for _, k := range keys {
				if err := w.Delete(k); err != nil {
					return err
				}
			}
			if len(keys) == 0 {
				return w.Delete(documentUploadKey(tenantID, id))
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			return nil
		}
	}
}

// sweepDocumentUploads removes the chunks of uploads abandoned more than
// documentUploadAbandoned ago, and of deletes cut short.
func (s *Store) sweepDocumentUploads(ctx context.Context, now time.Time) error {
	type upload struct{ tenant, id string }
	var stale []upload
	err := s.kv.View(ctx, func(r Reader) error {
		stale = stale[:0]
		prefix := documentUploadPrefix()
		return r.Scan(prefix, nil, func(key, value []byte) error {
			if len(value) != 8 {
				return nil
			}
			since := time.Unix(0, int64(binary.BigEndian.Uint64(value)))
			if now.Sub(since) < documentUploadAbandoned {
				return nil
			}
			tenant, id, ok := strings.Cut(string(key[len(prefix):]), "/")
			if ok {
				stale = append(stale, upload{tenant, id})
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	for _, u := range stale {
		if err := s.removeDocumentChunks(ctx, u.tenant, u.id); err != nil {
			return err
		}
	}
	return nil
}

// GetDocument returns a document's metadata, if the caller may read it.
func (s *Store) GetDocument(ctx context.Context, req TokenRequest, id string) (*Document, error) {
	rec, err := getRecord[documentRecord](ctx, s, "document", req.Tenant.ID, id, documentKey(req.Tenant.ID, id))
	if err != nil {
		return nil, err
	}
	return rec.view(), nil
}

func (r *documentRecord) view() *Document {
	doc := r.Document
	doc.Size = r.Size
	return &doc
}

// DeleteDocument removes a document: its record at once, its content
// right after (or, if that is cut short, by the sweep).
func (s *Store) DeleteDocument(ctx context.Context, req TokenRequest, id string) error {
	tenantID := req.Tenant.ID
	err := deleteRecord(ctx, s, tenantID, id, documentKey(tenantID, id), func(w Writer, _ *tenantKeys) (*AuditRecord, error) {
		// the chunks are orphans from now on: a marker as old as the
		// epoch lets the next sweep finish what the removal below starts
		if err := w.Put(documentUploadKey(tenantID, id), make([]byte, 8), 0); err != nil {
			return nil, err
		}
		return byApp(req.Application, "document", id, "delete", "document deleted"), nil
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := s.removeDocumentChunks(ctx, tenantID, id); err != nil {
		s.logger.Warn("removing a deleted document's content failed; the sweep removes it", zap.String("tenant_id", tenantID), zap.Error(err))
	}
	return nil
}

// OpenDocument returns a document's metadata and a reader of its content,
// once the read is in the audit log. The reader holds one batch of chunks
// at a time; it fails if the content was changed or removed meanwhile.
func (s *Store) OpenDocument(ctx context.Context, req TokenRequest, id string) (*Document, io.Reader, error) {
	rec, err := getRecord[documentRecord](ctx, s, "document", req.Tenant.ID, id, documentKey(req.Tenant.ID, id))
	if err != nil {
		return nil, nil, err
	}
	if err := s.recordAccess(ctx, nil, req.Tenant, nil, byApp(req.Application, "document", id, "read", "document content read")); err != nil {
		return nil, nil, err
	}
	return rec.view(), &documentReader{s: s, ctx: ctx, tenantID: req.Tenant.ID, rec: rec}, nil
}

// documentReader streams a document's content a batch of chunks at a
// time.
type documentReader struct {
	s        *Store
	ctx      context.Context
	tenantID string
	rec      *documentRecord
	next     int      // the next chunk to load
	batch    [][]byte // plaintext chunks loaded, not yet read
	read     int64
}

func (d *documentReader) Read(p []byte) (int, error) {
	for len(d.batch) == 0 {
		if d.next >= d.rec.Chunks {
			if d.read != d.rec.Size {
				return 0, fmt.Errorf("document %s: content length: %w", d.rec.ID, ErrIntegrity)
			}
			return 0, io.EOF
		}
		if err := d.load(); err != nil {
			return 0, err
		}
	}
	n := copy(p, d.batch[0])
	d.read += int64(n)
	if n == len(d.batch[0]) {
		clear(d.batch[0])
		d.batch = d.batch[1:]
	} else {
		d.batch[0] = d.batch[0][n:]
	}
	return n, nil
}

// load opens the next batch of chunks.
func (d *documentReader) load() error {
	last := min(d.next+documentBatchChunks, d.rec.Chunks)
	var out [][]byte
	err := d.s.kv.View(d.ctx, func(r Reader) error {
		out = out[:0]
		tk, err := d.s.tenantKeysFor(r, d.tenantID)
		if err != nil {
			return err
		}
		for i := d.next; i < last; i++ {
			sealed, err := r.Get(documentChunkKey(d.tenantID, d.rec.ID, i))
			if errors.Is(err, ErrNotFound) {
				return fmt.Errorf("document %s chunk %d: %w", d.rec.ID, i, ErrIntegrity)
			} else if err != nil {
				return err
			}
			plain, err := tk.openChunk(d.tenantID, chunkID(d.rec.ID, i), sealed)
			if err != nil {
				return err
			}
			out = append(out, plain)
		}
		return nil
	})
	if err != nil {
		return err
	}
	d.batch, d.next = out, last
	return nil
}

// openChunk opens one sealed chunk of content.
func (tk *tenantKeys) openChunk(tenantID, id string, sealed []byte) ([]byte, error) {
	plain, err := tk.Open(sealed, recordAAD("docchunk", tenantID, id))
	if err != nil {
		return nil, fmt.Errorf("document chunk %s: %w", id, err)
	}
	return plain, nil
}

package vaultstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testclock"
)

// documentWorld is a store with a tenant and a caller for documents.
type documentWorld struct {
	s      *Store
	clock  *testclock.Clock
	tenant *CreatedTenant
	req    TokenRequest
}

func newDocumentWorld(t *testing.T) *documentWorld {
	t.Helper()
	s, clock := newTestStore(t)
	tn := mustCreateTenant(t, s, "docs", TenantTest)
	app, _ := mustCreateApp(t, s, tn.Tenant.ID, ApplicationInput{Name: "files", Type: AppPrivate,
		Permissions: []string{"documents:create", "documents:read", "documents:reveal", "documents:delete"}})
	return &documentWorld{s: s, clock: clock, tenant: tn, req: TokenRequest{Tenant: tn.Tenant, Application: app}}
}

// documentContent is n bytes that differ from chunk to chunk.
func documentContent(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ byte(i/DocumentChunkSize) ^ seed
	}
	return b
}

// upload writes content in writes of step bytes and commits it.
func (w *documentWorld) upload(t *testing.T, content []byte, step int, in DocumentInput) *Document {
	t.Helper()
	u, err := w.s.BeginDocument(context.Background(), w.req, DefaultDocumentMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	for rest := content; len(rest) > 0; {
		n := min(step, len(rest))
		if _, err := u.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	doc, err := u.Commit(in)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func (w *documentWorld) read(t *testing.T, s *Store, id string) ([]byte, error) {
	t.Helper()
	_, r, err := s.OpenDocument(context.Background(), w.req, id)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

func (w *documentWorld) chunkKeys(t *testing.T, id string) []string {
	t.Helper()
	return kvKeys(t, w.s, string(documentChunksPrefix(w.tenant.Tenant.ID, id)))
}

func (w *documentWorld) markers(t *testing.T) []string {
	t.Helper()
	return kvKeys(t, w.s, string(documentUploadPrefix()))
}

// TestDocumentRoundTrip: content of every size around the chunk and batch
// boundaries comes back byte for byte, in as many chunks as it needs, with
// its metadata and content type; the upload and the read are audited.
func TestDocumentRoundTrip(t *testing.T) {
	w := newDocumentWorld(t)
	ctx := context.Background()
	sizes := []int{0, 1, DocumentChunkSize - 1, DocumentChunkSize, DocumentChunkSize + 1,
		documentBatchChunks * DocumentChunkSize, 2*documentBatchChunks*DocumentChunkSize + 5}
	for i, size := range sizes {
		content := documentContent(size, byte(i))
		doc := w.upload(t, content, 10_000+i, DocumentInput{Metadata: map[string]string{"n": "v"}, ContentType: "application/pdf"})
		if doc.Size != int64(size) || doc.ContentType != "application/pdf" || doc.Metadata["n"] != "v" || doc.TenantID != w.tenant.Tenant.ID || doc.CreatedBy != w.req.Application.ID {
			t.Errorf("size %d: document %+v", size, doc)
		}
		got, err := w.read(t, w.s, doc.ID)
		if err != nil || !bytes.Equal(got, content) {
			t.Errorf("size %d: read %d bytes, %v", size, len(got), err)
		}
		if n, want := len(w.chunkKeys(t, doc.ID)), (size+DocumentChunkSize-1)/DocumentChunkSize; n != want {
			t.Errorf("size %d: %d chunks stored, want %d", size, n, want)
		}
		meta, err := w.s.GetDocument(ctx, w.req, doc.ID)
		if err != nil || meta.ContentType != "application/pdf" || meta.Size != int64(size) {
			t.Errorf("size %d: GetDocument %+v, %v", size, meta, err)
		}
		logs, _, err := w.s.ListAudit(ctx, w.tenant.Tenant.ID, AuditFilter{EntityType: "document", EntityID: doc.ID}, "", 10)
		ops := map[string]bool{}
		for _, l := range logs {
			ops[l.Operation] = true
		}
		if err != nil || !ops["create"] || !ops["read"] {
			t.Errorf("size %d: audit operations %v, %v", size, ops, err)
		}
	}
	if m := w.markers(t); len(m) != 0 {
		t.Errorf("upload markers left after commits: %v", m)
	}
	// no content type: the generic one
	doc := w.upload(t, []byte("x"), 1, DocumentInput{})
	if doc.ContentType != "application/octet-stream" {
		t.Errorf("default content type %q", doc.ContentType)
	}
}

// TestDocumentRefusals: a document over the limit, bad metadata or a bad
// content type is refused, and the refused upload leaves nothing behind.
func TestDocumentRefusals(t *testing.T) {
	w := newDocumentWorld(t)
	ctx := context.Background()
	u, err := w.s.BeginDocument(ctx, w.req, 3*DocumentChunkSize)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write(documentContent(3*DocumentChunkSize, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write([]byte{1}); !errors.Is(err, ErrDocumentTooLarge) {
		t.Errorf("one byte over the limit: %v", err)
	}
	if _, err := u.Commit(DocumentInput{}); !errors.Is(err, ErrDocumentTooLarge) {
		t.Errorf("commit after the limit: %v", err)
	}
	u.Abort()
	if k := w.chunkKeys(t, u.ID()); len(k) != 0 {
		t.Errorf("an aborted upload left %d chunks", len(k))
	}
	if m := w.markers(t); len(m) != 0 {
		t.Errorf("an aborted upload left its marker: %v", m)
	}
	long := string(make([]byte, maxDocumentMetadataBytes+1))
	for _, tc := range []struct {
		name  string
		in    DocumentInput
		field string
	}{
		{"metadata value too long", DocumentInput{Metadata: map[string]string{"k": long}}, "metadata"},
		{"empty metadata key", DocumentInput{Metadata: map[string]string{"": "v"}}, "metadata"},
		{"content type not a media type", DocumentInput{ContentType: "not a type/"}, "document"},
	} {
		u, err := w.s.BeginDocument(ctx, w.req, DefaultDocumentMaxBytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := u.Write([]byte("content")); err != nil {
			t.Fatal(err)
		}
		_, err = u.Commit(tc.in)
		if f := validationFields(t, err); len(f) != 1 || f[0] != tc.field {
			t.Errorf("%s: %v", tc.name, err)
		}
		u.Abort()
		if k := w.chunkKeys(t, u.ID()); len(k) != 0 {
			t.Errorf("%s: the refused upload left %d chunks", tc.name, len(k))
		}
	}
}

// TestDocumentDelete: a delete removes the record and every chunk, is
// audited, and another tenant can neither read nor delete the document.
func TestDocumentDelete(t *testing.T) {
	w := newDocumentWorld(t)
	ctx := context.Background()
	doc := w.upload(t, documentContent(5*DocumentChunkSize, 3), 1<<20, DocumentInput{})
	other := mustCreateTenant(t, w.s, "other", TenantTest)
	app, _ := mustCreateApp(t, w.s, other.Tenant.ID, ApplicationInput{Name: "o", Type: AppPrivate, Permissions: []string{"documents:read"}})
	otherReq := TokenRequest{Tenant: other.Tenant, Application: app}
	if _, err := w.s.GetDocument(ctx, otherReq, doc.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("another tenant reads the document: %v", err)
	}
	if _, _, err := w.s.OpenDocument(ctx, otherReq, doc.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("another tenant opens the document: %v", err)
	}
	if err := w.s.DeleteDocument(ctx, otherReq, doc.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("another tenant deletes the document: %v", err)
	}
	if err := w.s.DeleteDocument(ctx, w.req, doc.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.s.GetDocument(ctx, w.req, doc.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("a deleted document reads: %v", err)
	}
	if k := w.chunkKeys(t, doc.ID); len(k) != 0 {
		t.Errorf("a deleted document left %d chunks", len(k))
	}
	if m := w.markers(t); len(m) != 0 {
		t.Errorf("a delete left its marker: %v", m)
	}
	if err := w.s.DeleteDocument(ctx, w.req, doc.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting twice: %v", err)
	}
	logs, _, _ := w.s.ListAudit(ctx, w.tenant.Tenant.ID, AuditFilter{EntityType: "document", EntityID: doc.ID, Operation: "delete"}, "", 10)
	if len(logs) != 1 {
		t.Errorf("%d delete records", len(logs))
	}
}

// TestDocumentTampering: a chunk moved from one document to another, or
// swapped within one, or removed, fails the read.
func TestDocumentTampering(t *testing.T) {
	w := newDocumentWorld(t)
	ctx := context.Background()
	a := w.upload(t, documentContent(2*DocumentChunkSize, 1), 1<<20, DocumentInput{})
	b := w.upload(t, documentContent(2*DocumentChunkSize, 2), 1<<20, DocumentInput{})
	tid := w.tenant.Tenant.ID
	move := func(from, to []byte) {
		t.Helper()
		err := w.s.kv.Update(ctx, func(wr Writer) error {
			v, err := wr.Get(from)
			if err != nil {
				return err
			}
			return wr.Put(to, append([]byte(nil), v...), 0)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	move(documentChunkKey(tid, b.ID, 0), documentChunkKey(tid, a.ID, 0))
	if _, err := w.read(t, w.s, a.ID); !errors.Is(err, ErrIntegrity) {
		t.Errorf("a chunk of another document: %v", err)
	}
	move(documentChunkKey(tid, b.ID, 1), documentChunkKey(tid, b.ID, 0))
	if _, err := w.read(t, w.s, b.ID); !errors.Is(err, ErrIntegrity) {
		t.Errorf("a chunk moved within its document: %v", err)
	}
	c := w.upload(t, documentContent(2*DocumentChunkSize, 3), 1<<20, DocumentInput{})
	if err := w.s.kv.Update(ctx, func(wr Writer) error { return wr.Delete(documentChunkKey(tid, c.ID, 1)) }); err != nil {
		t.Fatal(err)
	}
	if _, err := w.read(t, w.s, c.ID); !errors.Is(err, ErrIntegrity) {
		t.Errorf("a missing chunk: %v", err)
	}
}

// TestDocumentAbandonedUploadSwept: an upload neither committed nor
// aborted (its process died) is removed by the sweep a day later, not
// before, and cannot be committed after that.
func TestDocumentAbandonedUploadSwept(t *testing.T) {
	w := newDocumentWorld(t)
	ctx := context.Background()
	u, err := w.s.BeginDocument(ctx, w.req, DefaultDocumentMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write(documentContent(3*documentBatchChunks*DocumentChunkSize, 4)); err != nil {
		t.Fatal(err)
	}
	stored := len(w.chunkKeys(t, u.ID()))
	if stored == 0 {
		t.Fatal("the upload wrote no chunk before its commit; the test would check nothing")
	}
	if err := w.s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(w.chunkKeys(t, u.ID())); n != stored {
		t.Errorf("a fresh upload lost chunks to the sweep: %d of %d left", n, stored)
	}
	w.clock.Advance(documentUploadAbandoned + time.Minute)
	if err := w.s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(w.chunkKeys(t, u.ID())); n != 0 {
		t.Errorf("the sweep left %d chunks of an abandoned upload", n)
	}
	if m := w.markers(t); len(m) != 0 {
		t.Errorf("the sweep left the marker: %v", m)
	}
	if _, err := u.Commit(DocumentInput{}); err == nil {
		t.Error("an upload swept away committed")
	}
}

// TestDocumentDataKeyRotation: a data key rotation re-seals every chunk
// and record of a document, which reads back the same.
func TestDocumentDataKeyRotation(t *testing.T) {
	w := newDocumentWorld(t)
	ctx := context.Background()
	content := documentContent(3*documentBatchChunks*DocumentChunkSize+100, 5)
	doc := w.upload(t, content, 1<<20, DocumentInput{ContentType: "image/png"})
	if _, err := w.s.CreateClientKey(ctx, w.tenant.Tenant.ID, "actor", ClientKeyInput{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.s.RotateDataKey(ctx, w.tenant.Tenant.ID); err != nil {
		t.Fatal(err)
	}
	st := waitReseal(t, w.s, w.tenant.Tenant.ID)
	if st.Reseal == nil || st.Reseal.Error != "" {
		t.Fatalf("re-seal: %+v", st.Reseal)
	}
	assertAllSealedUnder(t, w.s, w.tenant.Tenant.ID, 2)
	got, err := w.read(t, w.s, doc.ID)
	if err != nil || !bytes.Equal(got, content) {
		t.Errorf("after the rotation: %d bytes, %v", len(got), err)
	}
}

// TestDocumentBackupRestore: documents and client keys are in a backup,
// and read back from the restored store.
func TestDocumentBackupRestore(t *testing.T) {
	w := newDocumentWorld(t)
	ctx := context.Background()
	content := documentContent(2*documentBatchChunks*DocumentChunkSize+7, 6)
	doc := w.upload(t, content, 1<<20, DocumentInput{Metadata: map[string]string{"kind": "id-scan"}, ContentType: "image/jpeg"})
	key, err := w.s.CreateClientKey(ctx, w.tenant.Tenant.ID, "actor", ClientKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	data := backupBytes(t, w.s)
	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := restoreBytes(t, data, dir, testMasterKey); err != nil {
		t.Fatal(err)
	}
	restored := openTestStore(t, Options{Dir: dir, Now: w.clock.Now})
	meta, err := restored.GetDocument(ctx, w.req, doc.ID)
	if err != nil || meta.Metadata["kind"] != "id-scan" || meta.ContentType != "image/jpeg" {
		t.Fatalf("restored document: %+v, %v", meta, err)
	}
	got, err := w.read(t, restored, doc.ID)
	if err != nil || !bytes.Equal(got, content) {
		t.Errorf("restored content: %d bytes, %v", len(got), err)
	}
	if _, err := restored.GetClientKey(ctx, w.tenant.Tenant.ID, key.ID); err != nil {
		t.Errorf("restored client key: %v", err)
	}
}

// patternReader yields n bytes of documentContent's pattern without holding
// them, so a large upload's source takes no memory.
type patternReader struct{ off, n int }

func (p *patternReader) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	k := min(len(b), p.n-p.off)
	for i := 0; i < k; i++ {
		j := p.off + i
		b[i] = byte(j*7) ^ byte(j/DocumentChunkSize)
	}
	p.off += k
	return k, nil
}

// TestDocumentStreamsInBoundedMemory: a 24 MB document goes in and comes
// out with the upload and the reader never holding more than a batch of
// chunks, and the live heap never growing by anything near the
// document's size.
func TestDocumentStreamsInBoundedMemory(t *testing.T) {
	w := newDocumentWorld(t)
	ctx := context.Background()
	const size = 24 << 20
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	base := heap()
	var peak uint64
	u, err := w.s.BeginDocument(ctx, w.req, DefaultDocumentMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	src, buf := &patternReader{n: size}, make([]byte, 32<<10)
	for written := 0; ; {
		n, err := src.Read(buf)
		if err == io.EOF {
			break
		}
		if _, err := u.Write(buf[:n]); err != nil {
			t.Fatal(err)
		}
		if len(u.pending) >= documentBatchChunks || cap(u.buf) != DocumentChunkSize {
			t.Fatalf("the upload holds %d chunks and a buffer of %d", len(u.pending), cap(u.buf))
		}
		if written += n; written%(4<<20) == 0 {
			peak = max(peak, heap())
		}
	}
	doc, err := u.Commit(DocumentInput{})
	if err != nil {
		t.Fatal(err)
	}
	_, r, err := w.s.OpenDocument(ctx, w.req, doc.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, want := sha256.New(), sha256.New()
	if _, err := io.Copy(want, &patternReader{n: size}); err != nil {
		t.Fatal(err)
	}
	dr := r.(*documentReader)
	for read := 0; ; {
		n, err := dr.Read(buf)
		got.Write(buf[:n])
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if len(dr.batch) > documentBatchChunks {
			t.Fatalf("the reader holds %d chunks", len(dr.batch))
		}
		if read += n; read%(4<<20) == 0 {
			peak = max(peak, heap())
		}
	}
	if !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Fatal("the content read back differs")
	}
	growth := int64(peak) - int64(base)
	t.Logf("live heap: %d MiB at the start, %+d MiB at the peak, for a %d MiB document", base>>20, growth>>20, size>>20)
	if growth > size/2 {
		t.Errorf("the live heap grew by %d MiB for a %d MiB document", growth>>20, size>>20)
	}
}

// TestDocumentUploadAcrossRotation: a data key rotation that completes,
// destroying the old key version, while an upload is under way leaves no
// chunk sealed under the destroyed version: the document reads back.
func TestDocumentUploadAcrossRotation(t *testing.T) {
	w := newDocumentWorld(t)
	ctx := context.Background()
	content := documentContent(5*documentBatchChunks*DocumentChunkSize/2, 7) // two batches written, half a batch held
	u, err := w.s.BeginDocument(ctx, w.req, DefaultDocumentMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	half := len(content) / 2
	if _, err := u.Write(content[:half]); err != nil {
		t.Fatal(err)
	}
	if len(u.pending) == 0 || u.chunks == 0 {
		t.Fatalf("the upload holds %d chunks and wrote %d: the test needs both", len(u.pending), u.chunks)
	}
	if _, err := w.s.RotateDataKey(ctx, w.tenant.Tenant.ID); err != nil {
		t.Fatal(err)
	}
	if st := waitReseal(t, w.s, w.tenant.Tenant.ID); len(st.Versions) != 1 || st.Versions[0] != 2 {
		t.Fatalf("versions after the rotation: %v", st.Versions)
	}
	if _, err := u.Write(content[half:]); err != nil {
		t.Fatal(err)
	}
	doc, err := u.Commit(DocumentInput{})
	if err != nil {
		t.Fatal(err)
	}
	assertAllSealedUnder(t, w.s, w.tenant.Tenant.ID, 2)
	got, err := w.read(t, w.s, doc.ID)
	if err != nil || !bytes.Equal(got, content) {
		t.Errorf("the document uploaded across a rotation: %d bytes, %v", len(got), err)
	}
}

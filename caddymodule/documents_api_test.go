package caddymodule

import (
	"bytes"
	"crypto/rand"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// multipartDoc builds an upload body as the official Node SDK does: the
// document part first, then the request part (when request is not "").
func multipartDoc(t *testing.T, content []byte, contentType, request string) (string, []byte) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="document"; filename="scan.pdf"`)
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	pw, err := mw.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	pw.Write(content)
	if request != "" {
		if err := mw.WriteField("request", request); err != nil {
			t.Fatal(err)
		}
	}
	mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

// download reads a document's content: an answer that is not JSON.
func download(t *testing.T, e *tokenEnv, role, id string) tvResp {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/documents/"+id+"/data", nil)
	req.Header.Set("SVC-API-KEY", e.keys[role])
	w := httptest.NewRecorder()
	if err := e.h.ServeHTTP(w, req, nil); err != nil {
		t.Fatal(err)
	}
	return tvResp{status: w.Code, header: w.Header(), raw: w.Body.Bytes()}
}

// docApp creates a private application with the given document
// permissions.
func docApp(t *testing.T, e *tokenEnv, name string, perms ...string) string {
	t.Helper()
	r := e.do(tvRoleMgmt, http.MethodPost, "/applications", map[string]any{"name": name, "type": "private", "permissions": perms})
	tvWantStatus(t, r, http.StatusCreated, "create "+name)
	e.keys[name] = testjson.Str(r.body, "key")
	return name
}

// TestDocumentsAPI: upload, metadata, download and delete through the
// API, with the permissions and refusals a caller sees.
func TestDocumentsAPI(t *testing.T) {
	e := newTokenEnv(t, false, false)
	all := docApp(t, e, "files", "documents:create", "documents:read", "documents:reveal", "documents:delete")
	readOnly := docApp(t, e, "viewer", "documents:read")
	content := make([]byte, 300<<10)
	rand.Read(content)
	ct, body := multipartDoc(t, content, "application/pdf", `{"metadata":{"kind":"id-scan"}}`)
	r := e.do(all, http.MethodPost, "/documents", body, "Content-Type", ct)
	tvWantStatus(t, r, http.StatusCreated, "POST /documents")
	id := testjson.Str(r.body, "id")
	if id == "" || testjson.Str(r.body, "content_type") != "application/pdf" || testjson.Str(r.body, "metadata", "kind") != "id-scan" ||
		testjson.Str(r.body, "tenant_id") != e.tenantID || testjson.Str(r.body, "created_by") == "" || testjson.Str(r.body, "created_at") == "" {
		t.Errorf("upload answer: %s", r.raw)
	}
	r = e.do(readOnly, http.MethodGet, "/documents/"+id, nil)
	tvWantStatus(t, r, http.StatusOK, "GET /documents/{id}")
	if testjson.Str(r.body, "id") != id || testjson.Str(r.body, "metadata", "kind") != "id-scan" {
		t.Errorf("metadata: %s", r.raw)
	}
	r = download(t, e, all, id)
	tvWantStatus(t, r, http.StatusOK, "GET /documents/{id}/data")
	if !bytes.Equal(r.raw, content) {
		t.Errorf("downloaded %d bytes, differing from the %d uploaded", len(r.raw), len(content))
	}
	for h, want := range map[string]string{"Content-Type": "application/pdf", "Content-Disposition": "attachment", "X-Content-Type-Options": "nosniff", "Content-Length": "307200"} {
		if got := r.header.Get(h); got != want {
			t.Errorf("download header %s: %q, want %q", h, got, want)
		}
	}
	tvWantProblem(t, e.do(readOnly, http.MethodGet, "/documents/"+id+"/data", nil), http.StatusForbidden, "download without documents:reveal")
	tvWantProblem(t, e.do(readOnly, http.MethodPost, "/documents", body, "Content-Type", ct), http.StatusForbidden, "upload without documents:create")
	tvWantProblem(t, e.do(readOnly, http.MethodDelete, "/documents/"+id, nil), http.StatusForbidden, "delete without documents:delete")
	tvWantProblem(t, e.do(tvRoleReveal, http.MethodGet, "/documents/"+id, nil), http.StatusForbidden, "a token reader reads a document")
	otherRole := "other-files"
	r = e.do("other-management", http.MethodPost, "/applications", map[string]any{"name": otherRole, "type": "private", "permissions": []string{"documents:read", "documents:reveal", "documents:delete"}})
	tvWantStatus(t, r, http.StatusCreated, "other tenant's application")
	e.keys[otherRole] = testjson.Str(r.body, "key")
	tvWantProblem(t, e.do(otherRole, http.MethodGet, "/documents/"+id, nil), http.StatusNotFound, "another tenant's metadata")
	tvWantProblem(t, e.do(otherRole, http.MethodGet, "/documents/"+id+"/data", nil), http.StatusNotFound, "another tenant's content")
	tvWantProblem(t, e.do(otherRole, http.MethodDelete, "/documents/"+id, nil), http.StatusNotFound, "another tenant's delete")

	tvWantStatus(t, e.do(all, http.MethodDelete, "/documents/"+id, nil), http.StatusNoContent, "DELETE /documents/{id}")
	tvWantProblem(t, e.do(all, http.MethodGet, "/documents/"+id, nil), http.StatusNotFound, "a deleted document")
	tvWantProblem(t, e.do(all, http.MethodGet, "/documents/"+id+"/data", nil), http.StatusNotFound, "a deleted document's content")

	// the request part first, no metadata, no content type
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	mw.WriteField("request", `{}`)
	fw, _ := mw.CreateFormFile("document", "x.bin")
	fw.Write([]byte("hello"))
	mw.Close()
	r = e.do(all, http.MethodPost, "/documents", b.Bytes(), "Content-Type", mw.FormDataContentType())
	tvWantStatus(t, r, http.StatusCreated, "request part first")
	if testjson.Str(r.body, "content_type") != "application/octet-stream" {
		t.Errorf("content type of a file part without one: %s", r.raw)
	}
}

// TestDocumentsAPIRefusals: what an upload refuses, each naming the part.
func TestDocumentsAPIRefusals(t *testing.T) {
	e := newTokenEnv(t, false, false)
	all := docApp(t, e, "files", "documents:create", "documents:read", "documents:reveal", "documents:delete")
	e.h.app.DocumentMaxSize = 100 << 10
	ct, body := multipartDoc(t, make([]byte, 100<<10), "text/plain", "")
	tvWantStatus(t, e.do(all, http.MethodPost, "/documents", body, "Content-Type", ct), http.StatusCreated, "a document at the limit")
	ct, body = multipartDoc(t, make([]byte, 100<<10+1), "text/plain", "")
	tvWantProblem(t, e.do(all, http.MethodPost, "/documents", body, "Content-Type", ct), http.StatusRequestEntityTooLarge, "one byte over the limit")
	// far over: the body's own limit
	ct, body = multipartDoc(t, make([]byte, 3<<20), "text/plain", "")
	tvWantProblem(t, e.do(all, http.MethodPost, "/documents", body, "Content-Type", ct), http.StatusRequestEntityTooLarge, "far over the limit")
	tvWantProblem(t, e.do(all, http.MethodPost, "/documents", `{"document":"x"}`), http.StatusUnsupportedMediaType, "a JSON body")
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	mw.WriteField("request", `{"metadata":{"a":"b"}}`)
	mw.Close()
	tvWantProblem(t, e.do(all, http.MethodPost, "/documents", b.Bytes(), "Content-Type", mw.FormDataContentType()), http.StatusBadRequest, "no document part", "document")
	ct, body = multipartDoc(t, []byte("x"), "text/plain", `{"metadata":"not an object"}`)
	tvWantProblem(t, e.do(all, http.MethodPost, "/documents", body, "Content-Type", ct), http.StatusBadRequest, "bad request part", "request")
	ct, body = multipartDoc(t, []byte("x"), "text/plain", `{"metadata":{"a":"1","a":"2"}}`)
	tvWantProblem(t, e.do(all, http.MethodPost, "/documents", body, "Content-Type", ct), http.StatusBadRequest, "a duplicate member in the request part", "request")
	ct, body = multipartDoc(t, []byte("x"), "not a media type", "")
	tvWantProblem(t, e.do(all, http.MethodPost, "/documents", body, "Content-Type", ct), http.StatusBadRequest, "bad content type", "document")
	b.Reset()
	mw = multipart.NewWriter(&b)
	mw.WriteField("other", "x")
	mw.Close()
	tvWantProblem(t, e.do(all, http.MethodPost, "/documents", b.Bytes(), "Content-Type", mw.FormDataContentType()), http.StatusBadRequest, "unknown part", "other")
	ct, body = multipartDoc(t, []byte("hello"), "text/plain", "")
	truncated := body[:len(body)-20]
	tvWantProblem(t, e.do(all, http.MethodPost, "/documents", truncated, "Content-Type", ct), http.StatusBadRequest, "a body that breaks off", "document")
	r := e.do(tvRoleMgmt, http.MethodGet, "/permissions?application_type=private", nil)
	if !strings.Contains(string(r.raw), "documents:reveal") {
		t.Errorf("GET /permissions does not list documents:reveal: %s", r.raw)
	}
}

// TestDocumentMaxSizeConfig: the limit defaults to 25 MB, takes the
// configured size, and a negative one is refused by Validate.
func TestDocumentMaxSizeConfig(t *testing.T) {
	a := &App{}
	if got := a.documentMaxBytes(); got != 25<<20 {
		t.Errorf("default limit %d, want 25 MiB", got)
	}
	a.DocumentMaxSize = 10 << 20
	if got := a.documentMaxBytes(); got != 10<<20 {
		t.Errorf("configured limit %d", got)
	}
	bad := &App{HeaderPrefix: "SVC", MasterKey: "{env.TV_KEY}", DocumentMaxSize: -1}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "document_max_size") {
		t.Errorf("a negative document_max_size: %v", err)
	}
}

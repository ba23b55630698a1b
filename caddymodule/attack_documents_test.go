package caddymodule

// Adversarial review of document uploads and downloads through the API.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testjson"
)

// attackPart is one part of a hand-made multipart body.
type attackPart struct {
	name, filename, contentType string
	content                     []byte
}

// attackMultipart builds a multipart body of parts, in order.
func attackMultipart(t *testing.T, parts ...attackPart) (string, []byte) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		cd := fmt.Sprintf(`form-data; name=%q`, p.name)
		if p.filename != "" {
			cd += fmt.Sprintf(`; filename=%q`, p.filename)
		}
		h.Set("Content-Disposition", cd)
		if p.contentType != "" {
			h.Set("Content-Type", p.contentType)
		}
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(p.content)
	}
	mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

// TestAttackDocumentUploads: odd uploads are refused with a 4xx problem
// naming the part, and a refused upload stores nothing (no create in the
// audit log); the odd but valid ones round-trip.
func TestAttackDocumentUploads(t *testing.T) {
	e := newTokenEnv(t, false, true)
	files := docApp(t, e, "files", "documents:create", "documents:read", "documents:reveal", "documents:delete")
	e.h.app.DocumentMaxSize = 64 << 10
	doc := func(content []byte) attackPart {
		return attackPart{name: "document", filename: "scan.pdf", contentType: "application/pdf", content: content}
	}
	req := func(s string) attackPart { return attackPart{name: "request", content: []byte(s)} }
	meta := func(n int) string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("k%d", i)] = "v"
		}
		b, err := json.Marshal(map[string]any{"metadata": m})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	refusals := []struct {
		name   string
		parts  []attackPart
		status int
		field  string
	}{
		{"two documents", []attackPart{doc([]byte("a")), doc([]byte("b"))}, http.StatusBadRequest, "document"},
		{"two requests", []attackPart{req(`{}`), req(`{}`), doc([]byte("a"))}, http.StatusBadRequest, "request"},
		{"no document", []attackPart{req(`{"metadata":{"a":"b"}}`)}, http.StatusBadRequest, "document"},
		{"nothing", nil, http.StatusBadRequest, "document"},
		{"unknown part after the document", []attackPart{doc([]byte("a")), {name: "extra", content: []byte("x")}}, http.StatusBadRequest, "extra"},
		{"request not JSON", []attackPart{doc([]byte("a")), req(`metadata=a`)}, http.StatusBadRequest, "request"},
		{"request an array", []attackPart{doc([]byte("a")), req(`[]`)}, http.StatusBadRequest, "request"},
		{"metadata a number", []attackPart{doc([]byte("a")), req(`{"metadata":{"a":1}}`)}, http.StatusBadRequest, "request"},
		{"metadata nested", []attackPart{doc([]byte("a")), req(`{"metadata":{"a":{"b":"c"}}}`)}, http.StatusBadRequest, "request"},
		{"metadata 51 entries", []attackPart{doc([]byte("a")), req(meta(51))}, http.StatusBadRequest, "metadata"},
		{"metadata empty key", []attackPart{doc([]byte("a")), req(`{"metadata":{"":"v"}}`)}, http.StatusBadRequest, "metadata"},
		{"metadata huge value", []attackPart{doc([]byte("a")), req(`{"metadata":{"k":"` + strings.Repeat("v", 60000) + `"}}`)}, http.StatusBadRequest, "metadata"},
		{"request over 64 KiB", []attackPart{doc([]byte("a")), req(`{"metadata":{"k":"` + strings.Repeat("v", 70000) + `"}}`)}, http.StatusBadRequest, "request"},
		{"request invalid UTF-8", []attackPart{doc([]byte("a")), req("{\"metadata\":{\"k\":\"\xff\"}}")}, http.StatusBadRequest, "request"},
		{"content type not a media type", []attackPart{{name: "document", contentType: "pdf please", content: []byte("a")}}, http.StatusBadRequest, "document"},
		{"content type too long", []attackPart{{name: "document", contentType: "text/plain; x=" + strings.Repeat("a", 5000), content: []byte("a")}}, http.StatusBadRequest, "document"},
		{"one byte over", []attackPart{doc(make([]byte, 64<<10+1))}, http.StatusRequestEntityTooLarge, ""},
		{"over, then a request part", []attackPart{doc(make([]byte, 200<<10)), req(`{}`)}, http.StatusRequestEntityTooLarge, ""},
	}
	for _, tc := range refusals {
		ct, body := attackMultipart(t, tc.parts...)
		r := e.do(files, http.MethodPost, "/documents", body, "Content-Type", ct)
		if tc.field != "" {
			tvWantProblem(t, r, tc.status, tc.name, tc.field)
		} else {
			tvWantProblem(t, r, tc.status, tc.name)
		}
	}
	ct, body := attackMultipart(t, doc([]byte("x")))
	for _, tc := range []struct {
		name, contentType string
		body              []byte
		status            int
	}{
		{"no content type", "", body, http.StatusUnsupportedMediaType},
		{"multipart/mixed", strings.Replace(ct, "form-data", "mixed", 1), body, http.StatusUnsupportedMediaType},
		{"JSON", "application/json", []byte(`{"document":"eA=="}`), http.StatusUnsupportedMediaType},
		{"urlencoded", "application/x-www-form-urlencoded", []byte("document=x"), http.StatusUnsupportedMediaType},
		{"no boundary", "multipart/form-data", body, http.StatusBadRequest},
		{"another boundary", "multipart/form-data; boundary=nothere", body, http.StatusBadRequest},
		{"boundary too long", "multipart/form-data; boundary=" + strings.Repeat("b", 100), body, http.StatusBadRequest},
		{"empty body", ct, nil, http.StatusBadRequest},
		{"garbage body", ct, []byte("garbage"), http.StatusBadRequest},
		{"cut short", ct, body[:len(body)/2], http.StatusBadRequest},
	} {
		req := httptest.NewRequest(http.MethodPost, "/documents", bytes.NewReader(tc.body))
		req.Header.Set("SVC-API-KEY", e.keys[files])
		if tc.contentType != "" {
			req.Header.Set("Content-Type", tc.contentType)
		}
		w := httptest.NewRecorder()
		if err := e.h.ServeHTTP(w, req, nil); err != nil {
			t.Fatal(err)
		}
		if w.Code != tc.status || !strings.HasPrefix(w.Header().Get("Content-Type"), "application/problem+json") {
			t.Errorf("%s: %d %s, want %d problem: %s", tc.name, w.Code, w.Header().Get("Content-Type"), tc.status, w.Body)
		}
	}
	if n := attackAuditCount(t, e, "document", "create"); n != 0 {
		t.Fatalf("%d documents created by refused uploads", n)
	}

	// odd but valid: zero bytes, a traversal in the file name, unicode
	// metadata, HTML content, the request part first
	valid := []struct {
		name    string
		parts   []attackPart
		content []byte
		ctype   string
	}{
		{"zero bytes", []attackPart{doc(nil)}, nil, "application/pdf"},
		{"traversal in the file name", []attackPart{{name: "document", filename: "../../../etc/passwd", content: []byte("root")}}, []byte("root"), "application/octet-stream"},
		{"a file name with a NUL", []attackPart{{name: "document", filename: "a\x00b", content: []byte("nul")}}, []byte("nul"), "application/octet-stream"},
		{"HTML", []attackPart{{name: "document", contentType: "text/html", content: []byte("<script>alert(1)</script>")}}, []byte("<script>alert(1)</script>"), "text/html"},
		{"unicode metadata, request first", []attackPart{req(`{"metadata":{"名前":"✓ Ωmega"}}`), doc([]byte("u"))}, []byte("u"), "application/pdf"},
		{"exactly the limit", []attackPart{doc(bytes.Repeat([]byte{7}, 64<<10))}, bytes.Repeat([]byte{7}, 64<<10), "application/pdf"},
	}
	for _, tc := range valid {
		ct, body := attackMultipart(t, tc.parts...)
		r := e.do(files, http.MethodPost, "/documents", body, "Content-Type", ct)
		tvWantStatus(t, r, http.StatusCreated, tc.name)
		if strings.Contains(string(r.raw), "passwd") {
			t.Errorf("%s: the answer shows the file name: %s", tc.name, r.raw)
		}
		id := testjson.Str(r.body, "id")
		d := download(t, e, files, id)
		tvWantStatus(t, d, http.StatusOK, tc.name+" download")
		if !bytes.Equal(d.raw, tc.content) || d.header.Get("Content-Type") != tc.ctype || d.header.Get("Content-Disposition") != "attachment" ||
			d.header.Get("X-Content-Type-Options") != "nosniff" || d.header.Get("Content-Length") != fmt.Sprint(len(tc.content)) {
			t.Errorf("%s: downloaded %d bytes, headers %v", tc.name, len(d.raw), d.header)
		}
	}
	if n := attackAuditCount(t, e, "document", "create"); n != len(valid) {
		t.Errorf("%d document creates in the audit log, want %d", n, len(valid))
	}
}

// TestAttackDocumentIDsAndTenants: odd ids are 404 on every route, the
// other tenant's key finds nothing, and a key without the permission gets
// 403 naming it on HEAD too.
func TestAttackDocumentIDsAndTenants(t *testing.T) {
	e := newTokenEnv(t, false, true)
	files := docApp(t, e, "files", "documents:create", "documents:read", "documents:reveal", "documents:delete")
	ct, body := attackMultipart(t, attackPart{name: "document", contentType: "text/plain", content: []byte("doc body")})
	r := e.do(files, http.MethodPost, "/documents", body, "Content-Type", ct)
	tvWantStatus(t, r, http.StatusCreated, "upload")
	id := testjson.Str(r.body, "id")
	for _, bad := range []string{"..", "%2e%2e", "x", strings.Repeat("d", 5000), "%00", strings.ToUpper(id), id + "%2F..", id + "x"} {
		for _, p := range []struct{ method, path string }{
			{http.MethodGet, "/documents/" + bad}, {http.MethodGet, "/documents/" + bad + "/data"}, {http.MethodDelete, "/documents/" + bad},
		} {
			r := e.do(files, p.method, p.path, nil)
			if r.status != http.StatusNotFound {
				t.Errorf("%s %.60s: %s", p.method, p.path, r)
			}
		}
	}
	r = e.do("other-management", http.MethodPost, "/applications", map[string]any{"name": "other-files", "type": "private",
		"permissions": []string{"documents:create", "documents:read", "documents:reveal", "documents:delete"}})
	tvWantStatus(t, r, http.StatusCreated, "other tenant's application")
	e.keys["other-files"] = testjson.Str(r.body, "key")
	for _, m := range []string{http.MethodHead, http.MethodGet} {
		req := httptest.NewRequest(m, "/documents/"+id+"/data", nil)
		req.Header.Set("SVC-API-KEY", e.keys["other-files"])
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, req, nil)
		if w.Code != http.StatusNotFound || strings.Contains(w.Body.String(), "doc body") {
			t.Errorf("%s of another tenant's document: %d %s", m, w.Code, w.Body)
		}
		reader := docApp(t, e, "reader-"+m, "documents:read")
		req = httptest.NewRequest(m, "/documents/"+id+"/data", nil)
		req.Header.Set("SVC-API-KEY", e.keys[reader])
		w = httptest.NewRecorder()
		e.h.ServeHTTP(w, req, nil)
		if w.Code != http.StatusForbidden || w.Header().Get("Content-Length") == "8" {
			t.Errorf("%s without documents:reveal: %d %v", m, w.Code, w.Header())
		}
	}
	tvWantStatus(t, e.do(files, http.MethodGet, "/documents/"+id, nil), http.StatusOK, "the document after the attempts")
}

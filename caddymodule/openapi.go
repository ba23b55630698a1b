package caddymodule

import (
	"bytes"
	_ "embed"
	"net/http"
	"strings"
	"sync"
)

// openAPIDocument describes the whole API (OpenAPI 3.1) with the default
// header prefix, SVC; a test checks the end-to-end tests' requests and
// responses against it.
//
//go:embed openapi.json
var openAPIDocument []byte

// openAPIByPrefix caches the document under each configured header
// prefix other than SVC.
var openAPIByPrefix sync.Map // prefix → []byte

// openAPIFor returns the document with the vault's header names, and the
// proxy key's query parameter, under prefix: "BT" documents BT-API-KEY
// and bt-proxy-key. The document writes every such name, and nothing
// else, as "SVC-…" or "svc-proxy-key".
func openAPIFor(prefix string) []byte {
	if prefix == "" || prefix == "SVC" {
		return openAPIDocument
	}
	if doc, ok := openAPIByPrefix.Load(prefix); ok {
		return doc.([]byte)
	}
	doc := bytes.ReplaceAll(openAPIDocument, []byte("SVC-"), []byte(prefix+"-"))
	doc = bytes.ReplaceAll(doc, []byte("svc-proxy-key"), []byte(strings.ToLower(prefix)+"-proxy-key"))
	openAPIByPrefix.Store(prefix, doc)
	return doc
}

// serveOpenAPI answers GET /openapi.json, without a key, with the header
// names under the vault app's header_prefix.
func serveOpenAPI(w http.ResponseWriter, headerPrefix string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(openAPIFor(headerPrefix))
}

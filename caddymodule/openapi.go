package caddymodule

import (
	_ "embed"
	"net/http"
)

// openAPIDocument describes the whole API (OpenAPI 3.1); a test checks
// the end-to-end tests' requests and responses against it.
//
//go:embed openapi.json
var openAPIDocument []byte

// serveOpenAPI answers GET /openapi.json, without a key.
func serveOpenAPI(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(openAPIDocument)
}

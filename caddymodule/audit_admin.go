package caddymodule

import (
	"net/http"
	"strings"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// auditKeyHandout is the answer of GET /vault/audit/key: what an operator
// needs to verify an exported audit file offline.
type auditKeyHandout struct {
	// TenantID is the tenant whose chain the key verifies.
	TenantID string `json:"tenant_id"`
	// Key is the tenant's audit chain MAC key, hex-encoded.
	Key string `json:"key"`
	// HeadSeq is the chain's last sequence number when the key was handed
	// out: an exported file that ends before it lost its end.
	HeadSeq uint64 `json:"head_seq"`
}

// handleAudit: the tenant's audit chain on the operator plane.
//
//	GET /vault/audit/verify?tenant=ID[&since=SEQ|RFC3339]  verifies the chain in the store
//	GET /vault/audit/key?tenant=ID                         hands out the key that verifies an exported file
//
// A verification that finds faults answers 200 with "ok": false: the
// request worked, the log did not.
func (a AdminAPI) handleAudit(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return methodNotAllowed(r)
	}
	store, err := a.store(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	tenant := q.Get("tenant")
	if tenant == "" {
		return adminError(errField("tenant", "tenant is required"))
	}
	switch strings.TrimPrefix(r.URL.Path, "/vault/audit/") {
	case "verify":
		since, err := vaultstore.ParseAuditSince(q.Get("since"))
		if err != nil {
			return adminError(err)
		}
		rep, err := store.VerifyAuditChain(r.Context(), tenant, since)
		if err != nil {
			return adminError(err)
		}
		return writeJSON(w, http.StatusOK, rep)
	case "key":
		key, head, err := store.AuditChainKey(r.Context(), tenant)
		if err != nil {
			return adminError(err)
		}
		store.ExportOperatorEvent("tenant", tenant, "read", "audit verification key handed out")
		return writeJSON(w, http.StatusOK, auditKeyHandout{TenantID: tenant, Key: key, HeadSeq: head})
	}
	return adminError(vaultstore.ErrNotFound)
}

package caddymodule

import "fmt"

// The values of the vault app's audit_sync option: the durability tier
// of the audit records of reads and proxied calls (see
// vaultstore.Store.SetStrictAuditSync and docs/security.md).
const (
	// AuditSyncDeferred, the default: a record is committed to the
	// storage's log before data leaves (a crash of the vault process
	// cannot lose it) and synced to disk within a few milliseconds.
	AuditSyncDeferred = "deferred"
	// AuditSyncStrict: a record is synced to disk before data leaves.
	AuditSyncStrict = "strict"
)

// validateAuditSync checks the audit_sync option.
func validateAuditSync(v string) error {
	switch v {
	case "", AuditSyncDeferred, AuditSyncStrict:
		return nil
	}
	return fmt.Errorf("audit_sync: %q is not %s or %s", v, AuditSyncDeferred, AuditSyncStrict)
}

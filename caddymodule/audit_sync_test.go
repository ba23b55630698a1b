package caddymodule

import (
	"strings"
	"testing"
)

// TestAppAuditSync: audit_sync strict reaches the store, a reload to the
// default tier (unset or "deferred") applies at once on the same store,
// and any other value is refused naming the option.
func TestAppAuditSync(t *testing.T) {
	t.Setenv("TV_TEST_KEY", testKey(1))
	storage := t.TempDir()
	first := App{Storage: storage, MasterKey: "{env.TV_TEST_KEY}", AuditSync: AuditSyncStrict}
	if err := provisionApp(t, &first); err != nil {
		t.Fatal(err)
	}
	if !first.Store().StrictAuditSync() {
		t.Fatal("audit_sync strict: the store runs the default tier")
	}
	for _, tc := range []struct {
		value  string
		strict bool
	}{{"", false}, {AuditSyncStrict, true}, {AuditSyncDeferred, false}} {
		next := App{Storage: storage, MasterKey: "{env.TV_TEST_KEY}", AuditSync: tc.value}
		if err := provisionApp(t, &next); err != nil {
			t.Fatalf("reload with audit_sync %q: %v", tc.value, err)
		}
		if next.Store() != first.Store() {
			t.Fatal("the reload opened a second store")
		}
		if got := next.Store().StrictAuditSync(); got != tc.strict {
			t.Errorf("after a reload with audit_sync %q: strict %v, want %v", tc.value, got, tc.strict)
		}
	}
	bad := App{Storage: storage, MasterKey: "{env.TV_TEST_KEY}", AuditSync: "lazy"}
	if err := provisionApp(t, &bad); err == nil || !strings.Contains(err.Error(), "audit_sync") {
		t.Errorf("audit_sync lazy: want an error naming audit_sync, got %v", err)
	}
}

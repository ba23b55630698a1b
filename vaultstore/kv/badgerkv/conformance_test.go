package badgerkv

import (
	"testing"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
	"github.com/tokenvault/tokenvault/vaultstore/kv/kvtest"
)

// TestConformance runs the kv suite every engine passes, with and
// without group commit.
func TestConformance(t *testing.T) {
	for _, syncWrites := range []bool{false, true} {
		name := "async"
		if syncWrites {
			name = "sync"
		}
		t.Run(name, func(t *testing.T) {
			kvtest.Run(t, func(t *testing.T) kv.KV {
				s, err := Open(Options{Dir: t.TempDir(), SyncWrites: syncWrites})
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				return s
			})
		})
	}
}

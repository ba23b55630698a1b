package vaultstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tokenvault/tokenvault/internal/testfs"
)

// A new store on a disk with no room left is refused as a full disk
// (ErrNoSpace, which the HTTP edge maps to 507 and Caddy logs once),
// whichever of the store's files could not be written first, and leaves
// no meta behind that would make the directory look like a store.
func TestOpenNewStoreOnFullDiskIsNoSpace(t *testing.T) {
	badgerOnly(t)
	fs := testfs.MountTmpfs(t, 8<<20)
	dir := filepath.Join(fs, "store")
	testfs.FillTo(t, fs, "filler", 0)
	_, err := Open(Options{Dir: dir, MasterKey: testMasterKey})
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Open on a full disk: %v, want ErrNoSpace", err)
	}
	if _, err := os.Stat(filepath.Join(dir, metaFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused open left %s: %v", metaFileName, err)
	}
}

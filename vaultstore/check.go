package vaultstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// CheckMasterKey reports, reading two small files and writing nothing,
// whether Open would accept the master key (and previous keys, to finish
// an interrupted rotation) for the store in dir: ErrWrongMasterKey for a
// store sealed under another key, an error for a store of a newer format
// or a database without its meta file, nil for a matching store and for
// no store at all (dir missing or empty), which Open would create. It
// does not take the directory's lock, so it answers while another
// process holds the store open; it is what `caddy validate` checks.
func CheckMasterKey(dir string, key []byte, previous ...[]byte) error {
	if len(key) != MasterKeySize {
		return fmt.Errorf("master key must be %d bytes, got %d", MasterKeySize, len(key))
	}
	masters, err := newMasterKeys(key, previous...)
	if err != nil {
		return err
	}
	m, err := readMeta(dir)
	if errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err == nil {
			return fmt.Errorf("%s holds a database without %s; refusing to guess its master key", dir, metaFileName)
		}
		return nil
	}
	if err != nil {
		return err
	}
	return checkMeta(m, masters)
}

// DirHoldsStore reports whether dir holds a store: its meta file, or a
// database without one.
func DirHoldsStore(dir string) bool {
	for _, name := range []string{metaFileName, "MANIFEST"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

package vaultstore

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// FormatVersion is the store layout this build reads and writes.
const FormatVersion = 1

// metaFileName names the small file beside Badger's files that records the
// store's format and a check value of its master key. It is read before
// Badger opens, so a wrong key is refused without touching any file.
const metaFileName = "tokenvault.json"

// ErrWrongMasterKey reports a master key that is not the one the store was
// created with.
var ErrWrongMasterKey = errors.New("master key does not match this store")

type storeMeta struct {
	Format    int       `json:"format"`
	KeyCheck  []byte    `json:"key_check"`
	CreatedAt time.Time `json:"created_at"`
}

// checkOrCreateMeta verifies the master key against an existing store, or
// records it for a new one. It writes only when the directory holds no
// store yet.
func checkOrCreateMeta(dir string, masterKey []byte, now time.Time) error {
	path := filepath.Join(dir, metaFileName)
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		var m storeMeta
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		if m.Format > FormatVersion {
			return fmt.Errorf("store format %d is newer than this build supports (%d); use a newer tokenvault", m.Format, FormatVersion)
		}
		if subtle.ConstantTimeCompare(m.KeyCheck, keyCheck(masterKey)) != 1 {
			return ErrWrongMasterKey
		}
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err == nil {
		return fmt.Errorf("%s holds a database without %s; refusing to guess its master key", dir, metaFileName)
	}
	raw, err = json.Marshal(storeMeta{Format: FormatVersion, KeyCheck: keyCheck(masterKey), CreatedAt: now.UTC()})
	if err != nil {
		return err
	}
	return writeFileAtomic(path, raw, 0o600)
}

// writeFileAtomic writes data to a temporary file, syncs it and renames it
// into place, so a crash leaves either the old file or the new one.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

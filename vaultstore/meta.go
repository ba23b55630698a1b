package vaultstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// FormatVersion is the store layout this build reads and writes (see
// migrate.go for the history).
const FormatVersion = 3

// metaFileName names the small file beside Badger's files that records the
// store's format and a check value of its master key. It is read before
// Badger opens, so a wrong key is refused without touching any file.
const metaFileName = "tokenvault.json"

// ErrWrongMasterKey reports a master key that is not the one the store was
// created with.
var ErrWrongMasterKey = errors.New("master key does not match this store")

type storeMeta struct {
	Format   int    `json:"format"`
	KeyCheck []byte `json:"key_check"`
	// RotatingTo is the check value of the master key a rotation is
	// moving to; set while one is under way.
	RotatingTo []byte    `json:"rotating_to,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
}

// checkOrCreateMeta verifies the master keys against an existing store,
// or records the current one for a new store, and returns the store's
// meta. It writes only when the directory holds no store yet. A store in
// the middle of a master key rotation needs both keys.
func checkOrCreateMeta(dir string, masters *masterKeys, now time.Time) (*storeMeta, error) {
	path := filepath.Join(dir, metaFileName)
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		var m storeMeta
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		if m.Format > FormatVersion {
			return nil, fmt.Errorf("store format %d is newer than this build supports (%d); use a newer tokenvault", m.Format, FormatVersion)
		}
		if m.RotatingTo != nil {
			if !masters.holds(m.KeyCheck) || !masters.holds(m.RotatingTo) {
				return nil, fmt.Errorf("%w: a master key rotation was interrupted; start with the new key as master_key and the old one in previous_master_keys to finish it", ErrWrongMasterKey)
			}
			return &m, nil
		}
		if !masters.holds(m.KeyCheck) {
			return nil, ErrWrongMasterKey
		}
		return &m, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err == nil {
		return nil, fmt.Errorf("%s holds a database without %s; refusing to guess its master key", dir, metaFileName)
	}
	m := &storeMeta{Format: FormatVersion, KeyCheck: masters.currentCheck(), CreatedAt: now.UTC()}
	return m, writeMeta(dir, m)
}

// readMeta reads the meta file.
func readMeta(dir string) (*storeMeta, error) {
	raw, err := os.ReadFile(filepath.Join(dir, metaFileName))
	if err != nil {
		return nil, err
	}
	var m storeMeta
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("reading %s: %w", metaFileName, err)
	}
	return &m, nil
}

// writeMeta replaces the meta file atomically.
func writeMeta(dir string, m *storeMeta) error {
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, metaFileName), raw, 0o600)
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

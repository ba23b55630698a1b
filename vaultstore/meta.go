package vaultstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/internal/seal"
)

// FormatVersion is the store layout this build reads and writes (see
// migrate.go for the history).
const FormatVersion = 3

// metaFileName names the small file beside Badger's files that records the
// store's format and a check value of its master key. It is read before
// Badger opens, so a wrong key is refused without touching any file.
const metaFileName = "tokenvault.json"

// ErrWrongMasterKey reports a master key that is not the one the store was
// created with. It is seal's, which promoting a key not held also returns.
var ErrWrongMasterKey = seal.ErrWrongMasterKey

type storeMeta struct {
	Format   int    `json:"format"`
	KeyCheck []byte `json:"key_check"`
	// RotatingTo is the check value of the master key a rotation is
	// moving to; set while one is under way.
	RotatingTo []byte    `json:"rotating_to,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
}

// metaRecord is where a store keeps its meta: a file beside Badger's files,
// or a record in a shared engine (metaFile, metaEntry).
type metaRecord interface {
	// load returns the meta, or errNoMeta when the store has none yet.
	load(ctx context.Context) (*storeMeta, error)
	// create records m for a store that has none and holds no data, and
	// returns nil; when a meta exists it returns that instead and records
	// nothing. It refuses a store that holds data but no meta.
	create(ctx context.Context, m *storeMeta) (*storeMeta, error)
	// save replaces the meta.
	save(ctx context.Context, m *storeMeta) error
}

// errNoMeta reports a store without meta: a new one.
var errNoMeta = errors.New("the store has no meta record")

// checkOrCreateMeta verifies the master keys against an existing store,
// or records the current one for a new store, and returns the store's
// meta. It writes only when the store holds nothing yet. A store in the
// middle of a master key rotation needs both keys.
func checkOrCreateMeta(ctx context.Context, rec metaRecord, masters *masterKeys, now time.Time) (*storeMeta, error) {
	fresh := &storeMeta{Format: FormatVersion, KeyCheck: masters.currentCheck(), CreatedAt: now.UTC()}
	m, err := rec.create(ctx, fresh)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return fresh, nil
	}
	if err := checkMeta(m, masters); err != nil {
		return nil, err
	}
	return m, nil
}

// checkMeta checks an existing store's meta against the master keys: a
// store of a newer format, or one sealed under keys masters does not
// hold, is refused. A store in the middle of a master key rotation needs
// both keys.
func checkMeta(m *storeMeta, masters *masterKeys) error {
	if m.Format > FormatVersion {
		return fmt.Errorf("store format %d is newer than this build supports (%d); use a newer tokenvault", m.Format, FormatVersion)
	}
	if m.RotatingTo != nil {
		if !masters.holds(m.KeyCheck) || !masters.holds(m.RotatingTo) {
			return fmt.Errorf("%w: a master key rotation was interrupted; start with the new key as master_key and the old one in previous_master_keys to finish it", ErrWrongMasterKey)
		}
		return nil
	}
	if !masters.holds(m.KeyCheck) {
		return ErrWrongMasterKey
	}
	return nil
}

// metaFile keeps the meta in a file of the storage directory, read before
// Badger opens, so a wrong key is refused without touching any file.
type metaFile struct{ dir string }

func (f metaFile) load(context.Context) (*storeMeta, error) {
	m, err := readMeta(f.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNoMeta
	}
	return m, err
}

func (f metaFile) create(ctx context.Context, m *storeMeta) (*storeMeta, error) {
	existing, err := f.load(ctx)
	if err == nil {
		return existing, nil
	}
	if !errors.Is(err, errNoMeta) {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(f.dir, "MANIFEST")); err == nil {
		return nil, fmt.Errorf("%s holds a database without %s; refusing to guess its master key", f.dir, metaFileName)
	}
	return nil, writeMeta(f.dir, m)
}

func (f metaFile) save(_ context.Context, m *storeMeta) error { return writeMeta(f.dir, m) }

// metaKey holds the meta in a shared engine. It is outside every tenant's
// keys and left out of backups, which carry their own header.
var metaKey = []byte("tokenvault/meta")

// metaEntry keeps the meta as an entry of the engine itself: every node
// that opens the database checks its master key against it, and the first
// to start on an empty database creates it, in one transaction.
type metaEntry struct{ kv KV }

func (e metaEntry) load(ctx context.Context) (*storeMeta, error) {
	var m *storeMeta
	err := e.kv.View(ctx, func(r Reader) error {
		var err error
		m, err = readMetaEntry(r)
		return err
	})
	return m, err
}

func (e metaEntry) create(ctx context.Context, fresh *storeMeta) (*storeMeta, error) {
	var existing *storeMeta
	err := e.kv.Update(ctx, func(w Writer) error {
		var err error
		existing, err = readMetaEntry(w)
		if !errors.Is(err, errNoMeta) {
			return err
		}
		existing = nil
		holdsData := false
		if err := w.Scan(nil, nil, func(key, _ []byte) error {
			holdsData = true
			return ErrStopScan
		}); err != nil {
			return err
		}
		if holdsData {
			return errors.New("the database holds vault data without its meta record; refusing to guess its master key")
		}
		raw, err := json.Marshal(fresh)
		if err != nil {
			return err
		}
		return w.Put(metaKey, raw, 0)
	})
	if err != nil {
		return nil, err
	}
	return existing, nil
}

func (e metaEntry) save(ctx context.Context, m *storeMeta) error {
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return e.kv.Update(ctx, func(w Writer) error { return w.Put(metaKey, raw, 0) })
}

// readMetaEntry reads the meta entry in a transaction.
func readMetaEntry(r Reader) (*storeMeta, error) {
	raw, err := r.Get(metaKey)
	if errors.Is(err, ErrNotFound) {
		return nil, errNoMeta
	}
	if err != nil {
		return nil, fmt.Errorf("reading the store's meta: %w", err)
	}
	var m storeMeta
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("reading the store's meta: %w", err)
	}
	return &m, nil
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

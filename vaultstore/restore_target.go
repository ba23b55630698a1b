package vaultstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
	"github.com/tokenvault/tokenvault/vaultstore/kv/badgerkv"
	"github.com/tokenvault/tokenvault/vaultstore/kv/postgres"
)

// restoreTarget is where Restore writes: a new Badger directory or an
// empty database.
type restoreTarget interface {
	// open readies the engine the entries are loaded into.
	open() (kv.Loader, error)
	// finish records the meta that makes the target a store opened by
	// masterKey, and releases the engine.
	finish(masterKey []byte, format int) error
	// discard undoes a failed restore and releases the engine.
	discard() error
}

// restoreDir restores into a directory that was empty or missing.
type restoreDir struct {
	dir    string
	exists bool
	locked bool // another process holds the directory
	logger *zap.Logger
	engine *badgerkv.Store
}

// checkRestoreDir refuses a directory that holds anything.
func checkRestoreDir(dir string, logger *zap.Logger) (*restoreDir, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	exists, err := checkRestoreTarget(abs)
	if err != nil {
		return nil, err
	}
	return &restoreDir{dir: abs, exists: exists, logger: logger}, nil
}

func (t *restoreDir) open() (kv.Loader, error) {
	if err := os.MkdirAll(t.dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", t.dir, err)
	}
	engine, err := badgerkv.Open(badgerkv.Options{Dir: t.dir, Logger: t.logger.Named("badger")})
	if err != nil {
		t.locked = errors.Is(err, ErrLocked)
		return nil, err
	}
	t.engine = engine
	return engine, nil
}

func (t *restoreDir) finish(masterKey []byte, format int) error {
	err := t.engine.Close()
	t.engine = nil
	if err != nil {
		return err
	}
	return writeRestoredMeta(t.dir, masterKey, format)
}

func (t *restoreDir) discard() error {
	if t.engine != nil {
		t.engine.Close()
		t.engine = nil
	}
	if t.locked {
		return nil // another process's files are not ours to remove
	}
	return removeRestored(t.dir, t.exists)
}

// restoreDatabase restores into a database that holds no vault entry.
type restoreDatabase struct {
	engine *postgres.Store
}

// openRestoreDatabase connects and refuses a database that holds any
// entry of a vault.
func openRestoreDatabase(o postgres.Options, logger *zap.Logger) (*restoreDatabase, error) {
	if o.Logger == nil {
		o.Logger = logger.Named("postgres")
	}
	engine, err := postgres.Open(context.Background(), o)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	holds := false
	err = engine.View(context.Background(), func(r Reader) error {
		return r.Scan(nil, nil, func([]byte, []byte) error {
			holds = true
			return ErrStopScan
		})
	})
	if err == nil && holds {
		err = fmt.Errorf("%w: the database holds a vault's entries; restore into an empty database or table", ErrRestoreTargetNotEmpty)
	}
	if err != nil {
		engine.Close()
		return nil, err
	}
	return &restoreDatabase{engine: engine}, nil
}

func (t *restoreDatabase) open() (kv.Loader, error) { return t.engine, nil }

func (t *restoreDatabase) finish(masterKey []byte, format int) error {
	m := &storeMeta{Format: format, KeyCheck: keyCheck(masterKey), CreatedAt: time.Now().UTC()}
	err := metaEntry{t.engine}.save(context.Background(), m)
	return errors.Join(err, t.engine.Close())
}

func (t *restoreDatabase) discard() error {
	err := t.engine.DeletePrefix(context.Background(), nil)
	return errors.Join(err, t.engine.Close())
}

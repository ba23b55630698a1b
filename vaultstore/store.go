package vaultstore

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore/kv/badgerkv"
)

// Options configure Open.
type Options struct {
	// Dir is the storage directory; it is created if missing.
	Dir string
	// MasterKey wraps every tenant's data key; MasterKeySize bytes.
	MasterKey []byte
	// PreviousMasterKeys open keys a master key rotation has not yet
	// rewrapped (only needed to finish an interrupted rotation).
	PreviousMasterKeys [][]byte
	// SyncWrites makes every committed write durable against power loss
	// before it is acknowledged.
	SyncWrites bool
	// Logger receives the store's own log lines; nil discards them.
	Logger *zap.Logger
	// Now is the clock; nil means time.Now. Tests inject their own.
	Now func() time.Time
	// RecordCacheEntries bounds each of the in-memory caches: decoded
	// tenant, application, proxy and key index records, the principals API
	// keys resolved to, and the proxies proxy keys resolved to. Zero means
	// DefaultRecordCacheEntries.
	RecordCacheEntries int
	// BlockCacheBytes sizes the storage engine's cache of table blocks;
	// zero means badgerkv.DefaultBlockCacheBytes.
	BlockCacheBytes int64
	// WrapKV, when set, wraps the storage engine; tests inject faults
	// with it.
	WrapKV func(KV) KV
	// Events, when set, is told of each counted change once it has
	// committed (for metrics); it must not block.
	Events func(Event)
}

// Store is the vault's state: tenants, applications, API keys and, in
// later layers, tokens and proxies. It is safe for concurrent use.
type Store struct {
	kv          KV
	keys        *keyring
	records     *recordCache
	credentials *credentialCache
	active      activeMarks
	audits      *auditBatcher
	cvc         *cvcKeyring
	masters     *masterKeys
	rotating    sync.Mutex // one master key rotation at a time
	reseals     resealers
	folds       usageFolds
	now         func() time.Time
	logger      *zap.Logger
	dir         string
	events      func(Event)

	stop      chan struct{}
	ctx       context.Context // cancelled by Close, for background work
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open checks the master key against the directory and opens the store.
// It refuses, without changing any file, a short key, the wrong key for an
// existing store, a store of a newer format, an unwritable directory, or a
// directory locked by another process.
func Open(o Options) (*Store, error) {
	if o.Dir == "" {
		return nil, errors.New("storage directory is required")
	}
	if len(o.MasterKey) != MasterKeySize {
		return nil, fmt.Errorf("master key must be %d bytes, got %d", MasterKeySize, len(o.MasterKey))
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("storage directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating storage directory: %w", err)
	}
	if err := checkWritable(dir); err != nil {
		return nil, err
	}
	if info, err := os.Stat(dir); err == nil && info.Mode().Perm()&0o077 != 0 {
		o.Logger.Warn("the storage directory is open to other users; its values are sealed, but 0700 keeps even their sizes private",
			zap.String("dir", dir), zap.Stringer("mode", info.Mode().Perm()))
	}
	masters, err := newMasterKeys(o.MasterKey, o.PreviousMasterKeys...)
	if err != nil {
		return nil, err
	}
	meta, err := checkOrCreateMeta(dir, masters, o.Now())
	if err != nil {
		return nil, fmt.Errorf("storage directory %s: %w", dir, err)
	}
	keys := newKeyring(masters)
	if meta.Format < FormatVersion {
		copyDir, err := backupBeforeMigration(dir, meta.Format, o.Now())
		if err != nil {
			return nil, err
		}
		o.Logger.Warn("upgrading an older store; a copy of it was taken first",
			zap.Int("format", meta.Format), zap.Int("to_format", FormatVersion), zap.String("copy", copyDir))
	}
	kv, err := badgerkv.Open(badgerkv.Options{Dir: dir, SyncWrites: o.SyncWrites, BlockCacheBytes: o.BlockCacheBytes, Logger: o.Logger.Named("badger")})
	if err != nil {
		return nil, err
	}
	cvc, err := openCVCKeyring(dir, masters)
	if err != nil {
		kv.Close()
		return nil, err
	}
	if err := cvc.shred(o.Now()); err != nil { // keys whose time ran out while the vault was down
		kv.Close()
		cvc.close()
		return nil, err
	}
	var engine KV = kv
	if o.WrapKV != nil {
		engine = o.WrapKV(kv)
	}
	credentials := newCredentialCache(o.RecordCacheEntries)
	s := &Store{kv: credentialKV{engine, credentials}, keys: keys, records: newRecordCache(o.RecordCacheEntries), credentials: credentials, active: newActiveMarks(),
		masters: masters, cvc: cvc, now: o.Now, logger: o.Logger, dir: dir, events: o.Events, stop: make(chan struct{})}
	s.audits = newAuditBatcher(s.kv, s.stop, auditLinger)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if meta.RotatingTo != nil {
		if err := s.finishMasterRotation(s.ctx, meta); err != nil {
			s.cancel()
			kv.Close()
			cvc.close()
			return nil, fmt.Errorf("finishing the interrupted master key rotation: %w", err)
		}
	} else if err := masters.promote(meta.KeyCheck); err != nil {
		s.cancel()
		kv.Close()
		cvc.close()
		return nil, err
	}
	if meta.Format < FormatVersion {
		if err := s.migrate(s.ctx, meta); err != nil {
			s.cancel()
			kv.Close()
			cvc.close()
			return nil, err
		}
	}
	s.wg.Add(3)
	go s.sweepLoop()
	go func() {
		defer s.wg.Done()
		s.audits.run()
	}()
	go func() {
		defer s.wg.Done()
		if err := s.resumeTenantDeletions(context.Background()); err != nil {
			s.logger.Warn("resuming tenant deletions failed", zap.Error(err))
		}
		if err := s.resumeReseals(s.ctx); err != nil {
			s.logger.Warn("resuming data key rotations failed", zap.Error(err))
		}
	}()
	return s, nil
}

// checkWritable fails when the directory does not accept new files; it
// leaves no trace on success.
func checkWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".writable-")
	if err != nil {
		return fmt.Errorf("storage directory %s is not writable: %w", dir, errors.Unwrap(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// Dir returns the absolute storage directory.
func (s *Store) Dir() string { return s.dir }

// MasterKeyMatches reports whether key is the store's master key.
func (s *Store) MasterKeyMatches(key []byte) bool {
	return subtle.ConstantTimeCompare(keyCheck(key), s.masters.currentCheck()) == 1
}

// Close stops the background sweep and closes the store.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		// a fold starting now sees the cancel, so none adds to wg below
		s.folds.mu.Lock()
		s.folds.mu.Unlock()
		close(s.stop)
		s.wg.Wait()
		s.closeErr = errors.Join(s.kv.Close(), s.cvc.close())
	})
	return s.closeErr
}

// getSealed reads and opens a sealed record of a tenant.
func (s *Store) getSealed(r Reader, tk *tenantKeys, kind, tenantID, id string, key []byte, v any) error {
	raw, err := r.Get(key)
	if err != nil {
		return err
	}
	return tk.openRecord(kind, tenantID, id, raw, v)
}

// putSealed seals and writes a record of a tenant.
func putSealed(w Writer, tk *tenantKeys, kind, tenantID, id string, key []byte, v any) error {
	sealed, err := tk.sealRecord(kind, tenantID, id, v)
	if err != nil {
		return err
	}
	return w.Put(key, sealed, 0)
}

// tenantKeysFor loads the data keys of a tenant; a tenant without keys
// does not exist.
func (s *Store) tenantKeysFor(r Reader, tenantID string) (*tenantKeys, error) {
	tk, err := s.keys.forTenant(r, tenantID)
	if err != nil {
		return nil, fmt.Errorf("tenant %s: %w", tenantID, err)
	}
	return tk, nil
}

// tenantForWrite loads a tenant's keys and record inside a write. Reading
// the record makes the transaction conflict with a concurrent tenant
// delete, so no write lands in a tenant that is being destroyed.
func (s *Store) tenantForWrite(w Writer, tenantID string) (*tenantKeys, *Tenant, error) {
	tk, err := s.tenantKeysFor(w, tenantID)
	if err != nil {
		return nil, nil, err
	}
	t, err := openCached[Tenant](s, w, tk, "tenant", tenantID, tenantID, tenantKey(tenantID))
	if err != nil {
		return nil, nil, err
	}
	return tk, t.clone(), nil
}

func (s *Store) stampNow() *Timestamp { return stamp(s.now()) }

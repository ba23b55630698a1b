package vaultstore

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore/kv/badgerkv"
	"github.com/tokenvault/tokenvault/vaultstore/kv/postgres"
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
	// StrictAuditSync syncs the audit record of every read and proxied
	// call before data leaves; by default it is committed to the engine's
	// log by then and synced within a few milliseconds
	// (audit_durability.go). Only with SyncWrites.
	StrictAuditSync bool
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
	// Postgres, when set, keeps the vault's state in PostgreSQL instead of
	// Badger in Dir, so that several vault processes can share it. Dir is
	// then not used.
	Postgres *postgres.Options
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
	exports     *auditExporter // the audit export (audit_chain_export.go)
	cvc         *cvcKeyring
	masters     *masterKeys
	meta        metaRecord
	node        string     // this process among those sharing the engine (leases)
	shared      bool       // other processes may share the engine (see cluster.go)
	rotating    sync.Mutex // one master key rotation at a time
	reseals     resealers
	folds       usageFolds
	now         func() time.Time
	logger      *zap.Logger
	dir         string
	events      func(Event)
	hooks       webhookWorkers // webhook delivery (webhooks_delivery.go)
	binTable    binTableHolder // the operator's BIN table (bin_table.go)

	stop      chan struct{}
	ctx       context.Context // cancelled by Close, for background work
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open checks the master key against the storage and opens the store.
// It refuses, without changing anything stored, a short key, the wrong key
// for an existing store, a store of a newer format, an unwritable
// directory, a directory locked by another process, or an unreachable
// database.
func Open(o Options) (*Store, error) {
	if o.Dir == "" && o.Postgres == nil {
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
	masters, err := newMasterKeys(o.MasterKey, o.PreviousMasterKeys...)
	if err != nil {
		return nil, err
	}
	var st *storage
	if o.Postgres != nil {
		st, err = openPostgres(o, masters)
	} else {
		st, err = openBadgerDir(o, masters)
	}
	if err != nil {
		return nil, err
	}
	kv, meta := st.engine, st.meta
	closeAll := func() { kv.Close(); st.cvc.close() }
	if err := st.cvc.shred(context.Background(), o.Now()); err != nil { // keys whose time ran out while the vault was down
		closeAll()
		return nil, err
	}
	var engine KV = kv
	if o.WrapKV != nil {
		engine = o.WrapKV(kv)
	}
	credentials := newCredentialCache(o.RecordCacheEntries)
	s := &Store{kv: credentialKV{engine, credentials}, keys: newKeyring(masters), records: newRecordCache(o.RecordCacheEntries), credentials: credentials, active: newActiveMarks(),
		masters: masters, cvc: st.cvc, meta: st.recorder, node: newNodeID(), now: o.Now, logger: o.Logger, dir: st.dir, events: o.Events, stop: make(chan struct{})}
	if err := s.watchSharedChanges(kv); err != nil {
		closeAll()
		return nil, err
	}
	s.exports = newAuditExporter()
	s.kv = newAuditKV(s.kv, s.exports)
	s.audits = newAuditBatcher(s.kv, s.stop, auditLinger)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if meta.RotatingTo != nil {
		if err := s.finishMasterRotation(s.ctx, meta); err != nil {
			s.cancel()
			closeAll()
			return nil, fmt.Errorf("finishing the interrupted master key rotation: %w", err)
		}
	} else if err := masters.promote(meta.KeyCheck); err != nil {
		s.cancel()
		closeAll()
		return nil, err
	}
	if meta.Format < FormatVersion {
		if err := s.migrate(s.ctx, meta); err != nil {
			s.cancel()
			closeAll()
			return nil, err
		}
	}
	s.withAuditDurability(o.StrictAuditSync)
	s.wg.Add(3)
	go s.sweepLoop()
	go func() {
		defer s.wg.Done()
		s.audits.run()
	}()
	go func() {
		defer s.wg.Done()
		// what a stop left unfinished, in the process that sweeps
		if !s.holdSweep(s.ctx) {
			return
		}
		if err := errors.Join(s.resumeTenantDeletions(s.ctx), s.resumeReseals(s.ctx)); err != nil && s.ctx.Err() == nil {
			s.logger.Warn("resuming tenant deletions and data key rotations failed", zap.Error(err))
		}
	}()
	return s, nil
}

// storage is an opened engine with the meta it was checked against and
// the CVC keys beside it.
type storage struct {
	engine   KV
	meta     *storeMeta
	recorder metaRecord
	cvc      *cvcKeyring
	dir      string // the Badger directory; empty for a database
}

// openBadgerDir checks the master key against the meta file of o.Dir, then
// opens Badger there, with the CVC key slot file beside it.
func openBadgerDir(o Options, masters *masterKeys) (*storage, error) {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("storage directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating storage directory: %w", err)
	}
	if err := checkWritable(dir); err != nil {
		return nil, noSpace(err)
	}
	if info, err := os.Stat(dir); err == nil && info.Mode().Perm()&0o077 != 0 {
		o.Logger.Warn("the storage directory is open to other users; its values are sealed, but 0700 keeps even their sizes private",
			zap.String("dir", dir), zap.Stringer("mode", info.Mode().Perm()))
	}
	recorder := metaFile{dir}
	meta, err := checkOrCreateMeta(context.Background(), recorder, masters, o.Now())
	if err != nil {
		return nil, fmt.Errorf("storage directory %s: %w", dir, noSpace(err))
	}
	if meta.Format < FormatVersion {
		copyDir, err := backupBeforeMigration(dir, meta.Format, o.Now())
		if err != nil {
			return nil, err
		}
		o.Logger.Warn("upgrading an older store; a copy of it was taken first",
			zap.Int("format", meta.Format), zap.Int("to_format", FormatVersion), zap.String("copy", copyDir))
	}
	engine, err := badgerkv.Open(badgerkv.Options{Dir: dir, SyncWrites: o.SyncWrites, BlockCacheBytes: o.BlockCacheBytes, Logger: o.Logger.Named("badger")})
	if err != nil {
		return nil, err
	}
	slots, err := openCVCSlotFile(dir)
	if err != nil {
		engine.Close()
		return nil, err
	}
	cvc, err := openCVCKeyring(context.Background(), slots, masters)
	if err != nil {
		engine.Close()
		slots.Close()
		return nil, err
	}
	return &storage{engine: engine, meta: meta, recorder: recorder, cvc: cvc, dir: dir}, nil
}

// cvcKeyConns is the size of the pool that CVC keys are read and created
// through: each use is one short statement.
const cvcKeyConns = 2

// openPostgres connects to the database, checks the master key against
// the meta entry there (creating it in an empty database) and keeps the
// CVC keys as entries beside the vault's.
func openPostgres(o Options, masters *masterKeys) (*storage, error) {
	po := *o.Postgres
	if po.Logger == nil {
		po.Logger = o.Logger.Named("postgres")
	}
	ctx := context.Background()
	engine, err := postgres.Open(ctx, po)
	if err != nil {
		return nil, err
	}
	recorder := metaEntry{engine}
	meta, err := checkOrCreateMeta(ctx, recorder, masters, o.Now())
	if err != nil {
		engine.Close()
		return nil, fmt.Errorf("database: %w", err)
	}
	// CVC keys are read and created while a token's transaction holds one
	// of the pool's connections: on a pool of their own, a burst of them
	// can never wait for connections held by the transactions waiting on
	// them.
	keyPool := po
	keyPool.MaxConns, keyPool.PurgeInterval = cvcKeyConns, -1
	keyEngine, err := postgres.Open(ctx, keyPool)
	if err != nil {
		engine.Close()
		return nil, err
	}
	cvc, err := openCVCKeyring(ctx, cvcKeyEntries{keyEngine}, masters)
	if err != nil {
		engine.Close()
		keyEngine.Close()
		return nil, err
	}
	return &storage{engine: engine, meta: meta, recorder: recorder, cvc: cvc}, nil
}

// noSpace marks a file system's "no space left on device" as
// kv.ErrNoSpace, so a start on a full disk is refused as the engine refuses
// it, whichever file could not be written first.
func noSpace(err error) error {
	if errors.Is(err, syscall.ENOSPC) && !errors.Is(err, ErrNoSpace) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
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

// Dir returns the absolute storage directory; empty when the store is in
// a database.
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
		//lint:ignore SA2001 a barrier: a fold holding the lock has added to wg before it is released
		s.folds.mu.Unlock()
		close(s.stop)
		s.wg.Wait()
		s.exports.close()
		if s.shared {
			// hand the sweep over at once rather than after its lease
			// lapses (a process that dies lets it lapse)
			if err := s.releaseLease(context.Background(), "sweep"); err != nil {
				s.logger.Warn("releasing the sweep lease failed; it lapses by itself", zap.Error(err))
			}
		}
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

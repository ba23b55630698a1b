package vaultstore

// Online backup and offline restore.
//
// A backup is one consistent snapshot of every key the store holds, read
// in a single Badger transaction while the vault keeps serving, and sealed
// so that nothing in it is readable without the master key but the header
// below and the number of records in each frame: no key, no value, no
// tenant id. (Badger's own backup of an encrypted database is plaintext.)
//
// File format, version 1; integers are big-endian:
//
//	header, in clear
//	  magic              8  "TVBACKUP"
//	  version            2  backup format: 1
//	  store format       2  FormatVersion of the store backed up
//	  created at         8  Unix nanoseconds
//	  key check         32  check value of the master key, as tokenvault.json holds it
//	  salt              32  random
//	  secret length      2
//	  wrapped secret        a random 32-byte backup secret sealed under the master key
//	                        (AES-256-GCM, internal/seal's format); its associated data
//	                        is "tokenvault backup v1|" and every header byte before the
//	                        secret length, so no header field can be changed unnoticed
//	frames, one or more
//	  length             4  of the sealed payload, at most 64 MiB
//	  flags              1  bit 0: the last frame; other bits zero
//	  records            4  entries in the payload
//	  sealed payload        AES-256-GCM under the frame key, with nonce 0x00000000 ||
//	                        frame index (8 bytes, counting from 0) and associated data
//	                        salt || frame index || flags || records
//	payload: records entries, each
//	  uvarint key length, key, uvarint value length, value,
//	  uvarint expires at (Unix seconds, as Badger keeps it; 0 for never)
//
// The frame key is HKDF-SHA256 of the backup secret, with the header's salt
// and the info "tokenvault backup v1". A frame that is changed, moved to
// another place or another backup, dropped, or replayed fails to open; a
// stream that ends before a frame flagged last, or goes on after it, is
// refused. Frames hold about 256 KiB of entries each.
//
// The running store holds the master key only as a cipher, so the key that
// seals a backup is not derived from the master key's bytes: it is a fresh
// secret per backup that the master key wraps, as it wraps every tenant's
// data key. A backup taken with one master key opens with that key only.
//
// No master key rotation runs while a backup is taken, and every data and
// fingerprint key in it must open with the current master key; a backup
// of a store whose rotation is unfinished is refused (ErrBackupRotating).
//
// Left out of a backup: the CVC key file (cvc_keys.go). CVCs are crypto-shredded
// when their retention ends, and a backup must not extend that, so card
// tokens restored from a backup have no CVC. The health check's key is left
// out, and the meta file is written afresh by Restore for the master key it
// is given, with the backup's store format: a backup of an older format is
// migrated when the restored store first opens (migrate.go).

import (
	"bufio"
	"bytes"
	"context"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	kvpkg "github.com/tokenvault/tokenvault/vaultstore/kv"
	"github.com/tokenvault/tokenvault/vaultstore/kv/postgres"
)

const (
	backupMagic        = "TVBACKUP"
	backupVersion      = 1
	backupInfo         = "tokenvault backup v1"
	backupSecretSize   = 32
	backupSaltSize     = 32
	backupFixedHeader  = 8 + 2 + 2 + 8 + 32 + backupSaltSize // up to the secret length
	backupMaxWrapped   = 1024
	backupFrameHeader  = 4 + 1 + 4
	backupBatchSize    = 256 << 10
	backupMaxFrame     = 64 << 20
	backupFrameLast    = 1
	backupNoncePadding = 4 // zero bytes in front of the frame index
)

// ErrBackupKeyMismatch reports a restore with a master key other than the
// one the backup was taken with.
var ErrBackupKeyMismatch = errors.New("the master key does not match the backup: it was taken with a different master key")

// ErrBackupCorrupt reports a backup that is not one, is damaged, truncated
// or tampered with.
var ErrBackupCorrupt = errors.New("the backup is damaged, truncated or tampered with")

// ErrBackupRotating reports a backup refused because a master key
// rotation is under way or unfinished: a backup opens with one master key.
var ErrBackupRotating = errors.New("a master key rotation is under way or unfinished; back up once it has finished")

// ErrRestoreTargetNotEmpty reports a restore into a directory that holds
// anything at all.
var ErrRestoreTargetNotEmpty = errors.New("the restore directory is not empty")

// Backup writes a consistent snapshot of the store to w in the sealed
// format above, while the store keeps serving. progress, when not nil, is
// called after each frame with the bytes written and records so far. A
// failed backup may have written part of a stream; it does not end in a
// last frame, so Restore refuses it.
func (s *Store) Backup(ctx context.Context, w io.Writer, progress func(bytes, records int64)) error {
	snap, err := snapshotterOf(s.kv)
	if err != nil {
		return err
	}
	// No master key rotation may start while the backup runs: its header
	// and its data keys must be under the same master key.
	if !s.rotating.TryLock() {
		return ErrBackupRotating
	}
	defer s.rotating.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)() // the store is closing
	// Say why before the stream begins; each entry is checked again in it.
	if err := s.checkMasterWrapped(ctx); err != nil {
		return err
	}

	secret := randomBytes(backupSecretSize)
	defer clear(secret)
	h := &backupHeader{
		storeFormat: FormatVersion,
		createdAt:   s.now(),
		keyCheck:    s.backupKeyCheck(),
		salt:        randomBytes(backupSaltSize),
	}
	if h.wrapped, err = s.wrapBackupSecret(secret, h.secretAAD()); err != nil {
		return fmt.Errorf("sealing the backup key: %w", err)
	}
	aead, err := backupFrameAEAD(secret, h.salt)
	if err != nil {
		return err
	}
	raw := h.encode()
	if _, err := w.Write(raw); err != nil {
		return fmt.Errorf("writing the backup: %w", err)
	}
	fw := &frameWriter{w: w, aead: aead, salt: h.salt, bytes: int64(len(raw)), progress: progress}
	err = snap.Snapshot(ctx, func(key, value []byte, expiresAt time.Time) error {
		if !backedUp(key) {
			return nil
		}
		if err := s.checkWrappedEntry(key, value); err != nil {
			return err
		}
		return fw.add(key, value, unixSeconds(expiresAt))
	})
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return fw.flush(true)
}

// checkMasterWrapped checks that every key the master key wraps opens with
// the current one, so that the backup opens with it alone.
func (s *Store) checkMasterWrapped(ctx context.Context) error {
	return s.kv.View(ctx, func(r Reader) error {
		for _, prefix := range []string{dataKeysPrefix, fingerprintKeysPrefix} {
			if err := r.Scan([]byte(prefix), nil, s.checkWrappedEntry); err != nil {
				return err
			}
		}
		return nil
	})
}

// checkWrappedEntry fails for an entry the master key wraps that the
// current master key does not open.
func (s *Store) checkWrappedEntry(key, value []byte) error {
	if !masterWrapped(key) {
		return nil
	}
	aad, _, err := wrappedKeyAAD(key)
	if err != nil {
		return err
	}
	if !s.wrappedByCurrentMaster(value, aad) {
		return fmt.Errorf("%w: %s does not open with the current master key", ErrBackupRotating, key)
	}
	return nil
}

// snapshotterOf finds the snapshot reader of kv, through wrappers that
// have an Unwrap() KV method.
func snapshotterOf(kv KV) (kvpkg.Snapshotter, error) {
	if s, ok := engineAs[kvpkg.Snapshotter](kv); ok {
		return s, nil
	}
	return nil, fmt.Errorf("backup: the storage engine (%T) cannot take a snapshot", kv)
}

// masterWrapped reports whether the master key wraps the value under key:
// a tenant's data key or fingerprint key (see rotation.go).
func masterWrapped(key []byte) bool {
	return bytes.HasPrefix(key, []byte(dataKeysPrefix)) || bytes.HasPrefix(key, []byte(fingerprintKeysPrefix))
}

// The prefixes of the entries the master key wraps (keys.go).
const (
	dataKeysPrefix        = keyVersion + "dek/"
	fingerprintKeysPrefix = keyVersion + "fpk/"
)

// backupHeader is the clear head of a backup.
type backupHeader struct {
	storeFormat uint16
	createdAt   time.Time
	keyCheck    []byte
	salt        []byte
	wrapped     []byte
}

// fixed encodes the header up to the secret length.
func (h *backupHeader) fixed() []byte {
	b := make([]byte, 0, backupFixedHeader)
	b = append(b, backupMagic...)
	b = binary.BigEndian.AppendUint16(b, backupVersion)
	b = binary.BigEndian.AppendUint16(b, h.storeFormat)
	b = binary.BigEndian.AppendUint64(b, uint64(h.createdAt.UnixNano()))
	b = append(b, h.keyCheck...)
	return append(b, h.salt...)
}

func (h *backupHeader) encode() []byte {
	b := h.fixed()
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.wrapped)))
	return append(b, h.wrapped...)
}

// secretAAD binds the wrapped secret to every other header field.
func (h *backupHeader) secretAAD() []byte {
	return append([]byte(backupInfo+"|"), h.fixed()...)
}

// readBackupHeader reads and checks the clear header.
func readBackupHeader(r io.Reader) (*backupHeader, error) {
	b := make([]byte, backupFixedHeader+2)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("%w: not a tokenvault backup (too short: %v)", ErrBackupCorrupt, err)
	}
	if err := checkBackupHead(b); err != nil {
		return nil, err
	}
	h := &backupHeader{
		storeFormat: binary.BigEndian.Uint16(b[10:12]),
		createdAt:   time.Unix(0, int64(binary.BigEndian.Uint64(b[12:20]))).UTC(),
		keyCheck:    b[20:52],
		salt:        b[52:84],
	}
	h.wrapped = make([]byte, binary.BigEndian.Uint16(b[84:86]))
	if _, err := io.ReadFull(r, h.wrapped); err != nil {
		return nil, fmt.Errorf("%w: the header is cut short", ErrBackupCorrupt)
	}
	return h, nil
}

// checkBackupHead checks the magic, version and secret length of the
// first backupFixedHeader+2 bytes.
func checkBackupHead(b []byte) error {
	if string(b[:8]) != backupMagic {
		return fmt.Errorf("%w: not a tokenvault backup", ErrBackupCorrupt)
	}
	if v := binary.BigEndian.Uint16(b[8:10]); v != backupVersion {
		return fmt.Errorf("backup format %d is not one this build reads (%d)", v, backupVersion)
	}
	if n := binary.BigEndian.Uint16(b[84:86]); n == 0 || n > backupMaxWrapped {
		return fmt.Errorf("%w: a wrapped key of %d bytes", ErrBackupCorrupt, n)
	}
	return nil
}

// backupFrameAEAD derives the frame key from the backup secret.
func backupFrameAEAD(secret, salt []byte) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, secret, salt, backupInfo, MasterKeySize)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	return newAEAD(key)
}

func frameNonce(index uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, backupNoncePadding, backupNoncePadding+8), index)
}

func frameAAD(salt []byte, index uint64, flags byte, records uint32) []byte {
	b := append(make([]byte, 0, len(salt)+8+1+4), salt...)
	b = binary.BigEndian.AppendUint64(b, index)
	b = append(b, flags)
	return binary.BigEndian.AppendUint32(b, records)
}

// parseFrameHeader checks a frame's clear header.
func parseFrameHeader(b []byte) (length int, flags byte, records uint32, err error) {
	n := binary.BigEndian.Uint32(b[0:4])
	flags, records = b[4], binary.BigEndian.Uint32(b[5:9])
	if n > backupMaxFrame || flags&^backupFrameLast != 0 {
		return 0, 0, 0, fmt.Errorf("%w: a malformed frame header", ErrBackupCorrupt)
	}
	return int(n), flags, records, nil
}

// frameWriter batches entries into sealed frames.
type frameWriter struct {
	w        io.Writer
	aead     cipher.AEAD
	salt     []byte
	index    uint64
	batch    []byte
	count    uint32
	out      []byte
	bytes    int64
	records  int64
	progress func(bytes, records int64)
}

func (f *frameWriter) add(key, value []byte, expiresAt uint64) error {
	f.batch = binary.AppendUvarint(f.batch, uint64(len(key)))
	f.batch = append(f.batch, key...)
	f.batch = binary.AppendUvarint(f.batch, uint64(len(value)))
	f.batch = append(f.batch, value...)
	f.batch = binary.AppendUvarint(f.batch, expiresAt)
	f.count++
	if len(f.batch) >= backupBatchSize {
		return f.flush(false)
	}
	return nil
}

// flush seals the batch as the next frame and writes it in one Write.
func (f *frameWriter) flush(last bool) error {
	var flags byte
	if last {
		flags = backupFrameLast
	}
	n := len(f.batch) + f.aead.Overhead()
	if n > backupMaxFrame {
		return fmt.Errorf("backup: an entry of %d bytes does not fit a frame", len(f.batch))
	}
	f.out = append(f.out[:0], make([]byte, backupFrameHeader)...)
	binary.BigEndian.PutUint32(f.out[0:4], uint32(n))
	f.out[4] = flags
	binary.BigEndian.PutUint32(f.out[5:9], f.count)
	f.out = f.aead.Seal(f.out, frameNonce(f.index), f.batch, frameAAD(f.salt, f.index, flags, f.count))
	if _, err := f.w.Write(f.out); err != nil {
		return fmt.Errorf("writing the backup: %w", err)
	}
	f.index++
	f.bytes += int64(len(f.out))
	f.records += int64(f.count)
	f.batch, f.count = f.batch[:0], 0
	if f.progress != nil {
		f.progress(f.bytes, f.records)
	}
	return nil
}

// RestoreOptions configure Restore.
type RestoreOptions struct {
	// Dir is the storage directory to restore into. It must be empty or
	// missing; a missing one is created with mode 0700.
	Dir string
	// Postgres, when set, restores into this database (which must hold no
	// vault entries) instead of Dir.
	Postgres *postgres.Options
	// MasterKey is the master key the backup was taken with.
	MasterKey []byte
	// Logger receives Badger's log lines; nil discards them.
	Logger *zap.Logger
	// Progress, when not nil, is called after each frame with the bytes
	// read and records restored so far.
	Progress func(bytes, records int64)
}

// RestoreStats describe a finished restore.
type RestoreStats struct {
	// Records is the number of entries written.
	Records int64
	// Expired is the number of entries left out because their expiry
	// had passed.
	Expired int64
	// Bytes is the size of the backup read.
	Bytes int64
	// CreatedAt is when the backup was taken.
	CreatedAt time.Time
}

// Restore writes the backup read from r into a new store, which the same
// master key then opens: in o.Dir, or in the database of o.Postgres. It
// runs offline: it opens the engine itself. It refuses a directory that is
// not empty or a database that holds any entry and, before writing
// anything, a backup taken with another master key (ErrBackupKeyMismatch).
// Every frame is verified before its entries are written; on any error the
// target is left as it was found (a directory removed if Restore created
// it, a database emptied). The meta that makes the target a store is
// written last.
func Restore(r io.Reader, o RestoreOptions) (*RestoreStats, error) {
	if o.Dir == "" && o.Postgres == nil {
		return nil, errors.New("restore: the storage directory is required")
	}
	if len(o.MasterKey) != MasterKeySize {
		return nil, fmt.Errorf("restore: the master key must be %d bytes, got %d", MasterKeySize, len(o.MasterKey))
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	var target restoreTarget
	var err error
	if o.Postgres != nil {
		target, err = openRestoreDatabase(*o.Postgres, o.Logger)
	} else {
		target, err = checkRestoreDir(o.Dir, o.Logger)
	}
	if err != nil {
		return nil, err
	}
	stats, err := restoreInto(r, o, target)
	if err != nil {
		if cleanErr := target.discard(); cleanErr != nil {
			err = errors.Join(err, fmt.Errorf("removing the partial restore: %w", cleanErr))
		}
		return nil, err
	}
	return stats, nil
}

// restoreInto verifies the backup's header against the master key, loads
// its entries into target and makes it a store.
func restoreInto(r io.Reader, o RestoreOptions, target restoreTarget) (*RestoreStats, error) {
	cr := &countingReader{r: bufio.NewReaderSize(r, 1<<20)}
	h, err := readBackupHeader(cr)
	if err != nil {
		return nil, err
	}
	if h.storeFormat == 0 || int(h.storeFormat) > FormatVersion {
		return nil, fmt.Errorf("the backup is of store format %d, newer than this build restores (%d); use a newer tokenvault", h.storeFormat, FormatVersion)
	}
	if subtle.ConstantTimeCompare(h.keyCheck, keyCheck(o.MasterKey)) != 1 {
		return nil, ErrBackupKeyMismatch
	}
	master, err := newAEAD(o.MasterKey)
	if err != nil {
		return nil, err
	}
	secret, err := open(master, h.wrapped, h.secretAAD())
	if err != nil {
		return nil, fmt.Errorf("%w: its header fails its integrity check", ErrBackupCorrupt)
	}
	aead, err := backupFrameAEAD(secret, h.salt)
	clear(secret)
	if err != nil {
		return nil, err
	}
	loader, err := target.open()
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	stats := &RestoreStats{CreatedAt: h.createdAt}
	progress := func() {
		if o.Progress != nil {
			o.Progress(cr.n, stats.Records)
		}
	}
	frames := &frameEntries{r: cr, aead: aead, salt: h.salt, master: master, stats: stats, progress: progress, now: time.Now(), head: make([]byte, backupFrameHeader)}
	if err := loader.Load(context.Background(), frames.next); err != nil {
		return nil, err
	}
	if err := target.finish(o.MasterKey, int(h.storeFormat)); err != nil {
		return nil, err
	}
	stats.Bytes = cr.n
	return stats, nil
}

// checkRestoreTarget refuses a directory with any entry, and reports
// whether it exists.
func checkRestoreTarget(dir string) (bool, error) {
	info, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}
	if !info.IsDir() {
		return false, fmt.Errorf("restore: %s is not a directory", dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if err != nil && err != io.EOF {
		return false, fmt.Errorf("restore: reading %s: %w", dir, err)
	}
	if len(names) > 0 {
		if _, err := os.Stat(filepath.Join(dir, metaFileName)); err == nil {
			return false, fmt.Errorf("%w: %s holds a vault store; restore into an empty or new directory", ErrRestoreTargetNotEmpty, dir)
		}
		return false, fmt.Errorf("%w: %s holds %s and maybe more; restore into an empty or new directory", ErrRestoreTargetNotEmpty, dir, names[0])
	}
	return true, nil
}

// frameEntries reads a backup's frames one at a time, verifying each
// before it hands out its entries, for an engine's Loader. It keeps the
// counts of a restore.
type frameEntries struct {
	r        io.Reader
	aead     cipher.AEAD
	salt     []byte
	master   cipher.AEAD
	stats    *RestoreStats
	progress func()
	now      time.Time

	index   uint64
	head    []byte
	sealed  []byte
	pending []backupEntry // the current frame's entries not yet handed out
	last    bool          // the current frame is the last
	// reported: progress was told of the current frame, once the loader
	// had taken all its entries
	reported bool
}

// backedUp reports whether a backup carries the entry under key: not the
// health checks' entries, nor what belongs to the storage rather than to
// the vault (its meta, CVC keys and job leases; a backup has its own
// header, and CVCs are never backed up).
func backedUp(key []byte) bool {
	return !bytes.Equal(key, healthKey) && !bytes.HasPrefix(key, []byte(keyVersion+"health/")) && !bytes.HasPrefix(key, []byte("tokenvault/"))
}

// unixSeconds is t in Unix seconds, 0 for the zero time (no expiry).
func unixSeconds(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.Unix())
}

// backupEntry is one entry of a frame; it shares the frame's memory.
type backupEntry struct {
	key, value []byte
	expiresAt  uint64 // Unix seconds; 0 for none
}

// next returns the next live entry, or io.EOF after the last frame.
// Entries already expired are counted and left out.
func (f *frameEntries) next() (key, value []byte, expiresAt time.Time, err error) {
	for {
		for len(f.pending) > 0 {
			e := f.pending[0]
			f.pending = f.pending[1:]
			if e.expiresAt != 0 && int64(e.expiresAt) <= f.now.Unix() {
				f.stats.Expired++
				continue
			}
			f.stats.Records++
			if e.expiresAt != 0 {
				expiresAt = time.Unix(int64(e.expiresAt), 0)
			}
			return e.key, e.value, expiresAt, nil
		}
		if f.index > 0 && !f.reported {
			f.reported = true // every entry of the frame is handed out
			f.progress()
		}
		if f.last {
			if n, _ := f.r.Read(f.head[:1]); n > 0 {
				return nil, nil, time.Time{}, fmt.Errorf("%w: data follows its last frame", ErrBackupCorrupt)
			}
			return nil, nil, time.Time{}, io.EOF
		}
		if err := f.readFrame(); err != nil {
			return nil, nil, time.Time{}, err
		}
	}
}

// readFrame reads, verifies and decodes the next frame.
func (f *frameEntries) readFrame() error {
	index := f.index
	if _, err := io.ReadFull(f.r, f.head); err != nil {
		return fmt.Errorf("%w: it ends before its last frame (after frame %d)", ErrBackupCorrupt, index)
	}
	n, flags, records, err := parseFrameHeader(f.head)
	if err != nil {
		return err
	}
	f.sealed = append(f.sealed[:0], make([]byte, n)...)
	if _, err := io.ReadFull(f.r, f.sealed); err != nil {
		return fmt.Errorf("%w: frame %d is cut short", ErrBackupCorrupt, index)
	}
	plain, err := f.aead.Open(nil, frameNonce(index), f.sealed, frameAAD(f.salt, index, flags, records))
	if err != nil {
		return fmt.Errorf("%w: frame %d fails its integrity check", ErrBackupCorrupt, index)
	}
	entries, err := decodeEntries(plain, records)
	if err != nil {
		return fmt.Errorf("frame %d: %w", index, err)
	}
	for _, e := range entries {
		if !masterWrapped(e.key) {
			continue
		}
		aad, _, err := wrappedKeyAAD(e.key)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBackupCorrupt, err)
		}
		raw, err := open(f.master, e.value, aad)
		if err != nil {
			return fmt.Errorf("the master key does not open %s in the backup", e.key)
		}
		clear(raw)
	}
	f.index++
	f.pending = entries
	f.last = flags&backupFrameLast != 0
	f.reported = false
	return nil
}

// decodeEntries decodes a frame's payload, which must hold exactly
// records entries. The entries share plain's memory.
func decodeEntries(plain []byte, records uint32) ([]backupEntry, error) {
	bad := fmt.Errorf("%w: a frame's entries do not decode", ErrBackupCorrupt)
	out := make([]backupEntry, 0, records)
	next := func() ([]byte, bool) {
		n, w := binary.Uvarint(plain)
		if w <= 0 || n > uint64(len(plain)-w) {
			return nil, false
		}
		b := plain[w : w+int(n) : w+int(n)]
		plain = plain[w+int(n):]
		return b, true
	}
	for range records {
		key, ok := next()
		if !ok || len(key) == 0 || bytes.HasPrefix(key, []byte("!badger!")) {
			return nil, bad
		}
		value, ok := next()
		if !ok {
			return nil, bad
		}
		exp, w := binary.Uvarint(plain)
		if w <= 0 {
			return nil, bad
		}
		plain = plain[w:]
		out = append(out, backupEntry{key: key, value: value, expiresAt: exp})
	}
	if len(plain) != 0 {
		return nil, bad
	}
	return out, nil
}

// writeRestoredMeta writes the meta file of the restored store: the one
// Open writes for a new store with masterKey (made by opening one beside
// the data), with the backup's store format, so that a backup of an older
// format is migrated when the restored store first opens.
func writeRestoredMeta(dir string, masterKey []byte, format int) error {
	staging, err := os.MkdirTemp(dir, ".restore-meta-")
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer os.RemoveAll(staging)
	s, err := Open(Options{Dir: staging, MasterKey: masterKey})
	if err != nil {
		return fmt.Errorf("restore: making the meta file: %w", err)
	}
	if err := s.Close(); err != nil {
		return fmt.Errorf("restore: making the meta file: %w", err)
	}
	m, err := readMeta(staging)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := os.RemoveAll(staging); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	m.Format = format
	return writeMeta(dir, m)
}

// removeRestored undoes a failed restore: dir was empty or missing before.
func removeRestored(dir string, existed bool) error {
	if !existed {
		return os.RemoveAll(dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	return errors.Join(errs...)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// BackupMeter follows a backup stream as it passes, without the master
// key: it counts its bytes and, from the frames' clear headers, its
// records, and knows whether the stream has reached its last frame. Write
// fails on a stream that is not a well-formed backup; it never fails to
// take bytes otherwise.
type BackupMeter struct {
	bytes, records int64
	state          int
	acc            []byte // the part of a header read so far
	skip           int    // bytes left in the current wrapped key or payload
	pending        int64  // records of the frame being skipped
	last           bool   // the frame being skipped is the last one
}

const (
	meterHead = iota
	meterWrapped
	meterFrameHead
	meterPayload
	meterDone
)

// Write implements io.Writer.
func (m *BackupMeter) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		switch m.state {
		case meterHead, meterFrameHead:
			want := backupFrameHeader
			if m.state == meterHead {
				want = backupFixedHeader + 2
			}
			n := min(want-len(m.acc), len(p))
			m.acc, p = append(m.acc, p[:n]...), p[n:]
			m.bytes += int64(n)
			if len(m.acc) < want {
				continue
			}
			if m.state == meterHead {
				if err := checkBackupHead(m.acc); err != nil {
					return total - len(p), err
				}
				m.state, m.skip = meterWrapped, int(binary.BigEndian.Uint16(m.acc[84:86]))
			} else {
				n, flags, records, err := parseFrameHeader(m.acc)
				if err != nil {
					return total - len(p), err
				}
				m.state, m.skip, m.pending, m.last = meterPayload, n, int64(records), flags&backupFrameLast != 0
			}
			m.acc = m.acc[:0]
		case meterWrapped, meterPayload:
			n := min(m.skip, len(p))
			m.skip, p = m.skip-n, p[n:]
			m.bytes += int64(n)
			if m.skip > 0 {
				continue
			}
			switch {
			case m.state == meterWrapped:
				m.state = meterFrameHead
			case m.last:
				m.records += m.pending
				m.state = meterDone
			default:
				m.records += m.pending
				m.state = meterFrameHead
			}
		case meterDone:
			return total - len(p), fmt.Errorf("%w: data follows its last frame", ErrBackupCorrupt)
		}
	}
	return total, nil
}

// Bytes is the number of bytes seen so far.
func (m *BackupMeter) Bytes() int64 { return m.bytes }

// Records is the number of records in the complete frames seen so far.
func (m *BackupMeter) Records() int64 { return m.records }

// Complete reports whether the stream has reached the end of its last
// frame.
func (m *BackupMeter) Complete() bool { return m.state == meterDone }

// The three places a backup touches how the store holds its master key.

// backupKeyCheck is the check value of the current master key.
func (s *Store) backupKeyCheck() []byte { return s.masters.currentCheck() }

// wrapBackupSecret seals a backup's secret under the current master key.
func (s *Store) wrapBackupSecret(secret, aad []byte) ([]byte, error) {
	return s.masters.wrap(1, secret, aad)
}

// wrappedByCurrentMaster reports whether the current master key opens a
// wrapped key.
func (s *Store) wrappedByCurrentMaster(wrapped, aad []byte) bool {
	raw, current, err := s.masters.unwrap(wrapped, aad)
	clear(raw)
	return err == nil && current
}

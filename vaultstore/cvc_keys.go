package vaultstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/internal/seal"
)

// The CVC keys' stores (see seal.CVCKeys). A key must be unrecoverable
// once its epoch ends, even to someone with the data directory and the
// master key, so on Badger it is kept in a small file of fixed slots
// beside the database, and erasing it overwrites its slot with zeros in
// place and syncs it. This relies on the file system rewriting a block
// in place, as ext4 and xfs do; on copy-on-write file systems (btrfs,
// zfs) old blocks can survive until reused.
const (
	cvcSlots    = 2048 // 34 hours of epochs: more than the longest retention
	cvcSlotSize = 96
	cvcFileName = "cvc-keys"
)

// MaxCVCRetention is the longest CVC Retention a tenant may have.
const MaxCVCRetention = 24 * time.Hour

// cvcSlotFile keeps CVC keys in a file of fixed slots beside Badger's
// files, one slot per epoch (modulo cvcSlots); erasing a key overwrites
// its slot with zeros in place and syncs it. Only one process opens a
// Badger directory, so the file is the whole truth.
type cvcSlotFile struct {
	mu   sync.Mutex
	file *os.File
}

func openCVCSlotFile(dir string) (*cvcSlotFile, error) {
	f, err := os.OpenFile(filepath.Join(dir, cvcFileName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening cvc key file: %w", err)
	}
	return &cvcSlotFile{file: f}, nil
}

// All implements seal.CVCKeyStore.
func (f *cvcSlotFile) All(context.Context) (map[int64][]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[int64][]byte{}
	buf := make([]byte, cvcSlotSize)
	for slot := int64(0); slot < cvcSlots; slot++ {
		n, err := f.file.ReadAt(buf, slot*cvcSlotSize)
		if n < cvcSlotSize {
			break // a new or short file: the rest is empty
		}
		if err != nil {
			return nil, fmt.Errorf("reading cvc key file: %w", err)
		}
		epoch := int64(binary.BigEndian.Uint64(buf[:8]))
		size := int(buf[8])
		if epoch == 0 || size == 0 || 9+size > cvcSlotSize {
			continue
		}
		out[epoch] = append([]byte(nil), buf[9:9+size]...)
	}
	return out, nil
}

// Get implements seal.CVCKeyStore.
func (f *cvcSlotFile) Get(ctx context.Context, epoch int64) ([]byte, error) {
	all, err := f.All(ctx)
	if err != nil {
		return nil, err
	}
	if w, ok := all[epoch]; ok {
		return w, nil
	}
	return nil, seal.ErrNoKey
}

// Create implements seal.CVCKeyStore.
func (f *cvcSlotFile) Create(_ context.Context, epoch int64, wrapped []byte) ([]byte, error) {
	return wrapped, f.writeSlot(epoch, wrapped)
}

// Replace implements seal.CVCKeyStore.
func (f *cvcSlotFile) Replace(_ context.Context, epoch int64, wrapped []byte) error {
	return f.writeSlot(epoch, wrapped)
}

// Erase implements seal.CVCKeyStore.
func (f *cvcSlotFile) Erase(_ context.Context, epoch int64) error { return f.writeSlot(epoch, nil) }

// writeSlot writes (or, with nil, zeroes) an epoch's slot and syncs it.
func (f *cvcSlotFile) writeSlot(epoch int64, wrapped []byte) error {
	buf := make([]byte, cvcSlotSize)
	if wrapped != nil {
		if 9+len(wrapped) > cvcSlotSize {
			return errors.New("wrapped cvc key does not fit its slot")
		}
		binary.BigEndian.PutUint64(buf[:8], uint64(epoch))
		buf[8] = byte(len(wrapped))
		copy(buf[9:], wrapped)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.file.WriteAt(buf, (epoch%cvcSlots)*cvcSlotSize); err != nil {
		return fmt.Errorf("writing cvc key slot: %w", err)
	}
	return f.file.Sync()
}

// Close implements seal.CVCKeyStore.
func (f *cvcSlotFile) Close() error { return f.file.Close() }

// cvcKeysPrefix holds CVC keys in a shared engine. It is outside every
// tenant's keys and left out of backups, like the slot file.
var cvcKeysPrefix = []byte("tokenvault/cvc/")

// cvcKeyEntries keeps CVC keys as entries of a shared engine, so that
// every node opens the CVCs any node sealed. Its engine is its own
// connection pool to the vault's database (see openPostgres), which it
// closes. A key is created once per
// epoch (the first node's wins, in one transaction) and deleted when its
// epoch ends; its entry also carries a time to live a little past that,
// so a key is deleted even if no node sweeps. What a deleted entry leaves
// behind depends on the engine: see docs/security.md (CVCs on PostgreSQL).
type cvcKeyEntries struct{ kv KV }

// cvcKeyTTLMargin keeps a key's entry a while past its epoch's end, so the
// sweep, not the time to live, normally deletes it.
const cvcKeyTTLMargin = 10 * time.Minute

func cvcKeyEntry(epoch int64) []byte {
	return strconv.AppendInt(append([]byte(nil), cvcKeysPrefix...), epoch, 10)
}

// All implements seal.CVCKeyStore.
func (e cvcKeyEntries) All(ctx context.Context) (map[int64][]byte, error) {
	out := map[int64][]byte{}
	err := e.kv.View(ctx, func(r Reader) error {
		return r.Scan(cvcKeysPrefix, nil, func(key, value []byte) error {
			epoch, err := strconv.ParseInt(string(key[len(cvcKeysPrefix):]), 10, 64)
			if err == nil {
				out[epoch] = value
			}
			return nil
		})
	})
	return out, err
}

// Get implements seal.CVCKeyStore.
func (e cvcKeyEntries) Get(ctx context.Context, epoch int64) ([]byte, error) {
	var out []byte
	err := e.kv.View(ctx, func(r Reader) error {
		var err error
		out, err = r.Get(cvcKeyEntry(epoch))
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("cvc key of epoch %d: %w", epoch, seal.ErrNoKey)
	}
	return out, err
}

// Create implements seal.CVCKeyStore.
func (e cvcKeyEntries) Create(ctx context.Context, epoch int64, wrapped []byte) ([]byte, error) {
	var out []byte
	ttl := time.Until(time.Unix(0, epoch*int64(cvcEpoch))) + cvcKeyTTLMargin
	err := e.kv.Update(ctx, func(w Writer) error {
		existing, err := w.Get(cvcKeyEntry(epoch))
		if err == nil {
			out = existing
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		out = wrapped
		return w.Put(cvcKeyEntry(epoch), wrapped, max(ttl, cvcKeyTTLMargin))
	})
	return out, err
}

// Replace implements seal.CVCKeyStore.
func (e cvcKeyEntries) Replace(ctx context.Context, epoch int64, wrapped []byte) error {
	ttl := time.Until(time.Unix(0, epoch*int64(cvcEpoch))) + cvcKeyTTLMargin
	return e.kv.Update(ctx, func(w Writer) error {
		if _, err := w.Get(cvcKeyEntry(epoch)); errors.Is(err, ErrNotFound) {
			return nil // erased meanwhile
		} else if err != nil {
			return err
		}
		return w.Put(cvcKeyEntry(epoch), wrapped, max(ttl, cvcKeyTTLMargin))
	})
}

// Erase implements seal.CVCKeyStore.
func (e cvcKeyEntries) Erase(ctx context.Context, epoch int64) error {
	return e.kv.Update(ctx, func(w Writer) error { return w.Delete(cvcKeyEntry(epoch)) })
}

// Close implements seal.CVCKeyStore.
func (e cvcKeyEntries) Close() error { return e.kv.Close() }

// Interface guards
var (
	_ cvcKeyStore = (*cvcSlotFile)(nil)
	_ cvcKeyStore = cvcKeyEntries{}
)

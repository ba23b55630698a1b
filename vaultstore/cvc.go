package vaultstore

import (
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Card verification codes may be kept only briefly (the tenant's CVC
// Retention quota) and must then be unrecoverable, even to someone with
// the data directory and the master key. Deleting a record is not enough:
// Badger keeps old values in its log until compaction. So a CVC is sealed
// under a short-lived key, one per cvcEpoch of expiry time, held in a small
// file of fixed slots beside the database; when the epoch ends, its slot is
// overwritten with zeros in place and synced. The sealed CVC may linger in
// Badger's files, but its key no longer exists anywhere.
//
// This relies on the file system rewriting a block in place, as ext4 and
// xfs do; on copy-on-write file systems (btrfs, zfs) old blocks can
// survive until reused.
const (
	cvcEpoch     = time.Minute
	cvcSlots     = 2048 // 34 hours of epochs: more than the longest retention
	cvcSlotSize  = 96
	cvcFileName  = "cvc-keys"
	cvcKeyHeader = 8 // the epoch number in front of a sealed CVC
)

// MaxCVCRetention is the longest CVC Retention a tenant may have.
const MaxCVCRetention = 24 * time.Hour

// errCVCShredded reports a CVC whose key is gone.
var errCVCShredded = errors.New("cvc key destroyed")

// cvcKeyring holds the live CVC keys in memory and in the slot file.
type cvcKeyring struct {
	mu      sync.Mutex
	file    *os.File
	masters *masterKeys
	keys    map[int64]cipher.AEAD
	wrapped map[int64][]byte // each key as its slot holds it, for a master key rotation
}

func openCVCKeyring(dir string, masters *masterKeys) (*cvcKeyring, error) {
	f, err := os.OpenFile(filepath.Join(dir, cvcFileName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening cvc key file: %w", err)
	}
	c := &cvcKeyring{file: f, masters: masters, keys: make(map[int64]cipher.AEAD), wrapped: make(map[int64][]byte)}
	buf := make([]byte, cvcSlotSize)
	for slot := int64(0); slot < cvcSlots; slot++ {
		n, err := f.ReadAt(buf, slot*cvcSlotSize)
		if n < cvcSlotSize {
			break // a new or short file: the rest is empty
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("reading cvc key file: %w", err)
		}
		epoch := int64(binary.BigEndian.Uint64(buf[:8]))
		size := int(buf[8])
		if epoch == 0 || size == 0 || 9+size > cvcSlotSize {
			continue
		}
		raw, _, err := masters.unwrap(buf[9:9+size], cvcKeyAAD(epoch))
		if err != nil {
			continue // not ours, or torn by a crash before sync: unusable either way
		}
		aead, err := newAEAD(raw)
		clear(raw)
		if err != nil {
			continue
		}
		c.keys[epoch] = aead
		c.wrapped[epoch] = append([]byte(nil), buf[9:9+size]...)
	}
	return c, nil
}

func cvcKeyAAD(epoch int64) []byte { return []byte("cvc|" + strconv.FormatInt(epoch, 10)) }

// epochFor is the epoch a CVC that must be gone by expires is sealed in:
// the last one that ends by then, so its key is destroyed at the latest
// one sweep after the retention ends, but not one that has ended by now.
func epochFor(expires, now time.Time) int64 {
	return max(expires.UnixNano()/int64(cvcEpoch), now.UnixNano()/int64(cvcEpoch)+1)
}

// seal encrypts a CVC that must be gone by expires. The key is durable in
// the slot file before anything sealed under it is returned.
func (c *cvcKeyring) seal(cvc string, expires, now time.Time, aad []byte) ([]byte, error) {
	epoch := epochFor(expires, now)
	c.mu.Lock()
	aead := c.keys[epoch]
	if aead == nil {
		raw := randomBytes(MasterKeySize)
		wrapped, err := c.masters.wrap(1, raw, cvcKeyAAD(epoch))
		if err == nil {
			err = c.writeSlot(epoch, wrapped)
		}
		if err == nil {
			aead, err = newAEAD(raw)
		}
		clear(raw)
		if err != nil {
			c.mu.Unlock()
			return nil, fmt.Errorf("creating cvc key: %w", err)
		}
		c.keys[epoch] = aead
		c.wrapped[epoch] = wrapped
	}
	c.mu.Unlock()
	sealed, err := seal(aead, 1, []byte(cvc), aad)
	if err != nil {
		return nil, err
	}
	out := binary.BigEndian.AppendUint64(make([]byte, 0, cvcKeyHeader+len(sealed)), uint64(epoch))
	return append(out, sealed...), nil
}

// open decrypts a sealed CVC; errCVCShredded once its key is destroyed.
func (c *cvcKeyring) open(blob, aad []byte) (string, error) {
	if len(blob) < cvcKeyHeader {
		return "", ErrIntegrity
	}
	epoch := int64(binary.BigEndian.Uint64(blob[:cvcKeyHeader]))
	c.mu.Lock()
	aead := c.keys[epoch]
	c.mu.Unlock()
	if aead == nil {
		return "", errCVCShredded
	}
	plain, err := open(aead, blob[cvcKeyHeader:], aad)
	if err != nil {
		return "", err
	}
	return string(plain), nil
}

// shred destroys every key whose epoch has ended by now.
func (c *cvcKeyring) shred(now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for epoch := range c.keys {
		if epoch*int64(cvcEpoch) > now.UnixNano() {
			continue
		}
		if err := c.writeSlot(epoch, nil); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(c.keys, epoch)
		delete(c.wrapped, epoch)
	}
	return errors.Join(errs...)
}

// rewrap wraps every live CVC key under the current master key, slot by
// slot; each slot is rewritten in place and synced, so an interruption
// leaves every slot under one master key or the other.
func (c *cvcKeyring) rewrap() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for epoch, wrapped := range c.wrapped {
		raw, current, err := c.masters.unwrap(wrapped, cvcKeyAAD(epoch))
		if err != nil {
			return fmt.Errorf("cvc key of epoch %d: %w", epoch, err)
		}
		if current {
			clear(raw)
			continue
		}
		next, err := c.masters.wrap(1, raw, cvcKeyAAD(epoch))
		clear(raw)
		if err != nil {
			return err
		}
		if err := c.writeSlot(epoch, next); err != nil {
			return err
		}
		c.wrapped[epoch] = next
	}
	return nil
}

// writeSlot writes (or, with nil, zeroes) an epoch's slot and syncs it.
func (c *cvcKeyring) writeSlot(epoch int64, wrapped []byte) error {
	buf := make([]byte, cvcSlotSize)
	if wrapped != nil {
		if 9+len(wrapped) > cvcSlotSize {
			return errors.New("wrapped cvc key does not fit its slot")
		}
		binary.BigEndian.PutUint64(buf[:8], uint64(epoch))
		buf[8] = byte(len(wrapped))
		copy(buf[9:], wrapped)
	}
	if _, err := c.file.WriteAt(buf, (epoch%cvcSlots)*cvcSlotSize); err != nil {
		return fmt.Errorf("writing cvc key slot: %w", err)
	}
	return c.file.Sync()
}

func (c *cvcKeyring) close() error { return c.file.Close() }

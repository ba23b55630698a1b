package vaultstore

import (
	"context"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
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

// cvcKeyring holds the live CVC keys in memory, backed by a cvcKeyStore:
// the slot file beside Badger's files, or entries of a shared engine.
type cvcKeyring struct {
	mu      sync.Mutex
	store   cvcKeyStore
	masters *masterKeys
	keys    map[int64]cipher.AEAD
}

// cvcKeyStore keeps the wrapped CVC keys, one per epoch.
type cvcKeyStore interface {
	// all returns every stored key, by epoch.
	all(ctx context.Context) (map[int64][]byte, error)
	// get returns the key of epoch, or ErrNotFound.
	get(ctx context.Context, epoch int64) ([]byte, error)
	// create stores wrapped as epoch's key unless it has one already, and
	// returns the key the epoch has now. It is durable when it returns.
	create(ctx context.Context, epoch int64, wrapped []byte) ([]byte, error)
	// replace rewrites epoch's key in place (a master key rotation).
	replace(ctx context.Context, epoch int64, wrapped []byte) error
	// erase destroys epoch's key.
	erase(ctx context.Context, epoch int64) error
	close() error
}

func openCVCKeyring(ctx context.Context, store cvcKeyStore, masters *masterKeys) (*cvcKeyring, error) {
	c := &cvcKeyring{store: store, masters: masters, keys: make(map[int64]cipher.AEAD)}
	stored, err := store.all(ctx)
	if err != nil {
		return nil, err
	}
	for epoch, wrapped := range stored {
		if aead, err := c.unwrap(epoch, wrapped); err == nil {
			c.keys[epoch] = aead
		}
	}
	return c, nil
}

// unwrap opens a stored key; a key that does not open (not ours, or torn
// by a crash before its sync) is unusable either way.
func (c *cvcKeyring) unwrap(epoch int64, wrapped []byte) (cipher.AEAD, error) {
	raw, _, err := c.masters.unwrap(wrapped, cvcKeyAAD(epoch))
	if err != nil {
		return nil, err
	}
	defer clear(raw)
	return newAEAD(raw)
}

func cvcKeyAAD(epoch int64) []byte { return []byte("cvc|" + strconv.FormatInt(epoch, 10)) }

// epochFor is the epoch a CVC that must be gone by expires is sealed in:
// the last one that ends by then, so its key is destroyed at the latest
// one sweep after the retention ends, but not one that has ended by now.
func epochFor(expires, now time.Time) int64 {
	return max(expires.UnixNano()/int64(cvcEpoch), now.UnixNano()/int64(cvcEpoch)+1)
}

// epochEnded reports whether epoch's time is over at now.
func epochEnded(epoch int64, now time.Time) bool { return epoch*int64(cvcEpoch) <= now.UnixNano() }

// seal encrypts a CVC that must be gone by expires. The key is durable in
// the key store before anything sealed under it is returned; when another
// node made the epoch's key first, that key is used.
func (c *cvcKeyring) seal(ctx context.Context, cvc string, expires, now time.Time, aad []byte) ([]byte, error) {
	epoch := epochFor(expires, now)
	c.mu.Lock()
	aead := c.keys[epoch]
	if aead == nil {
		var err error
		if aead, err = c.createKey(ctx, epoch); err != nil {
			c.mu.Unlock()
			return nil, fmt.Errorf("creating cvc key: %w", err)
		}
		c.keys[epoch] = aead
	}
	c.mu.Unlock()
	sealed, err := seal(aead, 1, []byte(cvc), aad)
	if err != nil {
		return nil, err
	}
	out := binary.BigEndian.AppendUint64(make([]byte, 0, cvcKeyHeader+len(sealed)), uint64(epoch))
	return append(out, sealed...), nil
}

// createKey makes a key for epoch, or takes the one stored already.
func (c *cvcKeyring) createKey(ctx context.Context, epoch int64) (cipher.AEAD, error) {
	raw := randomBytes(MasterKeySize)
	defer clear(raw)
	wrapped, err := c.masters.wrap(1, raw, cvcKeyAAD(epoch))
	if err != nil {
		return nil, err
	}
	stored, err := c.store.create(ctx, epoch, wrapped)
	if err != nil {
		return nil, err
	}
	return c.unwrap(epoch, stored)
}

// open decrypts a sealed CVC; errCVCShredded once its key is destroyed.
func (c *cvcKeyring) open(ctx context.Context, blob, aad []byte) (string, error) {
	if len(blob) < cvcKeyHeader {
		return "", ErrIntegrity
	}
	epoch := int64(binary.BigEndian.Uint64(blob[:cvcKeyHeader]))
	c.mu.Lock()
	aead := c.keys[epoch]
	c.mu.Unlock()
	if aead == nil {
		// another node may have made it since this one started
		wrapped, err := c.store.get(ctx, epoch)
		if errors.Is(err, ErrNotFound) {
			return "", errCVCShredded
		}
		if err != nil {
			return "", fmt.Errorf("reading cvc key: %w", err)
		}
		if aead, err = c.unwrap(epoch, wrapped); err != nil {
			return "", errCVCShredded
		}
		c.mu.Lock()
		c.keys[epoch] = aead
		c.mu.Unlock()
	}
	plain, err := open(aead, blob[cvcKeyHeader:], aad)
	if err != nil {
		return "", err
	}
	return string(plain), nil
}

// shred destroys every key whose epoch has ended by now: those this node
// holds and, in a shared store, those other nodes made.
func (c *cvcKeyring) shred(ctx context.Context, now time.Time) error {
	stored, err := c.store.all(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ended := map[int64]bool{}
	for epoch := range c.keys {
		ended[epoch] = epochEnded(epoch, now)
	}
	for epoch := range stored {
		ended[epoch] = ended[epoch] || epochEnded(epoch, now)
	}
	var errs []error
	for epoch, over := range ended {
		if !over {
			continue
		}
		if err := c.store.erase(ctx, epoch); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(c.keys, epoch)
	}
	return errors.Join(errs...)
}

// rewrap wraps every live CVC key under the current master key, one at a
// time; each is rewritten in place and made durable, so an interruption
// leaves every key under one master key or the other.
func (c *cvcKeyring) rewrap(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	stored, err := c.store.all(ctx)
	if err != nil {
		return err
	}
	for epoch, wrapped := range stored {
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
		if err := c.store.replace(ctx, epoch, next); err != nil {
			return err
		}
	}
	return nil
}

func (c *cvcKeyring) close() error { return c.store.close() }

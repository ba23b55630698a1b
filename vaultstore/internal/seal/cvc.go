package seal

import (
	"context"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Card verification codes may be kept only briefly (the tenant's CVC
// Retention quota) and must then be unrecoverable, even to someone with
// the stored data and the master key. Deleting a record is not enough:
// Badger keeps old values in its log until compaction. So a CVC is sealed
// under a short-lived key, one per CVCEpoch of expiry time, kept wrapped
// in a CVCKeyStore (the vault's: a file of fixed slots beside Badger's,
// overwritten with zeros in place and synced, or entries of a shared
// engine); when the epoch ends, its key is erased there. The sealed CVC
// may linger in the engine's files, but its key no longer exists.
const (
	// CVCEpoch is the span of expiry times one CVC key serves.
	CVCEpoch = time.Minute
	// CVCHeader is the length of the epoch number in front of a sealed
	// CVC.
	CVCHeader = 8
)

// ErrCVCShredded reports a CVC whose key is gone.
var ErrCVCShredded = errors.New("cvc key destroyed")

// ErrNoKey is what CVCKeyStore.Get wraps for an epoch without a key.
var ErrNoKey = errors.New("no key stored")

// CVCKeys holds the live CVC keys in memory, backed by a CVCKeyStore.
type CVCKeys struct {
	mu      sync.Mutex
	store   CVCKeyStore
	masters *Masters
	keys    map[int64]cipher.AEAD
}

// CVCKeyStore keeps the wrapped CVC keys, one per epoch.
type CVCKeyStore interface {
	// All returns every stored key, by epoch.
	All(ctx context.Context) (map[int64][]byte, error)
	// Get returns the key of epoch, or an error wrapping ErrNoKey.
	Get(ctx context.Context, epoch int64) ([]byte, error)
	// Create stores wrapped as epoch's key unless it has one already, and
	// returns the key the epoch has now. It is durable when it returns.
	Create(ctx context.Context, epoch int64, wrapped []byte) ([]byte, error)
	// Replace rewrites epoch's key in place (a master key rotation).
	Replace(ctx context.Context, epoch int64, wrapped []byte) error
	// Erase destroys epoch's key.
	Erase(ctx context.Context, epoch int64) error
	// Close releases the store.
	Close() error
}

// OpenCVCKeys loads the keys store holds that masters unwrap.
func OpenCVCKeys(ctx context.Context, store CVCKeyStore, masters *Masters) (*CVCKeys, error) {
	c := &CVCKeys{store: store, masters: masters, keys: make(map[int64]cipher.AEAD)}
	stored, err := store.All(ctx)
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
func (c *CVCKeys) unwrap(epoch int64, wrapped []byte) (cipher.AEAD, error) {
	raw, _, err := c.masters.Unwrap(wrapped, CVCKeyAAD(epoch))
	if err != nil {
		return nil, err
	}
	defer clear(raw)
	return NewAEAD(raw)
}

// EpochFor is the epoch a CVC that must be gone by expires is sealed in:
// the last one that ends by then, so its key is destroyed at the latest
// one sweep after the retention ends, but not one that has ended by now.
func EpochFor(expires, now time.Time) int64 {
	return max(expires.UnixNano()/int64(CVCEpoch), now.UnixNano()/int64(CVCEpoch)+1)
}

// EpochEnded reports whether epoch's time is over at now.
func EpochEnded(epoch int64, now time.Time) bool { return epoch*int64(CVCEpoch) <= now.UnixNano() }

// Seal encrypts a CVC that must be gone by expires. The key is durable in
// the key store before anything sealed under it is returned; when another
// node made the epoch's key first, that key is used.
func (c *CVCKeys) Seal(ctx context.Context, cvc string, expires, now time.Time, aad []byte) ([]byte, error) {
	epoch := EpochFor(expires, now)
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
	sealed, err := Seal(aead, 1, []byte(cvc), aad)
	if err != nil {
		return nil, err
	}
	out := binary.BigEndian.AppendUint64(make([]byte, 0, CVCHeader+len(sealed)), uint64(epoch))
	return append(out, sealed...), nil
}

// createKey makes a key for epoch, or takes the one stored already.
func (c *CVCKeys) createKey(ctx context.Context, epoch int64) (cipher.AEAD, error) {
	raw := RandomBytes(KeySize)
	defer clear(raw)
	wrapped, err := c.masters.Wrap(1, raw, CVCKeyAAD(epoch))
	if err != nil {
		return nil, err
	}
	stored, err := c.store.Create(ctx, epoch, wrapped)
	if err != nil {
		return nil, err
	}
	return c.unwrap(epoch, stored)
}

// Open decrypts a sealed CVC; ErrCVCShredded once its key is destroyed.
func (c *CVCKeys) Open(ctx context.Context, blob, aad []byte) (string, error) {
	if len(blob) < CVCHeader {
		return "", ErrIntegrity
	}
	epoch := int64(binary.BigEndian.Uint64(blob[:CVCHeader]))
	c.mu.Lock()
	aead := c.keys[epoch]
	c.mu.Unlock()
	if aead == nil {
		// another node may have made it since this one started
		wrapped, err := c.store.Get(ctx, epoch)
		if errors.Is(err, ErrNoKey) {
			return "", ErrCVCShredded
		}
		if err != nil {
			return "", fmt.Errorf("reading cvc key: %w", err)
		}
		if aead, err = c.unwrap(epoch, wrapped); err != nil {
			return "", ErrCVCShredded
		}
		c.mu.Lock()
		c.keys[epoch] = aead
		c.mu.Unlock()
	}
	plain, err := Open(aead, blob[CVCHeader:], aad)
	if err != nil {
		return "", err
	}
	return string(plain), nil
}

// Shred destroys every key whose epoch has ended by now: those this node
// holds and, in a shared store, those other nodes made.
func (c *CVCKeys) Shred(ctx context.Context, now time.Time) error {
	stored, err := c.store.All(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ended := map[int64]bool{}
	for epoch := range c.keys {
		ended[epoch] = EpochEnded(epoch, now)
	}
	for epoch := range stored {
		ended[epoch] = ended[epoch] || EpochEnded(epoch, now)
	}
	var errs []error
	for epoch, over := range ended {
		if !over {
			continue
		}
		if err := c.store.Erase(ctx, epoch); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(c.keys, epoch)
	}
	return errors.Join(errs...)
}

// Rewrap wraps every live CVC key under the current master key, one at a
// time; each is rewritten in place and made durable, so an interruption
// leaves every key under one master key or the other.
func (c *CVCKeys) Rewrap(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	stored, err := c.store.All(ctx)
	if err != nil {
		return err
	}
	for epoch, wrapped := range stored {
		raw, current, err := c.masters.Unwrap(wrapped, CVCKeyAAD(epoch))
		if err != nil {
			return fmt.Errorf("cvc key of epoch %d: %w", epoch, err)
		}
		if current {
			clear(raw)
			continue
		}
		next, err := c.masters.Wrap(1, raw, CVCKeyAAD(epoch))
		clear(raw)
		if err != nil {
			return err
		}
		if err := c.store.Replace(ctx, epoch, next); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the key store.
func (c *CVCKeys) Close() error { return c.store.Close() }

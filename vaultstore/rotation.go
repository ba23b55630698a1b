package vaultstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// Master key rotation rewraps every key the master key wraps (tenant data
// keys, fingerprint keys, CVC keys) under a new master key; no record is
// re-encrypted, since records are sealed under the data keys. The store
// keeps serving: values wrapped under either key open while it runs.
//
// It is safe to interrupt: the meta file records the rotation (KeyCheck
// the old key, RotatingTo the new) before the first rewrap and forgets it
// after the last; each rewrap is one transaction (or one synced slot
// write). Opening a store whose rotation was interrupted needs both keys
// and finishes the rotation before serving.

// RotateMasterKey rewraps every wrapped key under newKey and makes it the
// store's master key. Afterwards only newKey opens the store: the
// configuration must name it before the next start.
func (s *Store) RotateMasterKey(ctx context.Context, newKey []byte) error {
	s.rotating.Lock()
	defer s.rotating.Unlock()
	if len(newKey) != MasterKeySize {
		return fmt.Errorf("the new master key must be %d bytes", MasterKeySize)
	}
	if err := s.masters.add(newKey); err != nil {
		return err
	}
	old, next := s.masters.currentCheck(), keyCheck(newKey)
	if bytes.Equal(old, next) {
		return nil
	}
	meta, err := s.meta.load(ctx)
	if err != nil {
		return err
	}
	meta.KeyCheck, meta.RotatingTo = old, next
	if err := s.meta.save(ctx, meta); err != nil {
		return fmt.Errorf("recording the rotation: %w", err)
	}
	return s.finishMasterRotation(ctx, meta)
}

// finishMasterRotation rewraps everything under the key meta.RotatingTo
// names, then records it as the master key.
func (s *Store) finishMasterRotation(ctx context.Context, meta *storeMeta) error {
	if err := s.masters.promote(meta.RotatingTo); err != nil {
		return err
	}
	n, err := s.rewrapAll(ctx)
	if err != nil {
		return err
	}
	if err := s.cvc.rewrap(ctx); err != nil {
		return fmt.Errorf("rewrapping cvc keys: %w", err)
	}
	meta.KeyCheck, meta.RotatingTo = meta.RotatingTo, nil
	if err := s.meta.save(ctx, meta); err != nil {
		return fmt.Errorf("recording the new master key: %w", err)
	}
	s.masters.keepOnlyCurrent()
	s.logger.Info("master key rotated", zap.Int("keys_rewrapped", n))
	return nil
}

// rewrapBatch bounds the keys rewrapped in one transaction.
const rewrapBatch = 256

// rewrapAll rewraps every tenant data key and fingerprint key that the
// current master key did not wrap, and returns how many it rewrapped.
func (s *Store) rewrapAll(ctx context.Context) (int, error) {
	total := 0
	for _, prefix := range [][]byte{[]byte(keyVersion + "dek/"), []byte(keyVersion + "fpk/")} {
		var after []byte
		for {
			var keys [][]byte
			err := s.kv.View(ctx, func(r Reader) error {
				keys = keys[:0]
				return r.Scan(prefix, after, func(key, wrapped []byte) error {
					if len(keys) == rewrapBatch {
						return ErrStopScan
					}
					keys = append(keys, key)
					return nil
				})
			})
			if err != nil {
				return total, err
			}
			if len(keys) == 0 {
				break
			}
			n := 0
			err = s.kv.Update(ctx, func(w Writer) error {
				n = 0
				for _, key := range keys {
					changed, err := s.rewrapOne(w, key)
					if err != nil {
						return err
					}
					if changed {
						n++
					}
				}
				return nil
			})
			if err != nil {
				return total, err
			}
			total += n
			after = keys[len(keys)-1]
		}
	}
	return total, nil
}

// rewrapOne rewraps one wrapped key if an older master key wrapped it.
func (s *Store) rewrapOne(w Writer, key []byte) (bool, error) {
	wrapped, err := w.Get(key)
	if errors.Is(err, ErrNotFound) {
		return false, nil // its tenant was deleted meanwhile
	} else if err != nil {
		return false, err
	}
	aad, version, err := wrappedKeyAAD(key)
	if err != nil {
		return false, err
	}
	raw, current, err := s.masters.unwrap(wrapped, aad)
	if err != nil {
		return false, fmt.Errorf("unwrapping %s: %w", key, err)
	}
	defer clear(raw)
	if current {
		return false, nil
	}
	next, err := s.masters.wrap(version, raw, aad)
	if err != nil {
		return false, err
	}
	return true, w.Put(key, next, 0)
}

// wrappedKeyAAD is the associated data (and seal version) a wrapped key
// under key was sealed with.
func wrappedKeyAAD(key []byte) ([]byte, uint32, error) {
	rest, ok := strings.CutPrefix(string(key), keyVersion)
	if !ok {
		return nil, 0, fmt.Errorf("not a wrapped key: %s", key)
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 3 && parts[0] == "dek":
		v, err := strconv.ParseUint(parts[2], 16, 32)
		if err != nil {
			return nil, 0, fmt.Errorf("data key version in %s: %w", key, err)
		}
		return dataKeyAAD(parts[1], uint32(v)), uint32(v), nil
	case len(parts) == 2 && parts[0] == "fpk":
		return fingerprintKeyAAD(parts[1]), 1, nil
	}
	return nil, 0, fmt.Errorf("not a wrapped key: %s", key)
}

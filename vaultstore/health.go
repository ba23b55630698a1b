package vaultstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/kv/badgerkv"
)

// healthKey is where a single-node store's health check writes; it is
// not any tenant's.
var healthKey = []byte(keyVersion + "health")

// healthKeyTTL lets the health entries of processes that shared the
// engine and are gone vanish by themselves.
const healthKeyTTL = 24 * time.Hour

// healthEntry is where this process's health check writes: processes that
// share an engine write their own entries, so one's check never conflicts
// with or reads another's.
func (s *Store) healthEntry() []byte {
	if s.dir != "" {
		return healthKey
	}
	return []byte(keyVersion + "health/" + s.node)
}

// CheckHealth reports whether the store answers a write and a read: it
// writes the time under a key of its own (durably, as every write) and
// reads it back. While the disk is too full for writes (see Disk), it
// checks only that the store answers a read.
func (s *Store) CheckHealth(ctx context.Context) error {
	want := strconv.FormatInt(s.now().UnixNano(), 10)
	key := s.healthEntry()
	var ttl time.Duration
	if s.dir == "" {
		ttl = healthKeyTTL
	}
	if err := s.kv.Update(ctx, func(w Writer) error { return w.Put(key, []byte(want), ttl) }); err != nil {
		if errors.Is(err, ErrNoSpace) {
			// writes wait for disk space (Disk tells); reads must still work
			return s.kv.View(ctx, func(r Reader) error {
				if _, err := r.Get(key); err != nil && !errors.Is(err, ErrNotFound) {
					return fmt.Errorf("store read: %w", err)
				}
				return nil
			})
		}
		return fmt.Errorf("store write: %w", err)
	}
	return s.kv.View(ctx, func(r Reader) error {
		got, err := r.Get(key)
		if err != nil {
			return fmt.Errorf("store read: %w", err)
		}
		if string(got) != want {
			return fmt.Errorf("store read: a different value than was just written")
		}
		return nil
	})
}

// DiskStatus is the state of the storage engine's file system.
type DiskStatus struct {
	// FreeBytes is the space left on it for the vault.
	FreeBytes int64
	// MarginBytes is the free space under which writes are refused (507):
	// what the storage engine may still write on its own, plus
	// ReserveBytes.
	MarginBytes int64
	// ReserveBytes is the last part of the margin, which only the audit
	// records of reads may use, so that reads go on.
	ReserveBytes int64
	// Writable reports whether writes are admitted.
	Writable bool
	// ReadsAudited reports whether the audit records of reads still fit
	// (reads work).
	ReadsAudited bool
	// RefusedWrites counts writes refused for space since the store opened.
	RefusedWrites int64
}

// Disk reports the free space on the storage engine's file system, and
// whether writes are admitted; ok is false for an engine without a local
// disk, or one whose free space cannot be read.
func (s *Store) Disk() (d DiskStatus, ok bool) {
	e, ok := engineAs[interface{ Disk() badgerkv.Disk }](s.kv)
	if !ok {
		return DiskStatus{}, false
	}
	bd := e.Disk()
	if !bd.Known {
		return DiskStatus{}, false
	}
	return DiskStatus{FreeBytes: bd.FreeBytes, MarginBytes: bd.MarginBytes, ReserveBytes: bd.ReserveBytes,
		Writable: bd.Writable, ReadsAudited: bd.ReadsAudited, RefusedWrites: bd.RefusedWrites}, true
}

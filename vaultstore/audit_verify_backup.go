package vaultstore

// Offline verification of the audit chains in a backup file, with the
// master key it was taken with: the backup is read into memory (it is
// checked frame by frame as a restore checks it), and each tenant's chain
// is verified there as on the live store.

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// BackupAudit is what VerifyBackupAudit found in a backup.
type BackupAudit struct {
	// Reports are the tenants' chains verified, in tenant id order.
	Reports []*AuditChainReport
	// Keys are the tenants' chain keys (hex), to verify an exported file.
	Keys AuditFileKeys
	// Heads are the tenants' last sequence numbers at the backup.
	Heads AuditFileHeads
	// CreatedAt is when the backup was taken.
	CreatedAt time.Time
}

// VerifyBackupAudit reads a backup with the master key it was taken with
// and verifies the audit chain of tenantID, or of every tenant when it is
// empty. A tenant the backup does not hold is ErrNotFound.
func VerifyBackupAudit(ctx context.Context, r io.Reader, masterKey []byte, tenantID string, since AuditSince) (*BackupAudit, error) {
	if len(masterKey) != MasterKeySize {
		return nil, fmt.Errorf("the master key must be %d bytes, got %d", MasterKeySize, len(masterKey))
	}
	mem := &memTarget{}
	stats, err := restoreInto(r, RestoreOptions{Dir: "memory", MasterKey: masterKey}, mem)
	if err != nil {
		return nil, err
	}
	masters, err := newMasterKeys(masterKey)
	if err != nil {
		return nil, err
	}
	ring := newKeyring(masters)
	out := &BackupAudit{Keys: AuditFileKeys{}, Heads: AuditFileHeads{}, CreatedAt: stats.CreatedAt}
	var tenants []string
	prefix := tenantPrefix()
	_ = mem.Scan(prefix, nil, func(k, _ []byte) error {
		tenants = append(tenants, string(k[len(prefix):]))
		return nil
	})
	if tenantID != "" {
		if !slices.Contains(tenants, tenantID) {
			return nil, fmt.Errorf("tenant %s: %w", tenantID, ErrNotFound)
		}
		tenants = []string{tenantID}
	}
	for _, tid := range tenants {
		tk, err := ring.forTenant(mem, tid)
		if err != nil {
			return nil, fmt.Errorf("the keys of tenant %s: %w", tid, err)
		}
		rep, err := verifyChain(ctx, mem, tk, tid, since)
		if err != nil {
			return nil, err
		}
		out.Reports = append(out.Reports, rep)
		out.Keys[tid] = hex.EncodeToString(auditChainKey(tk))
		out.Heads[tid] = rep.HeadSeq
	}
	return out, nil
}

// memTarget is a restore target in memory, read back as a kv.Reader.
type memTarget struct {
	keys   [][]byte
	values map[string][]byte
}

func (m *memTarget) open() (kv.Loader, error) { return m, nil }

func (m *memTarget) finish([]byte, int) error {
	sort.Slice(m.keys, func(i, j int) bool { return bytes.Compare(m.keys[i], m.keys[j]) < 0 })
	return nil
}

func (m *memTarget) discard() error { return nil }

// Load implements kv.Loader.
func (m *memTarget) Load(ctx context.Context, next func() (key, value []byte, expiresAt time.Time, err error)) error {
	m.values = map[string][]byte{}
	for {
		k, v, _, err := next()
		if errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if _, dup := m.values[string(k)]; !dup {
			m.keys = append(m.keys, slices.Clone(k))
		}
		m.values[string(k)] = slices.Clone(v)
	}
}

// Get implements kv.Reader.
func (m *memTarget) Get(key []byte) ([]byte, error) {
	v, ok := m.values[string(key)]
	if !ok {
		return nil, ErrNotFound
	}
	return slices.Clone(v), nil
}

// Scan implements kv.Reader.
func (m *memTarget) Scan(prefix, after []byte, fn func(key, value []byte) error) error {
	i := sort.Search(len(m.keys), func(i int) bool { return bytes.Compare(m.keys[i], prefix) >= 0 })
	if after != nil {
		i = max(i, sort.Search(len(m.keys), func(i int) bool { return bytes.Compare(m.keys[i], after) > 0 }))
	}
	for ; i < len(m.keys) && bytes.HasPrefix(m.keys[i], prefix); i++ {
		if err := fn(slices.Clone(m.keys[i]), slices.Clone(m.values[string(m.keys[i])])); err != nil {
			if errors.Is(err, ErrStopScan) {
				return nil
			}
			return err
		}
	}
	return nil
}

package vaultstore

// Retention of chained audit records. They have no time to live: a record
// that vanished on its own could not be told from one deleted by hand. The
// sweep removes them instead, in sequence order, once the tenant's log
// retention has passed since they were written, and in the same
// transaction moves the tenant's checkpoint to the last record removed
// (its sequence number and MAC). Verification starts from the checkpoint,
// so the chain after it must be whole, and nothing before it can be
// removed unnoticed but what retention removes anyway.
//
// The purge checks every record it removes, as verification would: a gap,
// a record changed or moved, or a broken link is counted in the
// checkpoint, with the first one kept, so verification goes on reporting
// it after the evidence is gone; the purge passes over it so that a
// damaged log does not grow without bound.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// auditPurgeBatch bounds the records one purge transaction removes.
const auditPurgeBatch = 256

// purgeAuditChains removes every tenant's audit records past retention.
func (s *Store) purgeAuditChains(ctx context.Context, now time.Time) error {
	tenants, err := s.ListTenants(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range tenants {
		if err := s.purgeAuditChain(ctx, t, now); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, fmt.Errorf("purging the audit records of tenant %s: %w", t.ID, err))
		}
	}
	return errors.Join(errs...)
}

// purgeAuditChain removes the tenant's records created before now less
// its log retention, oldest sequence first, batch by batch.
func (s *Store) purgeAuditChain(ctx context.Context, t *Tenant, now time.Time) error {
	retention := time.Duration(t.Quotas.LogRetentionSeconds) * time.Second
	if retention <= 0 {
		retention = time.Duration(DefaultQuotas.LogRetentionSeconds) * time.Second
	}
	cutoff := now.Add(-retention)
	for ctx.Err() == nil {
		type due struct {
			seq  uint64
			slot string
		}
		var batch []due
		err := s.kv.View(ctx, func(r Reader) error {
			batch = batch[:0]
			tk, err := s.tenantKeysFor(r, t.ID)
			if err != nil {
				return err
			}
			ckpt, _, err := readMark(r, auditChainKey(tk), "checkpoint", t.ID, auditCheckpointKey(t.ID))
			if err != nil {
				return err
			}
			prefix := auditSeqPrefix(t.ID)
			var after []byte
			if ckpt.Seq > 0 {
				after = auditSeqKey(t.ID, ckpt.Seq)
			}
			return r.Scan(prefix, after, func(k, v []byte) error {
				seq, ok := parseAuditSeqKey(prefix, k)
				if !ok {
					return nil
				}
				at, ok := auditSlotTime(string(v))
				if ok && !at.Before(cutoff) || len(batch) == auditPurgeBatch {
					return ErrStopScan
				}
				batch = append(batch, due{seq, string(v)})
				return nil
			})
		})
		if err != nil || len(batch) == 0 {
			if errors.Is(err, ErrNotFound) {
				return nil // the tenant is gone
			}
			return err
		}
		var found uint64
		err = s.kv.Update(ctx, func(w Writer) error {
			found = 0
			tk, err := s.tenantKeysFor(w, t.ID)
			if err != nil {
				return err
			}
			key := auditChainKey(tk)
			ckpt, _, err := readMark(w, key, "checkpoint", t.ID, auditCheckpointKey(t.ID))
			if err != nil {
				return err
			}
			if len(batch) > 0 && batch[0].seq <= ckpt.Seq {
				return nil // another sweep got here first; the next round sees its checkpoint
			}
			note := func(f AuditChainFault) {
				found++
				if ckpt.Faults++; ckpt.FirstFault == nil {
					ckpt.FirstFault = &f
				}
			}
			prev := ckpt.MAC
			if ckpt.Seq == 0 {
				prev = hex.EncodeToString(make([]byte, auditMACSize))
			}
			for _, d := range batch {
				if d.seq > ckpt.Seq+1 {
					note(AuditChainFault{Kind: FaultGap, Seq: ckpt.Seq + 1, LastSeq: d.seq - 1,
						Detail: fmt.Sprintf("records %d to %d are missing", ckpt.Seq+1, d.seq-1)})
					prev = ""
				}
				var cr ChainedAuditRecord
				err := s.getSealed(w, tk, "audit", t.ID, d.slot, auditKey(t.ID, d.slot), &cr)
				switch {
				case errors.Is(err, ErrNotFound):
					note(AuditChainFault{Kind: FaultGap, Seq: d.seq, LastSeq: d.seq, Detail: fmt.Sprintf("record %d is missing", d.seq)})
					prev = ""
				case err != nil:
					note(AuditChainFault{Kind: FaultModified, Seq: d.seq, Detail: fmt.Sprintf("record %d does not open: it was changed or moved", d.seq)})
					prev = ""
				case cr.Seq != d.seq:
					note(AuditChainFault{Kind: FaultReordered, Seq: d.seq, Detail: fmt.Sprintf("the place of record %d holds record %d", d.seq, cr.Seq)})
					prev = ""
				case cr.TenantID != t.ID || !cr.checkMAC(key):
					note(AuditChainFault{Kind: FaultModified, Seq: d.seq, Detail: fmt.Sprintf("record %d does not match its MAC", d.seq)})
					prev = ""
				default:
					if prev != "" && cr.Prev != prev {
						note(AuditChainFault{Kind: FaultForked, Seq: d.seq, Detail: fmt.Sprintf("record %d does not follow record %d", d.seq, d.seq-1)})
					}
					prev = cr.MAC
				}
				if err := w.Delete(auditKey(t.ID, d.slot)); err != nil {
					return err
				}
				if err := w.Delete(auditSeqKey(t.ID, d.seq)); err != nil {
					return err
				}
				ckpt.Seq, ckpt.MAC, ckpt.Purged = d.seq, prev, ckpt.Purged+1
				if at, ok := auditSlotTime(d.slot); ok {
					ckpt.At = at.UnixMicro()
				}
			}
			encoded, err := encodeMark(key, "checkpoint", t.ID, ckpt)
			if err != nil {
				return err
			}
			return w.Put(auditCheckpointKey(t.ID), encoded, 0)
		})
		if err != nil {
			return err
		}
		if found > 0 {
			s.logger.Error("the audit chain purge found records missing or changed; the checkpoint keeps the first",
				zap.String("tenant", t.ID), zap.Uint64("faults", found))
		}
		if len(batch) < auditPurgeBatch {
			return nil
		}
	}
	return ctx.Err()
}

package vaultstore

// Verification of a tenant's audit chain (audit_chain.go): on the live
// store, in a backup, or in an exported log file. A report names faults by
// kind and sequence number, never with a record's content.

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kinds of AuditChainFault.
const (
	// FaultGap: records are missing in the middle of the chain.
	FaultGap = "gap"
	// FaultModified: a record does not open, or its MAC does not match
	// its content.
	FaultModified = "modified"
	// FaultReordered: a record is not in its place (another record's
	// position, or out of sequence in a file).
	FaultReordered = "reordered"
	// FaultTruncated: records are missing at the end of the chain, before
	// the head the store keeps (or the head a file is checked against).
	FaultTruncated = "truncated"
	// FaultForked: a record is whole but does not follow the record
	// before it.
	FaultForked = "forked"
	// FaultMark: the chain's head or checkpoint fails its integrity check.
	FaultMark = "checkpoint"
)

// maxReportedFaults bounds the faults a report lists; FaultCount counts all.
const maxReportedFaults = 50

// AuditChainFault is one fault verification found.
type AuditChainFault struct {
	// Kind is gap, modified, reordered, truncated, forked or checkpoint.
	Kind string `json:"kind"`
	// Seq is the first sequence number concerned.
	Seq uint64 `json:"seq"`
	// LastSeq, for a gap or a truncation, is the last one missing.
	LastSeq uint64 `json:"last_seq,omitempty"`
	// Detail says what was found, with sequence numbers only.
	Detail string `json:"detail"`
}

// AuditChainReport is the outcome of verifying one tenant's chain.
type AuditChainReport struct {
	TenantID string `json:"tenant_id"`
	// OK is true when no fault was found.
	OK bool `json:"ok"`
	// Verified counts the records whose MAC and link were checked.
	Verified uint64 `json:"verified"`
	// FirstSeq and LastSeq bound the records verified.
	FirstSeq uint64 `json:"first_seq,omitempty"`
	LastSeq  uint64 `json:"last_seq,omitempty"`
	// HeadSeq is the last sequence number the store gave (0: none).
	HeadSeq uint64 `json:"head_seq,omitempty"`
	// CheckpointSeq is the last record the retention purge removed; the
	// chain verifies from the record after it.
	CheckpointSeq uint64 `json:"checkpoint_seq,omitempty"`
	// Purged counts the records the purge removed.
	Purged uint64 `json:"purged,omitempty"`
	// Faults are the first faults in sequence order; FaultCount counts
	// them all.
	Faults     []AuditChainFault `json:"faults"`
	FaultCount int               `json:"fault_count"`
}

func (rep *AuditChainReport) fault(f AuditChainFault) {
	rep.FaultCount++
	rep.Faults = append(rep.Faults, f)
}

func (rep *AuditChainReport) finish() {
	slices.SortStableFunc(rep.Faults, func(a, b AuditChainFault) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	if len(rep.Faults) > maxReportedFaults {
		rep.Faults = rep.Faults[:maxReportedFaults]
	}
	if rep.Faults == nil {
		rep.Faults = []AuditChainFault{}
	}
	rep.OK = rep.FaultCount == 0
}

// AuditSince is where verification starts: at a sequence number, or at
// the first record created at or after a time; zero for the whole chain.
type AuditSince struct {
	Seq  uint64
	Time time.Time
}

// ParseAuditSince reads --since: a sequence number, or an RFC 3339 time.
func ParseAuditSince(v string) (AuditSince, error) {
	if v == "" {
		return AuditSince{}, nil
	}
	if n, err := strconv.ParseUint(v, 10, 64); err == nil {
		return AuditSince{Seq: n}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return AuditSince{}, invalid("since", "since must be a sequence number or an RFC 3339 time")
	}
	return AuditSince{Time: t}, nil
}

func (s AuditSince) skips(seq uint64, slot string) bool {
	if s.Seq > 0 {
		return seq < s.Seq
	}
	if !s.Time.IsZero() {
		at, ok := auditSlotTime(slot)
		return ok && at.Before(s.Time)
	}
	return false
}

// VerifyAuditChain verifies the tenant's audit chain in the live store.
func (s *Store) VerifyAuditChain(ctx context.Context, tenantID string, since AuditSince) (*AuditChainReport, error) {
	var rep *AuditChainReport
	err := s.kv.View(ctx, func(r Reader) error {
		tk, err := s.tenantKeysFor(r, tenantID)
		if err != nil {
			return err
		}
		rep, err = verifyChain(ctx, r, tk, tenantID, since)
		return err
	})
	return rep, err
}

// AuditChainKey returns the key that verifies the tenant's exported audit
// records, hex-encoded, and the chain's last sequence number now (0 for
// none). Whoever holds the key can check an exported file, and could also
// forge one: it is handed to operators only (admin API).
func (s *Store) AuditChainKey(ctx context.Context, tenantID string) (key string, head uint64, err error) {
	err = s.kv.View(ctx, func(r Reader) error {
		tk, err := s.tenantKeysFor(r, tenantID)
		if err != nil {
			return err
		}
		k := auditChainKey(tk)
		mark, _, err := readMark(r, k, "head", tenantID, auditHeadKey(tenantID))
		if err != nil {
			return err
		}
		key, head = hex.EncodeToString(k), mark.Seq
		return nil
	})
	return key, head, err
}

// unreadable is a record that did not open under its own slot.
type unreadable struct {
	seq  uint64
	slot string
	raw  []byte
}

// maxSwapChecks bounds the unreadable records tried under each other's
// slots to tell a swap from a modification.
const maxSwapChecks = 64

// verifyChain walks the chain index of a tenant in sequence order from
// its checkpoint (or since), checking each record's place, MAC and link,
// then the head.
func verifyChain(ctx context.Context, r Reader, tk *tenantKeys, tenantID string, since AuditSince) (*AuditChainReport, error) {
	key := auditChainKey(tk)
	rep := &AuditChainReport{TenantID: tenantID}
	ckpt, _, err := readMark(r, key, "checkpoint", tenantID, auditCheckpointKey(tenantID))
	if errors.Is(err, errChainMarkForged) {
		rep.fault(AuditChainFault{Kind: FaultMark, Detail: "the checkpoint fails its integrity check"})
		ckpt = &chainMark{}
	} else if err != nil {
		return nil, err
	}
	head, headFound, err := readMark(r, key, "head", tenantID, auditHeadKey(tenantID))
	if errors.Is(err, errChainMarkForged) {
		rep.fault(AuditChainFault{Kind: FaultMark, Detail: "the chain head fails its integrity check"})
		head, headFound = nil, false
	} else if err != nil {
		return nil, err
	}
	rep.CheckpointSeq, rep.Purged = ckpt.Seq, ckpt.Purged
	if ckpt.FirstFault != nil {
		f := *ckpt.FirstFault
		f.Detail = "found by the retention purge: " + f.Detail
		rep.fault(f)
		rep.FaultCount += int(ckpt.Faults) - 1
	}
	if head != nil {
		rep.HeadSeq = head.Seq
	}
	var prev []byte // nil: unknown (after a fault, or before since)
	if ckpt.Seq > 0 {
		if ckpt.MAC != "" { // empty: the purge removed a damaged record last
			prev, _ = hex.DecodeString(ckpt.MAC)
		}
	} else if since.Seq <= 1 && since.Time.IsZero() {
		prev = make([]byte, auditMACSize)
	}
	expect := ckpt.Seq + 1
	var skipped struct {
		seq  uint64
		slot string
	}
	var bad []unreadable
	prefix := auditSeqPrefix(tenantID)
	var after []byte
	if ckpt.Seq > 0 {
		after = auditSeqKey(tenantID, ckpt.Seq)
	}
	if since.Seq > ckpt.Seq+1 { // from the record before since, whose MAC since links to
		after, expect = auditSeqKey(tenantID, since.Seq-2), since.Seq-1
	}
	n := 0
	err = r.Scan(prefix, after, func(k, v []byte) error {
		if n++; n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		seq, ok := parseAuditSeqKey(prefix, k)
		if !ok {
			return nil
		}
		slot := string(v)
		if since.skips(seq, slot) {
			skipped.seq, skipped.slot = seq, slot
			expect = seq + 1
			return nil
		}
		if rep.Verified == 0 && prev == nil && skipped.seq == seq-1 && skipped.slot != "" {
			// the link into the first record verified: the MAC of the
			// record before, as it says (it is not verified itself)
			var before ChainedAuditRecord
			if raw, err := r.Get(auditKey(tenantID, skipped.slot)); err == nil &&
				tk.openRecord("audit", tenantID, skipped.slot, raw, &before) == nil {
				prev, _ = hex.DecodeString(before.MAC)
			}
		}
		if seq > expect {
			rep.fault(AuditChainFault{Kind: FaultGap, Seq: expect, LastSeq: seq - 1,
				Detail: fmt.Sprintf("records %d to %d are missing", expect, seq-1)})
			prev = nil
		}
		expect = seq + 1
		raw, err := r.Get(auditKey(tenantID, slot))
		if errors.Is(err, ErrNotFound) {
			rep.fault(AuditChainFault{Kind: FaultGap, Seq: seq, LastSeq: seq, Detail: fmt.Sprintf("record %d is missing", seq)})
			prev = nil
			return nil
		} else if err != nil {
			return err
		}
		var cr ChainedAuditRecord
		if err := tk.openRecord("audit", tenantID, slot, raw, &cr); err != nil {
			bad = append(bad, unreadable{seq, slot, raw})
			prev = nil
			return nil
		}
		switch {
		case cr.Seq != seq:
			rep.fault(AuditChainFault{Kind: FaultReordered, Seq: seq, Detail: fmt.Sprintf("the place of record %d holds record %d", seq, cr.Seq)})
			prev = nil
			return nil
		case cr.TenantID != tenantID || !cr.checkMAC(key):
			rep.fault(AuditChainFault{Kind: FaultModified, Seq: seq, Detail: fmt.Sprintf("record %d does not match its MAC", seq)})
			prev = nil
			return nil
		case prev != nil && cr.Prev != hex.EncodeToString(prev):
			rep.fault(AuditChainFault{Kind: FaultForked, Seq: seq, Detail: fmt.Sprintf("record %d does not follow record %d", seq, seq-1)})
		}
		prev, _ = hex.DecodeString(cr.MAC)
		if rep.Verified == 0 {
			rep.FirstSeq = seq
		}
		rep.Verified++
		rep.LastSeq = seq
		return nil
	})
	if err != nil {
		return nil, err
	}
	classifyUnreadable(rep, tk, tenantID, bad)
	last := expect - 1
	switch {
	case !headFound && last > 0:
		rep.fault(AuditChainFault{Kind: FaultMark, Seq: last, Detail: "the chain head is missing"})
	case headFound && head.Seq > last:
		rep.fault(AuditChainFault{Kind: FaultTruncated, Seq: last + 1, LastSeq: head.Seq,
			Detail: fmt.Sprintf("records %d to %d, the end of the chain, are missing", last+1, head.Seq)})
	case headFound && head.Seq < last:
		rep.fault(AuditChainFault{Kind: FaultForked, Seq: head.Seq + 1, Detail: fmt.Sprintf("records after the head (%d) are in the index", head.Seq)})
	case headFound && head.Seq == last && last > 0 && prev != nil && head.MAC != hex.EncodeToString(prev):
		rep.fault(AuditChainFault{Kind: FaultForked, Seq: last, Detail: fmt.Sprintf("record %d is not the one the head names", last)})
	}
	rep.finish()
	return rep, nil
}

// classifyUnreadable reports records that did not open: one that opens
// under another unreadable record's slot was moved there (reordered),
// the others were modified.
func classifyUnreadable(rep *AuditChainReport, tk *tenantKeys, tenantID string, bad []unreadable) {
	for i, u := range bad {
		moved := uint64(0)
		if len(bad) <= maxSwapChecks {
			for j, o := range bad {
				var cr ChainedAuditRecord
				if i != j && tk.openRecord("audit", tenantID, o.slot, u.raw, &cr) == nil {
					moved = o.seq
					break
				}
			}
		}
		if moved != 0 {
			rep.fault(AuditChainFault{Kind: FaultReordered, Seq: u.seq, Detail: fmt.Sprintf("the place of record %d holds the record of place %d", u.seq, moved)})
		} else {
			rep.fault(AuditChainFault{Kind: FaultModified, Seq: u.seq, Detail: fmt.Sprintf("record %d does not open: it was changed", u.seq)})
		}
	}
}

// AuditFileKeys are the chain keys an exported file is verified with, by
// tenant id, hex-encoded (from AuditChainKey or a backup).
type AuditFileKeys map[string]string

// AuditFileHeads are the head sequence numbers of the store a file is
// compared with, by tenant id: records up to the head missing from the
// end of the file are a truncation. Nil compares with nothing.
type AuditFileHeads map[string]uint64

// VerifyAuditFile verifies the audit lines of an exported log file: one
// JSON object per line, as the export writes them through Caddy's log
// (format json). Lines without a seq (other loggers, operator events) are
// skipped. Each tenant's lines must follow each other in sequence; the
// first line of a tenant may start anywhere (files rotate), the ones
// after must not skip, repeat or go back. Tenants without a key in keys
// are reported as errors, unless only names one tenant: then the lines
// of the others are skipped. heads, when given, reveal a cut-off end.
func VerifyAuditFile(r io.Reader, keys AuditFileKeys, heads AuditFileHeads, only string) ([]*AuditChainReport, error) {
	type chain struct {
		rep  *AuditChainReport
		key  []byte
		last uint64
		prev string
		max  uint64
	}
	chains := map[string]*chain{}
	var order []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 || b[0] != '{' {
			continue
		}
		var probe struct {
			Seq      *uint64 `json:"seq"`
			TenantID string  `json:"tenant_id"`
			MAC      string  `json:"mac"`
		}
		if json.Unmarshal(b, &probe) != nil || probe.Seq == nil || probe.MAC == "" || only != "" && probe.TenantID != only {
			continue
		}
		c := chains[probe.TenantID]
		if c == nil {
			kh, ok := keys[probe.TenantID]
			if !ok {
				return nil, fmt.Errorf("line %d: no verification key for tenant %s", line, probe.TenantID)
			}
			k, err := hex.DecodeString(strings.TrimSpace(kh))
			if err != nil || len(k) != auditMACSize {
				return nil, fmt.Errorf("the verification key of tenant %s is not 64 hex digits", probe.TenantID)
			}
			c = &chain{rep: &AuditChainReport{TenantID: probe.TenantID}, key: k}
			chains[probe.TenantID] = c
			order = append(order, probe.TenantID)
		}
		var cr ChainedAuditRecord
		if err := json.Unmarshal(b, &cr); err != nil {
			c.rep.fault(AuditChainFault{Kind: FaultModified, Seq: *probe.Seq, Detail: fmt.Sprintf("line %d (record %d) is not a valid record", line, *probe.Seq)})
			continue
		}
		seq := cr.Seq
		switch {
		case c.last != 0 && seq <= c.last:
			c.rep.fault(AuditChainFault{Kind: FaultReordered, Seq: seq, Detail: fmt.Sprintf("line %d holds record %d after record %d", line, seq, c.last)})
			continue // the chain goes on from c.last
		case c.last != 0 && seq > c.last+1:
			c.rep.fault(AuditChainFault{Kind: FaultGap, Seq: c.last + 1, LastSeq: seq - 1, Detail: fmt.Sprintf("records %d to %d are missing before line %d", c.last+1, seq-1, line)})
			c.prev = ""
		}
		switch {
		case !cr.checkMAC(c.key):
			c.rep.fault(AuditChainFault{Kind: FaultModified, Seq: seq, Detail: fmt.Sprintf("line %d (record %d) does not match its MAC", line, seq)})
			c.prev = ""
		default:
			if c.prev != "" && cr.Prev != c.prev {
				c.rep.fault(AuditChainFault{Kind: FaultForked, Seq: seq, Detail: fmt.Sprintf("line %d (record %d) does not follow record %d", line, seq, seq-1)})
			}
			if c.rep.Verified == 0 {
				c.rep.FirstSeq = seq
			}
			c.rep.Verified++
			c.rep.LastSeq = seq
			c.prev = cr.MAC
		}
		c.last, c.max = seq, max(c.max, seq)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the file: %w", err)
	}
	for tid, h := range heads {
		if only != "" && tid != only {
			continue
		}
		c := chains[tid]
		if c == nil {
			if h > 0 {
				rep := &AuditChainReport{TenantID: tid, HeadSeq: h}
				rep.fault(AuditChainFault{Kind: FaultTruncated, Seq: 1, LastSeq: h, Detail: fmt.Sprintf("the file holds none of records 1 to %d", h)})
				chains[tid] = &chain{rep: rep}
				order = append(order, tid)
			}
			continue
		}
		c.rep.HeadSeq = h
		switch {
		case h > c.last:
			c.rep.fault(AuditChainFault{Kind: FaultTruncated, Seq: c.last + 1, LastSeq: h,
				Detail: fmt.Sprintf("records %d to %d, the end of the chain, are missing", c.last+1, h)})
		case h < c.max:
			c.rep.fault(AuditChainFault{Kind: FaultForked, Seq: h + 1, LastSeq: c.max,
				Detail: fmt.Sprintf("the file holds records %d to %d, after the store's head: the store is behind its own export (rolled back?)", h+1, c.max)})
		}
	}
	out := make([]*AuditChainReport, 0, len(order))
	for _, tid := range order {
		chains[tid].rep.finish()
		out = append(out, chains[tid].rep)
	}
	return out, nil
}

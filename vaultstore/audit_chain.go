package vaultstore

// The audit chain: every audit record of a tenant carries a sequence
// number and a MAC over the record and the MAC of the record before it,
// so that a record deleted, changed, moved or cut off the end of the log
// is found by verification (audit_verify.go), on the live store, in a
// backup or in an exported log file.
//
// Keys, beside the records (v1/t/{tenant}/log/{slot}, see keys.go):
//
//	v1/t/{tenant}/logseq/{seq 16 hex}   the chain index: seq -> the record's slot
//	v1/t/{tenant}/logchain/head         the last seq and MAC, with a tag
//	v1/t/{tenant}/logchain/checkpoint   what the purge removed: last seq and MAC, with a tag
//
// The head is read and written in the transaction that writes the record,
// so two writers (goroutines, batches or nodes on one database) that take
// the same sequence number conflict, and one of them runs again with the
// next: the chain never forks. Chained records have no time to live: the
// sweep removes them in sequence order once the tenant's log retention
// has passed, and leaves the checkpoint from which the rest verifies
// (audit_chain_purge.go).
//
// The MAC key is derived from the tenant's fingerprint key, which no data
// key rotation changes and which never leaves the vault but wrapped by the
// master key; AuditChainKey hands it to an operator to verify an exported
// file.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"sync"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// auditChainInfo names the derivation of a tenant's chain key.
const auditChainInfo = "tokenvault audit chain v1"

// auditMACSize is the size of a chain MAC (HMAC-SHA-256).
const auditMACSize = sha256.Size

func auditSeqKey(tenantID string, seq uint64) []byte {
	return fmt.Appendf(nil, "%st/%s/logseq/%016x", keyVersion, tenantID, seq)
}

func auditSeqPrefix(tenantID string) []byte { return []byte(keyVersion + "t/" + tenantID + "/logseq/") }

func auditHeadKey(tenantID string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/logchain/head")
}

func auditCheckpointKey(tenantID string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/logchain/checkpoint")
}

// parseAuditSeqKey reads the sequence number out of a chain index key.
func parseAuditSeqKey(prefix, key []byte) (uint64, bool) {
	if len(key) != len(prefix)+16 {
		return 0, false
	}
	seq, err := strconv.ParseUint(string(key[len(prefix):]), 16, 64)
	return seq, err == nil
}

// auditChainKey derives the tenant's chain MAC key from its fingerprint key.
func auditChainKey(tk *tenantKeys) []byte {
	m := hmac.New(sha256.New, tk.fingerprint)
	m.Write([]byte(auditChainInfo))
	return m.Sum(nil)
}

// chainMAC is the MAC of the record with seq, whose canonical encoding is
// canonical (AuditRecord.appendRecord), after the record whose MAC is prev
// (zeros for the first record).
func chainMAC(key []byte, tenantID string, seq uint64, prev, canonical []byte) []byte {
	m := hmac.New(sha256.New, key)
	var n [8]byte
	m.Write([]byte(auditChainInfo))
	m.Write([]byte{0})
	binary.BigEndian.PutUint64(n[:], uint64(len(tenantID)))
	m.Write(n[:])
	m.Write([]byte(tenantID))
	binary.BigEndian.PutUint64(n[:], seq)
	m.Write(n[:])
	if len(prev) != auditMACSize {
		prev = make([]byte, auditMACSize)
	}
	m.Write(prev)
	m.Write(canonical)
	return m.Sum(nil)
}

// ChainedAuditRecord is an audit record with its place in the tenant's
// chain: what the store seals and what the export writes, one JSON object
// per record.
type ChainedAuditRecord struct {
	AuditRecord
	// Seq is the record's sequence number in its tenant's chain, from 1.
	Seq uint64 `json:"seq"`
	// Prev is the hex MAC of the record before (64 zeros for seq 1).
	Prev string `json:"prev"`
	// MAC is the hex HMAC-SHA-256 over the record and Prev.
	MAC string `json:"mac"`
}

// appendRecord encodes the chained record: the audit record's fields, then
// the chain's.
func (c *ChainedAuditRecord) appendRecord(dst []byte) ([]byte, error) {
	dst, err := c.AuditRecord.appendRecord(dst)
	if err != nil {
		return nil, err
	}
	dst = append(dst[:len(dst)-1], `,"seq":`...)
	dst = strconv.AppendUint(dst, c.Seq, 10)
	dst = append(dst, `,"prev":`...)
	dst = appendJSONString(dst, c.Prev)
	dst = append(dst, `,"mac":`...)
	dst = appendJSONString(dst, c.MAC)
	return append(dst, '}'), nil
}

// checkMAC reports whether the record's MAC is the one key gives it.
func (c *ChainedAuditRecord) checkMAC(key []byte) bool {
	prev, err1 := hex.DecodeString(c.Prev)
	mac, err2 := hex.DecodeString(c.MAC)
	if err1 != nil || err2 != nil || len(prev) != auditMACSize || len(mac) != auditMACSize || c.Seq == 0 {
		return false
	}
	canonical, err := c.AuditRecord.appendRecord(nil)
	if err != nil {
		return false
	}
	return hmac.Equal(mac, chainMAC(key, c.TenantID, c.Seq, prev, canonical))
}

// chainMark is a position in the chain as the head and the checkpoint
// keep it, with a tag under the chain key so that it cannot be forged.
type chainMark struct {
	Seq uint64 `json:"seq"`
	MAC string `json:"mac,omitempty"`
	// At is the creation time of the record at Seq, Unix microseconds.
	At int64 `json:"at,omitempty"`
	// Purged counts the records the purge removed (checkpoint only).
	Purged uint64 `json:"purged,omitempty"`
	// Faults counts the faults the purge found in what it removed, and
	// FirstFault is the first of them (checkpoint only): the purge passes
	// over them so the log does not grow without bound, and keeps them
	// here so that verification keeps reporting them.
	Faults     uint64           `json:"faults,omitempty"`
	FirstFault *AuditChainFault `json:"first_fault,omitempty"`
}

// errChainMarkForged reports a head or checkpoint whose tag fails.
var errChainMarkForged = errors.New("fails its integrity check")

func markTag(key []byte, kind, tenantID string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(auditChainInfo + "|" + kind + "|" + tenantID + "|"))
	m.Write(body)
	return m.Sum(nil)
}

func encodeMark(key []byte, kind, tenantID string, mark *chainMark) ([]byte, error) {
	body, err := json.Marshal(mark)
	if err != nil {
		return nil, err
	}
	return append(markTag(key, kind, tenantID, body), body...), nil
}

// readMark reads the head or checkpoint at k; absent is a zero mark with
// found false.
func readMark(r Reader, key []byte, kind, tenantID string, k []byte) (mark *chainMark, found bool, err error) {
	raw, err := r.Get(k)
	if errors.Is(err, ErrNotFound) {
		return &chainMark{}, false, nil
	} else if err != nil {
		return nil, false, err
	}
	if len(raw) < sha256.Size || !hmac.Equal(raw[:sha256.Size], markTag(key, kind, tenantID, raw[sha256.Size:])) {
		return nil, true, fmt.Errorf("the audit chain %s of tenant %s %w", kind, tenantID, errChainMarkForged)
	}
	mark = new(chainMark)
	if err := json.Unmarshal(raw[sha256.Size:], mark); err != nil {
		return nil, true, fmt.Errorf("the audit chain %s of tenant %s: %w", kind, tenantID, err)
	}
	return mark, true, nil
}

// chainedPut is an audit record waiting for its place in the chain: the
// transaction that writes it gives it its sequence number.
type chainedPut struct {
	tk       *tenantKeys
	tenantID string
	slot     string
	rec      *AuditRecord
}

// txAudit is what one run of a transaction did to audit chains: the heads
// it moved (read once per tenant, kept for the records that follow) and
// the records to export once it has committed; and, for the whole
// transaction, the chain locks it holds.
type txAudit struct {
	heads   map[string]*chainMark
	written []*ChainedAuditRecord
	locks   *chainLocks
	held    []int // stripes of locks held, until the transaction ends
	want    []int // stripes a run found taken
}

// chainLockStripes is the number of chain locks tenants share.
const chainLockStripes = 64

// chainLocks serialize, within one process, the transactions that move a
// tenant's chain head, from the head's read to the commit. Without them,
// every audited write of a busy tenant on Badger would conflict with the
// others on the head and run again (optimistic transactions: the loser
// finds out only at its commit), and eight writers in one tenant ran out
// of retries. With them, only transactions of other processes (nodes on
// one PostgreSQL database) conflict on the head. On PostgreSQL too: a
// transaction never waits for a lock while it runs (it tries it, and a
// taken lock ends the run, which gives its pooled connection back before
// waiting), so a holder always finds a connection. Measured on two nodes,
// one tenant, c=16: 239 card creates/s with 1.7 serialization failures
// per create without them, 361/s with 0.12 with them (docs/benchmarks.md).
// Tenants share locks by stripe; a transaction takes a stripe once.
type chainLocks [chainLockStripes]sync.Mutex

// errChainBusy ends a run of a transaction that needs a chain lock another
// transaction holds: auditKV.Update waits for it outside any transaction
// and runs again, so that the run reads the head the holder committed
// (a transaction that waited inside would have begun before that commit,
// and lose a conflict over the head at its own).
var errChainBusy = errors.New("the audit chain of a tenant is being written")

// lock takes the chain lock of tenantID for the rest of the transaction,
// or fails with errChainBusy and notes the lock as wanted.
func (ta *txAudit) lock(tenantID string) error {
	if ta.locks == nil {
		return nil
	}
	h := fnv.New32a()
	h.Write([]byte(tenantID))
	i := int(h.Sum32() % chainLockStripes)
	if slices.Contains(ta.held, i) {
		return nil
	}
	if !ta.locks[i].TryLock() {
		ta.want = append(ta.want, i)
		return errChainBusy
	}
	ta.held = append(ta.held, i)
	return nil
}

// wait takes every lock held or wanted, in stripe order (so two waiters
// cannot each hold what the other waits for), outside any transaction.
func (ta *txAudit) wait() {
	all := append(ta.held, ta.want...)
	ta.unlock()
	slices.Sort(all)
	all = slices.Compact(all)
	for _, i := range all {
		ta.locks[i].Lock()
	}
	ta.held, ta.want = all, nil
}

// unlock releases every chain lock the transaction took.
func (ta *txAudit) unlock() {
	for _, i := range ta.held {
		ta.locks[i].Unlock()
	}
	ta.held = nil
}

// write gives c the next sequence number of its tenant's chain and writes
// the record, its index entry and the new head in w.
func (c *chainedPut) write(w Writer) error {
	ta := txAuditOf(w)
	key := auditChainKey(c.tk)
	head := ta.heads[c.tenantID]
	if head == nil {
		if err := ta.lock(c.tenantID); err != nil {
			return err
		}
		h, _, err := readMark(w, key, "head", c.tenantID, auditHeadKey(c.tenantID))
		if err != nil {
			// a head that fails its check is evidence: writing on would
			// bury it, so the record (and its operation) is refused
			return fmt.Errorf("%w: %w", ErrAuditUnavailable, err)
		}
		head = h
	}
	prev := make([]byte, auditMACSize)
	if head.Seq > 0 {
		p, err := hex.DecodeString(head.MAC)
		if err != nil || len(p) != auditMACSize {
			return fmt.Errorf("%w: the audit chain head of tenant %s holds a malformed MAC", ErrAuditUnavailable, c.tenantID)
		}
		prev = p
	}
	cr := &ChainedAuditRecord{AuditRecord: *c.rec, Seq: head.Seq + 1, Prev: hex.EncodeToString(prev)}
	canonical, err := cr.AuditRecord.appendRecord(nil)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAuditUnavailable, err)
	}
	mac := chainMAC(key, c.tenantID, cr.Seq, prev, canonical)
	cr.MAC = hex.EncodeToString(mac)
	sealed, err := c.tk.sealRecord("audit", c.tenantID, c.slot, cr)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAuditUnavailable, err)
	}
	next := &chainMark{Seq: cr.Seq, MAC: cr.MAC}
	if cr.CreatedAt != nil {
		next.At = cr.CreatedAt.UnixMicro()
	}
	encoded, err := encodeMark(key, "head", c.tenantID, next)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAuditUnavailable, err)
	}
	for _, p := range []pendingPut{
		{key: auditKey(c.tenantID, c.slot), value: sealed},
		{key: auditSeqKey(c.tenantID, cr.Seq), value: []byte(c.slot)},
		{key: auditHeadKey(c.tenantID), value: encoded},
	} {
		if err := p.put(w); err != nil {
			return err
		}
	}
	ta.heads[c.tenantID] = next
	ta.written = append(ta.written, cr)
	return nil
}

// txAuditOf returns the audit state of the transaction w belongs to. A
// writer that does not come from the store's engine (auditKV) gets a
// fresh one: its records are chained but not exported.
func txAuditOf(w Writer) *txAudit {
	if aw, ok := w.(auditWriter); ok {
		return aw.ta
	}
	return &txAudit{heads: make(map[string]*chainMark)}
}

// auditKV is the store's engine as the rest of the store sees it: each
// transaction keeps the audit chain heads it moved, and once it has
// committed, its chained records go to the export.
type auditKV struct {
	KV
	export *auditExporter
	locks  *chainLocks
}

// newAuditKV wraps engine, with chain locks (see chainLocks).
func newAuditKV(engine KV, export *auditExporter) auditKV {
	return auditKV{KV: engine, export: export, locks: new(chainLocks)}
}

// Unwrap returns the engine underneath.
func (k auditKV) Unwrap() KV { return k.KV }

// Update runs fn with a writer that keeps the transaction's audit state,
// fresh for each run, and exports what the committed run wrote.
func (k auditKV) Update(ctx context.Context, fn func(Writer) error) error {
	ta := &txAudit{heads: make(map[string]*chainMark), locks: k.locks}
	// the next writer may read this head once it is committed, without
	// waiting for the sync, so that group commit still shares syncs (an
	// engine without the hook releases when Update returns)
	ctx = kv.WithCommitted(ctx, ta.unlock)
	defer ta.unlock() // what the commit did not release
	for {
		err := k.KV.Update(ctx, func(w Writer) error {
			clear(ta.heads)
			clear(ta.written)
			ta.written = ta.written[:0]
			return fn(auditWriter{w, ta})
		})
		if errors.Is(err, errChainBusy) && len(ta.want) > 0 {
			ta.wait()
			continue
		}
		if err == nil && len(ta.written) > 0 {
			k.export.offer(ta.written)
		}
		return err
	}
}

// auditWriter is a transaction's writer with its audit state.
type auditWriter struct {
	Writer
	ta *txAudit
}

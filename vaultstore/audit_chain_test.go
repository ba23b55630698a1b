package vaultstore

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// chainSlot returns the slot the chain index gives seq.
func chainSlot(tb testing.TB, s *Store, tenantID string, seq uint64) string {
	tb.Helper()
	var slot string
	err := s.kv.View(context.Background(), func(r Reader) error {
		v, err := r.Get(auditSeqKey(tenantID, seq))
		slot = string(v)
		return err
	})
	if err != nil {
		tb.Fatalf("the chain index entry of record %d: %v", seq, err)
	}
	return slot
}

// verifyAuditChain verifies the tenant's chain and fails on an error.
func verifyAuditChain(tb testing.TB, s *Store, tenantID string, since AuditSince) *AuditChainReport {
	tb.Helper()
	rep, err := s.VerifyAuditChain(context.Background(), tenantID, since)
	if err != nil {
		tb.Fatalf("VerifyAuditChain: %v", err)
	}
	return rep
}

// newChainWorld is a token world with some audit history: the tenant's creation
// (3 records), the admin application and its key (2), two tokens (2), and
// n detokenizations.
func newChainWorld(tb testing.TB, n int) *auditWorld {
	tb.Helper()
	w := newAuditWorld(tb)
	for i := range n {
		if _, err := w.detokenizeAudited(tb, "admin", `"{{ aa-text }}"`, auditRecordFor(fmt.Sprintf("proxy-%d", i))); err != nil {
			tb.Fatal(err)
		}
	}
	return w
}

// editStorage edits the engine directly, bypassing the vault, as someone with
// access to the storage would.
func editStorage(tb testing.TB, s *Store, fn func(w Writer) error) {
	tb.Helper()
	if err := s.kv.Update(context.Background(), fn); err != nil {
		tb.Fatalf("editing the storage: %v", err)
	}
}

// chainFaults describes a report's faults for a failure message.
func chainFaults(rep *AuditChainReport) string {
	b, _ := json.Marshal(rep.Faults)
	return string(b)
}

// An untouched chain verifies: every record, in sequence, linked, and the
// head names the last; the audit records read through the API are the
// same as before.
func TestAuditChainVerifiesIntact(t *testing.T) {
	w := newChainWorld(t, 6)
	rep := verifyAuditChain(t, w.s, w.tenant.ID, AuditSince{})
	all := w.all(t)
	if !rep.OK || rep.FaultCount != 0 || rep.FirstSeq != 1 || rep.LastSeq != uint64(len(all)) || rep.Verified != uint64(len(all)) || rep.HeadSeq != uint64(len(all)) {
		t.Fatalf("report %+v for %d records", rep, len(all))
	}
	raw, _ := json.Marshal(all)
	for _, leak := range []string{`"seq"`, `"mac"`, `"prev"`} {
		if bytes.Contains(raw, []byte(leak)) {
			t.Errorf("ListAudit's records hold %s", leak)
		}
	}
	for _, data := range []string{testVisa, auditText} {
		if bytes.Contains(raw, []byte(data)) {
			t.Errorf("an audit record holds %q", data)
		}
	}
	// since a sequence number or a time: the records from there on
	from := verifyAuditChain(t, w.s, w.tenant.ID, AuditSince{Seq: 4})
	if !from.OK || from.FirstSeq != 4 || from.Verified != uint64(len(all))-3 {
		t.Errorf("since 4: %+v", from)
	}
	slot := chainSlot(t, w.s, w.tenant.ID, 5)
	at, _ := auditSlotTime(slot)
	byTime := verifyAuditChain(t, w.s, w.tenant.ID, AuditSince{Time: at})
	if !byTime.OK || byTime.FirstSeq != 5 {
		t.Errorf("since the time of record 5: %+v", byTime)
	}
}

// Each kind of tampering done directly in the storage is reported, with
// the sequence number of the first record concerned.
func TestAuditChainTamperingIsReported(t *testing.T) {
	for _, tc := range chainTampers() {
		t.Run(tc.name, func(t *testing.T) {
			w := newChainWorld(t, 6)
			if rep := verifyAuditChain(t, w.s, w.tenant.ID, AuditSince{}); !rep.OK || rep.HeadSeq != 13 {
				t.Fatalf("before tampering: %+v", rep)
			}
			tc.tamper(t, w)
			checkChainReport(t, verifyAuditChain(t, w.s, w.tenant.ID, AuditSince{}), tc.kind, tc.seq)
		})
	}
}

// The same tampering is reported offline, in a backup taken after it,
// with the master key.
func TestAuditChainBackupVerifies(t *testing.T) {
	backup := func(tb testing.TB, w *auditWorld) *BackupAudit {
		tb.Helper()
		var buf bytes.Buffer
		if err := w.s.Backup(w.ctx, &buf, nil); err != nil {
			tb.Fatal(err)
		}
		ba, err := VerifyBackupAudit(w.ctx, &buf, testMasterKey, w.tenant.ID, AuditSince{})
		if err != nil || len(ba.Reports) != 1 {
			tb.Fatalf("VerifyBackupAudit: %v", err)
		}
		return ba
	}
	w := newChainWorld(t, 6)
	ba := backup(t, w)
	key, head, err := w.s.AuditChainKey(w.ctx, w.tenant.ID)
	if err != nil || !ba.Reports[0].OK || ba.Heads[w.tenant.ID] != 13 || head != 13 || ba.Keys[w.tenant.ID] != key {
		t.Fatalf("an intact backup: %+v %s, heads %v; key from the store %v", ba.Reports[0], chainFaults(ba.Reports[0]), ba.Heads, err)
	}
	var buf bytes.Buffer
	if err := w.s.Backup(w.ctx, &buf, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyBackupAudit(w.ctx, bytes.NewReader(buf.Bytes()), bytes.Repeat([]byte{7}, MasterKeySize), "", AuditSince{}); !errors.Is(err, ErrBackupKeyMismatch) {
		t.Errorf("another master key: %v", err)
	}
	if _, err := VerifyBackupAudit(w.ctx, bytes.NewReader(buf.Bytes()), testMasterKey, "no-such-tenant", AuditSince{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("an unknown tenant: %v", err)
	}
	for _, tc := range chainTampers() {
		t.Run(tc.name, func(t *testing.T) {
			w := newChainWorld(t, 6)
			tc.tamper(t, w)
			checkChainReport(t, backup(t, w).Reports[0], tc.kind, tc.seq)
		})
	}
}

// checkChainReport fails unless rep's first fault is kind at seq, and checks
// that the report names no record's content.
func checkChainReport(tb testing.TB, rep *AuditChainReport, kind string, seq uint64) {
	tb.Helper()
	if rep.OK || len(rep.Faults) == 0 {
		tb.Fatalf("tampering not reported: %+v", rep)
	}
	if f := rep.Faults[0]; f.Kind != kind || f.Seq != seq {
		tb.Errorf("first fault %+v, want %s at %d; all: %s", f, kind, seq, chainFaults(rep))
	}
	raw, _ := json.Marshal(rep)
	for _, leak := range []string{"proxy-", "someone-else", "api.example.com", auditText, "aa-text"} {
		if bytes.Contains(raw, []byte(leak)) {
			tb.Errorf("the report names %q: %s", leak, raw)
		}
	}
}

type chainTamper struct {
	name   string
	tamper func(tb testing.TB, w *auditWorld) // the chain holds records 1 to 13
	kind   string
	seq    uint64
}

// chainTampers are the kinds of tampering done directly in the storage, and
// the first fault each must be reported as.
func chainTampers() []chainTamper {
	flip := func(b []byte) []byte { b = slices.Clone(b); b[len(b)-1] ^= 1; return b }
	return []chainTamper{
		{"a record deleted", func(tb testing.TB, w *auditWorld) {
			slot := chainSlot(tb, w.s, w.tenant.ID, 9)
			editStorage(tb, w.s, func(tx Writer) error { return tx.Delete(auditKey(w.tenant.ID, slot)) })
		}, FaultGap, 9},
		{"a record and its index entry deleted", func(tb testing.TB, w *auditWorld) {
			slot := chainSlot(tb, w.s, w.tenant.ID, 8)
			editStorage(tb, w.s, func(tx Writer) error {
				return joinErr(tx.Delete(auditKey(w.tenant.ID, slot)), tx.Delete(auditSeqKey(w.tenant.ID, 8)))
			})
		}, FaultGap, 8},
		{"a record's bytes changed", func(tb testing.TB, w *auditWorld) {
			key := auditKey(w.tenant.ID, chainSlot(tb, w.s, w.tenant.ID, 10))
			editStorage(tb, w.s, func(tx Writer) error {
				v, err := tx.Get(key)
				if err != nil {
					return err
				}
				return tx.Put(key, flip(v), 0)
			})
		}, FaultModified, 10},
		{"a record rewritten with the tenant's keys, its MAC kept", func(tb testing.TB, w *auditWorld) {
			slot := chainSlot(tb, w.s, w.tenant.ID, 7)
			editStorage(tb, w.s, func(tx Writer) error {
				tk, err := w.s.tenantKeysFor(tx, w.tenant.ID)
				if err != nil {
					return err
				}
				var cr ChainedAuditRecord
				if err := w.s.getSealed(tx, tk, "audit", w.tenant.ID, slot, auditKey(w.tenant.ID, slot), &cr); err != nil {
					return err
				}
				cr.EntityID = "someone-else"
				return putSealed(tx, tk, "audit", w.tenant.ID, slot, auditKey(w.tenant.ID, slot), &cr)
			})
		}, FaultModified, 7},
		{"two records swapped", func(tb testing.TB, w *auditWorld) {
			a, b := auditKey(w.tenant.ID, chainSlot(tb, w.s, w.tenant.ID, 6)), auditKey(w.tenant.ID, chainSlot(tb, w.s, w.tenant.ID, 11))
			editStorage(tb, w.s, func(tx Writer) error {
				va, err1 := tx.Get(a)
				vb, err2 := tx.Get(b)
				return joinErr(err1, err2, tx.Put(a, vb, 0), tx.Put(b, va, 0))
			})
		}, FaultReordered, 6},
		{"two index entries swapped", func(tb testing.TB, w *auditWorld) {
			a, b := chainSlot(tb, w.s, w.tenant.ID, 5), chainSlot(tb, w.s, w.tenant.ID, 12)
			editStorage(tb, w.s, func(tx Writer) error {
				return joinErr(tx.Put(auditSeqKey(w.tenant.ID, 5), []byte(b), 0), tx.Put(auditSeqKey(w.tenant.ID, 12), []byte(a), 0))
			})
		}, FaultReordered, 5},
		{"the tail cut off", func(tb testing.TB, w *auditWorld) {
			for _, seq := range []uint64{12, 13} {
				slot := chainSlot(tb, w.s, w.tenant.ID, seq)
				editStorage(tb, w.s, func(tx Writer) error {
					return joinErr(tx.Delete(auditKey(w.tenant.ID, slot)), tx.Delete(auditSeqKey(w.tenant.ID, seq)))
				})
			}
		}, FaultTruncated, 12},
		{"the head changed", func(tb testing.TB, w *auditWorld) {
			editStorage(tb, w.s, func(tx Writer) error {
				v, err := tx.Get(auditHeadKey(w.tenant.ID))
				if err != nil {
					return err
				}
				return tx.Put(auditHeadKey(w.tenant.ID), bytes.Replace(v, []byte(`"seq":13`), []byte(`"seq":11`), 1), 0)
			})
		}, FaultMark, 0},
	}
}

func joinErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Concurrent writers (reads recorded in group-committed batches, and
// writes recording in their own transactions) never fork the chain: the
// sequence numbers are 1 to n, each once, and the chain verifies.
func TestAuditChainConcurrentWritersDoNotFork(t *testing.T) {
	w := newAuditWorld(t)
	writeConcurrently(t, []*Store{w.s}, w)
}

// Two nodes on one database do not fork a tenant's chain either.
func TestAuditChainTwoNodesDoNotFork(t *testing.T) {
	nodes := clusterNodes(t, 2, newFakeClock())
	w := newTokenWorldOn(t, nodes[0], newFakeClock(), t.TempDir(), nil)
	aw := &auditWorld{tokenWorld: w}
	aw.text = w.mustCreate("admin", TokenInput{ID: "aa-text", Type: "token", Data: asSecret(auditText)}).ID
	writeConcurrently(t, nodes, aw)
}

// writeConcurrently writes audited changes to the world's tenant from
// every store at once, as nodes sharing one database would.
func writeConcurrently(t *testing.T, stores []*Store, w *auditWorld) {
	t.Helper()
	const writers, each = 8, 12
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[i%len(stores)]
			req := w.req("admin")
			for j := range each {
				var err error
				if j%3 == 0 {
					_, err = s.CreateToken(w.ctx, req, TokenInput{Type: "token", Data: asSecret(fmt.Sprintf("v-%d-%d", i, j))})
				} else {
					_, _, err = s.Detokenize(w.ctx, req, DetokenizeOptions{Permission: "token:use", Limit: 10, Audit: auditRecordFor(fmt.Sprintf("p-%d-%d", i, j))}, decodeJSON(t, `"{{ aa-text }}"`))
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a writer failed: %v", err)
	}
	all := allAuditRecords(t, stores[0], w.tenant.ID)
	rep := verifyAuditChain(t, stores[len(stores)-1], w.tenant.ID, AuditSince{})
	if !rep.OK || rep.Verified != uint64(len(all)) || rep.HeadSeq != uint64(len(all)) {
		t.Fatalf("after %d concurrent writes: %d records, report %+v %s", writers*each, len(all), rep, chainFaults(rep))
	}
	if n := len(kvKeys(t, stores[0], string(auditSeqPrefix(w.tenant.ID)))); n != len(all) {
		t.Errorf("%d chain index entries for %d records", n, len(all))
	}
}

// The sweep removes records past the tenant's log retention in sequence
// order and leaves a checkpoint from which the rest verifies; records
// missing before it are remembered in the checkpoint and still reported.
func TestAuditChainPurgeLeavesCheckpoint(t *testing.T) {
	w := newChainWorld(t, 4) // records 1 to 11
	setLogRetention(t, w.s, w.tenant.ID, 3600)
	w.clock.Advance(2 * time.Hour)
	for i := range 3 { // records 12 to 14
		if _, err := w.detokenizeAudited(t, "admin", `"{{ aa-text }}"`, auditRecordFor(fmt.Sprintf("late-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.s.Sweep(w.ctx); err != nil {
		t.Fatal(err)
	}
	rep := verifyAuditChain(t, w.s, w.tenant.ID, AuditSince{})
	if !rep.OK || rep.CheckpointSeq != 11 || rep.Purged != 11 || rep.FirstSeq != 12 || rep.LastSeq != 14 || rep.HeadSeq != 14 {
		t.Fatalf("after the purge: %+v %s", rep, chainFaults(rep))
	}
	if n := len(w.all(t)); n != 3 {
		t.Errorf("%d records left, want 3", n)
	}
	// a sweep with nothing due changes nothing
	if err := w.s.Sweep(w.ctx); err != nil {
		t.Fatal(err)
	}
	if again := verifyAuditChain(t, w.s, w.tenant.ID, AuditSince{}); !again.OK || again.CheckpointSeq != 11 {
		t.Errorf("second sweep: %+v", again)
	}
	// the chain goes on after the checkpoint
	if _, err := w.detokenizeAudited(t, "admin", `"{{ aa-text }}"`, auditRecordFor("after")); err != nil {
		t.Fatal(err)
	}
	// a record deleted by hand before its time is found by the purge,
	// which keeps the fault once the evidence is gone
	slot := chainSlot(t, w.s, w.tenant.ID, 13)
	editStorage(t, w.s, func(tx Writer) error { return tx.Delete(auditKey(w.tenant.ID, slot)) })
	if rep := verifyAuditChain(t, w.s, w.tenant.ID, AuditSince{}); rep.OK || rep.Faults[0].Kind != FaultGap || rep.Faults[0].Seq != 13 {
		t.Fatalf("deleted record 13: %+v", rep)
	}
	w.clock.Advance(2 * time.Hour)
	if err := w.s.Sweep(w.ctx); err != nil {
		t.Fatal(err)
	}
	rep = verifyAuditChain(t, w.s, w.tenant.ID, AuditSince{})
	if rep.OK || rep.CheckpointSeq != 15 || rep.FaultCount != 1 || rep.Faults[0].Kind != FaultGap || rep.Faults[0].Seq != 13 ||
		!strings.Contains(rep.Faults[0].Detail, "purge") {
		t.Fatalf("after purging past the deleted record: %+v %s", rep, chainFaults(rep))
	}
	// a checkpoint changed in the storage is reported
	editStorage(t, w.s, func(tx Writer) error {
		v, err := tx.Get(auditCheckpointKey(w.tenant.ID))
		if err != nil {
			return err
		}
		return tx.Put(auditCheckpointKey(w.tenant.ID), bytes.Replace(v, []byte(`"faults":1`), []byte(`"faults":0`), 1), 0)
	})
	if rep := verifyAuditChain(t, w.s, w.tenant.ID, AuditSince{}); rep.OK || rep.Faults[0].Kind != FaultMark {
		t.Errorf("a changed checkpoint: %+v", rep)
	}
}

// exportAudit points the store's export at a JSON logger writing to buf,
// with the encoder Caddy's "format json" uses.
func exportAudit(s *Store, buf *syncBuffer) {
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{MessageKey: "msg", LevelKey: "level", TimeKey: "ts", NameKey: "logger",
		EncodeLevel: zapcore.LowercaseLevelEncoder, EncodeTime: zapcore.EpochTimeEncoder, EncodeDuration: zapcore.SecondsDurationEncoder})
	s.SetAuditExport(zap.New(zapcore.NewCore(enc, zapcore.AddSync(buf), zap.InfoLevel)).Named("vault.audit"))
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSpace(b.b.String()), "\n")
}

// Every committed audit record goes to the export logger as one JSON line
// with its fields, sequence number and MAC, never data; the exported file
// verifies with the key the store hands out, and each kind of tampering
// with the file is reported.
func TestAuditExportVerifies(t *testing.T) {
	w := newAuditWorld(t)
	buf := &syncBuffer{}
	exportAudit(w.s, buf)
	for i := range 6 {
		if _, err := w.detokenizeAudited(t, "admin", `"{{ zz-card | json: '$.number' }}"`, auditRecordFor(fmt.Sprintf("exp-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	w.mustCreate("admin", TokenInput{ID: "late-token", Type: "token", Data: asSecret("late")})
	head := verifyAuditChain(t, w.s, w.tenant.ID, AuditSince{}).HeadSeq // 14: 7 before the export, 7 after
	var lines []string
	eventually(t, "the export has every record", func() bool {
		lines = buf.lines()
		return len(lines) == 7
	})
	for _, l := range lines {
		for _, leak := range []string{testVisa, testCVC, auditText, "4242"} {
			if strings.Contains(l, leak) {
				t.Errorf("an exported line holds %q: %s", leak, l)
			}
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		for _, f := range []string{"id", "tenant_id", "entity_type", "operation", "created_at", "seq", "prev", "mac"} {
			if _, ok := m[f]; !ok {
				t.Errorf("exported line without %s: %s", f, l)
			}
		}
		if m["logger"] != "vault.audit" {
			t.Errorf("logger %v", m["logger"])
		}
	}
	key, keyHead, err := w.s.AuditChainKey(w.ctx, w.tenant.ID)
	if err != nil || keyHead != head {
		t.Fatalf("AuditChainKey: head %d, %v; want head %d", keyHead, err, head)
	}
	keys := AuditFileKeys{w.tenant.ID: key}
	heads := AuditFileHeads{w.tenant.ID: head}
	verify := func(lines []string, heads AuditFileHeads) *AuditChainReport {
		t.Helper()
		file := "{\"level\":\"info\",\"logger\":\"http.log\",\"msg\":\"other\"}\n" + strings.Join(lines, "\n") + "\n"
		reps, err := VerifyAuditFile(strings.NewReader(file), keys, heads, "")
		if err != nil || len(reps) != 1 {
			t.Fatalf("VerifyAuditFile: %v, %d reports", err, len(reps))
		}
		return reps[0]
	}
	if rep := verify(lines, heads); !rep.OK || rep.FirstSeq != 8 || rep.LastSeq != 14 || rep.Verified != 7 {
		t.Fatalf("the exported file: %+v %s", rep, chainFaults(rep))
	}
	changed := slices.Clone(lines)
	changed[2] = strings.Replace(changed[2], "exp-2", "exp-9", 1)
	swapped := slices.Clone(lines)
	swapped[3], swapped[4] = swapped[4], swapped[3]
	for _, tc := range []struct {
		name  string
		lines []string
		kind  string
		seq   uint64
	}{
		{"a line deleted", slices.Delete(slices.Clone(lines), 3, 4), FaultGap, 11},
		{"a line changed", changed, FaultModified, 10},
		{"two lines swapped", swapped, FaultGap, 11},
		{"the end cut off", lines[:5], FaultTruncated, 13},
	} {
		rep := verify(tc.lines, heads)
		if rep.OK || rep.Faults[0].Kind != tc.kind || rep.Faults[0].Seq != tc.seq {
			t.Errorf("%s: %+v %s", tc.name, rep, chainFaults(rep))
		}
		if tc.name == "two lines swapped" && !slices.ContainsFunc(rep.Faults, func(f AuditChainFault) bool { return f.Kind == FaultReordered && f.Seq == 11 }) {
			t.Errorf("two lines swapped: no reordering reported: %s", chainFaults(rep))
		}
	}
	// a store rolled back behind its export: the file holds records after its head
	if rep := verify(lines, AuditFileHeads{w.tenant.ID: head - 2}); rep.OK || rep.Faults[0].Kind != FaultForked || rep.Faults[0].Seq != head-1 {
		t.Errorf("store behind the file: %+v %s", rep, chainFaults(rep))
	}
	// the wrong key reports every line as modified
	other := hex.EncodeToString(bytes.Repeat([]byte{1}, 32))
	reps, err := VerifyAuditFile(strings.NewReader(strings.Join(lines, "\n")), AuditFileKeys{w.tenant.ID: other}, nil, "")
	if err != nil || reps[0].OK || reps[0].FaultCount != 7 {
		t.Errorf("wrong key: %v %+v", err, reps)
	}
	if _, err := VerifyAuditFile(strings.NewReader(strings.Join(lines, "\n")), AuditFileKeys{}, nil, ""); err == nil {
		t.Error("a file of a tenant without a key verified")
	}
	// lines of other tenants are skipped when one is asked for
	if reps, err := VerifyAuditFile(strings.NewReader(strings.Join(lines, "\n")), AuditFileKeys{"other": other}, nil, "other"); err != nil || len(reps) != 0 {
		t.Errorf("only another tenant: %v %+v", err, reps)
	}
}

// Every field of an audit record reaches the export line.
func TestAuditExportHasEveryField(t *testing.T) {
	ts := Timestamp{time.Date(2026, 11, 23, 1, 2, 3, 456789000, time.UTC)}
	rec := &ChainedAuditRecord{AuditRecord: AuditRecord{ID: "i", TenantID: "t", ActorID: "a", ActorType: "at", EntityType: "et", EntityID: "e",
		Operation: "o", Message: "m", CreatedAt: &ts, TokenIDs: []string{"x", "y"}, Destination: "d"}, Seq: 3, Prev: "p", MAC: "q"}
	var all map[string]any
	full, _ := json.Marshal(rec)
	if err := json.Unmarshal(full, &all); err != nil {
		t.Fatal(err)
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range auditFields(rec) {
		f.AddTo(enc)
	}
	for name := range all {
		if _, ok := enc.Fields[name]; !ok {
			t.Errorf("the export leaves out %s", name)
		}
	}
	if len(enc.Fields) != len(all) {
		t.Errorf("export fields %v, record fields %v", enc.Fields, all)
	}
}

// The chain survives both key rotations: a data key rotation re-seals the
// records (their plaintext, which the MAC covers, is unchanged) and a
// master key rotation rewraps the fingerprint key the chain key comes
// from; a deleted tenant's chain goes with it.
func TestAuditChainSurvivesKeyRotations(t *testing.T) {
	w := newRotationWorld(t, t.TempDir(), testMasterKey, 5)
	ctx := context.Background()
	tid := w.tenant.Tenant.ID
	before := verifyAuditChain(t, w.s, tid, AuditSince{})
	if !before.OK || before.HeadSeq == 0 {
		t.Fatalf("before the rotations: %+v", before)
	}
	if _, err := w.s.RotateDataKey(ctx, tid); err != nil {
		t.Fatal(err)
	}
	waitReseal(t, w.s, tid)
	assertAllSealedUnder(t, w.s, tid, 2)
	if err := w.s.RotateMasterKey(ctx, rotatedMasterKey); err != nil {
		t.Fatal(err)
	}
	w.ids = append(w.ids, w.create(t, len(w.ids)))
	after := verifyAuditChain(t, w.s, tid, AuditSince{})
	if !after.OK || after.HeadSeq <= before.HeadSeq || after.Verified != after.HeadSeq {
		t.Fatalf("after the rotations: %+v %s", after, chainFaults(after))
	}
	if err := w.s.DeleteTenant(ctx, tid); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{string(auditSeqPrefix(tid)), keyVersion + "t/" + tid + "/logchain/"} {
		if left := kvKeys(t, w.s, prefix); len(left) != 0 {
			t.Errorf("%d entries left under %s after the tenant was deleted", len(left), prefix)
		}
	}
	if _, err := w.s.VerifyAuditChain(ctx, tid, AuditSince{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("verifying a deleted tenant: %v", err)
	}
}

package vaultstore

import (
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// blockingWriter holds every write until released, as a log writer stuck
// on a dead network peer would.
type blockingWriter struct {
	release chan struct{}
	mu      sync.Mutex
	n       int
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	<-b.release
	b.mu.Lock()
	b.n++
	b.mu.Unlock()
	return len(p), nil
}

// A stuck export logger never holds up the vault: once the queue is full,
// records are dropped and counted, and a record offered after the store
// closed neither panics nor blocks.
func TestAuditExportDropsWhenStuck(t *testing.T) {
	s, _ := newTestStore(t)
	bw := &blockingWriter{release: make(chan struct{})}
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	h := s.SetAuditExport(zap.New(zapcore.NewCore(enc, zapcore.AddSync(bw), zap.InfoLevel)))
	rec := []*ChainedAuditRecord{{AuditRecord: AuditRecord{ID: "r", TenantID: "t", EntityType: "token", Operation: "read"}, Seq: 1}}
	for range auditExportQueue + 10 { // the writer holds one; the queue fills; the rest drop
		s.exports.offer(rec)
	}
	if d := s.AuditExportDropped(); d < 9 || d > 10 {
		t.Errorf("%d records dropped, want 9 or 10", d)
	}
	close(bw.release)
	closeTestStore(t, s) // writes what is queued, then stops
	bw.mu.Lock()
	written := bw.n
	bw.mu.Unlock()
	if want := auditExportQueue + 10 - int(s.AuditExportDropped()); written != want {
		t.Errorf("%d lines written, want %d", written, want)
	}
	s.exports.offer(rec) // a commit that raced Close
	s.ClearAuditExport(h)
	s.exports.offer(rec) // no logger: not exported, not counted
}

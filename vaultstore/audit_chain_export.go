package vaultstore

// The audit export: every chained audit record, once its transaction has
// committed, is also written as one JSON line to a zap logger the vault's
// host gives the store (Caddy's "vault.audit"), so operators route it
// with Caddy's own log configuration (a file kept for a year, syslog, any
// log module). The store stays the system of record; the export is best
// effort: a line is lost when the process dies between the commit and
// the write, when the queue below is full (counted, see
// AuditExportDropped), or when the log writer fails. Every line carries
// its sequence number and MAC, so verifying the exported file shows each
// line lost as a gap.

import (
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
)

// auditExportQueue bounds the committed transactions whose records wait
// for the export logger; beyond it lines are dropped rather than making
// requests wait on a slow log writer.
const auditExportQueue = 4096

// auditExporter hands committed audit records to the export logger, in
// commit order, from one goroutine.
type auditExporter struct {
	logger  atomic.Pointer[exportLogger]
	queue   chan []*ChainedAuditRecord
	dropped atomic.Uint64
	done    chan struct{}
	quit    chan struct{}
	start   sync.Once // the writer starts with the first logger
	stop    sync.Once
	started atomic.Bool
}

// exportLogger is one logger set with SetAuditExport.
type exportLogger struct{ *zap.Logger }

func newAuditExporter() *auditExporter {
	return &auditExporter{queue: make(chan []*ChainedAuditRecord, auditExportQueue), done: make(chan struct{}), quit: make(chan struct{})}
}

// offer queues records that have committed. Without a logger nothing is
// exported and nothing counts as dropped.
func (e *auditExporter) offer(recs []*ChainedAuditRecord) {
	if e == nil || e.logger.Load() == nil {
		return
	}
	select {
	case e.queue <- recs:
	default:
		e.dropped.Add(uint64(len(recs)))
	}
}

func (e *auditExporter) run() {
	defer close(e.done)
	for {
		select {
		case recs := <-e.queue:
			e.write(recs)
		case <-e.quit:
			for { // what was queued before the store closed
				select {
				case recs := <-e.queue:
					e.write(recs)
				default:
					return
				}
			}
		}
	}
}

func (e *auditExporter) write(recs []*ChainedAuditRecord) {
	l := e.logger.Load()
	if l == nil {
		e.dropped.Add(uint64(len(recs)))
		return
	}
	for _, r := range recs {
		l.Info("audit record", auditFields(r)...)
	}
}

// close writes what is queued and stops the writer, if it started.
func (e *auditExporter) close() {
	e.stop.Do(func() {
		e.start.Do(func() {}) // none starts after this
		close(e.quit)         // the queue stays open: a late commit's offer must not panic
	})
	if e.started.Load() {
		<-e.done
	}
}

// auditFields are the zap fields of an exported record: the record's own
// fields under their JSON names, in the order of its canonical encoding
// (AuditRecord.appendRecord, which leaves out the same empty ones), then
// its sequence number and MAC. Never data: the record holds none. They
// are built from the record's members, not by decoding its encoding again:
// this runs for every audited read and proxied call, and the round trip
// through encoding/json was 9% of a proxied call's CPU.
// TestAuditExportMatchesRecord keeps the list whole.
func auditFields(r *ChainedAuditRecord) []zap.Field {
	rec := &r.AuditRecord
	f := make([]zap.Field, 0, 16)
	f = append(f, zap.String("id", rec.ID), zap.String("tenant_id", rec.TenantID))
	f = appendNonEmpty(f, "actor_id", rec.ActorID)
	f = appendNonEmpty(f, "actor_type", rec.ActorType)
	f = append(f, zap.String("entity_type", rec.EntityType))
	f = appendNonEmpty(f, "entity_id", rec.EntityID)
	f = append(f, zap.String("operation", rec.Operation))
	f = appendNonEmpty(f, "message", rec.Message)
	created := ""
	if rec.CreatedAt != nil {
		created = string(rec.CreatedAt.AppendFormat(nil, timestampLayout))
	}
	f = append(f, zap.String("created_at", created))
	if len(rec.TokenIDs) > 0 {
		f = append(f, zap.Strings("token_ids", rec.TokenIDs))
	}
	f = appendNonEmpty(f, "destination_host", rec.Destination)
	f = appendNonEmpty(f, "authorized_by", rec.AuthorizedBy)
	return append(f, zap.Uint64("seq", r.Seq), zap.String("prev", r.Prev), zap.String("mac", r.MAC))
}

// appendNonEmpty adds a string field that the record's encoding leaves
// out when empty.
func appendNonEmpty(f []zap.Field, name, v string) []zap.Field {
	if v == "" {
		return f
	}
	return append(f, zap.String(name, v))
}

// AuditExport is a logger set with SetAuditExport.
type AuditExport struct{ l *exportLogger }

// SetAuditExport makes logger receive every audit record committed from
// now on, one line each, and returns the handle that ClearAuditExport
// takes. A later call replaces the logger (a new config of the host).
func (s *Store) SetAuditExport(logger *zap.Logger) AuditExport {
	l := &exportLogger{logger}
	s.exports.logger.Store(l)
	s.exports.start.Do(func() {
		s.exports.started.Store(true)
		go s.exports.run()
	})
	return AuditExport{l}
}

// ClearAuditExport stops the export to the logger h was returned for, if
// no later SetAuditExport has replaced it.
func (s *Store) ClearAuditExport(h AuditExport) {
	s.exports.logger.CompareAndSwap(h.l, nil)
}

// AuditExportDropped is the number of audit records that were not written
// to the export logger because its queue was full or it was removed while
// they waited. The store still holds them.
func (s *Store) AuditExportDropped() uint64 { return s.exports.dropped.Load() }

// ExportOperatorEvent writes an event of the operator plane (a tenant
// deleted, a master key rotation, a backup), which has no tenant log, to
// the export logger. It is not chained: it carries no sequence number.
func (s *Store) ExportOperatorEvent(entityType, entityID, operation, message string) {
	l := s.exports.logger.Load()
	if l == nil {
		return
	}
	l.Info("operator event", zap.String("plane", "operator"), zap.String("actor_type", ActorOperator),
		zap.String("entity_type", entityType), zap.String("entity_id", entityID), zap.String("operation", operation),
		zap.String("message", message), zap.String("created_at", stamp(s.now()).Format(timestampLayout)))
}

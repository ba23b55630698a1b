package caddymodule

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// The audit export: the store writes every committed audit record, with
// its sequence number and MAC, to the logger named vault.audit, one JSON
// object per record (with Caddy's "format json"), and operator events
// (a tenant deleted, a master key rotation, a backup, a verification key
// handed out) beside them. Operators route it with Caddy's own logging:
//
//	{
//		log audit {
//			output file /var/log/tokenvault/audit.log {
//				roll_keep_for 8760h
//			}
//			format json
//			include vault.audit
//		}
//		log default {
//			exclude vault.audit
//		}
//	}
//
// Each config that starts points the store at its own logger (its log
// writers are the ones that config opened); the config that replaces it
// takes over, and the last one to stop takes the export down.

// auditExports holds the export each running App set.
var auditExports sync.Map // *App -> appAuditExport

// appAuditExport is the export an App set on a store.
type appAuditExport struct {
	store  *vaultstore.Store
	handle vaultstore.AuditExport
}

// auditExportName is the logger the export writes to, under the vault
// app's own ("vault").
const auditExportName = "audit"

// startAuditExport points store's audit export at this config's
// vault.audit logger and registers the dropped-lines metric.
func (a *App) startAuditExport(store *vaultstore.Store) error {
	auditExports.Store(a, appAuditExport{store, store.SetAuditExport(a.logger.Named(auditExportName))})
	c := auditExportCollector{store}
	if err := a.ctx.GetMetricsRegistry().Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			return err
		}
	}
	return nil
}

// stopAuditExport stops the export to this config's logger, unless a
// newer config has taken it over.
func (a *App) stopAuditExport() {
	if v, ok := auditExports.LoadAndDelete(a); ok {
		e := v.(appAuditExport)
		e.store.ClearAuditExport(e.handle)
	}
}

// auditExportCollector reports the audit records the export dropped.
type auditExportCollector struct{ store *vaultstore.Store }

var auditExportDroppedDesc = prometheus.NewDesc("tokenvault_audit_export_dropped_total",
	"Audit records not written to the vault.audit logger (its queue was full); the store still holds them, and verifying the exported file shows each as a gap.", nil, nil)

// Describe implements prometheus.Collector.
func (auditExportCollector) Describe(ch chan<- *prometheus.Desc) { ch <- auditExportDroppedDesc }

// Collect implements prometheus.Collector.
func (c auditExportCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(auditExportDroppedDesc, prometheus.CounterValue, float64(c.store.AuditExportDropped()))
}

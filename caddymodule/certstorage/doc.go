// Package certstorage is a certmagic storage on PostgreSQL, so that the
// certificates one node obtains on demand for a whitelabel host are
// served by every node, and only one node at a time asks the CA for a
// given name.
//
// The Caddy module caddy.storage.vault_postgres ([Module]) wraps a
// [Storage]: every certmagic key is a row of one table (by default
// tokenvault_certmagic), keyed by its path in the "C" collation so that
// a directory's keys are one range of the primary key; locks are rows of
// a second table (the same name with _locks) whose lease the holder
// renews while it holds them, so the lock of a node that died is taken
// over once its lease runs out. Leases are judged by the database's
// clock, never by the nodes'. Both tables are created on first use.
//
// The connection string is a placeholder ({env.*} or {file.*}) resolved
// at provisioning, so that no password appears in the configuration,
// in the output of caddy adapt, or in any error or log line.
package certstorage

// Package vaultstore is the token vault's state and rules, with no
// Caddy in it: tenants, applications and their API keys, tokens and
// their searches, proxies, reactors, webhooks, documents, the audit log
// and the keys that seal all of it. Every operation is a method of
// Store, as every operation of Badger is a method of DB: one handle, safe
// for concurrent use, opened once (Open) and closed once (Close), which
// the HTTP edge (package caddymodule) calls with a tenant and an
// application already authenticated. Errors are the ones errors.go
// names; the edge maps each to a status once.
//
// Three layers sit below the aggregates, each a package of its own that
// imports nothing of this one:
//
//   - kv (with kv/badgerkv and kv/postgres): the storage engine, ordered
//     keys in transactions. kv.go gives the package its names; keys.go
//     is the layout of every key.
//   - internal/seal: the key hierarchy (master keys, each tenant's data
//     keys, CVC keys) and AES-GCM sealing bound to what a value is.
//     sealing.go gives the package its names; where wrapped keys are
//     stored stays here (datakeys.go, cvc_keys.go, meta.go) with the
//     rotations that rewrite them (rotation.go, datakey_rotation.go).
//   - query: the search language. search.go gives it the vault's rules
//     and a token's attributes and keeps the permissions, paging and
//     audit of a search.
//
// Beside them, strictjson decodes request bodies and expr is the
// expression language of masks, fingerprints and proxy templates.
//
// The files divide by aggregate, each holding its records, its
// validation and its Store methods:
//
//   - the store: store.go (Options, Open, Close), meta.go and migrate.go
//     (format), check.go, health.go, cluster.go (several processes on one
//     engine), sweep.go (expiry), events.go (counts for metrics),
//     backup.go, restore_target.go
//   - tenants: tenants.go, usage.go, token_counts.go, active_marks.go
//   - applications and access: applications.go, apikeys.go, sessions.go,
//     permissions.go, templates.go (roles and application templates),
//     credential_cache.go, client_keys.go
//   - tokens: tokens.go, tokentypes.go, token_codec.go (the record's
//     encoding), tokenize.go, detokenize.go, detokenize_json.go,
//     token_update.go, token_intents.go, expiry.go, fingerprint.go,
//     card_details.go, bin_table.go, mask_guard.go, search.go,
//     idempotency.go, record_cache.go, records.go (shared by the sealed
//     resources)
//   - proxies and code: proxies.go, hostnames.go, reactors.go,
//     async_reactions.go
//   - webhooks: webhooks.go, webhooks_delivery.go, webhooks_outbox.go,
//     webhooks_signing.go
//   - documents: documents.go
//   - the audit log: audit.go, audit_batch.go, audit_durability.go,
//     audit_chain.go and its export, purge and verification
//
// Test harnesses shared by several test files are in *_harness_test.go
// files.
package vaultstore

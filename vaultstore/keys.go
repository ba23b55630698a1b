package vaultstore

// Every key the vault writes is built here, so the layout can be read in
// one place. Keys are compared bytewise; every variable component is either
// fixed width (UUIDs, hex digests, 8-digit hex versions) or the last
// component, so no key is a prefix of an unrelated one.
//
//	v1/tenant/{tenant}                     tenant record, sealed
//	v1/dek/{tenant}/{version}              tenant data key, wrapped by the master key
//	v1/apikey/{sha256(key) hex}            key index: tenant, application, key id (no secret)
//	v1/t/{tenant}/app/{application}        application record, sealed
//	v1/t/{tenant}/appkey/{application}/{key}  API key metadata, sealed
//	v1/fpk/{tenant}                        tenant fingerprint key, wrapped by the master key
//	v1/t/{tenant}/tok/{token}              token record, sealed
//	v1/t/{tenant}/tokc/{created ns hex}/{token}  token list order; value: container and expiry
//	v1/t/{tenant}/fpc/{fingerprint}        dedupe claim: the token that first held a fingerprint
//	v1/t/{tenant}/fpx/{fingerprint}/{token}  every token holding a fingerprint
//	v1/t/{tenant}/six/{index hash}/{token}   search index entry (keyed hash, never the value)
//	v1/t/{tenant}/usage/...                token counts by type and container (see usageDeltaKey)
//	v1/t/{tenant}/mat/{yyyymm}/{token}     monthly active token marker
//	v1/exp/{expires ns hex}/{tenant}/{token}  expiry queue for the purge sweep; value is the type
//	v1/deleting/{tenant}                   a deleted tenant whose records are still being removed
//	v1/t/{tenant}/proxy/{proxy}            proxy record, sealed (holds the proxy key)
//	v1/proxykey/{sha256(key) hex}          proxy key index: tenant and proxy (no secret)
//	v1/hostname/{hostname}                 whitelabel hostname: tenant and proxy
//	v1/t/{tenant}/host/{hostname}          the tenant's side of a hostname, for listing and deletes
//	v1/t/{tenant}/log/{inverted ns hex}{rand}  audit record, sealed, expires with the log retention
//	v1/health                              the health check's last write (a timestamp)
//	v1/t/{tenant}/reactor/{reactor}        reactor record, sealed
//	v1/t/{tenant}/idem/{sha256(key) hex}    idempotency key: the first response, sealed, kept a day
//	v1/t/{tenant}/intent/{intent}          token intent, sealed, purged by the engine when it expires
//
// Everything a tenant owns lives under v1/t/{tenant}/, so deleting a tenant
// is one prefix delete once its data keys are gone.

import (
	"fmt"
	"time"
)

const keyVersion = "v1/"

func tenantKey(tenantID string) []byte { return []byte(keyVersion + "tenant/" + tenantID) }

func tenantPrefix() []byte { return []byte(keyVersion + "tenant/") }

func dataKeyKey(tenantID string, version uint32) []byte {
	return fmt.Appendf(nil, "%sdek/%s/%08x", keyVersion, tenantID, version)
}

func dataKeyPrefix(tenantID string) []byte { return []byte(keyVersion + "dek/" + tenantID + "/") }

func apiKeyIndexKey(digestHex string) []byte { return []byte(keyVersion + "apikey/" + digestHex) }

func tenantDataPrefix(tenantID string) []byte { return []byte(keyVersion + "t/" + tenantID + "/") }

func applicationKey(tenantID, appID string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/app/" + appID)
}

func applicationPrefix(tenantID string) []byte { return []byte(keyVersion + "t/" + tenantID + "/app/") }

func appKeyKey(tenantID, appID, keyID string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/appkey/" + appID + "/" + keyID)
}

func appKeyPrefix(tenantID, appID string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/appkey/" + appID + "/")
}

func fingerprintKeyKey(tenantID string) []byte { return []byte(keyVersion + "fpk/" + tenantID) }

func tokenIntentKey(tenantID, id string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/intent/" + id)
}

func tokenKey(tenantID, id string) []byte { return []byte(keyVersion + "t/" + tenantID + "/tok/" + id) }

func tokenOrderKey(tenantID string, created time.Time, id string) []byte {
	return fmt.Appendf(nil, "%st/%s/tokc/%016x/%s", keyVersion, tenantID, created.UnixNano(), id)
}

func tokenOrderPrefix(tenantID string) []byte { return []byte(keyVersion + "t/" + tenantID + "/tokc/") }

func fingerprintClaimKey(tenantID, fingerprint string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/fpc/" + fingerprint)
}

func fingerprintIndexKey(tenantID, fingerprint, id string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/fpx/" + fingerprint + "/" + id)
}

func fingerprintIndexPrefix(tenantID, fingerprint string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/fpx/" + fingerprint + "/")
}

func searchIndexKey(tenantID, hash, id string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/six/" + hash + "/" + id)
}

func searchIndexPrefix(tenantID, hash string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/six/" + hash + "/")
}

// Token counts are kept per type and container (the container in hex, so
// its slashes do not split the key), as totals and as changes written
// without a read into the tenant's current epoch; folding closes the
// epoch first, so that no change lands in an epoch being folded, and the
// folded changes' deletion marks lie in prefixes no later read visits.
//
//	usage/e                                       the current epoch (8 bytes); absent: 1
//	usage/f                                       the last epoch folded into the totals; absent: 0
//	usage/t/{type}/{container hex}                a total
//	usage/d/{epoch hex}/{type}/{container hex}/{ns hex}{nonce hex}  a change
func usageDeltaKey(tenantID string, epoch uint64, tokenType, container string, at time.Time, nonce uint64) []byte {
	return fmt.Appendf(nil, "%st/%s/usage/d/%016x/%s/%x/%016x%016x", keyVersion, tenantID, epoch, tokenType, container, at.UnixNano(), nonce)
}

func usageChangesPrefix(tenantID string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/usage/d/")
}

func usageEpochPrefix(tenantID string, epoch uint64) []byte {
	return fmt.Appendf(nil, "%st/%s/usage/d/%016x/", keyVersion, tenantID, epoch)
}

func usageTotalKey(tenantID, tokenType, container string) []byte {
	return fmt.Appendf(nil, "%st/%s/usage/t/%s/%x", keyVersion, tenantID, tokenType, container)
}

func usageTotalPrefix(tenantID string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/usage/t/")
}

func usageCurrentEpochKey(tenantID string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/usage/e")
}

func usageFoldedEpochKey(tenantID string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/usage/f")
}

func usagePrefix(tenantID string) []byte { return []byte(keyVersion + "t/" + tenantID + "/usage/") }

func activeTokenKey(tenantID string, month time.Time, id string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/mat/" + month.UTC().Format("200601") + "/" + id)
}

func activeTokenPrefix(tenantID string, month time.Time) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/mat/" + month.UTC().Format("200601") + "/")
}

func expiryKey(expires time.Time, tenantID, id string) []byte {
	return fmt.Appendf(nil, "%sexp/%016x/%s/%s", keyVersion, expires.UnixNano(), tenantID, id)
}

func expiryPrefix() []byte { return []byte(keyVersion + "exp/") }

func tenantDeletionKey(tenantID string) []byte { return []byte(keyVersion + "deleting/" + tenantID) }

func tenantDeletionPrefix() []byte { return []byte(keyVersion + "deleting/") }

func proxyKey(tenantID, id string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/proxy/" + id)
}

func proxyPrefix(tenantID string) []byte { return []byte(keyVersion + "t/" + tenantID + "/proxy/") }

func proxyKeyIndexKey(digestHex string) []byte { return []byte(keyVersion + "proxykey/" + digestHex) }

func hostnameKey(hostname string) []byte { return []byte(keyVersion + "hostname/" + hostname) }

func tenantHostnameKey(tenantID, hostname string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/host/" + hostname)
}

func tenantHostnamePrefix(tenantID string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/host/")
}

// auditSlot orders a tenant's audit records newest first: the timestamp
// is inverted so that a forward scan meets the latest record first. The
// slot is the last component of the record's key and what its seal binds.
func auditSlot(at time.Time, nonce uint64) string {
	return fmt.Sprintf("%016x%016x", ^uint64(at.UnixNano()), nonce)
}

func auditKey(tenantID, slot string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/log/" + slot)
}

func auditPrefix(tenantID string) []byte { return []byte(keyVersion + "t/" + tenantID + "/log/") }

func reactorKey(tenantID, id string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/reactor/" + id)
}

func reactorPrefix(tenantID string) []byte { return []byte(keyVersion + "t/" + tenantID + "/reactor/") }

func idempotencyKey(tenantID, digestHex string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/idem/" + digestHex)
}

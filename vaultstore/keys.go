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
//
// Everything a tenant owns lives under v1/t/{tenant}/, so deleting a tenant
// is one prefix delete once its data keys are gone.

import "fmt"

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

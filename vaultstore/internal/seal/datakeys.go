package seal

import (
	"crypto/cipher"
	"fmt"
	"iter"
	"maps"
	"strconv"
)

// DataKeys are one tenant's unwrapped data keys by version; new values
// are sealed under the newest (Current). Older versions open what was
// sealed before a data key rotation until it is re-sealed.
type DataKeys struct {
	current uint32
	aeads   map[uint32]cipher.AEAD
}

// NewDataKeys returns an empty set; Add gives it its versions.
func NewDataKeys() *DataKeys {
	return &DataKeys{aeads: make(map[uint32]cipher.AEAD)}
}

// Add holds raw as the key of version; the newest version added seals.
func (k *DataKeys) Add(version uint32, raw []byte) error {
	aead, err := NewAEAD(raw)
	if err != nil {
		return err
	}
	k.aeads[version] = aead
	k.current = max(k.current, version)
	return nil
}

// Len is how many versions are held.
func (k *DataKeys) Len() int { return len(k.aeads) }

// Current is the version new values are sealed under.
func (k *DataKeys) Current() uint32 { return k.current }

// Versions yields every version held, in no order.
func (k *DataKeys) Versions() iter.Seq[uint32] { return maps.Keys(k.aeads) }

// Seal seals plain under the current version, bound to aad.
func (k *DataKeys) Seal(plain, aad []byte) ([]byte, error) {
	return Seal(k.aeads[k.current], k.current, plain, aad)
}

// Open opens a value sealed under any held version. A version not held
// is ErrIntegrity, as is any other mismatch.
func (k *DataKeys) Open(sealed, aad []byte) ([]byte, error) {
	version, err := Version(sealed)
	if err != nil {
		return nil, err
	}
	aead := k.aeads[version]
	if aead == nil {
		return nil, fmt.Errorf("no data key version %d: %w", version, ErrIntegrity)
	}
	return Open(aead, sealed, aad)
}

// Reseal seals a value again under the current version; changed is
// false when it already is (and out is sealed itself).
func (k *DataKeys) Reseal(sealed, aad []byte) (out []byte, changed bool, err error) {
	version, err := Version(sealed)
	if err != nil {
		return nil, false, err
	}
	if version == k.current {
		return sealed, false, nil
	}
	plain, err := k.Open(sealed, aad)
	if err != nil {
		return nil, false, err
	}
	defer clear(plain)
	out, err = k.Seal(plain, aad)
	return out, err == nil, err
}

// The associated data of each kind of sealed value. A wrapped key is
// bound to what it is the key of; a record to its kind, tenant and id.

// DataKeyAAD binds a wrapped data key to its tenant and version.
func DataKeyAAD(tenantID string, version uint32) []byte {
	return []byte("dek|" + tenantID + "|" + strconv.FormatUint(uint64(version), 10))
}

// FingerprintKeyAAD binds a wrapped fingerprint key to its tenant.
func FingerprintKeyAAD(tenantID string) []byte { return []byte("fpk|" + tenantID) }

// CVCKeyAAD binds a wrapped CVC key to its epoch.
func CVCKeyAAD(epoch int64) []byte { return []byte("cvc|" + strconv.FormatInt(epoch, 10)) }

// RecordAAD binds a sealed record to its kind, tenant and id.
func RecordAAD(kind, tenantID, id string) []byte {
	b := make([]byte, 0, len(kind)+len(tenantID)+len(id)+2)
	return append(append(append(append(append(b, kind...), '|'), tenantID...), '|'), id...)
}

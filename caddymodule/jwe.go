package caddymodule

import (
	"context"
	"crypto"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	jose "github.com/go-jose/go-jose/v4"
	josecipher "github.com/go-jose/go-jose/v4/cipher"

	"github.com/tokenvault/tokenvault/vaultstore"
	"github.com/tokenvault/tokenvault/vaultstore/strictjson"
)

// Token data may arrive encrypted to one of the tenant's client
// encryption keys (POST /keys), as the vendor's Elements encrypt it: in
// the request's "encrypted" member (the official SDKs' name for it, in
// place of "data"), a compact JWE with "alg": "ECDH-ES" (direct key
// agreement on X25519), "enc": "A256GCM" and the key's id as "kid", whose
// plaintext is the data. It is decrypted here, before any validation, and
// then handled as if it had come in clear as "data".
//
// go-jose parses the JWE, allows only those two algorithms (so none,
// RSA1_5, dir and every other alg or enc is refused before any key is
// touched), computes the associated data and opens the AES-GCM content;
// it has no X25519 key agreement, so the agreement itself runs in the
// store (crypto/ecdh, the private key never leaving it) and the key
// derivation is go-jose's Concat KDF, as RFC 7518 §4.6.2 defines it.
//
// Every refusal says only that the data could not be decrypted: an
// unknown, deleted or expired kid, another tenant's key, a tampered
// header or ciphertext, a wrong algorithm and a malformed token look
// alike to the caller.

// jweUndecryptable is the one message of every refusal.
const jweUndecryptable = "could not be decrypted"

// errJWE is any reason a JWE does not open; never shown.
var errJWE = errors.New("jwe does not open")

// encryptedBody is the member that carries encrypted token data in a
// token-create body, as the official SDKs name it.
type encryptedBody struct {
	Encrypted *string `json:"encrypted"`
}

// encryptedData reads the "encrypted" member of a token-create body, if
// it has one, and returns the data it decrypts to in place of *data;
// prefix names the body's place in a refusal ("" for a whole body).
func (c *call) encryptedData(encrypted *string, data *any, prefix string) error {
	if encrypted == nil {
		return nil
	}
	if *data != nil {
		return errField(prefix+"encrypted", "give either data or encrypted, not both")
	}
	plain, err := decryptJWE(c.ctx(), c.store, c.tenantID(), *encrypted)
	if err != nil {
		if errors.Is(err, errJWE) {
			return errField(prefix+"encrypted", jweUndecryptable)
		}
		return err // the storage's own failure
	}
	defer clear(plain)
	v, err := decryptedValue(plain)
	if err != nil {
		return errField(prefix+"encrypted", jweUndecryptable)
	}
	*data = v
	return nil
}

// decryptTokenBody reads the "encrypted" member of a POST /tokens body
// (already decoded into in) and puts what it decrypts to in in.Data.
func (c *call) decryptTokenBody(body []byte, data *any) error {
	var enc encryptedBody
	if err := strictjson.Decode(body, &enc, strictjson.DefaultLimits); err != nil {
		return err
	}
	return c.encryptedData(enc.Encrypted, data, "")
}

// decryptTokenizeData decrypts, in a /tokenize body, every token-create
// object that has a type and an "encrypted" member, naming each by its
// path in a refusal.
func (c *call) decryptTokenizeData(v any, path string, depth int) error {
	if depth > strictjson.DefaultMaxDepth {
		return nil // the store refuses the body for its depth
	}
	switch x := v.(type) {
	case map[string]any:
		if _, hasType := x["type"]; hasType {
			if enc, ok := x["encrypted"]; ok {
				s, isString := enc.(string)
				if !isString {
					return errField(path+"encrypted", "encrypted must be a compact JWE string")
				}
				data := x["data"]
				if err := c.encryptedData(&s, &data, path); err != nil {
					return err
				}
				delete(x, "encrypted")
				x["data"] = data
				return nil
			}
			if _, hasData := x["data"]; hasData {
				return nil
			}
		}
		for k, sub := range x {
			if err := c.decryptTokenizeData(sub, path+k+".", depth+1); err != nil {
				return err
			}
		}
	case []any:
		for i, sub := range x {
			if err := c.decryptTokenizeData(sub, path+"["+strconv.Itoa(i)+"].", depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// decryptedValue reads a JWE's plaintext as token data: a JSON object or
// array as JSON (under the vault's input rules), anything else as the
// string it is (Elements encrypt a string value as its bare text).
func decryptedValue(plain []byte) (any, error) {
	trimmed := strings.TrimLeft(string(plain), " \t\r\n")
	if strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "[") {
		return strictjson.DecodeValue(plain, strictjson.DefaultLimits)
	}
	if !utf8.Valid(plain) {
		return nil, errJWE
	}
	return string(plain), nil
}

// decryptJWE opens a compact JWE addressed to one of the tenant's client
// encryption keys. Every reason it does not open is errJWE; a storage
// failure is returned as it is.
func decryptJWE(ctx context.Context, store *vaultstore.Store, tenantID, compact string) ([]byte, error) {
	obj, err := jose.ParseEncryptedCompact(compact, []jose.KeyAlgorithm{jose.ECDH_ES}, []jose.ContentEncryption{jose.A256GCM})
	if err != nil {
		return nil, errJWE
	}
	d := &x25519Decrypter{ctx: ctx, store: store, tenantID: tenantID}
	plain, err := obj.Decrypt(d)
	if d.storageErr != nil {
		return nil, d.storageErr
	}
	if err != nil {
		return nil, errJWE
	}
	return plain, nil
}

// x25519Decrypter derives a JWE's content key by ECDH-ES on X25519 with a
// client encryption key (go-jose's OpaqueKeyDecrypter).
type x25519Decrypter struct {
	ctx        context.Context
	store      *vaultstore.Store
	tenantID   string
	storageErr error
}

// DecryptKey derives the content encryption key from the header's
// ephemeral public key and the key its kid names.
func (d *x25519Decrypter) DecryptKey(encryptedKey []byte, h jose.Header) ([]byte, error) {
	if h.Algorithm != string(jose.ECDH_ES) || len(encryptedKey) != 0 || h.KeyID == "" {
		return nil, errJWE
	}
	if _, ok := h.ExtraHeaders["zip"]; ok {
		return nil, errJWE
	}
	if enc, _ := h.ExtraHeaders[jose.HeaderKey("enc")].(string); enc != string(jose.A256GCM) {
		return nil, errJWE
	}
	peer, err := x25519EPK(h.ExtraHeaders[jose.HeaderKey("epk")])
	if err != nil {
		return nil, err
	}
	apu, err := optionalB64(h.ExtraHeaders[jose.HeaderKey("apu")])
	if err != nil {
		return nil, err
	}
	apv, err := optionalB64(h.ExtraHeaders[jose.HeaderKey("apv")])
	if err != nil {
		return nil, err
	}
	z, err := d.store.ClientKeyAgreement(d.ctx, d.tenantID, h.KeyID, peer)
	if errors.Is(err, vaultstore.ErrClientKeyUnusable) {
		return nil, errJWE
	} else if err != nil {
		d.storageErr = err
		return nil, err
	}
	defer clear(z)
	return concatKDF(z, string(jose.A256GCM), apu, apv, 32)
}

// concatKDF is RFC 7518 §4.6.2 for ECDH-ES in direct key agreement mode:
// the algorithm id is the enc value, the key is size bytes.
func concatKDF(z []byte, alg string, apu, apv []byte, size int) ([]byte, error) {
	supPubInfo := binary.BigEndian.AppendUint32(nil, uint32(size*8))
	kdf := josecipher.NewConcatKDF(crypto.SHA256, z, lengthPrefixed([]byte(alg)), lengthPrefixed(apu), lengthPrefixed(apv), supPubInfo, []byte{})
	key := make([]byte, size)
	if _, err := io.ReadFull(kdf, key); err != nil {
		return nil, errJWE
	}
	return key, nil
}

func lengthPrefixed(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// x25519EPK reads the "epk" header: an OKP public JWK on X25519.
func x25519EPK(v any) ([]byte, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errJWE
	}
	if kty, _ := m["kty"].(string); kty != "OKP" {
		return nil, errJWE
	}
	if crv, _ := m["crv"].(string); crv != "X25519" {
		return nil, errJWE
	}
	if _, private := m["d"]; private {
		return nil, errJWE
	}
	x, _ := m["x"].(string)
	raw, err := base64.RawURLEncoding.DecodeString(x)
	if err != nil || len(raw) != 32 {
		return nil, errJWE
	}
	return raw, nil
}

// optionalB64 decodes an optional base64url header value (apu, apv).
func optionalB64(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, errJWE
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, errJWE
	}
	return raw, nil
}

package transforms

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"strings"

	"github.com/dop251/goja"
)

// The host side of the crypto module (js/crypto.js). Each function takes
// and returns strings and ArrayBuffers; hash state lives in Go closures
// behind a plain object with two functions.

// hashes are the digest algorithms createHash and createHmac accept.
var hashes = map[string]func() hash.Hash{
	"md5":    md5.New,
	"sha1":   sha1.New,
	"sha256": sha256.New,
	"sha384": sha512.New384,
	"sha512": sha512.New,
}

func (rt *jobRuntime) hashFunc(name string) func() hash.Hash {
	h, ok := hashes[strings.ToLower(strings.ReplaceAll(name, "-", ""))]
	if !ok {
		panic(rt.vm.NewTypeError("Digest method not supported"))
	}
	return h
}

// hashNew(algorithm) {update(ArrayBuffer), digest() ArrayBuffer}
func (rt *jobRuntime) hashNew(call goja.FunctionCall) goja.Value {
	return rt.digestObject(rt.hashFunc(call.Argument(0).String())())
}

// hmacNew(algorithm, key ArrayBuffer) {update(ArrayBuffer), digest() ArrayBuffer}
func (rt *jobRuntime) hmacNew(call goja.FunctionCall) goja.Value {
	h := rt.hashFunc(call.Argument(0).String())
	key := append([]byte(nil), rt.bytesArg(call.Argument(1))...)
	return rt.digestObject(hmac.New(h, key))
}

func (rt *jobRuntime) digestObject(h hash.Hash) goja.Value {
	o := rt.vm.NewObject()
	_ = o.Set("update", func(call goja.FunctionCall) goja.Value {
		h.Write(rt.bytesArg(call.Argument(0)))
		return goja.Undefined()
	})
	_ = o.Set("digest", func(goja.FunctionCall) goja.Value {
		return rt.vm.ToValue(rt.vm.NewArrayBuffer(h.Sum(nil)))
	})
	return o
}

// randomBytes(n) ArrayBuffer; js/crypto.js bounds n.
func (rt *jobRuntime) randomBytes(call goja.FunctionCall) goja.Value {
	n := call.Argument(0).ToInteger()
	if n < 0 || n > 65536 {
		panic(rt.vm.NewTypeError("randomBytes: size out of range"))
	}
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return rt.vm.ToValue(rt.vm.NewArrayBuffer(b))
}

// randomUUID() string, a version 4 UUID.
func (rt *jobRuntime) randomUUID(goja.FunctionCall) goja.Value {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return rt.vm.ToValue(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]))
}

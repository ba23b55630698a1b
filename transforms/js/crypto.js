// crypto: hashes, HMACs and random values, computed by the host on bytes.
// The host hands back plain objects with update/digest functions; nothing
// of Go is exposed.
(function (host, Buffer) {
  'use strict';
  function toBytes(data, encoding, what) {
    if (typeof data === 'string') return Buffer.from(data, encoding);
    if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    if (data instanceof ArrayBuffer) return new Uint8Array(data);
    throw new TypeError('The "' + what + '" argument must be of type string or an instance of Buffer, TypedArray, or DataView.');
  }
  function copyOf(view) {
    return view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength);
  }
  function output(ab, encoding) {
    const b = Buffer.from(ab);
    return encoding === undefined ? b : b.toString(encoding);
  }
  function digester(state, kind) {
    let done = false;
    const self = {
      update(data, encoding) {
        if (done) throw new Error(kind + ' digest already called');
        state.update(copyOf(toBytes(data, encoding, 'data')));
        return self;
      },
      digest(encoding) {
        if (done) throw new Error(kind + ' digest already called');
        done = true;
        return output(state.digest(), encoding);
      },
    };
    return self;
  }
  const hashes = ['md5', 'sha1', 'sha256', 'sha384', 'sha512'];
  return {
    createHash(algorithm) {
      return digester(host.hashNew(String(algorithm)), 'Hash');
    },
    createHmac(algorithm, key) {
      return digester(host.hmacNew(String(algorithm), copyOf(toBytes(key, 'utf8', 'key'))), 'Hmac');
    },
    randomBytes(size) {
      if (typeof size !== 'number' || size !== size || size < 0 || size > 65536) {
        throw new RangeError('The value of "size" is out of range. It must be >= 0 && <= 65536.');
      }
      return Buffer.from(host.randomBytes(Math.floor(size)));
    },
    randomUUID() {
      return host.randomUUID();
    },
    timingSafeEqual(a, b) {
      const x = toBytes(a, undefined, 'buf1');
      const y = toBytes(b, undefined, 'buf2');
      if (x.length !== y.length) throw new RangeError('Input buffers must have the same byte length');
      let diff = 0;
      for (let i = 0; i < x.length; i++) diff |= x[i] ^ y[i];
      return diff === 0;
    },
    getHashes() {
      return hashes.slice();
    },
  };
})

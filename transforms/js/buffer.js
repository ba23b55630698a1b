// Buffer: the subset of Node's Buffer that transforms use, as a subclass of
// Uint8Array. utf8, hex, base64 and base64url are converted by the host;
// latin1 (binary), ascii and utf16le (ucs2) here.
(function (host) {
  'use strict';
  const hostEncode = host.bufEncode;
  const hostDecode = host.bufDecode;
  const hostByteLength = host.bufByteLength;
  const MAX_LENGTH = 64 * 1024 * 1024;

  const encodings = {
    utf8: 'utf8', 'utf-8': 'utf8',
    hex: 'hex',
    base64: 'base64', base64url: 'base64url',
    latin1: 'latin1', binary: 'latin1',
    ascii: 'ascii',
    utf16le: 'utf16le', 'utf-16le': 'utf16le', ucs2: 'utf16le', 'ucs-2': 'utf16le',
  };
  function normalize(enc) {
    if (enc === undefined || enc === null) return 'utf8';
    const e = encodings[String(enc).toLowerCase()];
    if (e === undefined) throw new TypeError('Unknown encoding: ' + String(enc));
    return e;
  }
  function checkSize(n) {
    if (typeof n !== 'number' || n !== n || n < 0 || n > MAX_LENGTH) {
      throw new RangeError('The value of "size" is out of range. It must be >= 0 && <= ' + MAX_LENGTH + '. Received ' + String(n));
    }
    return Math.floor(n);
  }
  function copyOf(view) {
    return view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength);
  }

  function decode(string, enc) {
    switch (enc) {
      case 'latin1':
      case 'ascii': {
        const b = new Buffer(string.length);
        for (let i = 0; i < string.length; i++) b[i] = string.charCodeAt(i) & 0xff;
        return b;
      }
      case 'utf16le': {
        const b = new Buffer(string.length * 2);
        for (let i = 0; i < string.length; i++) {
          const c = string.charCodeAt(i);
          b[2 * i] = c & 0xff;
          b[2 * i + 1] = c >> 8;
        }
        return b;
      }
    }
    return new Buffer(hostDecode(string, enc));
  }

  function encode(view, enc) {
    switch (enc) {
      case 'latin1':
      case 'ascii': {
        const mask = enc === 'ascii' ? 0x7f : 0xff;
        let s = '';
        for (let i = 0; i < view.length; i += 4096) {
          const part = [];
          for (let j = i; j < view.length && j < i + 4096; j++) part.push(view[j] & mask);
          s += String.fromCharCode.apply(null, part);
        }
        return s;
      }
      case 'utf16le': {
        let s = '';
        for (let i = 0; i + 1 < view.length; i += 2) s += String.fromCharCode(view[i] | (view[i + 1] << 8));
        return s;
      }
    }
    return hostEncode(copyOf(view), enc);
  }

  class Buffer extends Uint8Array {
    static from(value, encodingOrOffset, length) {
      if (typeof value === 'string') return decode(value, normalize(encodingOrOffset));
      if (value instanceof ArrayBuffer) {
        const offset = encodingOrOffset === undefined ? 0 : encodingOrOffset;
        return new Buffer(value, offset, length === undefined ? value.byteLength - offset : length);
      }
      if (ArrayBuffer.isView(value)) {
        const b = new Buffer(checkSize(value.length));
        b.set(value);
        return b;
      }
      if (value !== null && typeof value === 'object') {
        if (value.type === 'Buffer' && Array.isArray(value.data)) return Buffer.from(value.data);
        if (typeof value.length === 'number') {
          const b = new Buffer(checkSize(value.length));
          for (let i = 0; i < b.length; i++) b[i] = value[i];
          return b;
        }
      }
      throw new TypeError('The first argument must be of type string or an instance of Buffer, ArrayBuffer, or Array or an Array-like Object.');
    }
    static alloc(size, fill, encoding) {
      const b = new Buffer(checkSize(size));
      if (fill !== undefined && fill !== 0) b.fill(fill, 0, b.length, encoding);
      return b;
    }
    static allocUnsafe(size) {
      return new Buffer(checkSize(size));
    }
    static byteLength(value, encoding) {
      if (typeof value === 'string') {
        const enc = normalize(encoding);
        switch (enc) {
          case 'latin1':
          case 'ascii':
            return value.length;
          case 'utf16le':
            return value.length * 2;
        }
        return hostByteLength(value, enc);
      }
      if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return value.byteLength;
      throw new TypeError('The "string" argument must be of type string or an instance of Buffer or ArrayBuffer.');
    }
    static isBuffer(value) {
      return value instanceof Buffer;
    }
    static isEncoding(encoding) {
      return typeof encoding === 'string' && encodings[encoding.toLowerCase()] !== undefined;
    }
    static concat(list, totalLength) {
      if (!Array.isArray(list)) throw new TypeError('The "list" argument must be an instance of Array.');
      let total = 0;
      for (const b of list) total += b.length;
      if (totalLength !== undefined) total = totalLength;
      const out = new Buffer(checkSize(total));
      let pos = 0;
      for (const b of list) {
        if (pos >= total) break;
        const part = b.length > total - pos ? b.subarray(0, total - pos) : b;
        out.set(part, pos);
        pos += part.length;
      }
      return out;
    }
    static compare(a, b) {
      return a.compare(b);
    }
    toString(encoding, start, end) {
      const len = this.length;
      start = start === undefined ? 0 : Math.max(0, Math.min(len, start | 0));
      end = end === undefined ? len : Math.max(start, Math.min(len, end | 0));
      return encode(start === 0 && end === len ? this : this.subarray(start, end), normalize(encoding));
    }
    toJSON() {
      return { type: 'Buffer', data: Array.from(this) };
    }
    equals(other) {
      return this.compare(other) === 0;
    }
    compare(other) {
      if (!ArrayBuffer.isView(other)) throw new TypeError('The "target" argument must be an instance of Buffer or Uint8Array.');
      const n = Math.min(this.length, other.length);
      for (let i = 0; i < n; i++) {
        if (this[i] !== other[i]) return this[i] < other[i] ? -1 : 1;
      }
      return this.length === other.length ? 0 : this.length < other.length ? -1 : 1;
    }
    write(string, offset, length, encoding) {
      if (typeof offset === 'string') {
        encoding = offset;
        offset = 0;
        length = undefined;
      } else if (typeof length === 'string') {
        encoding = length;
        length = undefined;
      }
      offset = offset === undefined ? 0 : offset | 0;
      const bytes = decode(String(string), normalize(encoding));
      const n = Math.min(bytes.length, this.length - offset, length === undefined ? Infinity : length | 0);
      if (n > 0) this.set(n === bytes.length ? bytes : bytes.subarray(0, n), offset);
      return Math.max(n, 0);
    }
    fill(value, offset, end, encoding) {
      if (typeof value === 'string' && value.length !== 1) {
        if (typeof offset === 'string') {
          encoding = offset;
          offset = undefined;
        }
        const bytes = decode(value, normalize(encoding));
        const from = offset === undefined ? 0 : offset | 0;
        const to = end === undefined ? this.length : end | 0;
        if (bytes.length === 0) return super.fill(0, from, to);
        for (let i = from; i < to; i++) this[i] = bytes[(i - from) % bytes.length];
        return this;
      }
      if (typeof value === 'string') value = value.charCodeAt(0);
      return super.fill(value, offset, end);
    }
    slice(start, end) {
      return this.subarray(start, end);
    }
    readUInt8(offset) {
      return this[offset === undefined ? 0 : offset];
    }
    readUInt16BE(offset) {
      offset = offset === undefined ? 0 : offset;
      return (this[offset] << 8) | this[offset + 1];
    }
    readUInt32BE(offset) {
      offset = offset === undefined ? 0 : offset;
      return ((this[offset] << 24) >>> 0) + ((this[offset + 1] << 16) | (this[offset + 2] << 8) | this[offset + 3]);
    }
  }
  Buffer.poolSize = 8192;
  return Buffer;
})

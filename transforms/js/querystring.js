// querystring: Node's parse and stringify for URL query strings.
(function () {
  'use strict';
  function unescape(s) {
    const plus = s.replace(/\+/g, ' ');
    try {
      return decodeURIComponent(plus);
    } catch (e) {
      return plus;
    }
  }
  function escape(s) {
    return encodeURIComponent(s);
  }
  function primitive(v) {
    switch (typeof v) {
      case 'string':
        return v;
      case 'number':
        return isFinite(v) ? String(v) : '';
      case 'bigint':
      case 'boolean':
        return String(v);
    }
    return '';
  }
  function parse(qs, sep, eq, options) {
    sep = sep || '&';
    eq = eq || '=';
    const out = Object.create(null);
    if (typeof qs !== 'string' || qs.length === 0) return out;
    let max = 1000;
    if (options && typeof options.maxKeys === 'number') max = options.maxKeys;
    let parts = qs.split(sep);
    if (max > 0 && parts.length > max) parts = parts.slice(0, max);
    for (const part of parts) {
      if (part.length === 0) continue;
      const i = part.indexOf(eq);
      const k = unescape(i >= 0 ? part.slice(0, i) : part);
      const v = i >= 0 ? unescape(part.slice(i + eq.length)) : '';
      if (!Object.prototype.hasOwnProperty.call(out, k)) out[k] = v;
      else if (Array.isArray(out[k])) out[k].push(v);
      else out[k] = [out[k], v];
    }
    return out;
  }
  function stringify(obj, sep, eq) {
    sep = sep || '&';
    eq = eq || '=';
    if (obj === null || typeof obj !== 'object') return '';
    const parts = [];
    for (const k of Object.keys(obj)) {
      const v = obj[k];
      const ks = escape(primitive(k)) + eq;
      if (Array.isArray(v)) {
        for (const x of v) parts.push(ks + escape(primitive(x)));
      } else {
        parts.push(ks + escape(primitive(v)));
      }
    }
    return parts.join(sep);
  }
  return { parse, stringify, decode: parse, encode: stringify, escape, unescape };
})

// Masking for display. Lists never hold token data: a token read from a
// list or search becomes its masked view at once (maskedView), and its
// data is dropped. Text that came back from a proxy or a reactor is shown
// with anything that looks like a card number or a CVC masked
// (maskSensitive).

const BULLETS = '••••';

function luhn(digits) {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) { d *= 2; if (d > 9) d -= 9; }
    sum += d;
  }
  return sum % 10 === 0;
}

function last4(s) {
  const digits = String(s).replace(/\D/g, '');
  return digits.length >= 4 ? digits.slice(-4) : '';
}

/**
 * The masked view of a token: at most the last four digits of a card or
 * bank number and a card's expiry; for other types only the shape of the
 * data. Whatever the key's access rules returned (revealed, masked or
 * redacted), no more than this is kept.
 */
export function maskedView(token) {
  const d = token && token.data;
  if (d === undefined || d === null) return 'redacted';
  if (token.type === 'card' && typeof d === 'object') {
    const l4 = last4(d.number || '');
    const exp = d.expiration_month && d.expiration_year ? ` exp ${String(d.expiration_month).padStart(2, '0')}/${d.expiration_year}` : '';
    return `${BULLETS} ${l4 || BULLETS}${exp}`;
  }
  if (token.type === 'bank' && typeof d === 'object') {
    const l4 = last4(d.account_number || '');
    return `account ${BULLETS} ${l4 || BULLETS}`;
  }
  if (typeof d === 'string') return `${BULLETS} (text, ${d.length} characters)`;
  if (Array.isArray(d)) return `${BULLETS} (list of ${d.length})`;
  if (typeof d === 'object') return `${BULLETS} (object: ${Object.keys(d).slice(0, 5).join(', ')})`;
  return `${BULLETS} (${typeof d})`;
}

/** A token as lists keep it: everything but its data, plus the masked view. */
export function withoutData(token) {
  const { data, ...rest } = token;
  return { ...rest, masked: maskedView(token) };
}

const CVC_KEYS = /^(cvc|cvv|cvv2|cvc2|cid|security_code)$/i;

/**
 * Masks, in any text, runs of 12 to 19 digits (spaces or dashes between
 * them allowed) that pass the Luhn check, keeping the last four, and the
 * values of JSON members named like a CVC.
 */
export function maskSensitive(text) {
  if (typeof text !== 'string') return text;
  let out = text.replace(/\d(?:[ -]?\d){11,18}/g, (m) => {
    const digits = m.replace(/\D/g, '');
    return luhn(digits) ? `${BULLETS}${BULLETS}${BULLETS}${digits.slice(-4)}` : m;
  });
  out = out.replace(/("(?:cvc|cvv|cvv2|cvc2|cid|security_code)"\s*:\s*)("[^"]*"|\d+)/gi, (_, k) => `${k}"•••"`);
  return out;
}

/** maskSensitive over a parsed JSON value, returned as pretty text. */
export function maskJSON(value) {
  const walk = (v, key) => {
    if (key && CVC_KEYS.test(key) && v !== null && typeof v !== 'object') return '•••';
    if (typeof v === 'string') return maskSensitive(v);
    if (typeof v === 'number' && Number.isInteger(v) && String(v).length >= 12) return maskSensitive(String(v));
    if (Array.isArray(v)) return v.map((x) => walk(x));
    if (v && typeof v === 'object') {
      const o = {};
      for (const [k, x] of Object.entries(v)) o[k] = walk(x, k);
      return o;
    }
    return v;
  };
  return JSON.stringify(walk(value), null, 2);
}

// The vault's public REST API, called on the console's own origin with
// the keys the user pasted in. Keys live in this module's memory, and in
// sessionStorage only when the user asked for it; never in localStorage
// or a cookie. signOut forgets them all.

const STORAGE_KEY = 'tokenvault.console.keys';

/** The API's root: the console is served in the same site as vault_api. */
export const apiBase = new URL('/', window.location.href);

/** An API failure: status and the problem+json body when there is one. */
export class ApiError extends Error {
  constructor(status, problem) {
    super(problemText(status, problem));
    this.status = status;
    this.problem = problem || {};
  }
  /** The messages for one field of a 400, or []. */
  field(name) {
    const errs = this.problem.errors || {};
    return Array.isArray(errs[name]) ? errs[name] : [];
  }
}

function problemText(status, p) {
  if (!p) return `The vault answered ${status}.`;
  const parts = [p.title || `The vault answered ${status}`];
  if (p.detail) parts.push(p.detail);
  if (p.errors && typeof p.errors === 'object') {
    for (const [field, msgs] of Object.entries(p.errors)) {
      parts.push(`${field}: ${[].concat(msgs).join('; ')}`);
    }
  }
  return parts.join(' — ');
}

// The session: the keys in use, with the application each belongs to.
const state = {
  keys: [], // [{key, app}]
  remember: false,
  headers: { apiKey: 'SVC-API-KEY', proxyKey: 'SVC-PROXY-KEY', destinationStatus: 'SVC-PROXY-DESTINATION-STATUS' },
  stats: { requests: 0, ok: 0, clientErrors: 0, rateLimited: 0, serverErrors: 0, failed: 0 },
};
const listeners = new Set();

/** Calls fn whenever the session changes; returns the unsubscribe. */
export function subscribe(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}
function changed() {
  if (state.remember) {
    sessionStorage.setItem(STORAGE_KEY, JSON.stringify(state.keys.map((k) => k.key)));
  } else {
    sessionStorage.removeItem(STORAGE_KEY);
  }
  for (const fn of listeners) fn();
}

/** The keys of the session, without their secrets. */
export function sessionKeys() {
  return state.keys.map((k) => ({ app: k.app, hint: keyHint(k.key) }));
}
export function isSignedIn() { return state.keys.length > 0; }
export function stats() { return { ...state.stats }; }
export function headerNames() { return { ...state.headers }; }

/** The last characters of a key, to tell keys apart without showing them. */
export function keyHint(key) { return '…' + key.slice(-4); }

/** Whether some key of the session holds permission p. */
export function can(p) { return state.keys.some((k) => k.app.permissions.includes(p)); }

function keyFor(permission) {
  if (!permission) return state.keys[0] && state.keys[0].key;
  const k = state.keys.find((x) => x.app.permissions.includes(permission));
  if (!k) throw new ApiError(403, { title: 'No key of this session holds ' + permission, detail: 'Add a key that does (Session page).' });
  return k.key;
}

let headersLoaded = null;
/** Learns the vault's header names (its header_prefix) from /openapi.json. */
export function loadHeaderNames() {
  if (!headersLoaded) {
    headersLoaded = fetch(new URL('openapi.json', apiBase), { credentials: 'omit' })
      .then((r) => (r.ok ? r.json() : null))
      .then((doc) => {
        const s = doc && doc.components && doc.components.securitySchemes;
        if (s && s.apiKey && s.apiKey.name) {
          state.headers.apiKey = s.apiKey.name;
          const prefix = s.apiKey.name.slice(0, -'API-KEY'.length);
          state.headers.proxyKey = (s.proxyKey && s.proxyKey.name) || prefix + 'PROXY-KEY';
          state.headers.destinationStatus = prefix + 'PROXY-DESTINATION-STATUS';
        }
      })
      .catch(() => {});
  }
  return headersLoaded;
}

/**
 * One API call. opts: {body, query, permission (picks the key), key
 * (a given key), headers, raw (return the Response-like record)}.
 */
export async function call(method, path, opts = {}) {
  await loadHeaderNames();
  const url = new URL(path.replace(/^\//, ''), apiBase);
  for (const [k, v] of Object.entries(opts.query || {})) {
    for (const one of [].concat(v)) if (one !== undefined && one !== '') url.searchParams.append(k, one);
  }
  const headers = { Accept: 'application/json', ...(opts.headers || {}) };
  const key = opts.noKey ? null : (opts.key || keyFor(opts.permission));
  if (key) headers[state.headers.apiKey] = key;
  let body;
  if (opts.body !== undefined) {
    body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    if (!headers['Content-Type']) headers['Content-Type'] = opts.contentType || 'application/json';
  }
  state.stats.requests++;
  let res;
  try {
    res = await fetch(url, { method, headers, body, credentials: 'omit', cache: 'no-store', redirect: 'manual', referrerPolicy: 'no-referrer' });
  } catch (e) {
    state.stats.failed++;
    changed();
    throw new ApiError(0, { title: 'The vault could not be reached', detail: String(e.message || e) });
  }
  if (res.type === 'opaqueredirect') {
    // the vault never follows a destination's redirect, and neither does
    // the console: the browser hides its status and Location from scripts
    state.stats.ok++;
    for (const fn of listeners) fn();
    const note = 'The answer was a redirect; the console does not follow it.';
    if (opts.raw) return { status: 'redirect', headers: [], text: note, json: null };
    throw new ApiError(0, { title: note });
  }
  if (res.status === 429) state.stats.rateLimited++;
  else if (res.status >= 500) state.stats.serverErrors++;
  else if (res.status >= 400) state.stats.clientErrors++;
  else state.stats.ok++;
  const text = await res.text();
  let json = null;
  if (text && /json/.test(res.headers.get('Content-Type') || '')) {
    try { json = JSON.parse(text); } catch { json = null; }
  }
  for (const fn of listeners) fn();
  if (opts.raw) {
    return { status: res.status, headers: [...res.headers.entries()], text, json };
  }
  if (!res.ok) throw new ApiError(res.status, json);
  return json;
}

/** Adds a key to the session after asking the vault whose it is. */
export async function addKey(key) {
  key = key.trim();
  if (!key) throw new ApiError(400, { title: 'Paste an API key' });
  if (state.keys.some((k) => k.key === key)) throw new ApiError(400, { title: 'This key is already in the session' });
  const app = await call('GET', '/applications/key', { key });
  state.keys.push({ key, app: { ...app, permissions: app.permissions || [] } });
  changed();
  return app;
}

/** Removes one key (by position) from the session. */
export function removeKey(i) {
  state.keys.splice(i, 1);
  changed();
}

/** Keeps the keys in sessionStorage (this tab only) or in memory only. */
export function setRemember(on) {
  state.remember = !!on;
  changed();
}
export function remembering() { return state.remember; }

/** Forgets every key, in memory and in sessionStorage. */
export function signOut() {
  state.keys = [];
  state.remember = false;
  sessionStorage.removeItem(STORAGE_KEY);
  for (const k of Object.keys(state.stats)) state.stats[k] = 0;
  changed();
}

/** Restores the keys kept in sessionStorage by this tab, if any. */
export async function restore() {
  let saved = [];
  try { saved = JSON.parse(sessionStorage.getItem(STORAGE_KEY) || '[]'); } catch { saved = []; }
  if (!Array.isArray(saved) || saved.length === 0) return;
  state.remember = true;
  for (const k of saved) {
    try { await addKey(String(k)); } catch { /* a revoked key is dropped */ }
  }
  changed();
}

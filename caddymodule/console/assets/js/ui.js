// Shared pieces of the pages: labelled fields, problem display, a two-step
// delete button, the once-shown secret, a page frame.
import { html, useState, useEffect, useRef } from './lib.js';
import { ApiError, addKey } from './api.js';

let nextId = 0;
/** A unique id for label/control pairs. */
export function uid(prefix) { nextId++; return `${prefix}-${nextId}`; }

/** A labelled text input (or textarea with rows, or select with options). */
export function Field({ id, label, value, onInput, type = 'text', rows, options, hint, required, error, placeholder, autocomplete = 'off', mono }) {
  const hintId = hint ? id + '-hint' : undefined;
  const errId = error && error.length ? id + '-error' : undefined;
  const describedBy = [hintId, errId].filter(Boolean).join(' ') || undefined;
  const common = { id, name: id, required, 'aria-describedby': describedBy, 'aria-invalid': errId ? 'true' : undefined };
  let control;
  if (options) {
    control = html`<select ...${common} value=${value} onChange=${(e) => onInput(e.target.value)}>
      ${options.map((o) => html`<option value=${o.value ?? o}>${o.label ?? o}</option>`)}</select>`;
  } else if (rows) {
    control = html`<textarea ...${common} class=${mono ? 'mono' : ''} rows=${rows} value=${value} placeholder=${placeholder}
      spellcheck="false" onInput=${(e) => onInput(e.target.value)}></textarea>`;
  } else {
    control = html`<input ...${common} class=${mono ? 'mono' : ''} type=${type} value=${value} placeholder=${placeholder}
      autocomplete=${autocomplete} onInput=${(e) => onInput(e.target.value)} />`;
  }
  return html`<div class="field">
    <label for=${id}>${label}</label>
    ${control}
    ${hint && html`<p class="hint" id=${hintId}>${hint}</p>`}
    ${errId && html`<p class="field-error" id=${errId}>${error.join(' ')}</p>`}
  </div>`;
}

/** A checkbox with its label. */
export function Check({ id, label, checked, onChange }) {
  return html`<div class="check"><input type="checkbox" id=${id} checked=${checked} onChange=${(e) => onChange(e.target.checked)} />
    <label for=${id}>${label}</label></div>`;
}

/** An API error as the user reads it. */
export function Problem({ error }) {
  if (!error) return null;
  const msg = error instanceof ApiError ? error.message : String(error.message || error);
  const status = error instanceof ApiError && error.status ? `${error.status}: ` : '';
  return html`<p class="problem" role="alert">${status}${msg}</p>`;
}

/** A status line for successes, announced politely. */
export function Notice({ text }) {
  return html`<p class="notice" role="status">${text || ''}</p>`;
}

/** Delete (or any irreversible action) in two steps, without a modal. */
export function ConfirmButton({ label, confirmLabel, onConfirm, disabled }) {
  const [armed, setArmed] = useState(false);
  const confirmRef = useRef(null);
  useEffect(() => { if (armed && confirmRef.current) confirmRef.current.focus(); }, [armed]);
  if (!armed) return html`<button type="button" class="danger" disabled=${disabled} onClick=${() => setArmed(true)}>${label}</button>`;
  return html`<span class="confirm">
    <button type="button" class="danger" ref=${confirmRef} onClick=${() => { setArmed(false); onConfirm(); }}>${confirmLabel}</button>
    <button type="button" onClick=${() => setArmed(false)}>Cancel</button></span>`;
}

/**
 * A key the vault shows once: visible until dismissed, with a button to
 * add it to this session (so it can be used at once without copying).
 */
export function OnceSecret({ title, secret, onDone, canUse = true }) {
  const [used, setUsed] = useState(null);
  const [err, setErr] = useState(null);
  const ref = useRef(null);
  useEffect(() => { if (ref.current) ref.current.focus(); }, []);
  const use = async () => {
    try { const app = await addKey(secret); setUsed(`Added to this session (${app.name}).`); setErr(null); } catch (e) { setErr(e); }
  };
  return html`<section class="once" aria-labelledby="once-title" tabindex="-1" ref=${ref}>
    <h2 id="once-title">${title}</h2>
    <p>This key is shown once. Copy it now: the vault keeps only its hash.</p>
    <p><code class="secret" data-testid="once-key">${secret}</code></p>
    <div class="actions">
      ${canUse && html`<button type="button" onClick=${use} disabled=${!!used}>Use this key in the console</button>`}
      <button type="button" onClick=${onDone}>Done, hide it</button>
    </div>
    <${Notice} text=${used} />
    <${Problem} error=${err} />
  </section>`;
}

/** Loads data with fn (re-run when deps change); returns [data, error, reload]. */
export function useLoad(fn, deps) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    fn().then((data) => live && setState({ data, error: null, loading: false }),
      (error) => live && setState({ data: null, error, loading: false }));
    return () => { live = false; };
  }, [...deps, tick]);
  return [state.data, state.error, () => setTick((t) => t + 1), state.loading];
}

/** Formats a vault timestamp for people (local time, to the second). */
export function when(ts) {
  if (!ts) return '';
  const d = new Date(ts);
  return isNaN(d) ? String(ts) : d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

/** A page's frame: its heading (focused on navigation) and content. */
export function Page({ title, intro, children }) {
  const ref = useRef(null);
  useEffect(() => { if (ref.current) ref.current.focus(); }, [title]);
  return html`<section class="page" aria-labelledby="page-title">
    <h1 id="page-title" tabindex="-1" ref=${ref}>${title}</h1>
    ${intro && html`<p class="intro">${intro}</p>`}
    ${children}
  </section>`;
}

/** Lines "NAME=value" into an object, and back. */
export function parsePairs(text) {
  const out = {};
  for (const line of text.split('\n')) {
    const t = line.trim();
    if (!t) continue;
    const i = t.indexOf('=');
    if (i <= 0) throw new Error(`"${t.slice(0, 40)}" is not NAME=value`);
    out[t.slice(0, i).trim()] = t.slice(i + 1).trim();
  }
  return out;
}
export function formatPairs(obj) {
  return Object.entries(obj || {}).map(([k, v]) => `${k}=${v}`).join('\n');
}

// Reactors: list, create and edit code in the highlighting editor (a
// validation error from the vault marks its line), delete, and a test
// invocation whose result is shown masked.
import { html, useState } from '../lib.js';
import { call, can } from '../api.js';
import { maskJSON } from '../mask.js';
import { CodeEditor, errorPosition } from '../editor.js';
import { Page, Problem, Notice, Field, ConfirmButton, useLoad, when, parsePairs, formatPairs } from '../ui.js';

const SAMPLE = `module.exports = async function (req) {
  const { args, configuration } = req;
  return {
    raw: { greeting: 'hello ' + args.name }
  };
};
`;

function ReactorForm({ initial, onSaved, onCancel }) {
  const [f, setF] = useState(initial);
  const [err, setErr] = useState(null);
  const set = (k) => (v) => setF({ ...f, [k]: v });
  const submit = async (e) => {
    e.preventDefault();
    setErr(null);
    try {
      const body = { name: f.name, code: f.code, configuration: parsePairs(f.configuration) };
      const saved = f.id
        ? await call('PUT', `/reactors/${encodeURIComponent(f.id)}`, { permission: 'reactor:update', body })
        : await call('POST', '/reactors', { permission: 'reactor:create', body });
      onSaved(saved, !f.id);
    } catch (e2) { setErr(e2); }
  };
  const codeErr = err && err.field ? err.field('code') : [];
  const pos = codeErr.length ? errorPosition(codeErr[0]) : null;
  return html`<form class="card" onSubmit=${submit} aria-labelledby="reactor-form-title">
    <h2 id="reactor-form-title">${f.id ? `Edit reactor ${initial.name}` : 'Create a reactor'}</h2>
    <${Field} id="reactor-name" label="Name" value=${f.name} onInput=${set('name')} required error=${err && err.field ? err.field('name') : []} />
    <${CodeEditor} id="reactor-code" label="Code (JavaScript)" value=${f.code} onInput=${set('code')} rows=${14}
      errorLine=${pos && pos.line} describedBy=${codeErr.length ? 'reactor-code-error' : undefined} />
    ${codeErr.length > 0 && html`<p class="field-error" id="reactor-code-error" data-line=${pos ? pos.line : ''}>
      ${pos ? `Line ${pos.line}, column ${pos.column}: ` : ''}${codeErr.join(' ')}</p>`}
    <${Field} id="reactor-configuration" label="Configuration (NAME=value lines)" rows="2" mono value=${f.configuration} onInput=${set('configuration')} />
    <div class="actions"><button type="submit">${f.id ? 'Save reactor' : 'Create reactor'}</button>
      ${onCancel && html`<button type="button" onClick=${onCancel}>Cancel</button>`}</div>
    <${Problem} error=${err} />
  </form>`;
}

function Invoke({ reactor }) {
  const [args, setArgs] = useState('{\n  "name": "world"\n}');
  const [result, setResult] = useState(null);
  const [err, setErr] = useState(null);
  const run = async (e) => {
    e.preventDefault();
    setErr(null); setResult(null);
    try {
      let parsed;
      try { parsed = JSON.parse(args); } catch { throw new Error('Arguments must be a JSON object.'); }
      const r = await call('POST', `/reactors/${encodeURIComponent(reactor.id)}/react`, { permission: 'reactor:invoke', body: { args: parsed } });
      setResult(maskJSON(r));
    } catch (e2) { setErr(e2); }
  };
  return html`<form class="card" onSubmit=${run} aria-labelledby=${'invoke-' + reactor.id}>
    <h3 id=${'invoke-' + reactor.id}>Test ${reactor.name}</h3>
    <${Field} id="reactor-args" label="Arguments (JSON; {{ token_id }} expressions are detokenized)" rows="4" mono value=${args} onInput=${setArgs} />
    <button type="submit" disabled=${!can('reactor:invoke')}>Invoke reactor</button>
    ${!can('reactor:invoke') && html`<p class="hint">Needs a key with reactor:invoke (a private application's key) in this session.</p>`}
    <${Problem} error=${err} />
    ${result && html`<pre class="result" data-testid="reactor-result">${result}</pre>`}
  </form>`;
}

export function ReactorsPage() {
  const [page, error, reload] = useLoad(() => call('GET', '/reactors', { permission: 'reactor:read', query: { size: 100 } }), []);
  const [editing, setEditing] = useState(null);
  const [testing, setTesting] = useState(null);
  const [err, setErr] = useState(null);
  const [notice, setNotice] = useState('');
  const reactors = (page && page.data) || [];
  const del = async (r) => {
    setErr(null);
    try { await call('DELETE', `/reactors/${encodeURIComponent(r.id)}`, { permission: 'reactor:delete' }); setNotice(`Reactor ${r.name} deleted.`); reload(); } catch (e) { setErr(e); }
  };
  return html`<${Page} title="Reactors" intro="Reactors run your JavaScript on detokenized arguments, inside the vault.">
    ${editing
      ? html`<${ReactorForm} key=${editing.id || 'new'} initial=${editing} onCancel=${() => setEditing(null)}
          onSaved=${(r, created) => { setEditing(null); setNotice(`Reactor ${r.name} ${created ? 'created' : 'saved'}.`); reload(); }} />`
      : can('reactor:create') && html`<button type="button" onClick=${() => setEditing({ id: null, name: '', code: SAMPLE, configuration: '' })}>New reactor</button>`}
    <${Problem} error=${error || err} /><${Notice} text=${notice} />
    <table class="list"><caption>Reactors (${reactors.length})</caption>
      <thead><tr><th scope="col">Name</th><th scope="col">Modified</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${reactors.map((r) => html`<tr key=${r.id}>
        <td>${r.name}<br /><code class="small">${r.id}</code></td><td>${when(r.modified_at || r.created_at)}</td>
        <td>${can('reactor:update') && html`<button type="button" onClick=${() => setEditing({ id: r.id, name: r.name, code: r.code || '', configuration: formatPairs(r.configuration) })}>Edit ${r.name}</button>`}
          <button type="button" aria-expanded=${testing === r.id ? 'true' : 'false'} onClick=${() => setTesting(testing === r.id ? null : r.id)}>Test ${r.name}</button>
          ${can('reactor:delete') && html`<${ConfirmButton} label=${'Delete ' + r.name} confirmLabel=${'Confirm: delete ' + r.name} onConfirm=${() => del(r)} />`}</td>
      </tr>
      ${testing === r.id && html`<tr class="detail"><td colspan="3"><${Invoke} reactor=${r} /></td></tr>`}`)}
      </tbody>
    </table>
  <//>`;
}

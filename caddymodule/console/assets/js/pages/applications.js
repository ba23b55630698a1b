// Applications: list, create (with permissions and access rules), keys
// (new, rotate, delete; a new key is shown once), delete.
import { html, useState } from '../lib.js';
import { call, can } from '../api.js';
import { Page, Problem, Notice, Field, Check, ConfirmButton, OnceSecret, useLoad, when } from '../ui.js';

const TYPES = ['private', 'public', 'management'];
const TRANSFORMS = ['reveal', 'mask', 'redact'];

function RuleEditor({ rules, setRules, perms }) {
  const set = (i, k, v) => setRules(rules.map((r, j) => (j === i ? { ...r, [k]: v } : r)));
  return html`<fieldset class="rules"><legend>Access rules (lowest priority first, first match wins)</legend>
    ${rules.length === 0 && html`<p class="hint">No rules: with token permissions, the application's permissions apply to every container, data revealed.</p>`}
    ${rules.map((r, i) => html`<div class="rule" key=${i}>
      <${Field} id=${`rule-${i}-container`} label=${`Rule ${i + 1} container`} value=${r.container} onInput=${(v) => set(i, 'container', v)} placeholder="/pci/" />
      <${Field} id=${`rule-${i}-transform`} label=${`Rule ${i + 1} transform`} value=${r.transform} options=${TRANSFORMS} onInput=${(v) => set(i, 'transform', v)} />
      <${Field} id=${`rule-${i}-priority`} label=${`Rule ${i + 1} priority`} type="number" value=${r.priority} onInput=${(v) => set(i, 'priority', v)} />
      <${Field} id=${`rule-${i}-permissions`} label=${`Rule ${i + 1} permissions (comma separated)`} value=${r.permissions}
        onInput=${(v) => set(i, 'permissions', v)} hint=${perms.length ? 'Of: ' + perms.join(', ') : ''} />
      <button type="button" onClick=${() => setRules(rules.filter((_, j) => j !== i))}>Remove rule ${i + 1}</button>
    </div>`)}
    <button type="button" onClick=${() => setRules([...rules, { container: '/', transform: 'mask', priority: String(rules.length + 1), permissions: 'token:read' }])}>Add a rule</button>
  </fieldset>`;
}

function CreateApplication({ onCreated }) {
  const [name, setName] = useState('');
  const [type, setType] = useState('private');
  const [chosen, setChosen] = useState({});
  const [rules, setRules] = useState([]);
  const [err, setErr] = useState(null);
  const [perms] = useLoad(() => call('GET', '/permissions', { query: { application_type: type } }), [type]);
  const names = (perms || []).map((p) => p.type || p.name || p).filter((p) => typeof p === 'string');
  const submit = async (e) => {
    e.preventDefault();
    setErr(null);
    try {
      const body = {
        name, type, permissions: names.filter((p) => chosen[p]),
        rules: rules.map((r) => ({
          container: r.container, transform: r.transform, priority: Number(r.priority),
          permissions: r.permissions.split(',').map((s) => s.trim()).filter(Boolean),
        })),
      };
      const app = await call('POST', '/applications', { permission: 'application:create', body });
      setName(''); setChosen({}); setRules([]);
      onCreated(app);
    } catch (e2) { setErr(e2); }
  };
  return html`<form class="card" onSubmit=${submit} aria-labelledby="create-app">
    <h2 id="create-app">Create an application</h2>
    <${Field} id="app-name" label="Name" value=${name} onInput=${setName} required error=${err && err.field && err.field('name')} />
    <${Field} id="app-type" label="Type" value=${type} options=${TYPES} onInput=${(v) => { setType(v); setChosen({}); }} />
    <fieldset><legend>Permissions</legend>
      <div class="checks">${names.map((p) => html`<${Check} id=${'perm-' + p.replace(':', '-')} label=${p} checked=${!!chosen[p]}
        onChange=${(on) => setChosen({ ...chosen, [p]: on })} />`)}</div>
    </fieldset>
    ${type !== 'management' && html`<${RuleEditor} rules=${rules} setRules=${setRules} perms=${names} />`}
    <button type="submit">Create application</button>
    <${Problem} error=${err} />
  </form>`;
}

function Keys({ app, onSecret }) {
  const [keys, error, reload] = useLoad(() => call('GET', `/applications/${encodeURIComponent(app.id)}/keys`, { permission: 'application:read' }), [app.id]);
  const [err, setErr] = useState(null);
  const [notice, setNotice] = useState('');
  const base = `/applications/${encodeURIComponent(app.id)}/keys`;
  const newKey = async () => {
    setErr(null);
    try { const k = await call('POST', base, { permission: 'application:update' }); onSecret(`New key for ${app.name}`, k.key); reload(); } catch (e) { setErr(e); }
  };
  const rotate = async (old) => {
    setErr(null);
    try {
      const k = await call('POST', base, { permission: 'application:update' });
      await call('DELETE', `${base}/${encodeURIComponent(old.id)}`, { permission: 'application:update' });
      onSecret(`Rotated key for ${app.name} (the old key no longer works)`, k.key);
      reload();
    } catch (e) { setErr(e); }
  };
  const remove = async (k) => {
    setErr(null);
    try { await call('DELETE', `${base}/${encodeURIComponent(k.id)}`, { permission: 'application:update' }); setNotice('Key deleted.'); reload(); } catch (e) { setErr(e); }
  };
  const mayUpdate = can('application:update');
  return html`<div class="keys">
    <h3>Keys</h3>
    <${Problem} error=${error || err} /><${Notice} text=${notice} />
    ${keys && keys.length === 0 && html`<p class="hint">No keys.</p>`}
    ${keys && keys.length > 0 && html`<table><caption class="sr-only">Keys of ${app.name}</caption>
      <thead><tr><th scope="col">Key id</th><th scope="col">Created</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${keys.map((k) => html`<tr key=${k.id}><td><code>${k.id}</code></td><td>${when(k.created_at)}</td>
        <td>${mayUpdate && html`<button type="button" onClick=${() => rotate(k)}>Rotate</button>
          <${ConfirmButton} label="Delete key" confirmLabel="Confirm: delete key" onConfirm=${() => remove(k)} />`}</td></tr>`)}</tbody>
    </table>`}
    ${mayUpdate && html`<button type="button" onClick=${newKey}>New key for ${app.name}</button>`}
  </div>`;
}

export function ApplicationsPage() {
  const [page, error, reload] = useLoad(() => call('GET', '/applications', { permission: 'application:read', query: { size: 100 } }), []);
  const [secret, setSecret] = useState(null);
  const [open, setOpen] = useState(null);
  const [err, setErr] = useState(null);
  const apps = (page && page.data) || [];
  const del = async (a) => {
    setErr(null);
    try { await call('DELETE', `/applications/${encodeURIComponent(a.id)}`, { permission: 'application:delete' }); reload(); } catch (e) { setErr(e); }
  };
  return html`<${Page} title="Applications" intro="Applications hold permissions and access rules; their keys call the API.">
    ${secret && html`<${OnceSecret} title=${secret.title} secret=${secret.key} onDone=${() => setSecret(null)} />`}
    ${can('application:create') && html`<${CreateApplication} onCreated=${(a) => { setSecret({ title: `Key of the new application ${a.name}`, key: a.key || (a.keys && a.keys[0] && a.keys[0].key) }); reload(); }} />`}
    <${Problem} error=${error || err} />
    <table class="list"><caption>Applications (${apps.length})</caption>
      <thead><tr><th scope="col">Name</th><th scope="col">Type</th><th scope="col">Permissions</th><th scope="col">Rules</th><th scope="col">Created</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${apps.map((a) => html`<tr key=${a.id}>
        <td>${a.name}<br /><code class="small">${a.id}</code></td><td>${a.type}</td>
        <td class="wrap">${(a.permissions || []).join(', ')}</td>
        <td class="wrap">${(a.rules || []).map((r) => html`<div>${r.priority}. <code>${r.container}</code> ${r.transform}: ${(r.permissions || []).join(', ')}</div>`)}</td>
        <td>${when(a.created_at)}</td>
        <td><button type="button" aria-expanded=${open === a.id ? 'true' : 'false'} onClick=${() => setOpen(open === a.id ? null : a.id)}>Keys of ${a.name}</button>
          ${can('application:delete') && html`<${ConfirmButton} label=${'Delete ' + a.name} confirmLabel=${'Confirm: delete ' + a.name} onConfirm=${() => del(a)} />`}</td>
      </tr>
      ${open === a.id && html`<tr class="detail"><td colspan="6"><${Keys} app=${a} onSecret=${(title, key) => setSecret({ title, key })} /></td></tr>`}`)}
      </tbody>
    </table>
  <//>`;
}

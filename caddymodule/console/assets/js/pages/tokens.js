// Tokens: list (cursor pages), search with the query language, the
// masked view, create, delete, and a read of one token's data on an
// explicit request. Lists keep no token data: each token becomes its
// masked view as it arrives (mask.js). A read shows the data as the
// key's access rules return it (revealed, masked or redacted), until
// hidden again.
import { html, useState } from '../lib.js';
import { call, can } from '../api.js';
import { withoutData } from '../mask.js';
import { Page, Problem, Notice, Field, ConfirmButton, when } from '../ui.js';

const EXAMPLES = {
  card: '{\n  "number": "<13 to 19 digits>",\n  "expiration_month": 12,\n  "expiration_year": 2030\n}',
  bank: '{\n  "routing_number": "110000000",\n  "account_number": "<up to 17 digits>"\n}',
  token: '"some sensitive text"',
};

function CreateToken({ onCreated }) {
  const [type, setType] = useState('card');
  const [data, setData] = useState('');
  const [containers, setContainers] = useState('');
  const [metadata, setMetadata] = useState('');
  const [err, setErr] = useState(null);
  const submit = async (e) => {
    e.preventDefault();
    setErr(null);
    try {
      let parsed;
      try { parsed = JSON.parse(data); } catch { throw new Error('Data must be JSON (a string in quotes, or an object).'); }
      const body = { type, data: parsed };
      const cs = containers.split(',').map((s) => s.trim()).filter(Boolean);
      if (cs.length) body.containers = cs;
      const md = {};
      for (const line of metadata.split('\n')) {
        const i = line.indexOf('=');
        if (i > 0) md[line.slice(0, i).trim()] = line.slice(i + 1).trim();
      }
      if (Object.keys(md).length) body.metadata = md;
      const tok = await call('POST', '/tokens', { permission: 'token:create', body });
      setData('');
      onCreated(withoutData(tok));
    } catch (e2) { setErr(e2); }
  };
  return html`<form class="card" onSubmit=${submit} aria-labelledby="create-token">
    <h2 id="create-token">Create a token</h2>
    <${Field} id="token-type" label="Type" value=${type} options=${['card', 'bank', 'token']} onInput=${setType} />
    <${Field} id="token-data" label="Data (JSON)" rows="5" mono value=${data} onInput=${setData} required
      placeholder=${EXAMPLES[type]} error=${err && err.field && err.field('data')}
      hint="Sent to the vault and then cleared from this form; the list shows only the masked view." />
    <${Field} id="token-containers" label="Containers (comma separated, optional)" value=${containers} onInput=${setContainers} placeholder="/pci/high/" />
    <${Field} id="token-metadata" label="Metadata (NAME=value lines, optional)" rows="2" mono value=${metadata} onInput=${setMetadata} placeholder="customer=alice" />
    <button type="submit">Create token</button>
    <${Problem} error=${err} />
  </form>`;
}

function TokenRow({ t, onDeleted }) {
  const [read, setRead] = useState(null); // the API's answer, while shown
  const [err, setErr] = useState(null);
  const reveal = async () => {
    setErr(null);
    try {
      const tok = await call('GET', `/tokens/${encodeURIComponent(t.id)}`, { permission: 'token:read' });
      setRead(JSON.stringify(tok.data === undefined ? null : tok.data, null, 2));
    } catch (e) { setErr(e); }
  };
  const del = async () => {
    setErr(null);
    try { await call('DELETE', `/tokens/${encodeURIComponent(t.id)}`, { permission: 'token:delete' }); onDeleted(t.id); } catch (e) { setErr(e); }
  };
  return html`<tr data-token-id=${t.id}>
    <td><code class="small">${t.id}</code></td><td>${t.type}</td>
    <td class="wrap">${(t.containers || []).join(', ')}</td>
    <td class="masked">${read === null ? t.masked : html`<pre class="revealed" aria-label=${'Data of ' + t.id}>${read}</pre>`}</td>
    <td>${when(t.created_at)}</td>
    <td>
      ${read === null
        ? html`<button type="button" onClick=${reveal} aria-label=${'Reveal token ' + t.id}>Reveal</button>`
        : html`<button type="button" onClick=${() => setRead(null)} aria-label=${'Hide token ' + t.id}>Hide</button>`}
      ${can('token:delete') && html`<${ConfirmButton} label="Delete" confirmLabel="Confirm delete" onConfirm=${del} />`}
      <${Problem} error=${err} />
    </td>
  </tr>`;
}

export function TokensPage() {
  const [query, setQuery] = useState('');
  const [rows, setRows] = useState(null);
  const [next, setNext] = useState('');
  const [mode, setMode] = useState('list');
  const [err, setErr] = useState(null);
  const [notice, setNotice] = useState('');
  const load = async (m, start = '') => {
    setErr(null);
    try {
      const page = m === 'search'
        ? await call('POST', '/v2/tokens/search', { permission: 'token:search', body: { query, size: 20, ...(start ? { start } : {}) } })
        : await call('GET', '/v2/tokens', { permission: 'token:read', query: { size: 20, start } });
      const got = (page.data || []).map(withoutData);
      setRows(start ? [...(rows || []), ...got] : got);
      setNext((page.pagination && page.pagination.next) || '');
      setMode(m);
      setNotice(`${m === 'search' ? 'Search' : 'List'}: ${start ? 'more' : got.length} token${got.length === 1 ? '' : 's'} shown.`);
    } catch (e) { setErr(e); }
  };
  const search = (e) => { e.preventDefault(); load('search'); };
  return html`<${Page} title="Tokens" intro="Token data stays masked here; a token's data is read only when you ask for it.">
    <form class="card" onSubmit=${search} aria-labelledby="search-tokens" role="search">
      <h2 id="search-tokens">Search</h2>
      <${Field} id="token-query" label="Query" mono value=${query} onInput=${setQuery}
        hint="The query language: type:card AND metadata.customer:alice, card.last4:4242, container:/pci/, created_at:[2026-01-01 TO *]"
        error=${err && err.field && err.field('query')} />
      <div class="actions">
        <button type="submit" disabled=${!can('token:search')}>Search</button>
        <button type="button" onClick=${() => load('list')} disabled=${!can('token:read')}>List all tokens</button>
      </div>
    </form>
    <${Problem} error=${err} /><${Notice} text=${notice} />
    ${rows && html`<table class="list"><caption>${mode === 'search' ? 'Search results' : 'Tokens'} (${rows.length})</caption>
      <thead><tr><th scope="col">Id</th><th scope="col">Type</th><th scope="col">Containers</th><th scope="col">Data</th><th scope="col">Created</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${rows.map((t) => html`<${TokenRow} key=${t.id} t=${t} onDeleted=${(id) => { setRows(rows.filter((r) => r.id !== id)); setNotice(`Token ${id} deleted.`); }} />`)}</tbody>
    </table>
    ${next && html`<button type="button" onClick=${() => load(mode, next)}>More tokens</button>`}`}
    ${can('token:create') && html`<${CreateToken} onCreated=${(t) => { setRows([t, ...(rows || [])]); setNotice(`Token ${t.id} created.`); }} />`}
  <//>`;
}

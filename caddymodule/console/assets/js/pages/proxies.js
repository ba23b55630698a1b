// Proxies: list, create, edit (merge patch), delete, and a test request
// through the proxy whose answer (what an echoing destination got) is
// shown with card numbers and CVCs masked.
import { html, useState } from '../lib.js';
import { call, can, headerNames } from '../api.js';
import { maskJSON, maskSensitive } from '../mask.js';
import { CodeEditor, errorPosition } from '../editor.js';
import { Page, Problem, Notice, Field, Check, ConfirmButton, useLoad, when, parsePairs, formatPairs } from '../ui.js';

const blank = { id: null, name: '', destination_url: '', require_auth: true, request: '', response: '', configuration: '' };

function ProxyForm({ initial, onSaved, onCancel }) {
  const [f, setF] = useState(initial);
  const [err, setErr] = useState(null);
  const set = (k) => (v) => setF({ ...f, [k]: v });
  const submit = async (e) => {
    e.preventDefault();
    setErr(null);
    try {
      const body = {
        name: f.name, destination_url: f.destination_url, require_auth: f.require_auth,
        request_transform: f.request.trim() ? { code: f.request } : null,
        response_transform: f.response.trim() ? { code: f.response } : null,
        configuration: parsePairs(f.configuration),
      };
      let saved;
      if (f.id) {
        await call('PATCH', `/proxies/${encodeURIComponent(f.id)}`, { permission: 'proxy:update', body, contentType: 'application/merge-patch+json' });
        saved = await call('GET', `/proxies/${encodeURIComponent(f.id)}`, { permission: 'proxy:read' });
      } else {
        if (!body.request_transform) delete body.request_transform;
        if (!body.response_transform) delete body.response_transform;
        saved = await call('POST', '/proxies', { permission: 'proxy:create', body });
      }
      onSaved(saved, !f.id);
    } catch (e2) { setErr(e2); }
  };
  const fieldErr = (n) => (err && err.field ? err.field(n) : []);
  const codeErr = (n) => { const m = fieldErr(n).concat(fieldErr(n + '.code')); return m.length ? m : null; };
  const reqErr = codeErr('request_transform');
  const resErr = codeErr('response_transform');
  return html`<form class="card" onSubmit=${submit} aria-labelledby="proxy-form-title">
    <h2 id="proxy-form-title">${f.id ? `Edit proxy ${initial.name}` : 'Create a proxy'}</h2>
    <${Field} id="proxy-name" label="Name" value=${f.name} onInput=${set('name')} required error=${fieldErr('name')} />
    <${Field} id="proxy-destination" label="Destination URL" type="url" value=${f.destination_url} onInput=${set('destination_url')} required
      error=${fieldErr('destination_url')} hint="HTTPS to a public address, unless the operator allowed other networks (egress)." />
    <${Check} id="proxy-require-auth" label="Require an API key to invoke (require_auth)" checked=${f.require_auth} onChange=${set('require_auth')} />
    <${CodeEditor} id="proxy-request-code" label="Request transform (JavaScript, optional)" value=${f.request} onInput=${set('request')} rows=${8}
      errorLine=${reqErr && errorPosition(reqErr[0]) && errorPosition(reqErr[0]).line} describedBy=${reqErr ? 'proxy-request-error' : undefined} />
    ${reqErr && html`<p class="field-error" id="proxy-request-error">${reqErr.join(' ')}</p>`}
    <${CodeEditor} id="proxy-response-code" label="Response transform (JavaScript, optional)" value=${f.response} onInput=${set('response')} rows=${6}
      errorLine=${resErr && errorPosition(resErr[0]) && errorPosition(resErr[0]).line} describedBy=${resErr ? 'proxy-response-error' : undefined} />
    ${resErr && html`<p class="field-error" id="proxy-response-error">${resErr.join(' ')}</p>`}
    <${Field} id="proxy-configuration" label="Configuration (NAME=value lines, for the transforms)" rows="2" mono value=${f.configuration} onInput=${set('configuration')} />
    <div class="actions"><button type="submit">${f.id ? 'Save proxy' : 'Create proxy'}</button>
      ${onCancel && html`<button type="button" onClick=${onCancel}>Cancel</button>`}</div>
    <${Problem} error=${err} />
  </form>`;
}

function TestPanel({ proxy }) {
  const [method, setMethod] = useState('POST');
  const [path, setPath] = useState('');
  const [headers, setHeaders] = useState('Content-Type: application/json');
  const [body, setBody] = useState('{\n  "number": "{{ TOKEN_ID | json: \'$.number\' }}"\n}');
  const [result, setResult] = useState(null);
  const [err, setErr] = useState(null);
  const send = async (e) => {
    e.preventDefault();
    setErr(null); setResult(null);
    try {
      const names = headerNames();
      const hdrs = {};
      for (const line of headers.split('\n')) {
        const i = line.indexOf(':');
        if (i > 0) hdrs[line.slice(0, i).trim()] = line.slice(i + 1).trim();
      }
      hdrs[names.proxyKey] = proxy.key;
      const opts = { headers: hdrs, raw: true };
      if (proxy.require_auth) opts.permission = 'token:use'; else opts.noKey = true;
      if (method !== 'GET' && method !== 'HEAD') { opts.body = body; opts.contentType = hdrs['Content-Type'] || 'application/json'; }
      const suffix = path.replace(/^\/+/, '');
      const r = await call(method, '/proxy' + (suffix ? '/' + suffix : ''), opts);
      const destStatus = r.headers.find(([k]) => k.toLowerCase() === names.destinationStatus.toLowerCase());
      setResult({
        status: r.status,
        destination: destStatus ? destStatus[1] : null,
        headers: r.headers.filter(([k]) => !/^(date|content-length)$/i.test(k)).map(([k, v]) => `${k}: ${maskSensitive(v)}`).join('\n'),
        body: r.json !== null ? maskJSON(r.json) : maskSensitive(r.text),
      });
    } catch (e2) { setErr(e2); }
  };
  return html`<form class="card test-panel" onSubmit=${send} aria-labelledby=${'test-' + proxy.id}>
    <h3 id=${'test-' + proxy.id}>Send a test request through ${proxy.name}</h3>
    <p class="hint">The vault detokenizes ${'{{ … }}'} expressions and forwards the request to ${proxy.destination_url}. ${proxy.require_auth ? 'Sent with a key of this session that holds token:use.' : 'Sent without an API key (require_auth is off).'} Card numbers and CVCs in the answer are masked here.</p>
    <${Field} id="test-method" label="Method" value=${method} options=${['POST', 'PUT', 'PATCH', 'GET', 'DELETE']} onInput=${setMethod} />
    <${Field} id="test-path" label="Path after the destination URL (optional)" value=${path} onInput=${setPath} />
    <${Field} id="test-headers" label="Headers (Name: value lines)" rows="2" mono value=${headers} onInput=${setHeaders} />
    <${Field} id="test-body" label="Body" rows="5" mono value=${body} onInput=${setBody} />
    <button type="submit">Send test request</button>
    <${Problem} error=${err} />
    ${result && html`<section class="result" aria-labelledby="test-result" data-testid="proxy-result">
      <h4 id="test-result">Answer: ${result.status}${result.destination ? ` (destination answered ${result.destination})` : ''}</h4>
      <pre class="small">${result.headers}</pre>
      <pre>${result.body}</pre>
    </section>`}
  </form>`;
}

export function ProxiesPage() {
  const [page, error, reload] = useLoad(() => call('GET', '/proxies', { permission: 'proxy:read', query: { size: 100 } }), []);
  const [editing, setEditing] = useState(null);
  const [testing, setTesting] = useState(null);
  const [err, setErr] = useState(null);
  const [notice, setNotice] = useState('');
  const proxies = (page && page.data) || [];
  const edit = (p) => setEditing({
    id: p.id, name: p.name, destination_url: p.destination_url, require_auth: p.require_auth,
    request: (p.request_transform && p.request_transform.code) || '', response: (p.response_transform && p.response_transform.code) || '',
    configuration: formatPairs(p.configuration),
  });
  const del = async (p) => {
    setErr(null);
    try { await call('DELETE', `/proxies/${encodeURIComponent(p.id)}`, { permission: 'proxy:delete' }); setNotice(`Proxy ${p.name} deleted.`); reload(); } catch (e) { setErr(e); }
  };
  return html`<${Page} title="Proxies" intro="Proxies forward requests to a destination with tokens detokenized on the way.">
    ${editing
      ? html`<${ProxyForm} key=${editing.id || 'new'} initial=${editing} onCancel=${() => setEditing(null)}
          onSaved=${(p, created) => { setEditing(null); setNotice(`Proxy ${p.name} ${created ? 'created' : 'saved'}.`); reload(); }} />`
      : can('proxy:create') && html`<button type="button" onClick=${() => setEditing({ ...blank })}>New proxy</button>`}
    <${Problem} error=${error || err} /><${Notice} text=${notice} />
    <table class="list"><caption>Proxies (${proxies.length})</caption>
      <thead><tr><th scope="col">Name</th><th scope="col">Destination</th><th scope="col">Auth</th><th scope="col">Transforms</th><th scope="col">Modified</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${proxies.map((p) => html`<tr key=${p.id}>
        <td>${p.name}<br /><code class="small">${p.id}</code></td><td class="wrap"><code>${p.destination_url}</code></td>
        <td>${p.require_auth ? 'API key' : 'proxy key only'}</td>
        <td>${[p.request_transform && 'request', p.response_transform && 'response'].filter(Boolean).join(', ') || 'none'}</td>
        <td>${when(p.modified_at || p.created_at)}</td>
        <td>${can('proxy:update') && html`<button type="button" onClick=${() => edit(p)}>Edit ${p.name}</button>`}
          <button type="button" aria-expanded=${testing === p.id ? 'true' : 'false'} onClick=${() => setTesting(testing === p.id ? null : p.id)}>Test ${p.name}</button>
          ${can('proxy:delete') && html`<${ConfirmButton} label=${'Delete ' + p.name} confirmLabel=${'Confirm: delete ' + p.name} onConfirm=${() => del(p)} />`}</td>
      </tr>
      ${testing === p.id && html`<tr class="detail"><td colspan="6"><${TestPanel} proxy=${p} /></td></tr>`}`)}
      </tbody>
    </table>
  <//>`;
}

// The audit log, newest first, filtered by entity type, entity id and
// date range; cursor pages.
import { html, useState, useEffect } from '../lib.js';
import { call } from '../api.js';
import { Page, Problem, Notice, Field, useLoad, when } from '../ui.js';

export function LogsPage() {
  const [types] = useLoad(() => call('GET', '/logs/entity-types', { permission: 'log:read' }), []);
  const [entityType, setEntityType] = useState('');
  const [entityId, setEntityId] = useState('');
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  const [rows, setRows] = useState([]);
  const [next, setNext] = useState('');
  const [err, setErr] = useState(null);
  const [notice, setNotice] = useState('');
  const load = async (start = '') => {
    setErr(null);
    try {
      const query = { entity_type: entityType, entity_id: entityId.trim(), size: 50, start };
      if (from) query.start_date = new Date(from + 'T00:00:00').toISOString();
      if (to) query.end_date = new Date(to + 'T23:59:59.999').toISOString();
      const page = await call('GET', '/logs', { permission: 'log:read', query });
      const got = page.data || [];
      setRows(start ? [...rows, ...got] : got);
      setNext((page.pagination && page.pagination.next) || '');
      setNotice(`${got.length} record${got.length === 1 ? '' : 's'} loaded.`);
    } catch (e) { setErr(e); }
  };
  useEffect(() => { load(); }, []);
  const options = [{ value: '', label: 'Any' }, ...((types || []).map((t) => ({ value: t.value || t, label: t.display_name || t.value || t })))];
  return html`<${Page} title="Audit log" intro="Who did what to which entity, newest first. Records never hold token data or keys.">
    <form class="card filters" onSubmit=${(e) => { e.preventDefault(); load(); }} aria-labelledby="log-filters">
      <h2 id="log-filters">Filter</h2>
      <div class="row">
        <${Field} id="log-entity-type" label="Entity type" value=${entityType} options=${options} onInput=${setEntityType} />
        <${Field} id="log-entity-id" label="Entity id" value=${entityId} onInput=${setEntityId} />
        <${Field} id="log-from" label="From (date)" type="date" value=${from} onInput=${setFrom} />
        <${Field} id="log-to" label="To (date)" type="date" value=${to} onInput=${setTo} />
      </div>
      <button type="submit">Apply filter</button>
    </form>
    <${Problem} error=${err} /><${Notice} text=${notice} />
    <table class="list"><caption>Audit records (${rows.length})</caption>
      <thead><tr><th scope="col">When</th><th scope="col">Entity</th><th scope="col">Operation</th><th scope="col">Actor</th><th scope="col">Message</th></tr></thead>
      <tbody>${rows.map((r) => html`<tr key=${r.id} data-entity-type=${r.entity_type}>
        <td>${when(r.created_at)}</td><td>${r.entity_type}<br /><code class="small">${r.entity_id || ''}</code></td>
        <td>${r.operation}</td><td><code class="small">${r.actor_id || ''}</code></td>
        <td class="wrap">${r.message || ''}${r.destination_host ? ` → ${r.destination_host}` : ''}</td></tr>`)}</tbody>
    </table>
    ${next && html`<button type="button" onClick=${() => load(next)}>Older records</button>`}
  <//>`;
}

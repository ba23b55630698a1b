// Tenant: its name, type and settings (editable with tenant:update) and
// the quotas the operator set (read only: quotas change on the admin API).
import { html, useState, useEffect } from '../lib.js';
import { call, can } from '../api.js';
import { Page, Problem, Notice, Field, Check, useLoad, when } from '../ui.js';

const SETTINGS = [
  ['deduplicate_tokens', 'Deduplicate tokens (a create with the same fingerprint returns the existing token)'],
  ['fingerprint_tokens', 'Fingerprint every token'],
  ['disable_ephemeral_proxy', 'Disable the ephemeral proxy (only pre-configured proxies)'],
];

const QUOTAS = [
  ['tokenize_limit', 'Tokens per tokenize request'],
  ['detokenize_limit', 'Tokens per detokenization'],
  ['cvc_retention_seconds', 'CVC retention (seconds)'],
  ['log_retention_seconds', 'Audit log retention (seconds)'],
  ['included_monthly_active_tokens', 'Included monthly active tokens'],
  ['rate_limit', 'Rate limit profile'],
];

export function TenantPage() {
  const [tenant, error, reload] = useLoad(() => call('GET', '/tenants/self', { permission: 'tenant:read' }), []);
  const [name, setName] = useState('');
  const [settings, setSettings] = useState({});
  const [saveErr, setSaveErr] = useState(null);
  const [notice, setNotice] = useState('');
  useEffect(() => {
    if (tenant) { setName(tenant.name || ''); setSettings({ ...(tenant.settings || {}) }); }
  }, [tenant]);
  const save = async (e) => {
    e.preventDefault();
    setSaveErr(null); setNotice('');
    try {
      await call('PUT', '/tenants/self', { permission: 'tenant:update', body: { name, settings } });
      setNotice('Tenant saved.');
      reload();
    } catch (err) { setSaveErr(err); }
  };
  const editable = can('tenant:update');
  return html`<${Page} title="Tenant" intro="The tenant of your keys: its settings and the quotas the operator set.">
    <${Problem} error=${error} />
    ${tenant && html`
      <dl class="facts">
        <dt>Id</dt><dd><code>${tenant.id}</code></dd>
        <dt>Type</dt><dd>${tenant.type}</dd>
        <dt>Created</dt><dd>${when(tenant.created_at)}</dd>
      </dl>
      <form onSubmit=${save} class="card" aria-labelledby="tenant-settings">
        <h2 id="tenant-settings">Settings</h2>
        <${Field} id="tenant-name" label="Name" value=${name} onInput=${setName} required />
        ${SETTINGS.map(([k, label]) => html`<${Check} id=${'setting-' + k} label=${label} checked=${settings[k] === 'true'}
          onChange=${(on) => setSettings({ ...settings, [k]: on ? 'true' : 'false' })} />`)}
        ${editable ? html`<button type="submit">Save settings</button>` : html`<p class="hint">Your keys may not update the tenant (tenant:update).</p>`}
        <${Problem} error=${saveErr} /><${Notice} text=${notice} />
      </form>
      <section class="card" aria-labelledby="tenant-quotas">
        <h2 id="tenant-quotas">Quotas</h2>
        <table><caption class="sr-only">Quotas of the tenant</caption>
          <thead><tr><th scope="col">Quota</th><th scope="col">Value</th></tr></thead>
          <tbody>${QUOTAS.map(([k, label]) => html`<tr><th scope="row">${label} <code>${k}</code></th><td>${String((tenant.quotas || {})[k] ?? '')}</td></tr>`)}</tbody>
        </table>
        <p class="hint">Quotas are set by the vault's operator (admin API, <code>caddy vault tenant</code>).</p>
      </section>`}
  <//>`;
}

// Usage: the usage report (tokens by type, monthly active tokens against
// the quota) and activity over time. The public API has no time series of
// usage, so the chart over time counts the audit log's records per day
// (at most MAX_PAGES pages of the newest records). Rates of rate-limited
// and failed requests: the vault's metrics are on the operator's
// Prometheus endpoint, not in the public API, so this page shows what
// this console itself saw in this session.
import { html } from '../lib.js';
import { call, can, stats } from '../api.js';
import { Bars, DayBars } from '../charts.js';
import { Page, Problem, useLoad } from '../ui.js';

const DAYS = 30;
const MAX_PAGES = 10;

async function activity() {
  const since = new Date(Date.now() - (DAYS - 1) * 86400e3);
  since.setHours(0, 0, 0, 0);
  const records = [];
  let start = '';
  let truncated = false;
  for (let i = 0; i < MAX_PAGES; i++) {
    const page = await call('GET', '/logs', { permission: 'log:read', query: { size: 100, start, start_date: since.toISOString() } });
    records.push(...(page.data || []));
    start = (page.pagination && page.pagination.next) || '';
    if (!start) break;
    if (i === MAX_PAGES - 1) truncated = true;
  }
  const byDay = new Map();
  for (let d = 0; d < DAYS; d++) {
    const day = new Date(since.getTime() + d * 86400e3);
    byDay.set(localDay(day), {});
  }
  const series = new Set();
  for (const r of records) {
    const day = localDay(new Date(r.created_at));
    const counts = byDay.get(day);
    if (!counts) continue;
    series.add(r.entity_type);
    counts[r.entity_type] = (counts[r.entity_type] || 0) + 1;
  }
  return { days: [...byDay.entries()].map(([day, counts]) => ({ day, counts })), series: [...series].sort(), truncated, total: records.length };
}

function localDay(d) {
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
}

export function UsagePage() {
  const [report, error] = useLoad(() => call('GET', '/tenants/self/reports/usage', { permission: 'report:read' }), []);
  const [act, actErr] = useLoad(() => (can('log:read') ? activity() : Promise.resolve(null)), []);
  const tr = report && report.token_report;
  const byType = tr ? Object.entries(tr.metrics_by_type || {}).map(([label, m]) => ({ label, value: m.count || 0 })) : [];
  const s = stats();
  return html`<${Page} title="Usage" intro="Tokens by type, monthly active tokens, and the tenant's activity over the last ${DAYS} days.">
    <${Problem} error=${error} />
    ${tr && html`<section class="card" aria-labelledby="usage-now">
      <h2 id="usage-now">Tokens now</h2>
      <dl class="facts">
        <dt>Total tokens</dt><dd>${tr.total_tokens ?? report.total_tokens}</dd>
        <dt>Monthly active tokens</dt><dd>${tr.monthly_active_tokens} of ${tr.included_monthly_active_tokens} included</dd>
      </dl>
      <div class="meter-row"><span id="mat-label">Monthly active tokens against the included quota</span>
        <meter aria-labelledby="mat-label" min="0" max=${Math.max(1, tr.included_monthly_active_tokens)} value=${tr.monthly_active_tokens}></meter></div>
      ${byType.length > 0 ? html`<${Bars} id="by-type" title="Tokens by type" items=${byType} />` : html`<p>No tokens yet.</p>`}
    </section>`}
    <section class="card" aria-labelledby="usage-time">
      <h2 id="usage-time">Activity over time</h2>
      <${Problem} error=${actErr} />
      ${act === null && !actErr && html`<p class="hint">Needs a key with log:read.</p>`}
      ${act && html`<${DayBars} id="per-day" title=${`Audit records per day, by entity (last ${DAYS} days)`} days=${act.days} series=${act.series} />
        ${act.truncated && html`<p class="hint">Counted from the newest ${act.total} records only.</p>`}
        <details><summary>The figures as a table</summary>
          <table><caption class="sr-only">Audit records per day and entity</caption>
            <thead><tr><th scope="col">Day</th>${act.series.map((k) => html`<th scope="col">${k}</th>`)}</tr></thead>
            <tbody>${act.days.filter((d) => Object.keys(d.counts).length).map((d) => html`<tr><th scope="row">${d.day}</th>${act.series.map((k) => html`<td>${d.counts[k] || 0}</td>`)}</tr>`)}</tbody>
          </table></details>`}
    </section>
    <section class="card" aria-labelledby="usage-rates">
      <h2 id="usage-rates">Rate limits and errors</h2>
      <p>The vault's request, error and rate-limit rates are Prometheus metrics (<code>tokenvault_requests_total</code>,
        <code>tokenvault_rate_limited_total</code>) on the operator's metrics endpoint; the public API does not expose them to a tenant's key.
        What this console saw in this session:</p>
      <dl class="facts" data-testid="session-stats">
        <dt>Requests</dt><dd>${s.requests}</dd>
        <dt>Answered 2xx/3xx</dt><dd>${s.ok}</dd>
        <dt>Rate limited (429)</dt><dd>${s.rateLimited}</dd>
        <dt>Other client errors (4xx)</dt><dd>${s.clientErrors}</dd>
        <dt>Server errors (5xx)</dt><dd>${s.serverErrors}</dd>
        <dt>Unreachable</dt><dd>${s.failed}</dd>
      </dl>
    </section>
  <//>`;
}

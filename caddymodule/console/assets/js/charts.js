// Charts as inline SVG (no chart library): bars over days, and horizontal
// bars by category. Each chart has a title and a description for screen
// readers, and the page shows the same figures in a table.
import { html } from './lib.js';

const W = 640; const H = 220; const PAD = { l: 40, r: 10, t: 10, b: 36 };

function niceMax(v) {
  if (v <= 5) return 5;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

/** Stacked bars per day: days [{day, counts: {series: n}}], series names. */
export function DayBars({ id, title, days, series }) {
  const totals = days.map((d) => series.reduce((s, k) => s + (d.counts[k] || 0), 0));
  const max = niceMax(Math.max(1, ...totals));
  const iw = W - PAD.l - PAD.r; const ih = H - PAD.t - PAD.b;
  const bw = days.length ? iw / days.length : iw;
  const y = (v) => PAD.t + ih - (v / max) * ih;
  const labelEvery = Math.max(1, Math.ceil(days.length / 8));
  return html`<figure class="chart">
    <svg viewBox=${`0 0 ${W} ${H}`} role="img" aria-labelledby=${id + '-t ' + id + '-d'} class="chart-svg">
      <title id=${id + '-t'}>${title}</title>
      <desc id=${id + '-d'}>${days.length} days; highest day ${Math.max(0, ...totals)}. The table below has every figure.</desc>
      ${[0, 0.5, 1].map((f) => html`<g><line class="grid" x1=${PAD.l} x2=${W - PAD.r} y1=${y(max * f)} y2=${y(max * f)} />
        <text class="axis" x=${PAD.l - 6} y=${y(max * f) + 4} text-anchor="end">${Math.round(max * f)}</text></g>`)}
      ${days.map((d, i) => {
        let acc = 0;
        return html`<g>${series.map((k, si) => {
          const v = d.counts[k] || 0;
          if (!v) return null;
          const y0 = y(acc); acc += v; const y1 = y(acc);
          return html`<rect class=${'s' + (si % 6)} x=${PAD.l + i * bw + bw * 0.15} width=${Math.max(1, bw * 0.7)} y=${y1} height=${Math.max(0.5, y0 - y1)} />`;
        })}
        ${i % labelEvery === 0 && html`<text class="axis" x=${PAD.l + i * bw + bw / 2} y=${H - PAD.b + 16} text-anchor="middle">${d.day.slice(5)}</text>`}</g>`;
      })}
    </svg>
    <figcaption>${title}
      <ul class="legend">${series.map((k, si) => html`<li><span class=${'swatch s' + (si % 6)} aria-hidden="true"></span>${k}</li>`)}</ul>
    </figcaption>
  </figure>`;
}

/** Horizontal bars: items [{label, value}]. */
export function Bars({ id, title, items }) {
  const max = niceMax(Math.max(1, ...items.map((i) => i.value)));
  const rowH = 28; const h = PAD.t + items.length * rowH + 10; const lw = 120;
  return html`<figure class="chart">
    <svg viewBox=${`0 0 ${W} ${h}`} role="img" aria-labelledby=${id + '-t'} class="chart-svg">
      <title id=${id + '-t'}>${title}: ${items.map((i) => `${i.label} ${i.value}`).join(', ')}</title>
      ${items.map((it, i) => html`<g>
        <text class="axis" x=${lw - 8} y=${PAD.t + i * rowH + 18} text-anchor="end">${it.label}</text>
        <rect class=${'s' + (i % 6)} x=${lw} y=${PAD.t + i * rowH + 4} height=${rowH - 10} width=${Math.max(1, (it.value / max) * (W - lw - 60))} />
        <text class="axis" x=${lw + Math.max(1, (it.value / max) * (W - lw - 60)) + 6} y=${PAD.t + i * rowH + 18}>${it.value}</text>
      </g>`)}
    </svg>
    <figcaption>${title}</figcaption>
  </figure>`;
}

// Clients: the clients of a window with their counts, group and last query
// (/queries/clients), and the queries over time of the busiest ones or of
// the chosen one (/queries/clients/timeseries); each links to its log. The
// window and the chosen client are kept in the URL.
import { useState, useEffect } from '../vendor/preact-htm.js';
import { call } from '../api.js';
import { html, href, navigate, fmtInt, fmtTime, ErrorMsg, BarChart, useTitle, markReady } from '../ui.js';

const WINDOWS = [
  { w: '1h', label: 'Last hour', step: '1m', ms: 3600e3 },
  { w: '24h', label: 'Last 24 hours', step: '15m', ms: 86400e3 },
  { w: '7d', label: 'Last 7 days', step: '1h', ms: 7 * 86400e3 },
];

export function ClientsPage({ route, title }) {
  useTitle(title);
  const win = WINDOWS.find((x) => x.w === route.query.get('window')) || WINDOWS[1];
  const client = route.query.get('client') || '';
  const [page, setPage] = useState(null);
  const [series, setSeries] = useState(null);
  const [err, setErr] = useState(null);
  const since = new Date(Date.now() - win.ms).toISOString().replace(/\.\d+Z$/, 'Z');

  useEffect(() => {
    setPage(null);
    call('queries-clients', { query: { window: win.w, limit: 200 } }).then(setPage).catch(setErr);
  }, [win.w]);
  useEffect(() => {
    setSeries(null);
    const query = { from: since, step: win.step };
    if (client) query.clients = client; else query.top = 100;
    call('queries-clients-timeseries', { query }).then((ts) => setSeries(ts)).catch(() => setSeries({ points: [] }));
  }, [win.w, client]);
  useEffect(() => { if (page) markReady(); }, [!!page]);

  const points = series ? (series.points || []).map((p) => ({ ts: p.ts, value: (p.counts || []).reduce((a, b) => a + b, 0) })) : null;
  const set = (k, v) => navigate(href('clients', { window: win.w === '24h' ? '' : win.w, client, [k]: v }));
  return html`<div class="row">
      <h1>${title}</h1><span class="spacer"></span>
      <label for="c-window" class="sr-only">Window</label>
      <select id="c-window" value=${win.w} onChange=${(e) => set('window', e.target.value)} style=${{ width: 'auto' }}>
        ${WINDOWS.map((x) => html`<option value=${x.w}>${x.label}</option>`)}
      </select>
    </div>
    <${ErrorMsg} error=${err} />
    <section class="panel" aria-label="Queries over time" style=${{ marginBottom: '1rem' }}>
      <h2>Queries over time of ${client ? client : 'all clients'} <span class="muted">(per ${win.step})</span>
        ${client && html` <a class="small" href=${href('clients', { window: win.w === '24h' ? '' : win.w })}>show all</a>`}</h2>
      ${points === null ? html`<p class="muted">Loading…</p>` : html`<${BarChart} points=${points} label=${'Queries of ' + (client || 'all clients')} />`}
      ${series && series.partial && html`<p class="muted small">The raw log does not reach back to the start of this window (it is younger, or retention removed older rows).</p>`}
    </section>
    ${page === null ? html`<p class="muted">Loading…</p>` : html`<div class="panel table-wrap">
      <table><caption class="sr-only">Clients, busiest first</caption>
        <thead><tr><th>Client</th><th class="opt">Group</th><th class="num">Queries</th><th class="num">Blocked</th><th class="opt">Last query</th><th><span class="sr-only">Links</span></th></tr></thead>
        <tbody>
          ${(page.items || []).length === 0 && html`<tr><td colspan="6" class="muted">No queries in this window.</td></tr>`}
          ${(page.items || []).map((c) => html`<tr data-client=${c.key}>
            <td><a href=${href('clients', { window: win.w === '24h' ? '' : win.w, client: c.key })} aria-current=${c.key === client ? 'true' : undefined}>${c.name || c.key}</a>${c.name ? html` <span class="muted small">${c.key}</span>` : ''}</td>
            <td class="opt">${c.group || ''}</td>
            <td class="num">${fmtInt(c.count)}</td>
            <td class="num">${fmtInt(c.blocked)}</td>
            <td class="opt">${c.last_seen ? fmtTime(c.last_seen) : ''}</td>
            <td><a href=${href('queries', { client: c.key, since })}>Log</a></td></tr>`)}
        </tbody>
      </table>
      ${page.approximate && html`<p class="muted small">Counts are approximate (per-hour counts were capped).</p>`}
    </div>`}`;
}

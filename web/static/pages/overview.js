// Overview: totals of a window and its queries over time (/stats/summary
// with step: total and blocked per bucket, from the rollups), and the top lists (/stats/top; upstreams
// with the average and 95th percentile answer time), every entry a link
// into the filtered query log. The window is kept in the URL.
import { useState, useEffect } from '../vendor/preact-htm.js';
import { call } from '../api.js';
import { html, href, navigate, fmtInt, fmtPct, fmtMS, ErrorMsg, BarChart, useTitle, useInterval, markReady } from '../ui.js';
import { NodeSelect, nodeOf } from '../nodes.js';

// Windows offered, and the bucket width of the chart for each (at most a
// few hundred bars; the API allows 1000 points).
const WINDOWS = [
  { w: '1h', label: 'Last hour', step: '1m', ms: 3600e3 },
  { w: '24h', label: 'Last 24 hours', step: '15m', ms: 86400e3 },
  { w: '7d', label: 'Last 7 days', step: '1h', ms: 7 * 86400e3 },
  { w: '30d', label: 'Last 30 days', step: '6h', ms: 30 * 86400e3 },
];

function sinceOf(win) {
  return new Date(Date.now() - win.ms).toISOString().replace(/\.\d+Z$/, 'Z');
}

function TopList({ title, items, link, empty, showBlocked, latency }) {
  return html`<section class="panel" aria-label=${title}>
    <h2>${title}</h2>
    ${items === null ? html`<p class="muted">Loading…</p>`
      : items.length === 0 ? html`<p class="muted">${empty}</p>`
        : html`<ol class="top-list">${items.map((it) => html`<li>
            <a href=${link(it.key)}>${it.key || '(none)'}</a>
            ${latency && it.avg_latency_ms > 0 && html`<span class="num small" data-testid="latency" title="answer time of forwarded queries: average and 95th percentile">${fmtMS(it.avg_latency_ms)} · p95 ${fmtMS(it.p95_latency_ms)}</span>`}
            <span class="num">${fmtInt(showBlocked ? it.blocked : it.count)}</span></li>`)}</ol>`}
  </section>`;
}

export function OverviewPage({ me, route, title }) {
  useTitle(title);
  const win = WINDOWS.find((x) => x.w === route.query.get('window')) || WINDOWS[1];
  // node= (several nodes): the serving node forwards every read to it.
  const node = nodeOf(route);
  const [sum, setSum] = useState(null);
  const [series, setSeries] = useState(null);
  const [tops, setTops] = useState({ domains: null, blocked: null, clients: null, upstreams: null });
  const [err, setErr] = useState(null);
  const [updated, setUpdated] = useState(null);

  const load = async () => {
    try {
      // The chart comes with the totals (the rollups, step buckets): it
      // costs the same on a 10-million-row log as on an empty one.
      const [s, d, b, c, u] = await Promise.all([
        call('stats-summary', { query: { window: win.w, step: win.step, node } }),
        call('stats-top', { query: { dim: 'domains', top: 10, window: win.w, node } }),
        call('stats-top', { query: { dim: 'domains', top: 10, blocked: true, window: win.w, node } }),
        call('stats-top', { query: { dim: 'clients', top: 10, window: win.w, node } }),
        call('stats-top', { query: { dim: 'upstreams', top: 10, window: win.w, node } }),
      ]);
      setSum(s);
      setSeries((s.series || []).map((p) => ({ ts: p.ts, value: p.total, blocked: p.blocked })));
      setTops({ domains: d.items || [], blocked: b.items || [], clients: c.items || [], upstreams: u.items || [] });
      setErr(null);
      setUpdated(new Date());
    } catch (e) {
      if (e.status !== 401) setErr(e);
    }
  };
  useEffect(() => { setSum(null); setSeries(null); setErr(null); load(); }, [win.w, node]);
  useInterval(load, 30000);

  useEffect(() => { if (sum) markReady(); }, [!!sum]);

  const q = (extra) => href('queries', { ...extra, since: sinceOf(win), node });
  return html`<div class="row">
      <h1>${title}</h1><span class="spacer"></span>
      <${NodeSelect} route=${route} page="overview" />
      <label for="window" class="sr-only">Window</label>
      <select id="window" value=${win.w} onChange=${(e) => navigate(href('overview', { window: e.target.value, node }))} style=${{ width: 'auto' }}>
        ${WINDOWS.map((x) => html`<option value=${x.w}>${x.label}</option>`)}
      </select>
    </div>
    <${ErrorMsg} error=${err} />
    <div class="cards">
      <div class="panel card"><a href=${q({})}><div class="label">Queries</div><div class="value" data-testid="total">${sum ? fmtInt(sum.total) : '…'}</div></a></div>
      <div class="panel card"><a href=${q({ status_class: 'blocked' })}><div class="label">Blocked</div><div class="value" data-testid="blocked">${sum ? fmtInt(sum.blocked) : '…'}</div></a></div>
      <div class="panel card"><div class="label">Blocked share</div><div class="value" data-testid="share">${sum ? fmtPct(sum.blocked_share) : '…'}</div></div>
      <div class="panel card"><div class="label">Average answer time</div><div class="value">${sum ? fmtMS(sum.avg_latency_ms) : '…'}</div></div>
    </div>
    ${series !== null && html`<section class="panel" aria-label="Queries over time" style=${{ marginBottom: '1rem' }}>
      <h2>Queries over time <span class="muted">(per ${win.step})</span></h2>
      <${BarChart} points=${series} label="Queries over time" />
    </section>`}
    <div class="grid">
      <${TopList} title="Top domains" items=${tops.domains} empty="No queries yet." link=${(k) => q({ domain: k })} />
      <${TopList} title="Top blocked domains" items=${tops.blocked} showBlocked=${true} empty="Nothing blocked in this window." link=${(k) => q({ domain: k, status_class: 'blocked' })} />
      <${TopList} title="Top clients" items=${tops.clients} empty="No clients yet." link=${(k) => q({ client: k })} />
      <${TopList} title="Top upstreams" latency=${true} items=${tops.upstreams} empty="Nothing was forwarded in this window." link=${(k) => q({ upstream: k })} />
    </div>
    ${updated && html`<p class="muted">Updated ${updated.toLocaleTimeString()}; refreshes every 30 seconds. Node ${sum && sum.node}.</p>`}`;
}

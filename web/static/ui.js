// Shared pieces: navigation inside the single-page app, formatting, messages
// and the SVG bar chart. No framework beyond Preact + htm (vendor/).
import { html, useEffect, useRef } from './vendor/preact-htm.js';
import { basePath, apiBase, errorText } from './api.js';

export { html };

/** The page (first path segment under the base) and the query of the URL. */
export function currentRoute() {
  const p = location.pathname;
  const rest = p.startsWith(basePath) ? p.slice(basePath.length) : '';
  return { page: rest.split('/')[0] || '', query: new URLSearchParams(location.search) };
}

/** The current location relative to the base (for login?next=). */
export function here() {
  const p = location.pathname;
  return (p.startsWith(basePath) ? p.slice(basePath.length) : '') + location.search;
}

/** Goes to a dashboard path relative to the base ("queries?domain=x"). */
export function navigate(to, opts = {}) {
  const u = new URL(to, document.baseURI);
  const target = u.pathname + u.search;
  if (target !== location.pathname + location.search) {
    history[opts.replace ? 'replaceState' : 'pushState'](null, '', target);
  }
  window.dispatchEvent(new Event('svc:navigate'));
}

/** Turns clicks on links inside the app into history navigation. */
export function interceptLinks() {
  document.addEventListener('click', (ev) => {
    if (ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
    const a = ev.target.closest && ev.target.closest('a[href]');
    if (!a || a.target || a.hasAttribute('download') || a.dataset.external !== undefined) return;
    const u = new URL(a.href, document.baseURI);
    if (u.origin !== location.origin || !u.pathname.startsWith(basePath) || u.pathname.startsWith(apiBase)) return;
    ev.preventDefault();
    navigate(u.pathname.slice(basePath.length) + u.search);
  });
}

/** A dashboard path with a query built from an object (empty values left out). */
export function href(page, query = {}) {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') qs.set(k, v);
  const s = qs.toString();
  return page + (s ? '?' + s : '');
}

const nf = new Intl.NumberFormat();
export const fmtInt = (n) => nf.format(n || 0);
export const fmtPct = (x) => `${((x || 0) * 100).toFixed(1)}%`;
export const fmtMS = (ms) => (ms >= 100 ? `${Math.round(ms)} ms` : `${(ms || 0).toFixed(1)} ms`);
export function fmtTime(ts) {
  const d = new Date(ts);
  const today = new Date();
  const t = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  return d.toDateString() === today.toDateString() ? t : `${d.toLocaleDateString()} ${t}`;
}

/** A message box; kind error, info, warn or ok. Errors are announced. */
export function Msg({ kind = 'info', children }) {
  return html`<div class=${'msg ' + kind} role=${kind === 'error' ? 'alert' : 'status'}>${children}</div>`;
}

/** An API error as a message, with the missing permission when there is one. */
export function ErrorMsg({ error }) {
  if (!error) return null;
  return html`<${Msg} kind="error">${errorText(error)}</${Msg}>`;
}

/** Sets the document title for a page. */
export function useTitle(t) {
  useEffect(() => { document.title = t ? `${t} · svc` : 'svc dashboard'; }, [t]);
}

/** Marks the first time a page shows its data (performance mark
 * "svc:ready", read by the tests and the first-paint benchmark). */
export function markReady() {
  if (performance.getEntriesByName('svc:ready').length === 0) performance.mark('svc:ready');
}

/** setInterval while the page is visible. */
export function useInterval(fn, ms) {
  const saved = useRef(fn);
  saved.current = fn;
  useEffect(() => {
    const id = setInterval(() => { if (!document.hidden) saved.current(); }, ms);
    return () => clearInterval(id);
  }, [ms]);
}

/**
 * A bar chart of points [{ts, value, blocked?}] drawn as SVG; each bar has a
 * title (tooltip) and the chart a text summary for screen readers.
 */
export function BarChart({ points, label }) {
  if (!points || points.length === 0) return html`<p class="muted">No queries in this window.</p>`;
  const W = 600, H = 160;
  const max = Math.max(1, ...points.map((p) => p.value));
  const bw = W / points.length;
  const total = points.reduce((s, p) => s + p.value, 0);
  const when = (ts) => new Date(ts).toLocaleString([], { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
  // The SVG stretches to the panel's width; its labels are HTML so that the
  // text is not stretched with it.
  return html`<div class="chart-wrap">
    <div class="chart-max muted small" aria-hidden="true">${fmtInt(max)}</div>
    <svg class="chart" viewBox=${`0 0 ${W} ${H}`} preserveAspectRatio="none" role="img" aria-label=${`${label}: ${fmtInt(total)} in ${points.length} intervals, at most ${fmtInt(max)}`}>
      <line class="axis" x1="0" y1=${H - 0.5} x2=${W} y2=${H - 0.5} />
      ${points.map((p, i) => {
        const h = (p.value / max) * (H - 4);
        const bh = ((p.blocked || 0) / max) * (H - 4);
        const x = i * bw + 0.5;
        const w = Math.max(1, bw - 1);
        return html`<g><title>${`${new Date(p.ts).toLocaleString()}: ${fmtInt(p.value)}${p.blocked !== undefined ? `, ${fmtInt(p.blocked)} blocked` : ''}`}</title>
          <rect class="bar" x=${x} y=${H - h} width=${w} height=${h} />
          ${bh > 0 ? html`<rect class="bar blocked" x=${x} y=${H - bh} width=${w} height=${bh} />` : null}</g>`;
      })}
    </svg>
    <div class="row muted small" aria-hidden="true"><span>${when(points[0].ts)}</span><span class="spacer"></span><span>${when(points[points.length - 1].ts)}</span></div>
  </div>`;
}

/**
 * The refusals an API message holds, by field: the object validator words
 * them "… is invalid: [spec.addresses: Invalid value: every address …,
 * spec.clientIDs[0]: …]". Returns {"spec.addresses": "every address …"}
 * (list indexes dropped, so a field's input finds its message); a message
 * that names no field gives {}.
 * @param {string} msg
 */
export function fieldErrors(msg) {
  const out = {};
  const re = /((?:spec|metadata)(?:\.[A-Za-z]+)+)((?:\[\d+\])*): /g;
  const hits = [...String(msg || '').matchAll(re)];
  hits.forEach((m, i) => {
    const end = i + 1 < hits.length ? hits[i + 1].index : msg.length;
    let text = msg.slice(m.index + m[0].length, end).replace(/[,\]\s]+$/, '').replace(/^Invalid value: /, '');
    const key = m[1];
    text = `${m[1]}${m[2]}: ${text}`;
    out[key] = out[key] ? `${out[key]}; ${text}` : text;
  });
  return out;
}

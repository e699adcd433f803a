// The query log: every filter of GET /queries (from the generated route
// table) kept in the URL, server-side pages by `continue`, the live tail
// over the SSE stream with resume, and per-row block, allow and explain.
import { useState, useEffect, useRef } from '../vendor/preact-htm.js';
import { call, can, url, route as apiRoute, errorText, ApiError } from '../api.js';
import { html, href, navigate, fmtTime, fmtMS, ErrorMsg, Msg, useTitle, markReady } from '../ui.js';
import { NodeSelect, nodeOf } from '../nodes.js';

// The filter parameters are the API's own (names, enums, docs); paging and
// the node choice (NodeSelect) are handled apart.
const PAGING = new Set(['limit', 'continue', 'node']);

export const FILTERS = (apiRoute('queries').query || []).filter((p) => !PAGING.has(p.name));
const LIMITS = ['50', '100', '200', '500', '1000'];
const PRIMARY = ['domain', 'client', 'status_class'];
const MAX_LIVE_ROWS = 1000;
const LABELS = {
  client: 'Client', client_id: 'Client ID', domain: 'Domain', domain_match: 'Domain match', list: 'List', qtype: 'Type', status: 'Status',
  status_class: 'Result', upstream: 'Upstream', zone: 'Zone', policy: 'Policy', since: 'Since', until: 'Until',
};
const QTYPES = ['A', 'AAAA', 'CNAME', 'HTTPS', 'SVCB', 'MX', 'TXT', 'NS', 'SOA', 'PTR', 'SRV', 'CAA', 'DS', 'DNSKEY', 'ANY'];
// Lists written from the query log, as `svc lists allow|deny` writes them.
const UI_LISTS = { block: 'ui-deny', allow: 'ui-allow' };
const UI_NAMESPACE = 'default';

/** Choices of a filter: its enum, or the values its doc lists ("a, b, c"). */
function choices(p) {
  if (p.enum && p.enum.length) return p.enum;
  if (p.doc && /^[a-z_]+(, [a-z_]+)+$/.test(p.doc)) return p.doc.split(', ');
  return null;
}

function filtersOf(query) {
  const f = {};
  for (const p of FILTERS) {
    const v = query.get(p.name);
    if (v) f[p.name] = v;
  }
  return f;
}

// datetime-local inputs hold local time; the API and the URL hold RFC 3339.
function toLocalInput(v) {
  const d = new Date(v);
  if (!v || isNaN(d)) return '';
  const off = d.getTimezoneOffset() * 60000;
  return new Date(d - off).toISOString().slice(0, 16);
}
function fromLocalInput(v) {
  if (!v) return '';
  const d = new Date(v);
  return isNaN(d) ? '' : d.toISOString().replace(/\.\d+Z$/, 'Z');
}

function FilterForm({ filters, limit, node }) {
  const [draft, setDraft] = useState({ ...filters, limit });
  useEffect(() => setDraft({ ...filters, limit }), [JSON.stringify(filters), limit]);
  const set = (k) => (e) => setDraft({ ...draft, [k]: e.target.value });
  const submit = (ev) => {
    ev.preventDefault();
    const q = {};
    for (const p of FILTERS) if (draft[p.name]) q[p.name] = draft[p.name].trim();
    if (draft.limit && draft.limit !== '50') q.limit = draft.limit;
    navigate(href('queries', { ...q, node }));
  };
  const field = (p) => {
    const id = 'f-' + p.name;
    const label = html`<label for=${id} title=${p.doc || ''}>${LABELS[p.name] || p.name}</label>`;
    const opts = choices(p);
    if (p.name === 'since' || p.name === 'until') {
      return html`<div>${label}<input id=${id} type="datetime-local" step="1" value=${toLocalInput(draft[p.name])}
        onInput=${(e) => setDraft({ ...draft, [p.name]: fromLocalInput(e.target.value) })} /></div>`;
    }
    if (opts) {
      return html`<div>${label}<select id=${id} value=${draft[p.name] || ''} onChange=${set(p.name)}>
        <option value="">${p.name === 'domain_match' ? 'exact (default)' : 'any'}</option>
        ${opts.map((o) => html`<option value=${o}>${o}</option>`)}</select></div>`;
    }
    return html`<div>${label}<input id=${id} value=${draft[p.name] || ''} onInput=${set(p.name)}
      list=${p.name === 'qtype' ? 'qtypes' : undefined} placeholder=${p.name === 'domain' ? 'example.com' : ''} /></div>`;
  };
  // The common filters first; the rest fold away (open when one is set),
  // which keeps the log in view on a phone.
  const more = FILTERS.filter((p) => !PRIMARY.includes(p.name));
  const moreSet = more.filter((p) => filters[p.name]).length + (limit !== '50' ? 1 : 0);
  return html`<form class="panel" onSubmit=${submit} aria-label="Filters">
    <div class="filters">
      ${FILTERS.filter((p) => PRIMARY.includes(p.name)).map(field)}
      <div class="actions"><button class="primary" type="submit">Apply</button>
        <a class="button" href=${href('queries', { node })}>Clear</a></div>
    </div>
    <details class="more" open=${moreSet > 0}>
      <summary>More filters${moreSet ? ` (${moreSet} set)` : ''}</summary>
      <div class="filters">
        ${more.map(field)}
        <div><label for="f-limit">Rows per page</label><select id="f-limit" value=${draft.limit || '50'} onChange=${set('limit')}>
          ${LIMITS.map((l) => html`<option value=${l}>${l}</option>`)}</select></div>
      </div>
    </details>
    <datalist id="qtypes">${QTYPES.map((t) => html`<option value=${t} />`)}</datalist>
  </form>`;
}

/** Adds the domain to ui-deny or ui-allow (origin querylog), creating the
 * list when missing; a concurrent change is retried on the fresh object. */
async function addToList(mode, domain, me) {
  const name = UI_LISTS[mode];
  for (let attempt = 0; ; attempt++) {
    let obj = null;
    try {
      obj = await call('get-blocklist', { params: { namespace: UI_NAMESPACE, name } });
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) throw e;
    }
    const rv = obj && obj.metadata && obj.metadata.resourceVersion;
    if (!obj) {
      obj = { apiVersion: 'service.io/v1alpha1', kind: 'BlockList', metadata: { name, namespace: UI_NAMESPACE }, spec: { mode, sources: [] } };
    }
    delete obj.status;
    obj.spec = obj.spec || {};
    obj.spec.sources = obj.spec.sources || [];
    let src = obj.spec.sources.find((s) => s.name === 'manual');
    if (!src) {
      src = { name: 'manual' };
      obj.spec.sources.push(src);
    }
    src.entries = src.entries || [];
    const value = domain.toLowerCase().replace(/\.$/, '');
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const have = src.entries.find((e) => e.value === value && (e.type || 'exact') === 'exact');
    if (have) {
      if (have.enabled !== false) return { name: `${UI_NAMESPACE}/${name}`, already: true };
      have.enabled = true;
      have.modified = now;
    } else {
      src.entries.push({ value, type: 'exact', origin: 'querylog', created: now, createdBy: me.principal.name });
    }
    try {
      await call('put-blocklist', { params: { namespace: UI_NAMESPACE, name }, body: obj, headers: rv ? { 'If-Match': rv } : {} });
      return { name: `${UI_NAMESPACE}/${name}` };
    } catch (e) {
      if (attempt < 2 && e instanceof ApiError && (e.status === 409 || e.status === 412)) continue;
      throw e;
    }
  }
}

function Explain({ item, onClose }) {
  const [res, setRes] = useState(null);
  const [err, setErr] = useState(null);
  useEffect(() => {
    call('dns-query', { body: { name: item.domain, type: item.type, client: item.client } }).then(setRes).catch(setErr);
  }, [item.id]);
  return html`<div class="explain" role="region" aria-label=${'Explanation of ' + item.domain}>
    <div class="row"><strong>${item.domain} ${item.type} as client ${item.client}, now</strong><span class="spacer"></span>
      <button class="small" type="button" onClick=${onClose}>Close</button></div>
    <${ErrorMsg} error=${err} />
    ${!res && !err && html`<p class="muted">Asking the server…</p>`}
    ${res && html`<dl>
      <dt>Result</dt><dd><span class=${'badge ' + res.status_class}>${res.status}</span> ${res.rcode}</dd>
      <dt>Policy</dt><dd data-testid="explain-policy">${res.policy || 'none matched (global lists and defaults)'}</dd>
      ${res.ede && html`<dt>Extended DNS error</dt><dd data-testid="explain-ede">${res.ede.code} ${res.ede.name}${res.ede.text ? ': ' + res.ede.text : ''}</dd>`}
      ${res.list && html`<dt>List</dt><dd>${res.list}</dd>`}
      ${res.rule && html`<dt>Rule</dt><dd class="mono">${res.rule}</dd>`}
      ${res.upstream && html`<dt>Upstream</dt><dd>${res.upstream}</dd>`}
      ${res.error && html`<dt>Error</dt><dd>${res.error}</dd>`}
      <dt>Answer</dt><dd class="mono">${(res.answer || []).length ? res.answer.map((a) => html`<div>${a}</div>`) : '(none)'}</dd>
      <dt>Time</dt><dd>${fmtMS(res.latency_ms)} on ${res.node}</dd>
      ${item.policy && item.policy !== res.policy && html`<dt>Policy (logged)</dt><dd>${item.policy}</dd>`}
      ${item.reason && html`<dt>Reason (logged)</dt><dd>${item.reason}</dd>`}
    </dl>`}
  </div>`;
}

function LiveBadge({ state }) {
  const text = { on: 'Live', connecting: 'Connecting…', retry: 'Reconnecting…', off: 'Paused' }[state] || state;
  return html`<span class="live" role="status" data-testid="live"><span class=${'dot' + (state === 'on' ? ' on' : '')}></span>${text}</span>`;
}

export function QueriesPage({ me, route, title }) {
  useTitle(title);
  const filters = filtersOf(route.query);
  const cont = route.query.get('continue') || '';
  const limit = route.query.get('limit') || '50';
  const liveWanted = route.query.get('live') !== '0' && !cont && !filters.until;
  const node = nodeOf(route);
  const key = JSON.stringify([filters, cont, limit, node]);

  const [rows, setRows] = useState(null);
  const [next, setNext] = useState('');
  const [err, setErr] = useState(null);
  const [live, setLive] = useState('off');
  const [fresh, setFresh] = useState(new Set());
  const [explain, setExplain] = useState(null);
  const [toast, setToast] = useState(null);
  const newest = useRef(0);

  const mayBlock = can(me, 'put-blocklist') && can(me, 'get-blocklist');
  const mayExplain = can(me, 'dns-query');

  // One page of the log; the live tail starts after its newest row.
  useEffect(() => {
    const ctl = new AbortController();
    setRows(null);
    setErr(null);
    setExplain(null);
    call('queries', { query: { ...filters, limit, continue: cont, node }, signal: ctl.signal }).then((p) => {
      const items = p.items || [];
      // The tail goes on after the newest row of the whole log when the
      // page was read, so a row written meanwhile is not lost (an empty
      // filtered page included).
      newest.current = Math.max(items.length ? items[0].id : 0, p.newest_id || 0);
      setRows(items);
      setNext(p.continue || '');
    }).catch((e) => { if (e.name !== 'AbortError') { setErr(e); setRows([]); } });
    return () => ctl.abort();
  }, [key]);

  // The live tail: EventSource resumes by itself with Last-Event-ID after a
  // dropped connection; a refused one (session gone, 403) is checked with
  // /auth/me and re-opened after the newest row seen.
  useEffect(() => {
    if (!liveWanted || rows === null || err) { setLive('off'); return; }
    let es = null;
    let timer = 0;
    let closed = false;
    const open = () => {
      const q = { ...filters, node };
      if (newest.current) q.last_event_id = String(newest.current);
      es = new EventSource(url('queries-stream', {}, q), { withCredentials: true });
      setLive('connecting');
      es.onopen = () => setLive('on');
      es.onmessage = (ev) => {
        let it;
        try { it = JSON.parse(ev.data); } catch { return; }
        if (!it || it.id <= newest.current) return;
        newest.current = it.id;
        setRows((old) => [it, ...(old || [])].slice(0, MAX_LIVE_ROWS));
        setFresh((old) => new Set(old).add(it.id));
      };
      es.onerror = () => {
        if (closed) return;
        if (es.readyState === EventSource.CLOSED) {
          setLive('retry');
          // 401 here sends the page to the login (api.js onAuthLost).
          call('auth-me').then(() => { if (!closed) timer = setTimeout(open, 3000); }).catch(() => {});
        } else {
          setLive('retry');
        }
      };
    };
    open();
    return () => { closed = true; clearTimeout(timer); if (es) es.close(); };
  }, [key, liveWanted, rows === null, !!err]);

  const act = async (mode, it) => {
    try {
      const r = await addToList(mode, it.domain, me);
      const verb = mode === 'block' ? 'Blocked' : 'Allowed';
      setToast({ kind: 'ok', text: r.already ? `${it.domain} is already in ${r.name}.` : `${verb} ${it.domain}: added to ${r.name}.` });
    } catch (e) {
      setToast({ kind: 'error', text: `Could not ${mode} ${it.domain}: ${errorText(e)}` });
    }
  };
  useEffect(() => {
    if (!toast) return;
    const id = setTimeout(() => setToast(null), 8000);
    return () => clearTimeout(id);
  }, [toast]);

  useEffect(() => { if (rows !== null) markReady(); }, [rows !== null]);

  const toggleLive = () => navigate(href('queries', { ...filters, limit: limit === '50' ? '' : limit, live: liveWanted ? '0' : '', node }));
  const hasFilters = Object.keys(filters).length > 0;
  return html`<div class="row">
      <h1>${title}</h1><span class="spacer"></span>
      <${NodeSelect} route=${route} page="queries" />
      ${!cont && !filters.until ? html`<${LiveBadge} state=${live} />
        <button class="small" type="button" onClick=${toggleLive}>${liveWanted ? 'Pause' : 'Resume live'}</button>` : null}
    </div>
    <${FilterForm} filters=${filters} limit=${limit} node=${node} />
    <${ErrorMsg} error=${err} />
    ${rows === null ? html`<p class="muted">Loading…</p>` : html`
    <div class="panel table-wrap" style=${{ marginTop: '1rem' }}>
      <table>
        <caption class="sr-only">Queries, newest first${hasFilters ? ', filtered' : ''}</caption>
        <thead><tr><th>Time</th><th>Client</th><th>Domain</th><th>Type</th><th>Result</th>
          <th class="opt">Why</th><th class="opt num">Time taken</th><th><span class="sr-only">Actions</span></th></tr></thead>
        <tbody>
          ${rows.length === 0 && html`<tr><td colspan="8" class="muted">No queries${hasFilters ? ' match these filters' : ' yet'}.${liveWanted ? ' New ones appear here as they come.' : ''}</td></tr>`}
          ${rows.map((it) => html`<tr key=${it.id} class=${fresh.has(it.id) ? 'new' : ''} data-domain=${it.domain}>
            <td>${fmtTime(it.ts)}</td>
            <td><a href=${href('queries', { client: it.client, node })} title="Queries of this client">${it.client_name || it.client}</a>${it.client_id
              ? html` <a class="muted client-id" href=${href('queries', { client_id: it.client_id, node })} title="Queries with this client ID (DoT, DoH, DoQ)">${it.client_id}</a>` : ''}</td>
            <td class="domain"><a href=${href('queries', { domain: it.domain, node })}>${it.domain}</a></td>
            <td>${it.type}</td>
            <td><span class=${'badge ' + it.status_class}>${it.status}</span>${it.rcode && it.rcode !== 'NOERROR' ? html` <span class="muted">${it.rcode}</span>` : ''}</td>
            <td class="opt">${[it.list, it.rule, it.reason, it.upstream].filter(Boolean).join(' · ')}</td>
            <td class="opt num">${fmtMS(it.latency_ms)}</td>
            <td><div class="row">
              ${mayBlock && it.status_class !== 'blocked' && html`<button class="small" type="button" aria-label=${'Block ' + it.domain} onClick=${() => act('block', it)}>Block</button>`}
              ${mayBlock && it.status_class === 'blocked' && html`<button class="small" type="button" aria-label=${'Allow ' + it.domain} onClick=${() => act('allow', it)}>Allow</button>`}
              ${mayExplain && html`<button class="small" type="button" aria-label=${'Explain ' + it.domain} aria-expanded=${explain && explain.id === it.id ? 'true' : 'false'}
                onClick=${() => setExplain(explain && explain.id === it.id ? null : it)}>Explain</button>`}
            </div></td>
          </tr>${explain && explain.id === it.id ? html`<tr><td colspan="8"><${Explain} item=${it} onClose=${() => setExplain(null)} /></td></tr>` : null}`)}
        </tbody>
      </table>
    </div>
    <nav class="row" aria-label="Pages" style=${{ marginTop: '.8rem' }}>
      ${cont && html`<a class="button" href=${href('queries', { ...filters, limit: limit === '50' ? '' : limit, node })}>Newest</a>`}
      ${next && html`<a class="button" rel="next" href=${href('queries', { ...filters, limit: limit === '50' ? '' : limit, continue: next, node })}>Older</a>`}
      ${!next && rows.length > 0 && html`<span class="muted">End of the log.</span>`}
    </nav>`}
    ${toast && html`<div class="toast"><${Msg} kind=${toast.kind}>${toast.text}</${Msg}></div>`}`;
}

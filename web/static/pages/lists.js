// Lists: every BlockList with its status (entries, invalid, unsupported,
// last fetch, per-source errors, digest), a refresh, and a source's entries
// and rules searchable and switchable one by one (the entries routes). The
// list, source and search are kept in the URL.
import { useState, useEffect } from '../vendor/preact-htm.js';
import { call, can, errorText } from '../api.js';
import { html, href, navigate, fmtInt, fmtTime, ErrorMsg, Msg, useTitle, markReady } from '../ui.js';
import { AddListForm, ExcludesForm } from './listadd.js';

const nsName = (o) => `${o.metadata.namespace}/${o.metadata.name}`;

function ListsTable({ lists, chosen, mayRefresh, onRefresh }) {
  return html`<div class="panel table-wrap" style=${{ marginBottom: '1rem' }}>
    <table><caption class="sr-only">Block and allow lists</caption>
      <thead><tr><th>List</th><th>Mode</th><th class="num">Entries</th><th class="num opt">Invalid</th><th class="num opt">Unsupported</th><th class="opt">Last fetch</th><th>Problems</th><th><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>
        ${lists.length === 0 && html`<tr><td colspan="8" class="muted">No lists yet. Block or allow a domain from the query log, or svc lists add NAME --url URL.</td></tr>`}
        ${lists.map((l) => {
          const st = l.status || {};
          const errs = (st.sources || []).filter((x) => x.error).map((x) => `${x.name}: ${x.error}`);
          return html`<tr data-list=${nsName(l)}>
            <td><a href=${href('lists', { list: nsName(l) })} aria-current=${nsName(l) === chosen ? 'true' : undefined}>${nsName(l)}</a></td>
            <td>${(l.spec && l.spec.mode) || 'block'}</td>
            <td class="num">${fmtInt(st.entries)}</td>
            <td class="num opt">${fmtInt(st.invalid)}</td>
            <td class="num opt">${fmtInt(st.unsupported)}</td>
            <td class="opt">${st.lastFetched ? fmtTime(st.lastFetched) : ''}</td>
            <td>${errs.length ? html`<span class="badge error">${errs.length} source error${errs.length > 1 ? 's' : ''}</span>` : ''}</td>
            <td>${mayRefresh && html`<button class="small" type="button" aria-label=${'Refresh ' + nsName(l)} onClick=${() => onRefresh(l)}>Refresh</button>`}</td>
          </tr>`;
        })}
      </tbody>
    </table>
  </div>`;
}

function Entries({ me, list, source, q }) {
  const [ns, name] = list.split('/');
  const [page, setPage] = useState(null);
  const [err, setErr] = useState(null);
  const [draft, setDraft] = useState(q);
  const [tick, setTick] = useState(0);
  const [note, setNote] = useState(null);
  const mayWrite = can(me, 'blocklist-entries-patch');
  useEffect(() => {
    setPage(null);
    call('blocklist-entries', { params: { namespace: ns, name, source }, query: { q, limit: 200 } }).then(setPage).catch(setErr);
  }, [list, source, q, tick]);
  const flip = async (e) => {
    setNote(null);
    try {
      await call('blocklist-entries-patch', { params: { namespace: ns, name, source }, body: { ids: [e.id], op: e.enabled ? 'disable' : 'enable' } });
      setNote({ kind: 'ok', text: `${e.value} ${e.enabled ? 'switched off' : 'switched on'}.` });
      setTick(tick + 1);
    } catch (x) {
      setNote({ kind: 'error', text: `${e.value}: ${errorText(x)}` });
    }
  };
  return html`<section class="panel" aria-label=${`Entries of ${list}, source ${source}`}>
    <h2>${list} · source ${source}</h2>
    <form class="row" onSubmit=${(ev) => { ev.preventDefault(); navigate(href('lists', { list, source, q: draft.trim() })); }}>
      <label for="e-q" class="sr-only">Search entries and rules</label>
      <input id="e-q" type="search" value=${draft} onInput=${(e) => setDraft(e.target.value)} placeholder="search entries and rules" style=${{ maxWidth: '22rem' }} />
      <button type="submit">Search</button>
    </form>
    ${note && html`<${Msg} kind=${note.kind}>${note.text}</${Msg}>`}
    <${ErrorMsg} error=${err} />
    ${page === null && !err ? html`<p class="muted">Loading…</p>` : page && html`
      <p class="muted small">${fmtInt(page.matched)} of ${fmtInt(page.total)}${page.rulesKnown === false ? ' (the rules of the body are not known on this node; entries and excludes only)' : ''}</p>
      <div class="table-wrap"><table><caption class="sr-only">Entries and rules</caption>
        <thead><tr><th>Value</th><th>Kind</th><th class="opt">Origin</th><th>On</th></tr></thead>
        <tbody>${(page.items || []).map((e) => html`<tr data-entry=${e.value}>
          <td class="domain mono">${e.value}${e.stale ? html` <span class="badge error">stale</span>` : ''}${e.groups && e.groups.length ? html` <span class="badge" data-testid="entry-groups" title="applies only to these client groups">for ${e.groups.join(', ')}</span>` : ''}</td>
          <td>${e.kind}${e.type ? ' · ' + e.type : ''}</td>
          <td class="opt">${e.origin || ''}${e.createdBy ? ' · ' + e.createdBy : ''}</td>
          <td><button type="button" role="switch" class="switch" aria-checked=${e.enabled ? 'true' : 'false'} aria-label=${e.value}
            disabled=${!mayWrite} onClick=${() => flip(e)}><span class="knob"></span></button></td></tr>`)}</tbody>
      </table></div>`}
  </section>`;
}

export function ListsPage({ me, route, title }) {
  useTitle(title);
  const chosen = route.query.get('list') || '';
  const [lists, setLists] = useState(null);
  const [err, setErr] = useState(null);
  const [note, setNote] = useState(null);
  const [tick, setTick] = useState(0);
  const [audience, setAudience] = useState({});
  useEffect(() => { call('list-blocklists').then((b) => setLists(b.items || [])).catch(setErr); }, [tick]);
  // To whom each list applies now ("applies to" line), when the principal may read policies.
  useEffect(() => {
    if (!can(me, 'blocklist-audience')) return;
    call('blocklist-audience').then((b) => setAudience(Object.fromEntries((b.items || []).map((a) => [a.list, a])))).catch(() => setAudience({}));
  }, [tick]);
  useEffect(() => { if (lists) markReady(); }, [!!lists]);
  const refresh = async (l) => {
    try {
      await call('blocklist-refresh', { params: { namespace: l.metadata.namespace, name: l.metadata.name } });
      setNote({ kind: 'ok', text: `${nsName(l)}: fetching again on ${'this node'}.` });
    } catch (e) {
      setNote({ kind: 'error', text: `${nsName(l)}: ${errorText(e)}` });
    }
  };
  if (err) return html`<h1>${title}</h1><${ErrorMsg} error=${err} />`;
  if (!lists) return html`<h1>${title}</h1><p class="muted">Loading…</p>`;
  const l = lists.find((x) => nsName(x) === chosen);
  const sources = l ? ((l.spec && l.spec.sources) || []) : [];
  const source = route.query.get('source') || (sources[0] && sources[0].name) || '';
  const st = (l && l.status) || {};
  return html`<h1>${title}</h1>
    ${note && html`<${Msg} kind=${note.kind}>${note.text}</${Msg}>`}
    ${can(me, 'put-blocklist') && html`<${AddListForm} onAdded=${(l) => { setTick((t) => t + 1); if (l !== chosen) navigate(href('lists', { list: l })); }} />`}
    <${ListsTable} lists=${lists} chosen=${chosen} mayRefresh=${can(me, 'blocklist-refresh')} onRefresh=${refresh} />
    ${l && html`<section class="panel" aria-label=${'Sources of ' + chosen} style=${{ marginBottom: '1rem' }}>
      <h2>Sources of ${chosen}</h2>
      ${audience[chosen] && html`<p data-testid="applies-to"><strong>Applies to:</strong> ${audience[chosen].appliesTo}</p>`}
      <ul class="top-list">${sources.map((s) => {
        const ss = (st.sources || []).find((x) => x.name === s.name) || {};
        return html`<li><a href=${href('lists', { list: chosen, source: s.name })} aria-current=${s.name === source ? 'true' : undefined}>${s.name}</a>
          <span class="muted small">${s.url || (s.configMapRef ? 'ConfigMap ' + s.configMapRef.name : (s.inline ? 'inline rules' : 'structured entries only'))}${s.enabled === false ? ' · off' : ''}
          · ${fmtInt(ss.entries)} entries${ss.digest ? ' · ' + ss.digest.slice(0, 12) : ''}${ss.staleExcludes && ss.staleExcludes.length ? ` · ${ss.staleExcludes.length} stale excludes` : ''}</span>
          ${ss.error ? html`<span class="badge error">${ss.error}</span>` : ''}</li>`;
      })}</ul>
    </section>`}
    ${l && source && can(me, 'put-blocklist') && html`<${ExcludesForm} key=${chosen + '|' + source} list=${chosen} source=${source} onSaved=${() => setTick((t) => t + 1)} />`}
    ${l && source && html`<${Entries} key=${chosen + '|' + source} me=${me} list=${chosen} source=${source} q=${route.query.get('q') || ''} />`}`;
}

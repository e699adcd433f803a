// Policies: every Policy with priority, client groups, lists, block mode,
// services, safe search and upstream group, and for the chosen one its
// state on this node (/policies/{ns}/{name}/state: active now, shadowed by,
// effective lists) and its schedule as a week grid; with policies.write the
// editor (policyedit.js).
import { useState, useEffect } from '../vendor/preact-htm.js';
import { call, can } from '../api.js';
import { html, href, ErrorMsg, Msg, useTitle, markReady } from '../ui.js';
import { WeekGrid } from './week.js';
import { PolicyEditor } from './policyedit.js';

const nsName = (o) => `${o.metadata.namespace}/${o.metadata.name}`;
const list = (v) => (Array.isArray(v) ? v : []);

function stateText(st) {
  if (!st) return '…';
  if (!st.loaded) return 'not loaded';
  if (!st.active) return 'inactive now (schedule)';
  if (!st.effective) return 'shadowed';
  return 'active';
}

function Details({ p }) {
  const [st, setSt] = useState(null);
  const [err, setErr] = useState(null);
  useEffect(() => {
    setSt(null);
    call('policy-state', { params: { ns: p.metadata.namespace, name: p.metadata.name } }).then(setSt).catch(setErr);
  }, [nsName(p)]);
  const spec = p.spec || {};
  return html`<section class="panel" aria-label=${'Policy ' + nsName(p)} data-testid="policy">
    <h2>${nsName(p)} <span class=${'badge ' + (st && st.effective ? 'allowed' : 'error')}>${stateText(st)}</span></h2>
    <${ErrorMsg} error=${err} />
    ${st && (st.shadowedBy || []).length > 0 && html`<${Msg} kind="warn">Shadowed by ${st.shadowedBy.map((x) => `${x.policy} (priority ${x.priority}${x.groups && x.groups.length ? ', groups ' + x.groups.join(', ') : ''})`).join('; ')}.</${Msg}>`}
    ${st && (st.problems || []).length > 0 && html`<${Msg} kind="error">${st.problems.join('; ')}</${Msg}>`}
    <div class="grid">
      <div class="explain"><dl>
        <dt>Priority</dt><dd>${spec.priority ?? 0}</dd>
        <dt>Client groups</dt><dd>${list(spec.clientGroupRefs).join(', ') || 'every client'}</dd>
        <dt>Block mode</dt><dd>${spec.blockMode || 'default'}</dd>
        <dt>Services</dt><dd>${list(spec.blockedServices).join(', ') || '—'}${list(spec.blockedCategories).length ? ' · categories ' + list(spec.blockedCategories).join(', ') : ''}</dd>
        <dt>Safe search</dt><dd>${spec.safeSearch ? JSON.stringify(spec.safeSearch) : 'off'}</dd>
        <dt>Rewrites</dt><dd>${list(spec.rewrites).length}</dd>
        <dt>Upstream group</dt><dd>${spec.upstreamGroup || 'default'}</dd>
      </dl></div>
      <div><h3 class="small muted">Effective lists</h3>
        <ul class="top-list">${(st ? st.lists || [] : []).map((l) => html`<li><span>${l.list}</span><span class="muted small">${l.role} · ${l.why}${l.applied ? '' : ' · not applied'}${l.note ? ' · ' + l.note : ''}</span></li>`)}</ul>
        ${st && (st.lists || []).length === 0 && html`<p class="muted">None.</p>`}
      </div>
    </div>
    <h3 class="small muted">Schedule</h3>
    ${spec.schedule ? html`<div class="table-wrap"><${WeekGrid} sch=${spec.schedule} /></div>` : html`<p class="muted">Always active.</p>`}
  </section>`;
}

export function PoliciesPage({ me, route, title }) {
  useTitle(title);
  const chosen = route.query.get('policy') || '';
  const [items, setItems] = useState(null);
  const [err, setErr] = useState(null);
  const [tick, setTick] = useState(0);
  useEffect(() => { call('list-policies').then((b) => setItems(b.items || [])).catch(setErr); }, [tick]);
  useEffect(() => { if (items) markReady(); }, [!!items]);
  if (err) return html`<h1>${title}</h1><${ErrorMsg} error=${err} />`;
  if (!items) return html`<h1>${title}</h1><p class="muted">Loading…</p>`;
  const sorted = items.slice().sort((a, b) => ((b.spec || {}).priority || 0) - ((a.spec || {}).priority || 0));
  const p = items.find((x) => nsName(x) === chosen);
  return html`<h1>${title}</h1>
    <div class="panel table-wrap" style=${{ marginBottom: '1rem' }}>
      <table><caption class="sr-only">Policies, highest priority first</caption>
        <thead><tr><th>Policy</th><th class="num">Priority</th><th>Client groups</th><th class="opt">Lists</th><th class="opt">Services</th><th class="opt">Schedule</th></tr></thead>
        <tbody>
          ${items.length === 0 && html`<tr><td colspan="6" class="muted">No policies: global lists apply to every client (docs/policies.md).</td></tr>`}
          ${sorted.map((x) => { const s = x.spec || {}; return html`<tr data-policy=${nsName(x)}>
            <td><a href=${href('policies', { policy: nsName(x) })} aria-current=${nsName(x) === chosen ? 'true' : undefined}>${nsName(x)}</a></td>
            <td class="num">${s.priority ?? 0}</td>
            <td>${list(s.clientGroupRefs).join(', ') || 'every client'}</td>
            <td class="opt">${list(s.blockListRefs).length} block, ${list(s.allowListRefs).length} allow</td>
            <td class="opt">${list(s.blockedServices).length + list(s.blockedCategories).length}</td>
            <td class="opt">${s.schedule ? `${s.schedule.start}–${s.schedule.end} ${list(s.schedule.weekdays).join(',') || 'daily'}` : 'always'}</td></tr>`; })}
        </tbody>
      </table>
    </div>
    ${p && can(me, 'policy-state') && html`<${Details} key=${chosen + '@' + p.metadata.resourceVersion} p=${p} />`}
    ${p && can(me, 'put-policy') && html`<${PolicyEditor} key=${chosen} p=${p} onSaved=${() => setTick(tick + 1)} />`}`;
}

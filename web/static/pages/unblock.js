// Unblock requests: the queue of pending requests with one-click approve
// (scope, subdomains, duration) and deny, and the history of decisions.
// Everything goes through /unblockrequests (docs/unblock-requests.md).
import { useState, useEffect, useCallback } from '../vendor/preact-htm.js';
import { call, can } from '../api.js';
import { html, href, ErrorMsg, Msg, useTitle, useInterval, markReady, fmtTime } from '../ui.js';

const DURATIONS = [['', 'Permanently'], ['1h', 'For 1 hour'], ['24h', 'For 24 hours'], ['168h', 'For 7 days']];

/** The number of pending requests, for the navigation (refreshed every minute). */
export function PendingCount({ me }) {
  const [n, setN] = useState(0);
  const load = useCallback(() => {
    if (!can(me, 'unblockrequests-list')) return;
    call('unblockrequests-list', { query: { phase: 'pending', limit: 1 } }).then((p) => setN(p.pending || 0)).catch(() => {});
  }, [me]);
  useEffect(() => {
    load();
    window.addEventListener('svc:unblock-changed', load);
    return () => window.removeEventListener('svc:unblock-changed', load);
  }, [load]);
  useInterval(load, 60000);
  if (!n) return null;
  return html` <span class="badge" data-pending=${n} title=${`${n} pending`}>${n}<span class="sr-only"> pending</span></span>`;
}

function Decide({ r, groups, onDone }) {
  const [scope, setScope] = useState('everyone');
  const [chosen, setChosen] = useState([]);
  const [subdomains, setSubdomains] = useState(false);
  const [duration, setDuration] = useState('');
  const [comment, setComment] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const params = { namespace: r.namespace, name: r.name };
  const mine = groups.filter((g) => g.startsWith(r.namespace + '/'));
  const act = async (op, body) => {
    setBusy(true);
    setError(null);
    try {
      const out = await call(op, { params, body });
      window.dispatchEvent(new Event('svc:unblock-changed'));
      onDone(out);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const approve = (ev) => {
    ev.preventDefault();
    const body = { match: subdomains ? 'subdomains' : 'exact', comment };
    if (scope === 'groups') Object.assign(body, { scope: 'groups', groups: chosen });
    if (duration) body.duration = duration;
    act('unblockrequests-approve', body);
  };
  const id = (k) => `${k}-${r.namespace}-${r.name}`;
  return html`<form class="decide" onSubmit=${approve} data-request=${r.name}>
    <fieldset disabled=${busy}>
      <legend class="sr-only">Decide ${r.domain}</legend>
      <label for=${id('scope')}>For</label>
      <select id=${id('scope')} name="scope" value=${scope} onChange=${(e) => setScope(e.target.value)}>
        <option value="everyone">everyone</option>
        <option value="groups" disabled=${mine.length === 0}>client groups…</option>
      </select>
      ${scope === 'groups' ? html`<select multiple name="groups" aria-label="Client groups" size=${Math.min(4, mine.length)}
        onChange=${(e) => setChosen([...e.target.selectedOptions].map((o) => o.value))}>
        ${mine.map((g) => html`<option value=${g}>${g.split('/')[1]}</option>`)}
      </select>` : null}
      <label><input type="checkbox" name="subdomains" checked=${subdomains} onChange=${(e) => setSubdomains(e.target.checked)} /> with subdomains</label>
      <select name="duration" aria-label="How long" value=${duration} onChange=${(e) => setDuration(e.target.value)}>
        ${DURATIONS.map(([v, t]) => html`<option value=${v}>${t}</option>`)}
      </select>
      <input name="comment" aria-label="Comment" placeholder="Comment (optional)" maxlength="1000" value=${comment} onInput=${(e) => setComment(e.target.value)} />
      <button type="submit" class="primary" disabled=${scope === 'groups' && chosen.length === 0}>Approve</button>
      <button type="button" name="deny" onClick=${() => act('unblockrequests-deny', { comment })}>Deny</button>
    </fieldset>
    <${ErrorMsg} error=${error} />
  </form>`;
}

function Pending({ items, mayWrite, groups, onDone }) {
  if (items.length === 0) return html`<${Msg} kind="ok">No request is waiting for a decision.</${Msg}>`;
  return html`<ul class="queue">${items.map((r) => html`<li class="card" data-domain=${r.domain} key=${r.namespace + '/' + r.name}>
    <div class="row"><strong class="mono">${r.domain}</strong><span class="spacer"></span>
      <span class="muted small">filed ${fmtTime(r.createdAt)}${r.submissions > 1 ? ` · ${r.submissions} times` : ''}${r.expiresAt ? ` · expires ${fmtTime(r.expiresAt)}` : ''}</span></div>
    ${r.reason ? html`<blockquote class="reason">${r.reason}</blockquote>` : html`<p class="muted small">No reason given.</p>`}
    <dl class="facts small">
      <dt>Client</dt><dd><a href=${href('queries', { client: r.requester.ip, domain: r.domain })}>${r.requester.ip || '-'}</a>${r.requester.clientID ? ` (${r.requester.clientID})` : ''}</dd>
      ${r.requester.contact ? html`<dt>Contact</dt><dd>${r.requester.contact}</dd>` : null}
      ${r.policy ? html`<dt>Policy</dt><dd>${r.policy}</dd>` : null}
      ${r.list ? html`<dt>List</dt><dd>${r.list}</dd>` : null}
      ${r.rule ? html`<dt>Rule</dt><dd class="mono">${r.rule}</dd>` : null}
    </dl>
    ${mayWrite ? html`<${Decide} r=${r} groups=${groups} onDone=${onDone} />` : null}
  </li>`)}</ul>`;
}

function History({ items }) {
  if (items.length === 0) return html`<p class="muted">No decided or expired requests yet.</p>`;
  return html`<table class="history"><thead><tr><th>Domain</th><th>Phase</th><th>Decided by</th><th>When</th><th>Scope</th><th>Comment</th></tr></thead>
    <tbody>${items.map((r) => html`<tr data-domain=${r.domain} data-phase=${r.phase} key=${r.namespace + '/' + r.name}>
      <td class="mono">${r.domain}</td><td>${r.phase}</td><td>${r.decidedBy || '-'}</td>
      <td>${r.decidedAt ? fmtTime(r.decidedAt) : r.expiresAt ? fmtTime(r.expiresAt) : '-'}</td>
      <td>${r.scope ? `${r.scope === 'groups' ? (r.groups || []).join(', ') : 'everyone'}${r.match === 'subdomains' ? ', subdomains' : ''}${r.duration ? `, ${r.duration}` : ''}` : '-'}</td>
      <td>${r.comment || ''}</td></tr>`)}</tbody></table>`;
}

export function UnblockPage({ me, title }) {
  useTitle(title);
  const [page, setPage] = useState(null);
  const [groups, setGroups] = useState([]);
  const [error, setError] = useState(null);
  const [note, setNote] = useState('');
  const mayWrite = can(me, 'unblockrequests-approve');
  const load = useCallback(() => {
    call('unblockrequests-list', { query: { limit: 1000 } }).then((p) => { setPage(p); setError(null); markReady(); }).catch(setError);
  }, []);
  useEffect(() => {
    load();
    if (mayWrite && can(me, 'list-clientgroups')) {
      call('list-clientgroups').then((l) => setGroups((l.items || []).map((g) => `${g.metadata.namespace}/${g.metadata.name}`))).catch(() => {});
    }
  }, [load]);
  useInterval(load, 30000);
  const done = (r) => {
    setNote(r.phase === 'approved'
      ? `${r.domain} approved${r.expiresAt ? ' until ' + fmtTime(r.expiresAt) : ''}: allow entries in ${r.entry}.`
      : `${r.domain} denied.`);
    load();
  };
  if (error && !page) return html`<h1>${title}</h1><${ErrorMsg} error=${error} />`;
  if (!page) return html`<h1>${title}</h1><p class="muted">Loading…</p>`;
  const pending = page.items.filter((r) => r.phase === 'pending');
  const rest = page.items.filter((r) => r.phase !== 'pending');
  return html`<h1>${title}</h1>
    <p class="muted">People ask from the block page. An approval adds an allow entry for everyone or for client groups; a timed one ends by itself.</p>
    ${note ? html`<${Msg} kind="ok">${note}</${Msg}>` : null}
    <${ErrorMsg} error=${error} />
    <section aria-labelledby="ub-pending"><h2 id="ub-pending">Pending (${pending.length})</h2>
      <${Pending} items=${pending} mayWrite=${mayWrite} groups=${groups} onDone=${done} /></section>
    <section aria-labelledby="ub-history"><h2 id="ub-history">History</h2><${History} items=${rest} /></section>`;
}

// Blocked services: the catalogue as a grid of switches, per policy. A switch
// edits the policy as `svc services block|unblock --policy` does:
// spec.blockedServices, and spec.allowedServices for an exception to a
// blocked category. The policy and the category are kept in the URL.
import { useState, useEffect } from '../vendor/preact-htm.js';
import { call, can, url, errorText, ApiError } from '../api.js';
import { html, href, navigate, ErrorMsg, Msg, useTitle, markReady } from '../ui.js';

const list = (v) => (Array.isArray(v) ? v.filter((x) => typeof x === 'string') : []);
const nsName = (o) => `${o.metadata.namespace}/${o.metadata.name}`;

/** Why a policy blocks a service (the CLI's serviceState). */
function stateOf(spec, sv) {
  if (list(spec.allowedServices).includes(sv.id)) return 'allowed';
  if (list(spec.blockedServices).includes(sv.id)) return 'blocked';
  if (list(spec.blockedCategories).includes(sv.category)) return 'category';
  return 'off';
}

/** Blocks or unblocks a service in a policy, retried on a concurrent change. */
async function setService(policy, sv, block) {
  const [namespace, name] = policy.split('/');
  for (let attempt = 0; ; attempt++) {
    const obj = await call('get-policy', { params: { namespace, name } });
    const rv = obj.metadata && obj.metadata.resourceVersion;
    delete obj.status;
    const spec = (obj.spec = obj.spec || {});
    let blocked = list(spec.blockedServices);
    let allowed = list(spec.allowedServices);
    const cats = list(spec.blockedCategories);
    if (block) {
      allowed = allowed.filter((s) => s !== sv.id);
      if (!blocked.includes(sv.id) && !cats.includes(sv.category)) blocked.push(sv.id);
    } else {
      blocked = blocked.filter((s) => s !== sv.id);
      if (cats.includes(sv.category) && !allowed.includes(sv.id)) allowed.push(sv.id);
    }
    for (const [k, v] of [['blockedServices', blocked], ['allowedServices', allowed]]) {
      if (v.length) spec[k] = v.sort(); else delete spec[k];
    }
    try {
      return await call('put-policy', { params: { namespace, name }, body: obj, headers: rv ? { 'If-Match': rv } : {} });
    } catch (e) {
      if (attempt < 2 && e instanceof ApiError && (e.status === 409 || e.status === 412)) continue;
      throw e;
    }
  }
}

function dark() {
  const t = document.documentElement.dataset.theme;
  return t ? t === 'dark' : matchMedia('(prefers-color-scheme: dark)').matches;
}

function Tile({ sv, state, byID, mayWrite, busy, onToggle }) {
  const on = state !== 'off' && state !== 'allowed';
  const icon = sv.icon ? url('catalogue-icon', { file: sv.id + '.svg' }, dark() && sv.iconOnDark ? { variant: 'onDark' } : {}) : '';
  const why = { blocked: 'blocked', category: 'blocked with its category', allowed: 'allowed (exception to its category)', off: 'not blocked' }[state];
  const names = (ids) => ids.map((id) => (byID[id] ? byID[id].name : id)).join(', ');
  return html`<li class=${'tile' + (on ? ' on' : '')} data-service=${sv.id}>
    <div class="row">
      ${icon ? html`<img src=${icon} alt="" width="28" height="28" loading="lazy" />` : html`<span class="noicon" aria-hidden="true">${sv.name.slice(0, 1)}</span>`}
      <span class="name" id=${'sv-' + sv.id}>${sv.name}</span>
      <span class="spacer"></span>
      <button type="button" role="switch" class="switch" aria-checked=${on ? 'true' : 'false'} aria-labelledby=${'sv-' + sv.id}
        disabled=${!mayWrite || busy} title=${mayWrite ? (on ? 'Unblock' : 'Block') : 'Your account may not change policies'}
        onClick=${() => onToggle(sv, !on)}><span class="knob"></span></button>
    </div>
    <div class="muted small">${why} · ${sv.rules} rule${sv.rules === 1 ? '' : 's'}</div>
    ${sv.requires && sv.requires.length ? html`<div class="small">Also blocks: ${names(sv.requires)}</div>` : null}
    ${sv.related && sv.related.length ? html`<div class="small muted">Related: ${names(sv.related)}</div>` : null}
    ${sv.note ? html`<div class="small muted">${sv.note}</div>` : null}
  </li>`;
}

export function ServicesPage({ me, route, title }) {
  useTitle(title);
  const [services, setServices] = useState(null);
  const [cats, setCats] = useState([]);
  const [policies, setPolicies] = useState(null);
  const [spec, setSpec] = useState(null);
  const [err, setErr] = useState(null);
  const [busy, setBusy] = useState('');
  const [note, setNote] = useState(null);
  const [q, setQ] = useState('');
  const category = route.query.get('category') || '';
  const canPolicies = can(me, 'list-policies');
  const policy = route.query.get('policy') || (policies && policies[0] ? nsName(policies[0]) : '');
  const mayWrite = can(me, 'put-policy') && can(me, 'get-policy');

  useEffect(() => {
    Promise.all([call('catalogue-services'), call('catalogue-categories')]).then(([s, c]) => {
      setServices(s.items || []);
      setCats((c.items || []).slice().sort((a, b) => a.order - b.order));
    }).catch(setErr);
    if (canPolicies) call('list-policies').then((p) => setPolicies(p.items || [])).catch(setErr);
    else setPolicies([]);
  }, []);
  useEffect(() => {
    if (!policies) return;
    const p = policies.find((x) => nsName(x) === policy);
    setSpec(p ? p.spec || {} : null);
  }, [policies, policy]);
  useEffect(() => { if (services) markReady(); }, [!!services]);

  const toggle = async (sv, block) => {
    setBusy(sv.id);
    setNote(null);
    try {
      const saved = await setService(policy, sv, block);
      setSpec(saved.spec || {});
      setPolicies((ps) => ps.map((p) => (nsName(p) === policy ? saved : p)));
      setNote({ kind: 'ok', text: `${sv.name} ${block ? 'blocked' : 'unblocked'} for the clients of ${policy}.` });
    } catch (e) {
      setNote({ kind: 'error', text: `Could not change ${sv.name}: ${errorText(e)}` });
    } finally {
      setBusy('');
    }
  };

  if (err) return html`<h1>${title}</h1><${ErrorMsg} error=${err} />`;
  if (!services || !policies) return html`<h1>${title}</h1><p class="muted">Loading…</p>`;
  const byID = Object.fromEntries(services.map((s) => [s.id, s]));
  const shown = services.filter((s) => (!category || s.category === category) && (!q || s.name.toLowerCase().includes(q.toLowerCase()) || s.id.includes(q.toLowerCase())));
  const set = (k, v) => navigate(href('services', { policy: route.query.get('policy') || '', category, [k]: v }));
  return html`<h1>${title}</h1>
    <div class="panel filters" style=${{ marginBottom: '1rem' }}>
      <div><label for="s-policy">Policy</label>
        <select id="s-policy" value=${policy} onChange=${(e) => set('policy', e.target.value)} disabled=${!policies.length}>
          ${policies.length === 0 && html`<option value="">no policy</option>`}
          ${policies.map((p) => html`<option value=${nsName(p)}>${nsName(p)}</option>`)}
        </select></div>
      <div><label for="s-category">Category</label>
        <select id="s-category" value=${category} onChange=${(e) => set('category', e.target.value)}>
          <option value="">all</option>${cats.map((c) => html`<option value=${c.id}>${c.name} (${c.services})</option>`)}
        </select></div>
      <div><label for="s-q">Search</label><input id="s-q" type="search" value=${q} onInput=${(e) => setQ(e.target.value)} placeholder="YouTube" /></div>
    </div>
    ${policies.length === 0 && html`<${Msg} kind="info">Services are blocked per policy, and there is no Policy yet. Create one for the client groups it should cover (<code>svc apply</code>, docs/policies.md); a policy without client groups applies to every client and then hides the global lists.</${Msg}>`}
    ${note && html`<${Msg} kind=${note.kind}>${note.text}</${Msg}>`}
    ${cats.filter((c) => shown.some((s) => s.category === c.id)).map((c) => html`<section class="svc-cat" aria-labelledby=${'cat-' + c.id}>
      <h2 id=${'cat-' + c.id}>${c.name} ${spec && list(spec.blockedCategories).includes(c.id) ? html`<span class="badge blocked">category blocked</span>` : null}</h2>
      <ul class="tiles">${shown.filter((s) => s.category === c.id).map((sv) => html`<${Tile} key=${sv.id} sv=${sv} byID=${byID}
        state=${spec ? stateOf(spec, sv) : 'off'} mayWrite=${mayWrite && !!spec} busy=${busy === sv.id} onToggle=${toggle} />`)}</ul>
    </section>`)}`;
}

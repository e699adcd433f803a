// Client groups: every ClientGroup with its members (addresses and CIDR
// prefixes, client IDs, client names) and the policies that name it; with
// clientgroups.write a group is created and edited (PUT with If-Match of the
// version read), with clientgroups.delete deleted (after saying which
// policies still name it). The API's validation message is shown at the
// field it names (spec.addresses → the addresses box).
import { useState, useEffect } from '../vendor/preact-htm.js';
import { call, can, errorText } from '../api.js';
import { html, href, navigate, ErrorMsg, Msg, useTitle, markReady, fieldErrors } from '../ui.js';

const nsName = (o) => `${o.metadata.namespace}/${o.metadata.name}`;
const list = (v) => (Array.isArray(v) ? v : []);
const lines = (s) => s.split(/[\n,]+/).map((x) => x.trim()).filter(Boolean);
const NAME_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

// The member fields: form key, spec field, label, hint.
const MEMBERS = [
  ['addresses', 'Addresses and CIDR prefixes, one per line', '192.168.1.20\n192.168.1.0/24\n2001:db8::/64'],
  ['clientIDs', 'Client IDs (DoT/DoQ server name label, DoH path), one per line', 'kids-tablet'],
  ['names', 'Client names (reverse lookup, DHCP), one per line', 'laptop.home'],
];

/** Policies that name a group (clientGroupRefs is by name, in the policy's namespace or as ns/name). */
function usedBy(policies, g) {
  return (policies || []).filter((p) => list((p.spec || {}).clientGroupRefs).some((r) =>
    r === nsName(g) || (r === g.metadata.name && p.metadata.namespace === g.metadata.namespace))).map(nsName);
}

function GroupForm({ g, existing, onSaved, onDeleted, me, policies }) {
  const isNew = !g;
  const spec = (g && g.spec) || {};
  const [f, setF] = useState(() => ({
    namespace: g ? g.metadata.namespace : 'default', name: g ? g.metadata.name : '', description: spec.description || '',
    addresses: list(spec.addresses).join('\n'), clientIDs: list(spec.clientIDs).join('\n'), names: list(spec.names).join('\n'),
  }));
  const [errs, setErrs] = useState({}); // field → message; '' → above the form
  const [ok, setOk] = useState('');
  const [busy, setBusy] = useState(false);
  const [asking, setAsking] = useState(false);
  const set = (k) => (e) => setF({ ...f, [k]: e.target.value });
  const id = (k) => `cg-${isNew ? 'new' : 'edit'}-${k}`;

  const save = async (ev) => {
    ev.preventDefault();
    setErrs({});
    setOk('');
    const namespace = f.namespace.trim(), name = f.name.trim();
    if (isNew) {
      if (!NAME_RE.test(name)) { setErrs({ name: `Name ${name || '(empty)'}: lower-case letters, digits and “-”, e.g. kids.` }); return; }
      if (!NAME_RE.test(namespace)) { setErrs({ namespace: `Namespace ${namespace || '(empty)'}: lower-case letters, digits and “-”, e.g. default.` }); return; }
      if (existing.some((x) => nsName(x) === `${namespace}/${name}`)) { setErrs({ name: `A group ${namespace}/${name} exists: choose it in the table to edit it.` }); return; }
    }
    setBusy(true);
    try {
      let obj = { apiVersion: 'service.io/v1alpha1', kind: 'ClientGroup', metadata: { namespace, name }, spec: {} };
      const headers = {};
      if (!isNew) {
        // Read, change the spec, write back with If-Match: a concurrent
        // change is refused rather than overwritten.
        obj = await call('get-clientgroup', { params: { namespace, name } });
        if (obj.metadata.resourceVersion) headers['If-Match'] = obj.metadata.resourceVersion;
      }
      const s = { ...(obj.spec || {}) };
      const put = (k, v) => { if (v === '' || (Array.isArray(v) && v.length === 0)) delete s[k]; else s[k] = v; };
      put('description', f.description.trim());
      for (const [k] of MEMBERS) put(k, lines(f[k]));
      obj.spec = s;
      await call('put-clientgroup', { params: { namespace, name }, body: obj, headers });
      setOk(isNew ? `Created ${namespace}/${name}.` : `Saved ${namespace}/${name}.`);
      onSaved(`${namespace}/${name}`);
    } catch (e) {
      const text = errorText(e);
      const byField = fieldErrors(e && e.message);
      const out = {};
      for (const [path, m] of Object.entries(byField)) {
        const k = path.replace(/^spec\./, '').replace(/^metadata\./, '');
        out[['description', 'name', 'namespace', ...MEMBERS.map((x) => x[0])].includes(k) ? k : ''] = m;
      }
      if (Object.keys(out).length === 0 || out['']) out[''] = (e && (e.status === 412 || e.status === 409)) ? `${text} Someone changed the group meanwhile: reload and edit again.` : text;
      setErrs(out);
    } finally {
      setBusy(false);
    }
  };

  const del = async () => {
    setBusy(true);
    try {
      await call('delete-clientgroup', { params: { namespace: g.metadata.namespace, name: g.metadata.name } });
      onDeleted();
    } catch (e) {
      setErrs({ '': errorText(e) });
    } finally {
      setBusy(false);
      setAsking(false);
    }
  };

  const at = (k) => errs[k] && html`<div class="msg error field-error" role="alert" id=${id(k) + '-err'}>${errs[k]}</div>`;
  const inv = (k) => (errs[k] ? { 'aria-invalid': 'true', 'aria-describedby': id(k) + '-err' } : {});
  const users = g ? usedBy(policies, g) : [];
  const title = isNew ? 'New client group' : `Edit ${nsName(g)}`;
  return html`<form class="panel" onSubmit=${save} aria-label=${title} data-testid=${isNew ? 'group-new' : 'group-edit'} style=${{ marginTop: '1rem' }}>
    <h2>${title}</h2>
    ${ok && html`<${Msg} kind="ok">${ok}</${Msg}>`}
    ${errs[''] && html`<${Msg} kind="error">${errs['']}</${Msg}>`}
    <div class="filters">
      ${isNew && html`<div><label for=${id('namespace')}>Namespace</label><input id=${id('namespace')} value=${f.namespace} onInput=${set('namespace')} ...${inv('namespace')} />${at('namespace')}</div>
        <div><label for=${id('name')}>Name</label><input id=${id('name')} value=${f.name} onInput=${set('name')} placeholder="kids" ...${inv('name')} />${at('name')}</div>`}
      <div><label for=${id('description')}>Description</label><input id=${id('description')} value=${f.description} onInput=${set('description')} ...${inv('description')} />${at('description')}</div>
    </div>
    <div class="grid" style=${{ marginTop: '.6rem' }}>
      ${MEMBERS.map(([k, label, ph]) => html`<div><label for=${id(k)}>${label}</label>
        <textarea id=${id(k)} class="mono" rows="4" value=${f[k]} onInput=${set(k)} placeholder=${ph} ...${inv(k)}></textarea>${at(k)}</div>`)}
    </div>
    <p class="small muted">A client is a member when its address, client ID or name matches any line. A group without members matches nobody.</p>
    <div class="row">
      <button class="primary" type="submit" disabled=${busy}>${isNew ? 'Create group' : 'Save group'}</button>
      <span class="spacer"></span>
      ${!isNew && can(me, 'delete-clientgroup') && (!asking
        ? html`<button type="button" onClick=${() => setAsking(true)}>Delete group…</button>`
        : html`<span>${users.length ? `Still named by ${users.join(', ')}: those policies then match no client through it.` : 'No policy names it.'}</span>
          <button type="button" class="primary" onClick=${del} disabled=${busy}>Delete ${nsName(g)}</button>
          <button type="button" onClick=${() => setAsking(false)}>Keep it</button>`)}
    </div>
  </form>`;
}

export function GroupsPage({ me, route, title }) {
  useTitle(title);
  const chosen = route.query.get('group') || '';
  const [items, setItems] = useState(null);
  const [policies, setPolicies] = useState(null);
  const [err, setErr] = useState(null);
  const [tick, setTick] = useState(0);
  const [note, setNote] = useState('');
  useEffect(() => {
    call('list-clientgroups').then((b) => setItems(b.items || [])).catch(setErr);
    if (can(me, 'list-policies')) call('list-policies').then((b) => setPolicies(b.items || [])).catch(() => setPolicies([]));
  }, [tick]);
  useEffect(() => { if (items) markReady(); }, [!!items]);
  if (err) return html`<h1>${title}</h1><${ErrorMsg} error=${err} />`;
  if (!items) return html`<h1>${title}</h1><p class="muted">Loading…</p>`;
  const g = items.find((x) => nsName(x) === chosen);
  const writable = can(me, 'put-clientgroup');
  const count = (x) => list((x.spec || {}).addresses).length + list((x.spec || {}).clientIDs).length + list((x.spec || {}).names).length;
  return html`<h1>${title}</h1>
    ${note && html`<${Msg} kind="ok">${note}</${Msg}>`}
    <div class="panel table-wrap">
      <table><caption class="sr-only">Client groups</caption>
        <thead><tr><th>Group</th><th>Members</th><th class="opt">Description</th><th class="opt">Used by</th></tr></thead>
        <tbody>
          ${items.length === 0 && html`<tr><td colspan="4" class="muted">No client groups: policies without client groups apply to every client.</td></tr>`}
          ${items.map((x) => { const s = x.spec || {}; return html`<tr data-group=${nsName(x)}>
            <td><a href=${href('groups', { group: nsName(x) })} aria-current=${nsName(x) === chosen ? 'true' : undefined}>${nsName(x)}</a></td>
            <td>${count(x) === 0 ? html`<span class="muted">none (matches nobody)</span>`
              : [...list(s.addresses), ...list(s.clientIDs).map((c) => 'id ' + c), ...list(s.names).map((n) => 'name ' + n)].slice(0, 6).join(', ') + (count(x) > 6 ? ` … (${count(x)})` : '')}</td>
            <td class="opt">${s.description || ''}</td>
            <td class="opt">${policies ? usedBy(policies, x).join(', ') || '—' : ''}</td></tr>`; })}
        </tbody>
      </table>
    </div>
    ${chosen && !g && html`<${Msg} kind="warn">There is no group ${chosen}.</${Msg}>`}
    ${g && writable && html`<${GroupForm} key=${chosen + '@' + g.metadata.resourceVersion} g=${g} me=${me} policies=${policies}
      onSaved=${() => setTick(tick + 1)} onDeleted=${() => { setNote(`Deleted ${chosen}.`); navigate('groups', { replace: true }); setTick(tick + 1); }} />`}
    ${!writable && html`<p class="muted small">Changing groups needs clientgroups.write (roles operator and admin).</p>`}
    ${writable && !g && html`<${GroupForm} key="new" existing=${items} me=${me} policies=${policies}
      onSaved=${(k) => { setTick(tick + 1); navigate(href('groups', { group: k })); }} />`}`;
}

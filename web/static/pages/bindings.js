// Role bindings (Administration → Access): every binding of
// /iam/rolebindings; with rolebindings.write a RoleBinding object is created
// or edited (subject, role, scope; PUT with If-Match of the version read),
// with rolebindings.delete removed. Bindings from the config file
// (rbac.bindings) are shown with the reason they cannot change here. The
// API's refusal is shown at the field it names (spec.scope.name → zone).
import { useState, useEffect } from '../vendor/preact-htm.js';
import { call, can, errorText } from '../api.js';
import { html, ErrorMsg, Msg, markReady, fieldErrors } from '../ui.js';

const ROLES = ['viewer', 'auditor', 'operator', 'zone-admin', 'admin'];
const KINDS = ['User', 'Group', 'ServiceAccount'];
const NAME_RE = /^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$/;
const CONFIG_REASON = 'from the config file (rbac.bindings): change it there and restart or reload the node; the API cannot edit the config file';

// Form fields and the API paths that name them.
const FIELDS = {
  name: 'metadata.name', subjectKind: 'spec.subject.kind', subjectName: 'spec.subject.name', subjectNamespace: 'spec.subject.namespace',
  role: 'spec.role', scopeKind: 'spec.scope.kind', scopeName: 'spec.scope.name',
};

// /iam/rolebindings names an object binding "<namespace>/<name>" with an
// empty namespace (RoleBinding is cluster-scoped): the object's name is after it.
const bindingName = (b) => (b.source === 'object' ? b.name.replace(/^\//, '') : b.name);

const scopeText = (s) => (!s || s.kind === 'cluster' ? 'cluster' : `zone ${s.name || ''}`);

function BindingForm({ b, existing, onDone, onCancel }) {
  const isNew = !b;
  const [f, setF] = useState(() => ({
    name: b ? bindingName(b) : '', subjectKind: b ? b.subject.kind : 'User', subjectName: b ? b.subject.name : '', subjectNamespace: (b && b.subject.namespace) || '',
    role: b ? b.role : 'viewer', scopeKind: b && b.scope ? b.scope.kind : 'cluster', scopeName: (b && b.scope && b.scope.name) || '',
  }));
  const [errs, setErrs] = useState({});
  const [busy, setBusy] = useState(false);
  const set = (k) => (e) => setF({ ...f, [k]: e.target.value });
  const id = (k) => `rb-${k}`;

  const save = async (ev) => {
    ev.preventDefault();
    setErrs({});
    const name = f.name.trim();
    if (isNew) {
      if (!NAME_RE.test(name)) { setErrs({ name: `Name ${name || '(empty)'}: lower-case letters, digits, “-” and “.”, e.g. alice-viewer.` }); return; }
      if (existing.some((x) => x.source === 'object' && bindingName(x) === name)) { setErrs({ name: `A RoleBinding ${name} exists: edit it in the table.` }); return; }
    }
    setBusy(true);
    try {
      let obj = { apiVersion: 'service.io/v1alpha1', kind: 'RoleBinding', metadata: { name } };
      const headers = {};
      if (!isNew) {
        obj = await call('get-rolebinding', { params: { name } });
        if (obj.metadata.resourceVersion) headers['If-Match'] = obj.metadata.resourceVersion;
      }
      const subject = { kind: f.subjectKind, name: f.subjectName.trim() };
      if (f.subjectKind === 'ServiceAccount') subject.namespace = f.subjectNamespace.trim();
      const scope = { kind: f.scopeKind };
      if (f.scopeKind === 'zone') scope.name = f.scopeName.trim();
      obj.spec = { ...(obj.spec || {}), subject, role: f.role, scope };
      await call('put-rolebinding', { params: { name }, body: obj, headers });
      onDone(isNew ? `Created the binding ${name}: ${subject.kind} ${subject.name} is ${f.role} at ${scopeText(scope)} scope.` : `Saved the binding ${name}.`);
    } catch (e) {
      const byPath = fieldErrors(e && e.message);
      const out = {};
      for (const [path, m] of Object.entries(byPath)) {
        const k = Object.keys(FIELDS).find((x) => FIELDS[x] === path);
        out[k || ''] = out[k || ''] ? `${out[k || '']}; ${m}` : m;
      }
      if (Object.keys(out).length === 0 || out['']) out[''] = (e && (e.status === 412 || e.status === 409)) ? `${errorText(e)} Someone changed the binding meanwhile: reload and edit again.` : errorText(e);
      setErrs(out);
    } finally {
      setBusy(false);
    }
  };

  const at = (k) => errs[k] && html`<div class="msg error field-error" role="alert" id=${id(k) + '-err'}>${errs[k]}</div>`;
  const inv = (k) => (errs[k] ? { 'aria-invalid': 'true', 'aria-describedby': id(k) + '-err' } : {});
  const sel = (k, label, opts) => html`<div><label for=${id(k)}>${label}</label><select id=${id(k)} value=${f[k]} onChange=${set(k)} ...${inv(k)}>
    ${opts.map((o) => html`<option value=${o}>${o}</option>`)}</select>${at(k)}</div>`;
  const inp = (k, label, extra = {}) => html`<div><label for=${id(k)}>${label}</label><input id=${id(k)} value=${f[k]} onInput=${set(k)} ...${inv(k)} ...${extra} />${at(k)}</div>`;
  const title = isNew ? 'New role binding' : `Edit the binding ${bindingName(b)}`;
  return html`<form class="panel" onSubmit=${save} aria-label=${title} data-testid="binding-form" style=${{ marginTop: '1rem' }}>
    <h3>${title}</h3>
    ${errs[''] && html`<${Msg} kind="error">${errs['']}</${Msg}>`}
    <div class="filters">
      ${isNew && inp('name', 'Binding name', { placeholder: 'alice-viewer' })}
      ${sel('subjectKind', 'Subject kind', KINDS)}
      ${inp('subjectName', f.subjectKind === 'Group' ? 'Group name' : f.subjectKind === 'ServiceAccount' ? 'Service account name' : 'User name (local, or <provider>:<name>)', { required: true })}
      ${f.subjectKind === 'ServiceAccount' && inp('subjectNamespace', 'Service account namespace')}
      ${sel('role', 'Role', ROLES)}
      ${sel('scopeKind', 'Scope', ['cluster', 'zone'])}
      ${f.scopeKind === 'zone' && inp('scopeName', 'Zone (only zone-admin)', { placeholder: 'lab.example' })}
    </div>
    <div class="row" style=${{ marginTop: '.6rem' }}>
      <button class="primary" type="submit" disabled=${busy}>${isNew ? 'Create binding' : 'Save binding'}</button>
      ${onCancel && html`<button type="button" onClick=${onCancel}>Cancel</button>`}
    </div>
  </form>`;
}

export function BindingsPanel({ me }) {
  const [data, setData] = useState(null);
  const [err, setErr] = useState(null);
  const [tick, setTick] = useState(0);
  const [editing, setEditing] = useState(''); // binding name, or '' for none
  const [msg, setMsg] = useState(null);
  const [asking, setAsking] = useState('');
  useEffect(() => { call('iam-rolebindings').then((d) => { setData(d); markReady(); }).catch(setErr); }, [tick]);
  const writable = can(me, 'put-rolebinding');
  const deletable = can(me, 'delete-rolebinding');
  const done = (text) => { setMsg({ kind: 'ok', text }); setEditing(''); setTick((t) => t + 1); };
  const del = async (name) => {
    try {
      await call('delete-rolebinding', { params: { name } });
      done(`Deleted the binding ${name}.`);
    } catch (e) { setMsg({ kind: 'error', text: errorText(e) }); }
    setAsking('');
  };
  const items = (data && data.items) || [];
  const cur = items.find((x) => x.source === 'object' && bindingName(x) === editing);
  return html`<div class="panel table-wrap"><h2>Role bindings</h2>
    <${ErrorMsg} error=${err} />
    ${msg && html`<${Msg} kind=${msg.kind}>${msg.text}</${Msg}>`}
    ${data && html`<table><caption class="sr-only">Role bindings</caption>
      <thead><tr><th>Name</th><th>Subject</th><th>Role</th><th>Scope</th><th>From</th>${(writable || deletable) && html`<th><span class="sr-only">Actions</span></th>`}</tr></thead>
      <tbody>${items.map((b) => { const n = bindingName(b); return html`<tr data-binding=${n} data-source=${b.source}><td>${n}</td>
        <td>${b.subject.kind} ${b.subject.namespace ? b.subject.namespace + '/' : ''}${b.subject.name}</td><td>${b.role}</td><td>${scopeText(b.scope)}</td>
        <td>${b.source === 'config' ? 'config file (rbac.bindings)' : 'RoleBinding object'}</td>
        ${(writable || deletable) && html`<td class="actions-cell">${b.source === 'config'
          ? html`<span class="small muted lock">Not editable here: ${CONFIG_REASON}</span>`
          : asking === n
            ? html`<button type="button" class="small primary" onClick=${() => del(n)}>Delete ${n}</button> <button type="button" class="small" onClick=${() => setAsking('')}>Keep it</button>`
            : html`${writable && html`<button type="button" class="small" aria-label=${'Edit binding ' + n} onClick=${() => { setMsg(null); setEditing(n); }}>Edit</button>`}
              ${' '}${deletable && html`<button type="button" class="small" aria-label=${'Delete binding ' + n} onClick=${() => setAsking(n)}>Delete…</button>`}`}</td>`}
      </tr>`; })}</tbody></table>
      ${(data.diagnoses || []).map((d) => html`<${Msg} kind="warn">${d}</${Msg}>`)}`}
    ${writable && data && (cur
      ? html`<${BindingForm} key=${'edit-' + editing} b=${cur} existing=${items} onDone=${done} onCancel=${() => setEditing('')} />`
      : html`<${BindingForm} key=${'new-' + tick} existing=${items} onDone=${done} />`)}
    <p class="small muted">Bindings from the config file change there; RoleBinding objects here, with <code>svc apply</code> or the API (<code>/objects/rolebindings</code>).</p>
  </div>`;
}

// Administration → Users: local users (/iam/users) with groups, state, last
// login and password change; with users.write a user is created (a
// password given, or one generated and shown once; must change it at first
// login unless unticked), disabled or enabled, its groups and display name
// changed, its password reset (a generated one shown once); with
// users.delete deleted with its tokens after a confirmation. The built-in
// admin and one's own account are not offered for disabling or deleting
// (the page says why): locking oneself out takes the node's admin socket.
import { useState, useEffect } from '../vendor/preact-htm.js';
import { call, can, errorText } from '../api.js';
import { html, ErrorMsg, Msg, markReady, fmtTime } from '../ui.js';

const words = (s) => s.split(/[\s,]+/).map((x) => x.trim()).filter(Boolean);

/** A generated password, shown once with a copy button. */
function Secret({ who, password }) {
  const [copied, setCopied] = useState(false);
  return html`<${Msg} kind="ok">The password of ${who}, shown only now: <code class="token" data-testid="new-password">${password}</code>
    <button type="button" class="small" onClick=${() => navigator.clipboard && navigator.clipboard.writeText(password).then(() => setCopied(true), () => {})}>${copied ? 'Copied' : 'Copy'}</button>
    ${' '}They choose their own at the first sign-in.</${Msg}>`;
}

function CreateUser({ onDone }) {
  const [f, setF] = useState({ name: '', displayName: '', groups: '', password: '', mustChange: true });
  const [err, setErr] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (k) => (e) => setF({ ...f, [k]: e.target.type === 'checkbox' ? e.target.checked : e.target.value });
  const submit = async (ev) => {
    ev.preventDefault();
    setErr(null);
    setBusy(true);
    try {
      const body = { name: f.name.trim(), displayName: f.displayName.trim() || undefined, groups: words(f.groups), password: f.password || undefined, mustChangePassword: f.mustChange };
      const r = await call('iam-users-create', { body });
      setF({ name: '', displayName: '', groups: '', password: '', mustChange: true });
      onDone({ text: `Created ${r.user.name}.`, secret: r.password ? { who: r.user.name, password: r.password } : null });
    } catch (e) {
      setErr(e);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="panel" onSubmit=${submit} aria-label="Create a user" style=${{ marginTop: '1rem' }}>
    <h2>Create a user</h2>
    ${err && html`<${Msg} kind="error">${errorText(err)}</${Msg}>`}
    <div class="filters">
      <div><label for="u-name">Login name</label><input id="u-name" required value=${f.name} onInput=${set('name')} autocomplete="off" /></div>
      <div><label for="u-display">Display name</label><input id="u-display" value=${f.displayName} onInput=${set('displayName')} /></div>
      <div><label for="u-groups">Groups (for role bindings)</label><input id="u-groups" value=${f.groups} onInput=${set('groups')} placeholder="family, ops" /></div>
      <div><label for="u-password">Password (empty: generated)</label><input id="u-password" type="password" value=${f.password} onInput=${set('password')} autocomplete="new-password" /></div>
      <div><label><input type="checkbox" checked=${f.mustChange} onChange=${set('mustChange')} /> Must change it at first sign-in</label></div>
      <div class="actions"><button class="primary" type="submit" disabled=${busy}>Create user</button></div>
    </div>
    <p class="small muted">A user has no role until a role binding names it or one of its groups (the “Access” tab).</p>
  </form>`;
}

function EditUser({ u, onDone, onCancel }) {
  const [f, setF] = useState({ displayName: u.displayName || '', groups: (u.groups || []).join(', ') });
  const [err, setErr] = useState(null);
  const set = (k) => (e) => setF({ ...f, [k]: e.target.value });
  const submit = async (ev) => {
    ev.preventDefault();
    try {
      await call('iam-users-update', { params: { name: u.name }, body: { displayName: f.displayName.trim(), groups: words(f.groups) } });
      onDone({ text: `Saved ${u.name}.` });
    } catch (e) { setErr(e); }
  };
  return html`<form class="panel" onSubmit=${submit} aria-label=${'Edit user ' + u.name} style=${{ marginTop: '1rem' }}>
    <h2>Edit ${u.name}</h2>
    ${err && html`<${Msg} kind="error">${errorText(err)}</${Msg}>`}
    <div class="filters">
      <div><label for="ue-display">Display name</label><input id="ue-display" value=${f.displayName} onInput=${set('displayName')} /></div>
      <div><label for="ue-groups">Groups</label><input id="ue-groups" value=${f.groups} onInput=${set('groups')} /></div>
      <div class="actions"><button class="primary" type="submit">Save</button><button type="button" onClick=${onCancel}>Cancel</button></div>
    </div>
  </form>`;
}

export function UsersPanel({ me }) {
  const [data, setData] = useState(null);
  const [err, setErr] = useState(null);
  const [tick, setTick] = useState(0);
  const [msg, setMsg] = useState(null); // {kind, text, secret}
  const [editing, setEditing] = useState('');
  const [asking, setAsking] = useState('');
  useEffect(() => { call('iam-users').then((d) => { setData(d); markReady(); }).catch(setErr); }, [tick]);
  const done = (m) => { setMsg({ kind: 'ok', ...m }); setEditing(''); setAsking(''); setTick((t) => t + 1); };
  const act = async (op, name, text) => {
    try {
      const r = await call(op, { params: { name }, body: op === 'iam-users-reset-password' ? {} : undefined });
      done({ text, secret: r && r.password ? { who: name, password: r.password } : null });
    } catch (e) { setMsg({ kind: 'error', text: errorText(e) }); setAsking(''); }
  };
  const writable = can(me, 'iam-users-create');
  const deletable = can(me, 'iam-users-delete');
  const self = me.principal.name;
  if (err) return html`<${ErrorMsg} error=${err} />`;
  if (!data) return html`<p class="muted">Loading…</p>`;
  const cur = (data.items || []).find((x) => x.name === editing);
  // Why a user cannot be disabled or deleted here, or ''.
  const guard = (x) => (x.builtinAdmin ? 'the built-in admin is managed by the node (SERVICE_ADMIN_PASSWORD, svc admin)' : x.name === self ? 'your own account' : '');
  return html`${msg && html`<${Msg} kind=${msg.kind}>${msg.text}</${Msg}>`}${msg && msg.secret && html`<${Secret} ...${msg.secret} />`}
  <div class="panel table-wrap"><table><caption class="sr-only">Local users</caption>
    <thead><tr><th>User</th><th>Groups</th><th>State</th><th class="opt">Last login</th><th class="opt">Password changed</th>${(writable || deletable) && html`<th><span class="sr-only">Actions</span></th>`}</tr></thead>
    <tbody>${(data.items || []).map((x) => html`<tr data-user=${x.name}>
      <td>${x.name}${x.displayName ? html` <span class="muted">(${x.displayName})</span>` : ''}${x.builtinAdmin ? html` <span class="badge">built-in admin</span>` : ''}</td>
      <td>${(x.groups || []).join(', ')}</td>
      <td>${x.disabled ? html`<span class="badge blocked">disabled</span>` : html`<span class="badge allowed">active</span>`}${x.mustChangePassword ? html` <span class="badge error">must change password</span>` : ''}</td>
      <td class="opt">${x.lastLoginAt ? fmtTime(x.lastLoginAt) : 'never'}</td>
      <td class="opt">${x.passwordChangedAt ? fmtTime(x.passwordChangedAt) : ''}</td>
      ${(writable || deletable) && html`<td class="actions-cell">${asking === x.name
        ? html`<span>Deletes ${x.name} and its API tokens.</span> <button type="button" class="small primary" onClick=${() => act('iam-users-delete', x.name, `Deleted ${x.name}.`)}>Delete ${x.name}</button>
          <button type="button" class="small" onClick=${() => setAsking('')}>Keep</button>`
        : html`${writable && html`<button type="button" class="small" aria-label=${'Edit user ' + x.name} onClick=${() => setEditing(x.name)}>Edit</button>
          <button type="button" class="small" aria-label=${'Reset password of ' + x.name} onClick=${() => act('iam-users-reset-password', x.name, `New password for ${x.name}.`)}>Reset password</button>`}
          ${guard(x) ? html`<span class="small muted"> (${guard(x)}: not disabled or deleted here)</span>`
            : html`${writable && (x.disabled
              ? html` <button type="button" class="small" aria-label=${'Enable ' + x.name} onClick=${() => act('iam-users-enable', x.name, `Enabled ${x.name}.`)}>Enable</button>`
              : html` <button type="button" class="small" aria-label=${'Disable ' + x.name} onClick=${() => act('iam-users-disable', x.name, `Disabled ${x.name}: its sessions and tokens stop working.`)}>Disable</button>`)}
              ${deletable && html` <button type="button" class="small" aria-label=${'Delete ' + x.name} onClick=${() => setAsking(x.name)}>Delete…</button>`}`}`}</td>`}</tr>`)}</tbody>
  </table></div>
  ${cur && writable && html`<${EditUser} key=${cur.name} u=${cur} onDone=${done} onCancel=${() => setEditing('')} />`}
  ${writable && html`<${CreateUser} onDone=${done} />`}
  ${!writable && html`<p class="small muted">Creating and changing users needs users.write (admin).</p>`}`;
}

// Administration: settings from /settings/_schema (environment-locked and
// host-only keys read-only with the reason, restart-required keys marked),
// users, tokens (the secret shown once), role bindings and diagnoses,
// the audit trail, nodes, cluster and catalogue. The tab is kept in the URL
// (admin?tab=settings&q=...).
import { useState, useEffect } from '../vendor/preact-htm.js';
import { call, can, errorText } from '../api.js';
import { html, href, ErrorMsg, Msg, useTitle, markReady, fmtTime, fmtInt } from '../ui.js';
import { BindingsPanel } from './bindings.js';
import { UsersPanel } from './users.js';

const TABS = [
  { id: 'settings', title: 'Settings', needs: 'settings-schema' },
  { id: 'users', title: 'Users', needs: 'iam-users' },
  { id: 'tokens', title: 'Tokens', needs: 'auth-tokens-list' },
  { id: 'access', title: 'Access and diagnoses', needs: 'iam-rolebindings', alt: 'info-messages' },
  { id: 'audit', title: 'Audit trail', needs: 'audit' },
  { id: 'cluster', title: 'Nodes and cluster', needs: 'cluster' },
];

/** Loads an operation's answer; reload() asks again. */
function useLoad(fn, deps) {
  const [s, setS] = useState({ data: null, err: null });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setS((p) => ({ data: p.data, err: null }));
    fn().then((data) => { if (live) { setS({ data, err: null }); markReady(); } })
      .catch((err) => { if (live) setS({ data: null, err }); });
    return () => { live = false; };
  }, [...deps, tick]);
  return { ...s, reload: () => setTick((t) => t + 1) };
}

// ---- Settings -------------------------------------------------------------

/** The value at a dotted key of the nested effective settings. */
function valueAt(obj, key) {
  let v = obj;
  for (const p of key.split('.')) {
    if (v === null || typeof v !== 'object' || !(p in v)) return undefined;
    v = v[p];
  }
  return v;
}

/** A merge patch setting one dotted key. */
function patchFor(key, value) {
  return key.split('.').reduceRight((acc, p) => ({ [p]: acc }), value);
}

/** Why a key cannot be changed through the API here, or ''. */
function lockReason(k, me, noFile) {
  if ((k.flags || []).includes('host-only')) return 'host-only: set in the config file or the environment of the node, never through the API';
  if (k.source === 'env') return `locked: set by the ${k.origin || 'environment'}; remove the variable to manage it here`;
  if (noFile) return 'read-only: the node has no settingsFile to keep changes in';
  const op = k.scope === 'node' ? 'node-config-patch' : 'settings-patch';
  if (!can(me, op)) return `read-only for you: changing it needs ${op === 'settings-patch' ? 'settings.write' : 'nodeconfig.write'}`;
  return '';
}

const isText = (t) => t === 'list' || t === 'map';
function show(v, type) {
  if (v === undefined || v === null) return '';
  if (isText(type)) return JSON.stringify(v, null, 2);
  if (Array.isArray(v)) return v.join(', ');
  return String(v);
}
function parse(text, type) {
  const s = text.trim();
  if (isText(type)) return s === '' ? null : JSON.parse(s);
  if (type === 'int') {
    if (!/^-?\d+$/.test(s)) throw new Error('a whole number is expected');
    return parseInt(s, 10);
  }
  if (type === 'bool') return s === 'true';
  if (type.endsWith('[]')) return s === '' ? [] : s.split(',').map((x) => x.trim()).filter(Boolean);
  return s;
}

function SettingRow({ k, value, me, noFile, onSaved }) {
  const id = 'set-' + k.key.replace(/[^a-zA-Z0-9]/g, '-');
  const [text, setText] = useState(show(value, k.type));
  const [msg, setMsg] = useState(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => setText(show(value, k.type)), [JSON.stringify(value)]);
  const lock = lockReason(k, me, noFile);
  const restart = (k.flags || []).includes('restart');
  const writeOnly = (k.flags || []).includes('write-only');
  const changed = text !== show(value, k.type);
  const save = async (reset) => {
    setBusy(true);
    setMsg(null);
    try {
      const v = reset ? null : parse(text, k.type);
      await call(k.scope === 'node' ? 'node-config-patch' : 'settings-patch', { body: patchFor(k.key, v) });
      setMsg({ kind: 'ok', text: (reset ? 'Override removed.' : 'Saved.') + (restart ? ' Takes effect at the next start of the node.' : '') });
      onSaved();
    } catch (e) {
      setMsg({ kind: 'error', text: errorText(e) });
    } finally {
      setBusy(false);
    }
  };
  let input;
  if (k.type === 'bool') {
    input = html`<select id=${id} disabled=${!!lock} value=${text} onChange=${(e) => setText(e.target.value)}><option value="true">true</option><option value="false">false</option></select>`;
  } else if (k.allowed && k.allowed.length && !k.type.endsWith('[]')) {
    input = html`<select id=${id} disabled=${!!lock} value=${text} onChange=${(e) => setText(e.target.value)}>
      ${!k.allowed.includes(text) && html`<option value=${text}>${text || '(empty)'}</option>`}
      ${k.allowed.map((a) => html`<option value=${a}>${a}</option>`)}</select>`;
  } else if (isText(k.type)) {
    input = html`<textarea id=${id} class="mono" rows="3" readonly=${!!lock} value=${text} onInput=${(e) => setText(e.target.value)}></textarea>`;
  } else {
    input = html`<input id=${id} class="mono" readonly=${!!lock} value=${text} placeholder=${writeOnly ? '(write-only: not shown)' : ''} onInput=${(e) => setText(e.target.value)} />`;
  }
  return html`<tr data-key=${k.key}>
    <td><label for=${id} class="mono">${k.key}</label>
      <div class="small muted">${k.description}</div>
      <div class="small">
        <span class="badge">${k.scope}</span> <span class="badge">${k.type}</span>
        ${restart && html` <span class="badge error" title="changing it needs a restart of the node">restart required</span>`}
        ${k.source && k.source !== 'default' && html` <span class="badge" title=${k.origin || ''}>from ${k.source}</span>`}
        ${k.range && html` <span class="muted">range ${k.range}</span>`}
        ${k.env && html` <span class="muted">env <code>${k.env}</code></span>`}
      </div></td>
    <td>${input}
      ${lock && html`<div class="small muted lock" id=${id + '-lock'}>${lock}</div>`}
      ${msg && html`<${Msg} kind=${msg.kind}>${msg.text}</${Msg}>`}</td>
    <td class="actions-cell">${!lock && html`<button type="button" class="small primary" disabled=${busy || !changed} onClick=${() => save(false)} aria-label=${'Save ' + k.key}>Save</button>
      ${k.scope === 'cluster' && html` <button type="button" class="small" disabled=${busy} onClick=${() => save(true)} aria-label=${'Reset ' + k.key} title="Removes the value set through the API">Reset</button>`}`}</td>
  </tr>`;
}

function SettingsTab({ me, route }) {
  const q = route.query.get('q') || '';
  const schema = useLoad(() => call('settings-schema'), []);
  const values = useLoad(() => call('settings-get'), []);
  const [filter, setFilter] = useState(q);
  if (schema.err || values.err) return html`<${ErrorMsg} error=${schema.err || values.err} />`;
  if (!schema.data || !values.data) return html`<p class="muted">Loading…</p>`;
  const f = filter.trim().toLowerCase();
  const keys = schema.data.filter((k) => !f || k.key.toLowerCase().includes(f) || (k.description || '').toLowerCase().includes(f));
  const locked = schema.data.filter((k) => k.source === 'env').length;
  const noFile = !valueAt(values.data, 'settingsFile');
  return html`<div class="panel">
    ${noFile && html`<${Msg} kind="warn">Settings are read-only on this node: no <code>settingsFile</code> is configured to keep changes made here. Set <code>settingsFile</code> in the config file (or <code>SERVICE_SETTINGSFILE</code>) and restart the node.</${Msg}>`}
    <div class="row"><label for="set-filter">Find a key</label>
      <input id="set-filter" type="search" value=${filter} placeholder="cache, listeners.api, …" onInput=${(e) => {
        setFilter(e.target.value);
        history.replaceState(null, '', href('admin', { tab: 'settings', q: e.target.value }));
      }} />
      <span class="muted small">${fmtInt(keys.length)} of ${fmtInt(schema.data.length)} keys${locked ? `, ${locked} set by the environment` : ''}</span></div>
    <p class="small muted">Cluster keys apply to every node (<code>PATCH /settings</code>); node keys to the node serving this page (<code>PATCH /node/config</code>). Keys marked “restart required” take effect at the next start.</p>
    <div class="table-wrap"><table class="settings"><caption class="sr-only">Settings</caption>
      <thead><tr><th>Key</th><th>Value</th><th><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${keys.slice(0, 200).map((k) => html`<${SettingRow} key=${k.key} k=${k} value=${valueAt(values.data, k.key)} me=${me} noFile=${noFile} onSaved=${values.reload} />`)}</tbody>
    </table></div>
    ${keys.length > 200 && html`<p class="muted small">Showing 200 of ${keys.length}: narrow the search.</p>`}
  </div>`;
}

// ---- Users -----------------------------------------------------------------

function UsersTab({ me }) {
  return html`<${UsersPanel} me=${me} />`;
}

// ---- Tokens ----------------------------------------------------------------

function TokenForm({ onCreated }) {
  const [f, setF] = useState({ description: '', expiresIn: '', scopes: '' });
  const [err, setErr] = useState(null);
  const [created, setCreated] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (k) => (e) => setF({ ...f, [k]: e.target.value });
  const submit = async (ev) => {
    ev.preventDefault();
    setBusy(true);
    setErr(null);
    setCreated(null);
    try {
      const body = { description: f.description.trim() };
      if (f.expiresIn.trim()) body.expiresIn = f.expiresIn.trim();
      const scopes = f.scopes.split(/[\s,]+/).filter(Boolean);
      if (scopes.length) body.scopes = scopes;
      const t = await call('auth-tokens-create', { body });
      setCreated(t);
      setF({ description: '', expiresIn: '', scopes: '' });
      onCreated();
    } catch (e) {
      setErr(e);
    } finally {
      setBusy(false);
    }
  };
  const copy = () => navigator.clipboard && navigator.clipboard.writeText(created.token).catch(() => {});
  return html`<form class="panel" onSubmit=${submit} aria-label="Create a token">
    <h2>Create a token</h2>
    <${ErrorMsg} error=${err} />
    ${created && html`<div class="msg ok secret" role="status"><p>Token <code>${created.id}</code> created. Copy it now: it is shown only once.</p>
      <p><code class="mono token" data-testid="new-token">${created.token}</code> <button type="button" class="small" onClick=${copy}>Copy</button></p>
      <p class="small">Use it as <code>Authorization: Bearer …</code> or <code>svc --token</code>.</p></div>`}
    <div class="filters">
      <div><label for="t-desc">Description</label><input id="t-desc" value=${f.description} onInput=${set('description')} placeholder="CI deploys" /></div>
      <div><label for="t-exp">Expires in (e.g. 720h; empty: the server's maximum)</label><input id="t-exp" value=${f.expiresIn} onInput=${set('expiresIn')} /></div>
      <div><label for="t-scopes">Scopes (roles, comma-separated; empty: all of yours)</label><input id="t-scopes" value=${f.scopes} onInput=${set('scopes')} placeholder="viewer, zone-admin@zone:lab" /></div>
      <div class="actions"><button class="primary" type="submit" disabled=${busy}>Create token</button></div>
    </div>
  </form>`;
}

function TokensTab({ me }) {
  const all = !!(me.permissions.tokens && me.permissions.tokens.includes('read'));
  const t = useLoad(() => call('auth-tokens-list', { query: { all: all ? 'true' : '' } }), []);
  const [err, setErr] = useState(null);
  const revoke = async (id) => {
    setErr(null);
    try { await call('auth-tokens-delete', { params: { id } }); t.reload(); } catch (e) { setErr(e); }
  };
  return html`<${TokenForm} onCreated=${t.reload} />
  <div class="panel table-wrap" style=${{ marginTop: '1rem' }}><h2>${all ? 'Every token' : 'Your tokens'}</h2>
    <${ErrorMsg} error=${t.err || err} />
    ${!t.data ? html`<p class="muted">Loading…</p>` : html`<table><caption class="sr-only">Tokens</caption>
      <thead><tr><th>Id</th><th>Description</th><th>Owner</th><th>Scopes</th><th class="opt">Created</th><th>Expires</th><th class="opt">Last used</th><th><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${(t.data.items || []).length === 0 && html`<tr><td colspan="8" class="muted">No tokens.</td></tr>`}
      ${(t.data.items || []).map((x) => html`<tr data-token=${x.id}>
        <td class="mono">${x.id}</td><td>${x.description || ''}</td><td>${x.owner.kind} ${x.owner.name}</td>
        <td>${(x.scopes || []).join(', ') || html`<span class="muted">all of the owner's</span>`}</td>
        <td class="opt">${fmtTime(x.createdAt)}</td><td>${x.expiresAt ? fmtTime(x.expiresAt) : 'never'}</td>
        <td class="opt">${x.lastUsedAt ? `${fmtTime(x.lastUsedAt)} ${x.lastUsedIP || ''}` : 'never'}</td>
        <td><button type="button" class="small" onClick=${() => revoke(x.id)} aria-label=${'Revoke token ' + x.id}>Revoke</button></td></tr>`)}</tbody></table>`}
  </div>`;
}

// ---- Access and diagnoses ----------------------------------------------------

function AccessTab({ me }) {
  const msgs = useLoad(() => (can(me, 'info-messages') ? call('info-messages') : Promise.resolve(null)), []);
  return html`${can(me, 'info-messages') && html`<div class="panel" style=${{ marginBottom: '1rem' }}><h2>Diagnoses</h2>
    <${ErrorMsg} error=${msgs.err} />
    ${msgs.data && ((msgs.data.items || []).length === 0 ? html`<p class="muted">Nothing to report: no ignored binding, broken identity provider or configuration problem.</p>`
      : html`<ul class="diagnoses">${msgs.data.items.map((m) => html`<li data-reason=${m.reason}><span class=${'badge ' + (m.severity === 'error' ? 'blocked' : m.severity === 'warning' ? 'error' : 'rewritten')}>${m.severity}</span>
        ${' '}${m.message}${m.object ? html` <span class="muted">(${m.object})</span>` : ''}${m.hint ? html`<div class="small muted">${m.hint}</div>` : ''}
        <div class="small muted">${m.source} · ${m.reason} · node ${m.node}</div></li>`)}</ul>`)}
  </div>`}
  ${can(me, 'iam-rolebindings') && html`<${BindingsPanel} me=${me} />`}`;
}

// ---- Audit -------------------------------------------------------------------

function AuditTab({ route }) {
  const actor = route.query.get('actor') || '';
  const kind = route.query.get('kind') || '';
  const cont = route.query.get('continue') || '';
  const a = useLoad(() => call('audit', { query: { order: 'desc', limit: 50, actor, kind, continue: cont } }), [actor, kind, cont]);
  const go = (q) => history.pushState(null, '', href('admin', { tab: 'audit', actor, kind, ...q })) || window.dispatchEvent(new Event('svc:navigate'));
  const submit = (ev) => {
    ev.preventDefault();
    const fd = new FormData(ev.target);
    go({ actor: fd.get('actor'), kind: fd.get('kind'), continue: '' });
  };
  return html`<form class="panel filters" onSubmit=${submit} aria-label="Audit filters" style=${{ marginBottom: '1rem' }}>
    <div><label for="a-actor">Actor</label><input id="a-actor" name="actor" value=${actor} /></div>
    <div><label for="a-kind">Kind</label><input id="a-kind" name="kind" value=${kind} placeholder="Policy, BlockList, Settings…" /></div>
    <div class="actions"><button type="submit" class="primary">Filter</button></div>
  </form>
  <div class="panel table-wrap">
    <${ErrorMsg} error=${a.err} />
    ${!a.data ? html`<p class="muted">Loading…</p>` : html`<table><caption class="sr-only">Audit trail, newest first</caption>
      <thead><tr><th>Time</th><th>Actor</th><th>Action</th><th>Object</th><th>Result</th><th class="opt">Request</th></tr></thead>
      <tbody>${(a.data.items || []).length === 0 && html`<tr><td colspan="6" class="muted">No entries.</td></tr>`}
      ${(a.data.items || []).map((e) => html`<tr data-seq=${e.seq}><td>${fmtTime(e.time)}</td><td>${e.actor.kind} ${e.actor.name}</td><td>${e.action}</td>
        <td>${e.kind || ''} ${e.namespace ? e.namespace + '/' : ''}${e.name || ''}</td>
        <td><span class=${'badge ' + (e.status < 400 ? 'allowed' : 'blocked')}>${e.status}</span> ${e.decision !== 'allow' ? e.decision : ''} ${e.result || ''}</td>
        <td class="opt mono small">${e.method} ${e.path}</td></tr>`)}</tbody></table>
      <div class="row">${cont && html`<button type="button" class="small" onClick=${() => go({ continue: '' })}>Newest</button>`}<span class="spacer"></span>
        ${a.data.continue ? html`<button type="button" class="small" onClick=${() => go({ continue: a.data.continue })}>Older</button>` : html`<span class="muted small">End of the trail</span>`}</div>`}
  </div>`;
}

// ---- Nodes, cluster, catalogue --------------------------------------------------

function ClusterTab({ me }) {
  const c = useLoad(() => call('cluster'), []);
  const n = useLoad(() => call('nodes'), []);
  const cat = useLoad(() => (can(me, 'catalogue-info') ? call('catalogue-info') : Promise.resolve(null)), []);
  const dl = (pairs) => html`<dl class="facts">${pairs.filter((p) => p[1] !== undefined && p[1] !== '').map(([k, v]) => html`<dt>${k}</dt><dd>${v}</dd>`)}</dl>`;
  return html`<div class="grid">
    <div class="panel"><h2>Cluster</h2><${ErrorMsg} error=${c.err} />
      ${c.data && dl([['Store', c.data.driver === 'kube' ? 'Kubernetes' : 'file (SQLite)'], ['Cluster id', c.data.clusterID], ['This node', c.data.node],
        ['Nodes', String(c.data.nodes)], ['Leader', c.data.leader], ['Epoch', String(c.data.epoch)], ['Read-only', c.data.readOnly ? 'yes' : 'no']])}</div>
    <div class="panel"><h2>Catalogue</h2><${ErrorMsg} error=${cat.err} />
      ${cat.data && dl([['Version', cat.data.version], ['Origin', cat.data.origin], ['Services', fmtInt(cat.data.services)], ['Categories', fmtInt(cat.data.categories)],
        ['Safe-search engines', fmtInt(cat.data.safeSearchEngines)], ['License', cat.data.license], ['Digest', html`<code class="small">${(cat.data.digest || '').slice(0, 16)}…</code>`],
        ['Last refresh', cat.data.refresh ? `${cat.data.refresh.lastSuccess ? fmtTime(cat.data.refresh.lastSuccess) : 'never'}${cat.data.refresh.lastError ? ' · error: ' + cat.data.refresh.lastError : ''}` : 'not refreshed (embedded)']])}
      ${cat.data && (cat.data.sources || []).length > 0 && html`<ul class="small">${cat.data.sources.map((s) => html`<li>${s.name} (${s.id}): ${s.loaded ? `${s.services} services` : 'not loaded'}${s.shadowed ? `, ${s.shadowed} shadowed` : ''}</li>`)}</ul>`}</div>
  </div>
  <div class="panel table-wrap" style=${{ marginTop: '1rem' }}><h2>Nodes</h2><${ErrorMsg} error=${n.err} />
    ${n.data && html`<table><caption class="sr-only">Nodes</caption><thead><tr><th>Node</th><th>Address</th><th>Ready</th><th>Leader</th><th>Version</th></tr></thead>
      <tbody>${(n.data.items || []).map((x) => html`<tr data-node=${x.name}><td>${x.name}</td><td class="mono">${x.address || ''}</td>
        <td>${x.ready === undefined ? 'unknown' : x.ready ? 'yes' : 'no'}</td><td>${x.leader ? 'yes' : ''}</td><td>${x.version || ''}</td></tr>`)}</tbody></table>`}</div>`;
}

const BODIES = { settings: SettingsTab, users: UsersTab, tokens: TokensTab, access: AccessTab, audit: AuditTab, cluster: ClusterTab };

export function AdminPage({ me, route, title }) {
  useTitle(title);
  const tabs = TABS.filter((t) => can(me, t.needs) || (t.alt && can(me, t.alt)));
  const asked = route.query.get('tab') || '';
  const tab = tabs.find((t) => t.id === asked) || tabs[0];
  if (!tab) return html`<h1>${title}</h1><${Msg} kind="warn">Your account may not see any part of the administration.</${Msg}>`;
  const Body = BODIES[tab.id];
  return html`<h1>${title}</h1>
    <nav class="tabs" aria-label="Administration"><ul>${tabs.map((t) => html`<li><a href=${href('admin', { tab: t.id })} aria-current=${t.id === tab.id ? 'page' : undefined}>${t.title}</a></li>`)}</ul></nav>
    <${Body} key=${tab.id} me=${me} route=${route} />`;
}

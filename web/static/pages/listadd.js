// Lists, writing: add a list from a URL and watch its first fetch (entries,
// invalid, unsupported, or the fetch error), and edit a source's excludes.
// Both write the BlockList object (PUT, If-Match of the version read).
import { useState, useEffect } from '../vendor/preact-htm.js';
import { call, errorText } from '../api.js';
import { html, fmtInt, Msg } from '../ui.js';

const NAME_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** The first fetch's outcome of source `src`, or null while it runs. */
function fetched(obj, src) {
  const ss = ((obj.status && obj.status.sources) || []).find((x) => x.name === src);
  if (!ss) return null;
  if (ss.error) return { kind: 'error', text: `The fetch failed: ${ss.error}` };
  if (!ss.lastFetched && !ss.digest) return null;
  const st = obj.status || {};
  return { kind: 'ok', text: `Fetched: ${fmtInt(ss.entries)} entries, ${fmtInt(ss.invalid || st.invalid)} invalid, ${fmtInt(st.unsupported)} unsupported${ss.digest ? ', digest ' + ss.digest.slice(0, 12) : ''}.` };
}

export function AddListForm({ onAdded }) {
  const [f, setF] = useState({ namespace: 'default', name: '', url: '', mode: 'block', global: true });
  const [msg, setMsg] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (k) => (e) => setF({ ...f, [k]: e.target.type === 'checkbox' ? e.target.checked : e.target.value });
  const submit = async (ev) => {
    ev.preventDefault();
    setMsg(null);
    const name = f.name.trim();
    if (!NAME_RE.test(name)) { setMsg({ kind: 'error', text: 'Name: lower-case letters, digits and “-”, e.g. ads-main.' }); return; }
    setBusy(true);
    try {
      const spec = { mode: f.mode, sources: [{ name: 'main', url: f.url.trim() }] };
      if (!f.global) spec.global = false;
      await call('put-blocklist', { params: { namespace: f.namespace, name }, body: {
        apiVersion: 'service.io/v1alpha1', kind: 'BlockList', metadata: { namespace: f.namespace, name }, spec } });
      setMsg({ kind: 'info', text: `${f.namespace}/${name} created; fetching ${f.url.trim()}…` });
      onAdded(`${f.namespace}/${name}`);
      // The first fetch: its result is in the status; bounded wait.
      for (let i = 0; i < 60; i++) {
        await new Promise((r) => setTimeout(r, 1000));
        const obj = await call('get-blocklist', { params: { namespace: f.namespace, name } });
        const out = fetched(obj, 'main');
        if (out) { setMsg({ kind: out.kind, text: `${f.namespace}/${name}: ${out.text}` }); onAdded(`${f.namespace}/${name}`); return; }
      }
      setMsg({ kind: 'warn', text: `${f.namespace}/${name}: no fetch result within a minute; the lists table shows it when it comes.` });
    } catch (e) {
      setMsg({ kind: 'error', text: errorText(e) });
    } finally {
      setBusy(false);
    }
  };
  return html`<details class="panel add-list" open=${!!msg}><summary>Add a list from a URL</summary>
    <form onSubmit=${submit} aria-label="Add a list from a URL">
      ${msg && html`<${Msg} kind=${msg.kind}>${msg.text}</${Msg}>`}
      <div class="filters">
        <div><label for="al-url">URL (hosts file, AdGuard/ABP rules, or one domain a line)</label><input id="al-url" type="url" required value=${f.url} onInput=${set('url')} placeholder="https://example.org/ads.txt" /></div>
        <div><label for="al-name">Name</label><input id="al-name" required value=${f.name} onInput=${set('name')} placeholder="ads-main" /></div>
        <div><label for="al-ns">Namespace</label><input id="al-ns" value=${f.namespace} onInput=${set('namespace')} /></div>
        <div><label for="al-mode">Mode</label><select id="al-mode" value=${f.mode} onChange=${set('mode')}><option value="block">block</option><option value="allow">allow</option></select></div>
        <div><label><input type="checkbox" checked=${f.global} onChange=${set('global')} /> Global (every client, unless a policy opts out)</label></div>
        <div class="actions"><button class="primary" type="submit" disabled=${busy}>Add and fetch</button></div>
      </div>
    </form></details>`;
}

/** The excludes of one source: names or rules taken out of its rules. */
export function ExcludesForm({ list, source, onSaved }) {
  const [ns, name] = list.split('/');
  const [text, setText] = useState(null);
  const [msg, setMsg] = useState(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    call('get-blocklist', { params: { namespace: ns, name } }).then((o) => {
      const s = ((o.spec && o.spec.sources) || []).find((x) => x.name === source);
      setText(((s && s.exclude) || []).join('\n'));
    }).catch((e) => setMsg({ kind: 'error', text: errorText(e) }));
  }, [list, source]);
  const save = async (ev) => {
    ev.preventDefault();
    setBusy(true);
    setMsg(null);
    try {
      const obj = await call('get-blocklist', { params: { namespace: ns, name } });
      const rv = obj.metadata && obj.metadata.resourceVersion;
      const s = ((obj.spec && obj.spec.sources) || []).find((x) => x.name === source);
      if (!s) throw new Error(`source ${source} is gone from ${list}`);
      const ex = text.split('\n').map((x) => x.trim()).filter(Boolean);
      if (ex.length) s.exclude = ex; else delete s.exclude;
      await call('put-blocklist', { params: { namespace: ns, name }, body: obj, headers: rv ? { 'If-Match': rv } : {} });
      setMsg({ kind: 'ok', text: `Excludes of ${source} saved (${ex.length}).` });
      onSaved();
    } catch (e) {
      setMsg({ kind: 'error', text: errorText(e) });
    } finally {
      setBusy(false);
    }
  };
  if (text === null && !msg) return null;
  return html`<form class="panel" onSubmit=${save} aria-label=${'Excludes of ' + source} style=${{ marginBottom: '1rem' }}>
    <h2>Excludes of ${source}</h2>
    ${msg && html`<${Msg} kind=${msg.kind}>${msg.text}</${Msg}>`}
    <label for="ex-text">Names or rules taken out of this source, one per line (an exclude that matches nothing is reported as stale)</label>
    <textarea id="ex-text" class="mono" rows="4" value=${text || ''} onInput=${(e) => setText(e.target.value)} placeholder="||keep.example^"></textarea>
    <div class="actions"><button class="primary" type="submit" disabled=${busy}>Save excludes</button></div>
  </form>`;
}

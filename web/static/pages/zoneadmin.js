// Zones, managing: create a zone (a DNSZone object), delete one with its
// record sets (after a dry run says how many), import a BIND zone file into
// a record set and download the zone's export.
import { useState } from '../vendor/preact-htm.js';
import { call, url, errorText } from '../api.js';
import { html, Msg } from '../ui.js';

const NAME_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export function CreateZoneForm({ zones, onCreated }) {
  const [f, setF] = useState({ name: '', zoneName: '' });
  const [msg, setMsg] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (k) => (e) => setF({ ...f, [k]: e.target.value });
  const submit = async (ev) => {
    ev.preventDefault();
    setMsg(null);
    const zoneName = f.zoneName.trim().replace(/\.?$/, '.');
    const name = f.name.trim() || zoneName.slice(0, -1).replace(/\./g, '-');
    if (!NAME_RE.test(name)) { setMsg({ kind: 'error', text: `Object name ${name}: lower-case letters, digits and “-”, e.g. example-com.` }); return; }
    // PUT replaces: refuse a name that exists rather than overwrite it.
    if (zones.some((z) => z.metadata.name === name)) { setMsg({ kind: 'error', text: `A zone object named ${name} exists; choose another name.` }); return; }
    setBusy(true);
    try {
      await call('put-dnszone', { params: { name }, body: { apiVersion: 'service.io/v1alpha1', kind: 'DNSZone', metadata: { name }, spec: { zoneName } } });
      setMsg({ kind: 'ok', text: `Zone ${zoneName} created as ${name}.` });
      setF({ name: '', zoneName: '' });
      onCreated(name);
    } catch (e) {
      setMsg({ kind: 'error', text: errorText(e) });
    } finally {
      setBusy(false);
    }
  };
  return html`<details class="panel add-zone" open=${!!msg}><summary>Create a zone</summary>
    <form onSubmit=${submit} aria-label="Create a zone">
      ${msg && html`<${Msg} kind=${msg.kind}>${msg.text}</${Msg}>`}
      <div class="filters">
        <div><label for="z-zonename">Zone (domain)</label><input id="z-zonename" required value=${f.zoneName} onInput=${set('zoneName')} placeholder="lab.example." /></div>
        <div><label for="z-name">Object name (empty: from the domain)</label><input id="z-name" value=${f.name} onInput=${set('name')} placeholder="lab-example" /></div>
        <div class="actions"><button class="primary" type="submit" disabled=${busy}>Create zone</button></div>
      </div>
    </form></details>`;
}

export function ImportForm({ zone, onDone }) {
  const [text, setText] = useState('');
  const [msg, setMsg] = useState(null);
  const [busy, setBusy] = useState(false);
  const pick = async (e) => {
    const file = e.target.files && e.target.files[0];
    if (file) setText(await file.text());
  };
  const submit = async (ev) => {
    ev.preventDefault();
    setBusy(true);
    setMsg(null);
    try {
      const r = await call('zone-import', { params: { zone }, raw: text, contentType: 'text/dns' });
      setMsg({ kind: 'ok', text: `Imported into ${r.namespace}/${r.name} (${r.result}).` });
      onDone();
    } catch (e) {
      setMsg({ kind: 'error', text: errorText(e) });
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="panel" onSubmit=${submit} aria-label="Import a zone file" style=${{ marginBottom: '1rem' }}>
    <h2>Import a BIND zone file</h2>
    ${msg && html`<${Msg} kind=${msg.kind}>${msg.text}</${Msg}>`}
    <p class="small muted">The records go into the record set <code>import-${zone}</code> (replacing what an earlier import put there); names are relative to the zone unless they end with a dot.</p>
    <div class="filters">
      <div><label for="imp-file">Zone file</label><input id="imp-file" type="file" accept=".zone,.db,.txt,text/dns,text/plain" onChange=${pick} /></div>
      <div><label for="imp-text">or paste it</label><textarea id="imp-text" class="mono" rows="4" value=${text} onInput=${(e) => setText(e.target.value)} placeholder="www 300 IN A 192.0.2.1"></textarea></div>
      <div class="actions"><button class="primary" type="submit" disabled=${busy || !text.trim()}>Import</button>
        <a class="button" href=${url('zone-export', { zone })} download=${zone + '.zone'}>Download the zone file</a></div>
    </div>
  </form>`;
}

export function DeleteZone({ zone, onDeleted }) {
  const [dry, setDry] = useState(null);
  const [msg, setMsg] = useState(null);
  const ask = async () => {
    setMsg(null);
    try { setDry(await call('zone-delete', { params: { zone }, query: { dryRun: 'true' } })); } catch (e) { setMsg({ kind: 'error', text: errorText(e) }); }
  };
  const del = async () => {
    try {
      const r = await call('zone-delete', { params: { zone } });
      onDeleted(`Zone ${zone} deleted with ${r.recordSets} record sets (${r.records} records).`);
    } catch (e) {
      setDry(null);
      setMsg({ kind: 'error', text: errorText(e) });
    }
  };
  return html`<div class="row delete-zone">
    ${msg && html`<${Msg} kind=${msg.kind}>${msg.text}</${Msg}>`}
    ${!dry ? html`<button type="button" class="small" onClick=${ask}>Delete zone…</button>`
      : html`<span>Deletes ${zone} and ${dry.recordSets} record sets (${dry.records} records).</span>
        <button type="button" class="small primary" onClick=${del}>Delete ${zone}</button>
        <button type="button" class="small" onClick=${() => setDry(null)}>Keep it</button>`}
  </div>`;
}

// Zones and records: the zones with serial and record counts, a zone's
// records as its exported zone file, and adding or removing records through
// /zones/{zone}/records, with the API's validation messages. The zone is
// kept in the URL.
import { useState, useEffect } from '../vendor/preact-htm.js';
import { call, can, errorText } from '../api.js';
import { html, href, navigate, ErrorMsg, Msg, useTitle, markReady } from '../ui.js';
import { CreateZoneForm, ImportForm, DeleteZone } from './zoneadmin.js';

const TYPES = ['A', 'AAAA', 'CNAME', 'TXT', 'MX', 'SRV', 'NS', 'PTR', 'CAA', 'HTTPS', 'SVCB'];

function readyOf(z) {
  const c = ((z.status && z.status.conditions) || []).find((x) => x.type === 'Ready');
  return c ? (c.status === 'True' ? 'ready' : c.reason || 'not ready') : '…';
}

function managerOf(o) {
  const a = (o.metadata && o.metadata.annotations) || {};
  const l = (o.metadata && o.metadata.labels) || {};
  return a['service.io/managed-by'] || l['app.kubernetes.io/managed-by'] || 'kubernetes';
}

function RecordForm({ zone, onDone }) {
  const [f, setF] = useState({ name: '', type: 'A', ttl: '', targets: '' });
  const [msg, setMsg] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (k) => (e) => setF({ ...f, [k]: e.target.value });
  const targets = () => f.targets.split('\n').map((x) => x.trim()).filter(Boolean);
  const add = async (ev) => {
    ev.preventDefault();
    setBusy(true);
    setMsg(null);
    try {
      const body = { name: f.name.trim() || '@', type: f.type, targets: targets() };
      if (f.ttl) body.ttl = parseInt(f.ttl, 10);
      const r = await call('zone-records-add', { params: { zone }, body });
      setMsg({ kind: 'ok', text: `${body.name} ${body.type} added (${r.namespace}/${r.name} ${r.result}).` });
      onDone();
    } catch (e) {
      setMsg({ kind: 'error', text: errorText(e) });
    } finally {
      setBusy(false);
    }
  };
  const remove = async () => {
    setBusy(true);
    setMsg(null);
    try {
      const name = f.name.trim() || '@';
      const ts = targets();
      const r = await call('zone-records-remove', { params: { zone }, query: { name, type: f.type, target: ts.length === 1 ? ts[0] : '' } });
      setMsg({ kind: 'ok', text: `${name} ${f.type}${ts.length === 1 ? ' ' + ts[0] : ''} removed (${r.namespace}/${r.name} ${r.result}).` });
      onDone();
    } catch (e) {
      setMsg({ kind: 'error', text: errorText(e) });
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="panel" onSubmit=${add} aria-label="Add or remove records" style=${{ marginBottom: '1rem' }}>
    <h2>Add or remove records</h2>
    ${msg && html`<${Msg} kind=${msg.kind}>${msg.text}</${Msg}>`}
    <div class="filters">
      <div><label for="r-name">Name (relative, @ for the apex)</label><input id="r-name" value=${f.name} onInput=${set('name')} placeholder="www" /></div>
      <div><label for="r-type">Type</label><select id="r-type" value=${f.type} onChange=${set('type')}>${TYPES.map((t) => html`<option value=${t}>${t}</option>`)}</select></div>
      <div><label for="r-ttl">TTL (seconds, optional)</label><input id="r-ttl" inputmode="numeric" value=${f.ttl} onInput=${set('ttl')} /></div>
      <div><label for="r-targets">Values, one per line</label><textarea id="r-targets" rows="2" value=${f.targets} onInput=${set('targets')} placeholder="192.0.2.10"></textarea></div>
      <div class="actions"><button class="primary" type="submit" disabled=${busy}>Add</button>
        <button type="button" disabled=${busy} onClick=${remove} title="Removes the name and type, or only the one value given">Remove</button></div>
    </div>
  </form>`;
}

export function ZonesPage({ me, route, title }) {
  useTitle(title);
  const zone = route.query.get('zone') || '';
  const [zones, setZones] = useState(null);
  const [text, setText] = useState(null);
  const [err, setErr] = useState(null);
  const [zerr, setZerr] = useState(null);
  const [tick, setTick] = useState(0);
  const [note, setNote] = useState('');

  useEffect(() => {
    call('list-dnszones').then((b) => setZones(b.items || [])).catch(setErr);
  }, [tick]);
  useEffect(() => {
    setText(null);
    setZerr(null);
    if (zone) call('zone-export', { params: { zone }, text: true }).then(setText).catch(setZerr);
  }, [zone, tick]);
  useEffect(() => { if (zones) markReady(); }, [!!zones]);

  if (err) return html`<h1>${title}</h1><${ErrorMsg} error=${err} />`;
  if (!zones) return html`<h1>${title}</h1><p class="muted">Loading…</p>`;
  const z = zones.find((x) => x.metadata.name === zone);
  const owner = z ? managerOf(z) : '';
  const foreign = owner && owner !== 'api';
  return html`<h1>${title}</h1>
    ${note && html`<${Msg} kind="ok">${note}</${Msg}>`}
    ${can(me, 'put-dnszone') && html`<${CreateZoneForm} zones=${zones} onCreated=${(n) => { setTick(tick + 1); navigate(href('zones', { zone: n })); }} />`}
    <div class="panel table-wrap" style=${{ marginBottom: '1rem' }}>
      <table><caption class="sr-only">Zones</caption>
        <thead><tr><th>Zone</th><th>Name</th><th class="num">Serial</th><th class="num">Records</th><th>State</th><th class="opt">Managed by</th></tr></thead>
        <tbody>
          ${zones.length === 0 && html`<tr><td colspan="6" class="muted">No zones yet (svc zones --help).</td></tr>`}
          ${zones.map((x) => html`<tr data-zone=${x.metadata.name}>
            <td><a href=${href('zones', { zone: x.metadata.name })} aria-current=${x.metadata.name === zone ? 'true' : undefined}>${x.metadata.name}</a></td>
            <td>${(x.spec && x.spec.zoneName) || ''}</td>
            <td class="num">${(x.status && x.status.serial) || ''}</td>
            <td class="num">${(x.status && x.status.records) ?? ''}</td>
            <td>${readyOf(x)}</td>
            <td class="opt">${managerOf(x)}</td></tr>`)}
        </tbody>
      </table>
    </div>
    ${zone && html`<section aria-label=${'Zone ' + zone}>
      ${foreign && html`<${Msg} kind="info">The zone object is managed by ${owner}: the API refuses to change or delete it (naming ${owner}); change it where ${owner} keeps it. Records added here go into record sets the API manages.</${Msg}>`}
      ${z && can(me, 'zone-delete') && html`<${DeleteZone} key=${zone} zone=${zone} onDeleted=${(t) => { setNote(t); setTick(tick + 1); navigate('zones'); }} />`}
      ${can(me, 'zone-records-add') && html`<${RecordForm} zone=${zone} onDone=${() => setTick(tick + 1)} />`}
      ${can(me, 'zone-import') && html`<${ImportForm} key=${zone} zone=${zone} onDone=${() => setTick(tick + 1)} />`}
      <div class="panel"><h2>Records of ${zone}</h2>
        <${ErrorMsg} error=${zerr} />
        ${text === null && !zerr ? html`<p class="muted">Loading…</p>` : html`<pre class="zonefile mono" data-testid="zonefile" tabindex="0">${text}</pre>`}
      </div>
    </section>`}`;
}

// The Policy editor: priority, client groups, lists (block, allow, global
// lists and excluded global lists), block mode, safe search, rewrites,
// upstream group and the schedule on an editable week grid. Saved with PUT
// and If-Match of the version read; the API's write-time refusal is shown
// at the field it names (spec.<field>), else above the form.
import { useState } from '../vendor/preact-htm.js';
import { call, errorText } from '../api.js';
import { html, Msg } from '../ui.js';
import { DAYS, WeekGrid } from './week.js';

const list = (v) => (Array.isArray(v) ? v : []);
const words = (s) => s.split(/[\s,]+/).map((x) => x.trim()).filter(Boolean);
const MODES = ['', 'nxdomain', 'zeroIP', 'refused', 'customIP', 'blockPage'];

/** Rewrites as lines "name TYPE target…" (CNAME: one target). */
function rewritesText(rs) {
  return list(rs).map((r) => `${r.name} ${r.type || (r.cname ? 'CNAME' : 'A')} ${r.cname || list(r.targets).join(' ')}`.trim()).join('\n');
}
function parseRewrites(text) {
  return text.split('\n').map((l) => l.trim()).filter(Boolean).map((l) => {
    const [name, type = '', ...rest] = l.split(/\s+/);
    const t = type.toUpperCase();
    return t === 'CNAME' ? { name, type: t, cname: rest[0] || '' } : { name, type: t, targets: rest };
  });
}

function formOf(spec) {
  const sch = spec.schedule || null;
  return {
    priority: String(spec.priority ?? 0),
    clientGroupRefs: list(spec.clientGroupRefs).join(', '),
    blockListRefs: list(spec.blockListRefs).join(', '),
    allowListRefs: list(spec.allowListRefs).join(', '),
    excludeListRefs: list(spec.excludeListRefs).join(', '),
    globalLists: spec.globalLists !== false,
    blockMode: spec.blockMode || '',
    safeSearch: !!spec.safeSearch,
    upstreamGroup: spec.upstreamGroup || '',
    rewrites: rewritesText(spec.rewrites),
    scheduled: !!sch,
    start: (sch && sch.start) || '09:00',
    end: (sch && sch.end) || '17:00',
    tz: (sch && sch.tz) || 'UTC',
    weekdays: sch ? list(sch.weekdays) : ['mon', 'tue', 'wed', 'thu', 'fri'],
  };
}

/** The field an API message names (spec.schedule.tz → tz), or ''. */
function fieldOf(msg) {
  const m = /spec\.([a-zA-Z]+)(?:\.([a-zA-Z]+))?/.exec(msg || '');
  if (!m) return '';
  if (m[1] === 'schedule') return m[2] && ['start', 'end', 'tz', 'weekdays'].includes(m[2]) ? m[2] : 'start';
  return m[1];
}

export function PolicyEditor({ p, onSaved }) {
  const { namespace, name } = p.metadata;
  const [f, setF] = useState(() => formOf(p.spec || {}));
  const [err, setErr] = useState(null); // {field, text}
  const [ok, setOk] = useState('');
  const [busy, setBusy] = useState(false);
  const set = (k) => (e) => setF({ ...f, [k]: e.target.type === 'checkbox' ? e.target.checked : e.target.value });
  const sch = { start: f.start, end: f.end, tz: f.tz, weekdays: f.weekdays.length === 7 ? [] : f.weekdays };
  const toggleDay = (d) => {
    const cur = f.weekdays.length === 0 ? DAYS.slice() : f.weekdays;
    const next = cur.includes(d) ? cur.filter((x) => x !== d) : DAYS.filter((x) => x === d || cur.includes(x));
    setF({ ...f, weekdays: next });
  };

  const save = async (ev) => {
    ev.preventDefault();
    setBusy(true);
    setErr(null);
    setOk('');
    try {
      if (!/^-?\d+$/.test(f.priority.trim())) throw { field: 'priority', text: 'Priority: a whole number is expected (higher wins).' };
      const obj = await call('get-policy', { params: { namespace, name } });
      const rv = obj.metadata && obj.metadata.resourceVersion;
      const spec = { ...(obj.spec || {}) };
      const put = (k, v) => { if (v === undefined || v === '' || (Array.isArray(v) && v.length === 0)) delete spec[k]; else spec[k] = v; };
      put('priority', parseInt(f.priority, 10) || undefined);
      put('clientGroupRefs', words(f.clientGroupRefs));
      put('blockListRefs', words(f.blockListRefs));
      put('allowListRefs', words(f.allowListRefs));
      put('excludeListRefs', words(f.excludeListRefs));
      put('globalLists', f.globalLists ? undefined : false);
      put('blockMode', f.blockMode);
      put('safeSearch', f.safeSearch || undefined);
      put('upstreamGroup', f.upstreamGroup.trim());
      put('rewrites', parseRewrites(f.rewrites));
      if (f.scheduled) {
        if (f.weekdays.length === 0) throw { field: 'weekdays', text: 'Schedule: choose at least one day, or turn the schedule off.' };
        put('schedule', { start: f.start, end: f.end, tz: f.tz.trim() || undefined, weekdays: f.weekdays.length === 7 ? undefined : f.weekdays });
      } else put('schedule', undefined);
      obj.spec = spec;
      await call('put-policy', { params: { namespace, name }, body: obj, headers: rv ? { 'If-Match': rv } : {} });
      setOk(`Saved ${namespace}/${name}.`);
      onSaved();
    } catch (e) {
      if (e && e.field) setErr(e);
      else {
        const text = errorText(e);
        setErr({ field: e && e.status === 412 ? '' : fieldOf(text), text: e && (e.status === 412 || e.status === 409) ? `${text} Someone changed the policy meanwhile: reload and edit again.` : text });
      }
    } finally {
      setBusy(false);
    }
  };

  const at = (field) => err && err.field === field && html`<div class="msg error field-error" role="alert" id=${'pe-err-' + field}>${err.text}</div>`;
  const input = (k, label, extra = {}) => html`<div><label for=${'pe-' + k}>${label}</label>
    <input id=${'pe-' + k} value=${f[k]} onInput=${set(k)} aria-invalid=${err && err.field === k ? 'true' : undefined} aria-describedby=${err && err.field === k ? 'pe-err-' + k : undefined} ...${extra} />${at(k)}</div>`;
  return html`<form class="panel" onSubmit=${save} aria-label=${'Edit policy ' + namespace + '/' + name} style=${{ marginTop: '1rem' }}>
    <h2>Edit ${namespace}/${name}</h2>
    ${ok && html`<${Msg} kind="ok">${ok}</${Msg}>`}
    ${err && !err.field && html`<${Msg} kind="error">${err.text}</${Msg}>`}
    <div class="filters">
      ${input('priority', 'Priority (higher wins)', { inputmode: 'numeric' })}
      ${input('clientGroupRefs', 'Client groups (empty: every client)')}
      ${input('blockListRefs', 'Block lists')}
      ${input('allowListRefs', 'Allow lists')}
      <div><label><input type="checkbox" checked=${f.globalLists} onChange=${set('globalLists')} /> Also the global lists</label>${at('globalLists')}</div>
      ${input('excludeListRefs', 'Global lists excluded', { disabled: !f.globalLists })}
      <div><label for="pe-blockMode">Block mode</label><select id="pe-blockMode" value=${f.blockMode} onChange=${set('blockMode')}>
        ${MODES.map((m) => html`<option value=${m}>${m || 'the list’s, else blocking.defaultResponse'}</option>`)}</select>${at('blockMode')}</div>
      <div><label><input type="checkbox" checked=${f.safeSearch} onChange=${set('safeSearch')} /> Safe search</label>${at('safeSearch')}</div>
      ${input('upstreamGroup', 'Upstream group (empty: default)')}
      <div><label for="pe-rewrites">Rewrites, one per line: name TYPE target</label>
        <textarea id="pe-rewrites" class="mono" rows="3" value=${f.rewrites} onInput=${set('rewrites')} placeholder="nas.home A 192.168.1.10"></textarea>${at('rewrites')}</div>
    </div>
    <fieldset class="schedule"><legend><label><input type="checkbox" checked=${f.scheduled} onChange=${set('scheduled')} /> Active only on a schedule</label></legend>
      ${f.scheduled && html`<div class="filters">
        ${input('start', 'From (HH:MM)', { type: 'time' })}
        ${input('end', 'To (HH:MM; before From runs past midnight)', { type: 'time' })}
        ${input('tz', 'Time zone (IANA)')}
      </div>
      <p class="small muted">Days: press a day to switch it on or off.</p>${at('weekdays')}
      <div class="table-wrap"><${WeekGrid} sch=${sch} onDay=${toggleDay} /></div>`}
    </fieldset>
    <div class="actions"><button class="primary" type="submit" disabled=${busy}>Save policy</button></div>
  </form>`;
}

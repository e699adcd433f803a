// The blocking pause of the header: GET /dns/blocking shows whether this
// node blocks; with dns.blocking, POST pauses it for a while (with a live
// countdown) or resumes it.
import { useState, useEffect } from './vendor/preact-htm.js';
import { call, can, errorText } from './api.js';
import { html } from './ui.js';

const PAUSES = [['5m', '5 minutes'], ['30m', '30 minutes'], ['1h', '1 hour'], ['', 'until resumed']];

function left(until, now) {
  const s = Math.max(0, Math.round((new Date(until) - now) / 1000));
  const m = Math.floor(s / 60);
  return `${m}:${String(s % 60).padStart(2, '0')}`;
}

export function BlockingControl({ me }) {
  const [st, setSt] = useState(null);
  const [now, setNow] = useState(Date.now());
  const [err, setErr] = useState('');
  const [choice, setChoice] = useState('5m');
  const mayRead = can(me, 'dns-blocking-state');
  const mayWrite = can(me, 'dns-blocking');

  const load = () => call('dns-blocking-state').then(setSt).catch(() => {});
  useEffect(() => { if (mayRead) load(); }, []);
  // The countdown, and a fresh state when it runs out.
  useEffect(() => {
    if (!st || st.blocking || !st.until) return;
    const id = setInterval(() => {
      setNow(Date.now());
      if (new Date(st.until) <= Date.now()) { clearInterval(id); load(); }
    }, 1000);
    return () => clearInterval(id);
  }, [st]);

  const set = async (blocking) => {
    setErr('');
    try {
      const body = { blocking };
      if (!blocking && choice) body.duration = choice;
      setSt(await call('dns-blocking', { body }));
      setNow(Date.now());
    } catch (e) {
      setErr(errorText(e));
    }
  };
  if (!mayRead || !st) return null;
  if (!st.blocking) {
    return html`<span class="blocking paused" role="status" data-testid="blocking">
      <span class="badge error">Blocking paused${st.until ? ` · ${left(st.until, now)} left` : ''}</span>
      ${mayWrite && html`<button class="small" type="button" onClick=${() => set(true)}>Resume</button>`}
      ${err && html`<span class="sr-only" role="alert">${err}</span>`}</span>`;
  }
  if (!mayWrite) return null;
  return html`<span class="blocking" data-testid="blocking">
    <label for="pause-for" class="sr-only">Pause blocking for</label>
    <select id="pause-for" class="small" value=${choice} onChange=${(e) => setChoice(e.target.value)}>
      ${PAUSES.map(([v, l]) => html`<option value=${v}>${l}</option>`)}</select>
    <button class="small" type="button" onClick=${() => set(false)}>Pause blocking</button>
    ${err && html`<span class="msg error small" role="alert">${err}</span>`}</span>`;
}

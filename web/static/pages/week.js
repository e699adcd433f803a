// The week grid of a Policy schedule (one start-end window on some weekdays,
// in a time zone), shared by the policy page and its editor.
import { html } from '../ui.js';

export const DAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];
const list = (v) => (Array.isArray(v) ? v : []);
const minutes = (hhmm) => { const [h, m] = String(hhmm || '00:00').split(':').map(Number); return h * 60 + m; };

/** Whether the schedule is open at the start of an hour of a weekday (the
 * grid's resolution; a window past midnight belongs to the day it starts). */
export function openAt(sch, day, hour) {
  const days = list(sch.weekdays);
  const s = minutes(sch.start), e = minutes(sch.end), t = hour * 60;
  const dayOn = (d) => days.length === 0 || days.includes(d);
  const prev = DAYS[(DAYS.indexOf(day) + 6) % 7];
  if (s < e) return dayOn(day) && t >= s && t < e;
  if (s === e) return dayOn(day);
  return (dayOn(day) && t >= s) || (dayOn(prev) && t < e);
}

/** The grid; with onDay the day names are buttons that switch a weekday on
 * or off (the editor), and the hours are set by the editor's start and end. */
export function WeekGrid({ sch, onDay }) {
  return html`<table class="week" aria-label=${`Schedule: ${sch.start || '00:00'} to ${sch.end || '00:00'} ${list(sch.weekdays).join(', ') || 'every day'} (${sch.tz || 'UTC'})`}>
    <thead><tr><th><span class="sr-only">Day</span></th>${Array.from({ length: 24 }, (_, h) => html`<th class="hour">${h % 3 === 0 ? h : ''}</th>`)}</tr></thead>
    <tbody>${DAYS.map((d) => html`<tr><th>${onDay
      ? html`<button type="button" class="small day" aria-pressed=${list(sch.weekdays).length === 0 || list(sch.weekdays).includes(d) ? 'true' : 'false'} onClick=${() => onDay(d)}>${d}</button>`
      : d}</th>${Array.from({ length: 24 }, (_, h) => {
      const on = openAt(sch, d, h);
      return html`<td class=${on ? 'on' : ''} title=${`${d} ${String(h).padStart(2, '0')}:00 ${on ? 'active' : 'inactive'}`}></td>`;
    })}</tr>`)}</tbody>
  </table>`;
}


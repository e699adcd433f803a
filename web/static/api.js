// The REST API client: every call goes through the generated route table
// (api.gen.js), so the dashboard can only call routes the server declares.
// Cookie session; unsafe methods carry X-Service-CSRF from /auth/me.
import { routes } from './api.gen.js';

/** The dashboard's root path, from <base href> (listeners.api.pathPrefix + "/"). */
export const basePath = new URL(document.baseURI).pathname.replace(/\/?$/, '/');
export const apiBase = basePath + 'api/v1';

let csrf = '';
let authLost = () => {};

/** @param {string} v */
export function setCSRF(v) { csrf = v || ''; }

/** Called with a 401 of a protected route (the session is gone) or a 403
 * password_change_required. */
export function onAuthLost(fn) { authLost = fn; }

/** An error answer: {error: {key, message, hint, missing}} and the status. */
export class ApiError extends Error {
  constructor(status, body, retryAfter) {
    const d = (body && body.error) || {};
    super(d.message || `HTTP ${status}`);
    this.status = status;
    this.key = d.key || (status === 0 ? 'network' : 'http');
    this.hint = d.hint || '';
    this.missing = d.missing || '';
    this.retryAfter = retryAfter ? parseInt(retryAfter, 10) : 0;
  }
}

/** @param {string} op operation id @returns {import('./api.gen.js').Route} */
export function route(op) {
  const r = routes[op];
  if (!r) throw new Error(`unknown API operation ${op}`);
  return r;
}

/** URL of an operation with path parameters and a query (empty values left out). */
export function url(op, params = {}, query = {}) {
  const r = route(op);
  const path = r.path.replace(/\{(\w+)\}/g, (_, k) => {
    if (params[k] === undefined) throw new Error(`${op}: missing path parameter ${k}`);
    return encodeURIComponent(params[k]);
  });
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null && v !== '') qs.set(k, String(v));
  }
  const s = qs.toString();
  return apiBase + path + (s ? '?' + s : '');
}

/**
 * Calls an operation and returns its JSON body (null for 204).
 * @param {string} op
 * @param {{params?: Object, query?: Object, body?: any, raw?: string, contentType?: string, headers?: Object, signal?: AbortSignal, quiet?: boolean, text?: boolean}} [o]
 * quiet: a 401 is only thrown, not reported as a lost session (the first /auth/me).
 * text: the body is returned as text (zone files), not parsed as JSON.
 * raw, contentType: a request body sent as text (zone files), not as JSON.
 */
export async function call(op, o = {}) {
  const r = route(op);
  const headers = { Accept: o.text ? 'text/dns, text/plain, application/json' : 'application/json', ...(o.headers || {}) };
  if (r.method !== 'GET' && r.method !== 'HEAD') headers['X-Service-CSRF'] = csrf;
  let body;
  if (o.raw !== undefined) {
    // A text body as it is (zone files: text/dns).
    headers['Content-Type'] = o.contentType || 'text/plain';
    body = o.raw;
  } else if (o.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(o.body);
  }
  let res;
  try {
    res = await fetch(url(op, o.params, o.query), { method: r.method, headers, body, credentials: 'same-origin', signal: o.signal });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, { error: { message: 'the server did not answer', hint: 'check that the node is running and reachable' } });
  }
  const text = res.status === 204 ? '' : await res.text();
  if (res.ok && o.text) return text;
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!res.ok) {
    const err = new ApiError(res.status, data, res.headers.get('Retry-After'));
    if (!o.quiet && ((res.status === 401 && r.permission !== 'public') || err.key === 'password_change_required')) authLost(err);
    throw err;
  }
  return data;
}

/**
 * Whether the principal of /auth/me may call an operation: its
 * x-permission at cluster scope, or (routes of scope any or zone) in some zone.
 * @param {import('./api.gen.js').MeBody|null} me
 * @param {string} op
 */
export function can(me, op) {
  const r = routes[op];
  if (!r) return false;
  if (r.permission === 'public') return true;
  if (!me || me.mustChangePassword) return false;
  const [res, verb] = r.permission.split('.');
  const has = (m) => !!(m && m[res] && m[res].includes(verb));
  if (has(me.permissions)) return true;
  if (r.scope === 'cluster') return false;
  return Object.values(me.scopedPermissions || {}).some(has);
}

/** Human text of an error: message, then the server's hint. */
export function errorText(e) {
  if (!(e instanceof ApiError)) return String(e && e.message || e);
  return e.hint ? `${e.message} (${e.hint})` : e.message;
}

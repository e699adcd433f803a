// Sign-in (local accounts and the identity providers of /auth/status) and
// the password change a first start with a generated password requires.
import { useState, useEffect } from '../vendor/preact-htm.js';
import { call, errorText, ApiError, basePath } from '../api.js';
import { html, navigate, Msg, ErrorMsg, useTitle } from '../ui.js';

/** The page to return to: a path of the dashboard, never another origin. */
function nextOf(route) {
  const n = route.query.get('next') || '';
  if (!n || n.startsWith('/') || n.includes('//') || /^[a-z][a-z0-9+.-]*:/i.test(n) || n.startsWith('login') || n.startsWith('password')) return '';
  return n;
}

function lockoutText(e, seconds) {
  return `Too many failed sign-ins from here or for this account. Try again in ${seconds} second${seconds === 1 ? '' : 's'}.`;
}

export function LoginPage({ me, setMe, route, bootError }) {
  useTitle('Sign in');
  const next = nextOf(route);
  const [status, setStatus] = useState(null);
  const [statusErr, setStatusErr] = useState(bootError || null);
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState('');
  const [lockedFor, setLockedFor] = useState(0);

  useEffect(() => {
    if (me && !me.mustChangePassword) navigate(next || '', { replace: true });
  }, [me]);
  useEffect(() => {
    call('auth-status').then(setStatus).catch(setStatusErr);
  }, []);
  // Count the lockout down so the user sees when to try again.
  useEffect(() => {
    if (lockedFor <= 0) return;
    const id = setTimeout(() => setLockedFor(lockedFor - 1), 1000);
    return () => clearTimeout(id);
  }, [lockedFor]);

  const submit = async (ev) => {
    ev.preventDefault();
    setBusy(true);
    setErr('');
    try {
      const m = await call('auth-login', { body: { username, password } });
      setPassword('');
      setMe(m);
      if (m.mustChangePassword) navigate('password' + (next ? '?next=' + encodeURIComponent(next) : ''), { replace: true });
      else navigate(next || '', { replace: true });
    } catch (e) {
      if (e instanceof ApiError && e.status === 429) {
        setLockedFor(e.retryAfter || 60);
        setErr('');
      } else if (e instanceof ApiError && e.status === 401) {
        setErr('Wrong username or password.');
      } else {
        setErr(errorText(e));
      }
    } finally {
      setBusy(false);
    }
  };

  const expired = route.query.get('expired') === '1';
  const providers = (status && status.providers) || [];
  return html`<main class="center" id="content">
    <div class="panel login">
      <h1><img src="ui/favicon.svg" alt="" width="22" height="22" /> Sign in to svc</h1>
      ${expired && html`<${Msg} kind="info">Your session has ended. Sign in again to go back to the page you were on.</${Msg}>`}
      <${ErrorMsg} error=${statusErr} />
      ${status && status.hasDefaultCredentials && html`<${Msg} kind="info">First start: sign in as <strong>admin</strong> with the password the server printed when it started. You will choose a new one next.</${Msg}>`}
      ${lockedFor > 0 && html`<${Msg} kind="error">${lockoutText(null, lockedFor)}</${Msg}>`}
      ${err && html`<${Msg} kind="error">${err}</${Msg}>`}
      ${(!status || status.localLogin) && html`<form class="form" onSubmit=${submit} aria-label="Sign in with a local account">
        <div><label for="username">Username</label>
          <input id="username" name="username" autocomplete="username" required value=${username} onInput=${(e) => setUsername(e.target.value)} /></div>
        <div><label for="password">Password</label>
          <input id="password" name="password" type="password" autocomplete="current-password" required value=${password} onInput=${(e) => setPassword(e.target.value)} /></div>
        ${status && status.localLoginMode === 'admins-only' && html`<p class="muted">Local sign-in is open to administrators only.</p>`}
        <button class="primary" type="submit" disabled=${busy || lockedFor > 0}>${busy ? 'Signing in…' : 'Sign in'}</button>
      </form>`}
      ${status && !status.localLogin && html`<p class="muted">Local sign-in is turned off; use your identity provider.</p>`}
      ${providers.length > 0 && html`<div class="providers">
        ${providers.map((p) => html`<a class="button" data-external href=${(p.startURL || '') + '?redirect=' + encodeURIComponent(basePath + next)}>Sign in with ${p.displayName || p.id}</a>`)}
      </div>`}
    </div>
  </main>`;
}

export function PasswordPage({ me, setMe, route }) {
  useTitle('Choose a new password');
  const next = nextOf(route);
  const [cur, setCur] = useState('');
  const [pw, setPw] = useState('');
  const [pw2, setPw2] = useState('');
  const [err, setErr] = useState('');
  const [busy, setBusy] = useState(false);
  const forced = me.mustChangePassword;

  const submit = async (ev) => {
    ev.preventDefault();
    setErr('');
    if (pw.length < 8) return setErr('The new password needs at least 8 characters.');
    if (pw !== pw2) return setErr('The two new passwords differ.');
    if (pw === cur) return setErr('Choose a password other than the current one.');
    setBusy(true);
    try {
      const m = await call('auth-password', { body: { currentPassword: cur, newPassword: pw } });
      setMe(m);
      navigate(next || '', { replace: true });
    } catch (e) {
      setErr(e instanceof ApiError && e.status === 429 ? lockoutText(e, e.retryAfter || 60) : errorText(e));
    } finally {
      setBusy(false);
    }
  };
  return html`<main class="center" id="content">
    <div class="panel login">
      <h1>Choose a new password</h1>
      ${forced && html`<${Msg} kind="info">The password of ${me.principal.name} was generated at the first start or reset by an administrator: choose your own before going on.</${Msg}>`}
      ${err && html`<${Msg} kind="error">${err}</${Msg}>`}
      <form class="form" onSubmit=${submit}>
        <input type="text" name="username" autocomplete="username" value=${me.principal.name} hidden readonly />
        <div><label for="current">Current password</label>
          <input id="current" type="password" autocomplete="current-password" required value=${cur} onInput=${(e) => setCur(e.target.value)} /></div>
        <div><label for="new">New password (at least 8 characters)</label>
          <input id="new" type="password" autocomplete="new-password" required minlength="8" value=${pw} onInput=${(e) => setPw(e.target.value)} /></div>
        <div><label for="new2">New password again</label>
          <input id="new2" type="password" autocomplete="new-password" required minlength="8" value=${pw2} onInput=${(e) => setPw2(e.target.value)} /></div>
        <button class="primary" type="submit" disabled=${busy}>${busy ? 'Saving…' : 'Save and continue'}</button>
        ${!forced && html`<a href=${next || 'overview'}>Cancel</a>`}
      </form>
    </div>
  </main>`;
}

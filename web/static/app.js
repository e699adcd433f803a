// Entry module: theme, session (/auth/me), routing and the page frame.
import { render, useState, useEffect, useCallback } from './vendor/preact-htm.js';
import { call, can, setCSRF, onAuthLost, basePath, route as route_ } from './api.js';
import { html, currentRoute, navigate, interceptLinks, here, Msg } from './ui.js';
import { LoginPage, PasswordPage } from './pages/login.js';
import { OverviewPage } from './pages/overview.js';
import { QueriesPage } from './pages/queries.js';
import { ServicesPage } from './pages/services.js';
import { ZonesPage } from './pages/zones.js';
import { ClientsPage } from './pages/clients.js';
import { BlockingControl } from './blocking.js';
import { ListsPage } from './pages/lists.js';
import { PoliciesPage } from './pages/policies.js';
import { GroupsPage } from './pages/groups.js';
import { AdminPage } from './pages/admin.js';
import { UnblockPage, PendingCount } from './pages/unblock.js';

// Theme: the system's unless the user chose one (kept in localStorage).
const THEME_KEY = 'svc.theme';
function applyTheme(t) {
  if (t === 'light' || t === 'dark') document.documentElement.dataset.theme = t;
  else delete document.documentElement.dataset.theme;
}
applyTheme(localStorage.getItem(THEME_KEY));

function effectiveTheme() {
  const t = document.documentElement.dataset.theme;
  if (t) return t;
  return matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
}

function ThemeToggle() {
  const [theme, setTheme] = useState(effectiveTheme());
  const next = theme === 'dark' ? 'light' : 'dark';
  return html`<button class="small" type="button" aria-label=${`Switch to the ${next} theme`} title=${`Switch to the ${next} theme`}
    onClick=${() => { localStorage.setItem(THEME_KEY, next); applyTheme(next); setTheme(next); }}>${theme === 'dark' ? '☀' : '☾'}<span class="sr-only">theme</span></button>`;
}

// Pages of the navigation: the operation each needs (hidden without it).
const PAGES = [
  { page: 'overview', title: 'Overview', needs: 'stats-summary', component: OverviewPage },
  { page: 'queries', title: 'Query log', needs: 'queries', component: QueriesPage },
  { page: 'clients', title: 'Clients', needs: 'queries-clients', component: ClientsPage },
  { page: 'lists', title: 'Lists', needs: 'list-blocklists', component: ListsPage },
  { page: 'services', title: 'Services', needs: 'catalogue-services', component: ServicesPage },
  { page: 'policies', title: 'Policies', needs: 'list-policies', component: PoliciesPage },
  { page: 'unblock', title: 'Unblock requests', needs: 'unblockrequests-list', component: UnblockPage, badge: PendingCount },
  { page: 'groups', title: 'Client groups', needs: 'list-clientgroups', component: GroupsPage },
  { page: 'zones', title: 'Zones', needs: 'list-dnszones', component: ZonesPage },
  // Administration opens for any of its parts.
  { page: 'admin', title: 'Administration', needs: ['settings-schema', 'iam-users', 'iam-rolebindings', 'info-messages', 'audit', 'cluster'], component: AdminPage },
];

/** Whether the principal may open a page (needs: one operation or any of several). */
const allowed = (me, p) => [].concat(p.needs).some((op) => can(me, op));

// Redirect replaces the URL after the render (never during it).
function Redirect({ to }) {
  useEffect(() => navigate(to, { replace: true }), [to]);
  return null;
}

function Frame({ me, route, onLogout, children }) {
  const visible = PAGES.filter((p) => allowed(me, p));
  return html`<a class="skip" href="#content">Skip to content</a>
  <header class="top">
    <a class="brand" href=${basePath}><img src="ui/favicon.svg" alt="" />svc</a>
    <nav class="main" aria-label="Main"><ul>
      ${visible.map((p) => html`<li><a href=${p.page} aria-current=${route.page === p.page ? 'page' : undefined}>${p.title}${p.badge ? html`<${p.badge} me=${me} />` : null}</a></li>`)}
    </ul></nav>
    <div class="who">
      <${BlockingControl} me=${me} />
      <span title=${me.roles.join(', ')}>${me.principal.name}</span>
      <span class="roles">${me.roles.length ? '(' + me.roles.join(', ') + ')' : '(no role)'}</span>
      <${ThemeToggle} />
      <button class="small" type="button" onClick=${onLogout}>Sign out</button>
    </div>
  </header>
  <main id="content" tabindex="-1">${children}</main>`;
}

function App() {
  const [route, setRoute] = useState(currentRoute());
  const [me, setMeState] = useState(undefined); // undefined: not known yet; null: signed out
  const [bootError, setBootError] = useState(null);

  const setMe = useCallback((m) => {
    setCSRF(m ? m.csrf : '');
    setMeState(m);
  }, []);

  useEffect(() => {
    const on = () => setRoute(currentRoute());
    window.addEventListener('popstate', on);
    window.addEventListener('svc:navigate', on);
    interceptLinks();
    return () => { window.removeEventListener('popstate', on); window.removeEventListener('svc:navigate', on); };
  }, []);

  // The session: who am I, and back to login (then here) when it ends.
  useEffect(() => {
    onAuthLost((err) => {
      if (err.key === 'password_change_required') {
        if (currentRoute().page !== 'password') navigate('password?next=' + encodeURIComponent(here()), { replace: true });
        return;
      }
      setMe(null);
      const r = currentRoute();
      if (r.page !== 'login') navigate('login?expired=1&next=' + encodeURIComponent(here()), { replace: true });
    });
    call('auth-me', { quiet: true }).then(setMe).catch((e) => {
      if (e.status === 401) setMe(null);
      else { setBootError(e); setMeState(null); }
    });
  }, []);

  // The idle timeout: ask again when it should have passed, so an expired
  // session shows the login page without waiting for a click.
  useEffect(() => {
    if (!me || !me.idleExpiresAt) return;
    const wait = Math.min(Math.max(new Date(me.idleExpiresAt) - Date.now() + 2000, 5000), 2 ** 31 - 1);
    const id = setTimeout(() => { call('auth-me').then(setMe).catch(() => {}); }, wait);
    const onVisible = () => { if (!document.hidden) call('auth-me').then(setMe).catch(() => {}); };
    document.addEventListener('visibilitychange', onVisible);
    return () => { clearTimeout(id); document.removeEventListener('visibilitychange', onVisible); };
  }, [me]);

  const logout = async () => {
    try { await call('auth-logout'); } catch { /* the cookie is dropped either way */ }
    setMe(null);
    navigate('login', { replace: true });
  };

  if (me === undefined) return html`<p class="boot">Loading the dashboard…</p>`;
  const ctx = { me, setMe, route };
  if (route.page === 'login') return html`<${LoginPage} ...${ctx} bootError=${bootError} />`;
  if (!me) {
    return html`<${Redirect} to=${'login?next=' + encodeURIComponent(here())} />`;
  }
  if (me.mustChangePassword || route.page === 'password') {
    if (route.page !== 'password') {
      return html`<${Redirect} to=${'password?next=' + encodeURIComponent(here())} />`;
    }
    return html`<${PasswordPage} ...${ctx} />`;
  }
  let page = PAGES.find((p) => p.page === route.page);
  if (!page) {
    const first = PAGES.find((p) => allowed(me, p));
    if (route.page === '' && first) {
      return html`<${Redirect} to=${first.page + location.search} />`;
    }
    const body = route.page === ''
      ? html`<h1>Welcome, ${me.principal.name}</h1><${Msg} kind="info">Your account holds no permission that a page of the dashboard needs yet (${me.roles.join(', ') || 'no role'}). Ask an administrator to bind a role, e.g. viewer and auditor.</${Msg}>`
      : html`<h1>Page not found</h1><p>There is no page ${route.page}. <a href=${basePath}>Go to the start page</a>.</p>`;
    return html`<${Frame} me=${me} route=${route} onLogout=${logout}>${body}</${Frame}>`;
  }
  if (!allowed(me, page)) {
    return html`<${Frame} me=${me} route=${route} onLogout=${logout}><h1>${page.title}</h1>
      <${Msg} kind="warn">Your account may not open this page: it needs the permission ${route_([].concat(page.needs)[0]).permission}. Ask an administrator to bind a role that grants it.</${Msg}></${Frame}>`;
  }
  const Page = page.component;
  return html`<${Frame} me=${me} route=${route} onLogout=${logout}><${Page} key=${page.page} title=${page.title} ...${ctx} /></${Frame}>`;
}

render(html`<${App} />`, document.getElementById('app'));

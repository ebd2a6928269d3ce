// The console's entry point: sign-in, navigation and the router. Routes
// live in the URL fragment (#/deliveries?status=failed), so the server
// serves two pages only and the browser's back button works.
import { api, setToken, signedIn, ApiError } from './api.js';
import { h, clear, announce, notice, field } from './dom.js';
import * as tenant from './tenant.js';
import * as operator from './operator.js';
import { app } from './state.js';

const mode = document.body.dataset.mode; // "console" or "portal"

function stopTimers() {
  for (const t of app.timers) clearInterval(t);
  app.timers = [];
}

// A portal link carries its token in the fragment: take it, and take it
// out of the address bar (and so of the history and any screenshot).
function tokenFromFragment() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (!m) return '';
  history.replaceState(null, '', location.pathname + '#/endpoints');
  return decodeURIComponent(m[1]);
}

async function start() {
  const t = tokenFromFragment();
  if (t) {
    setToken(t);
    try {
      app.session = await api('GET', '/v1/session');
    } catch (e) {
      setToken(null);
      return signIn(e instanceof ApiError ? e.message : String(e));
    }
  }
  if (!signedIn()) return signIn('');
  window.addEventListener('hashchange', route);
  route();
}

function signIn(problem) {
  const main = clear(document.getElementById('main'));
  if (mode === 'portal') {
    main.append(h('h1', { tabindex: '-1' }, 'Webhooks'),
      notice('error', problem || 'This page opens from a portal link. Ask the application that sent you here for a new link.'));
    return;
  }
  const input = h('input', { type: 'password', autocomplete: 'off', spellcheck: 'false', required: true });
  const form = h('form', { class: 'grid', 'aria-labelledby': 'signin-h' },
    field('signin-token', 'Bearer token', input, 'The admin token (HOOKLINE_ADMIN_TOKEN) or a tenant API key (hk_…). It stays in this tab\'s memory only.'),
    h('span'), h('div', {}, h('button', { type: 'submit' }, 'Sign in')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    setToken(input.value.trim());
    try {
      app.session = await api('GET', '/v1/session');
    } catch (e) {
      setToken(null);
      const err = document.getElementById('signin-token-err');
      err.textContent = e.message; err.hidden = false;
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      return;
    }
    window.addEventListener('hashchange', route);
    if (!location.hash || location.hash === '#') location.hash = app.isAdmin() ? '#/tenants' : '#/endpoints';
    else route();
  });
  main.append(h('div', {}, h('h1', { id: 'signin-h', tabindex: '-1' }, 'Sign in to Hookline'), problem ? notice('error', problem) : null, form));
  input.focus();
}

function renderNav(path) {
  const nav = clear(document.getElementById('nav'));
  const items = [];
  if (app.isAdmin()) {
    items.push(['#/tenants', 'Tenants'], ['#/cluster', 'Cluster'], ['#/audit', 'Audit']);
  }
  if (!app.isAdmin() || app.tenant) {
    const label = app.isAdmin() ? ` (${app.tenant})` : '';
    items.push([app.link('/endpoints'), 'Endpoints' + label], [app.link('/deliveries'), 'Deliveries' + label]);
    if (app.session.kind !== 'portal_token') items.push([app.link('/portal-links'), 'Portal links' + label]);
  }
  for (const [href, text] of items) {
    const a = h('a', { href }, text);
    const target = href.slice(1).split('?')[0];
    if (path === target || path.startsWith(target + '/')) a.setAttribute('aria-current', 'page');
    nav.append(a);
  }
  const s = app.session;
  const who = s.kind === 'admin' ? 'operator (admin token)'
    : s.kind === 'api_key' ? `tenant ${s.tenant_id} (API key ${s.id})`
      : `${s.tenant_id} · ${(s.capabilities || []).join(', ')}`;
  document.getElementById('who').textContent = who;
}

async function route() {
  // Routes start with "#/"; any other fragment is not a route.
  if (location.hash && !location.hash.startsWith('#/')) return;
  stopTimers();
  document.getElementById('status').textContent = '';
  let path = location.hash.replace(/^#/, '') || '/';
  let query = new URLSearchParams();
  const qi = path.indexOf('?');
  if (qi >= 0) { query = new URLSearchParams(path.slice(qi + 1)); path = path.slice(0, qi); }
  if (app.isAdmin()) {
    const m = /^\/t\/([^/]+)(\/.*)$/.exec(path);
    if (m) { app.tenant = decodeURIComponent(m[1]); path = m[2]; }
    else if (!/^\/(endpoints|deliveries|portal-links)/.test(path)) app.tenant = '';
  }
  renderNav(path);
  const main = clear(document.getElementById('main'));
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  try {
    await dispatch(main, parts, query);
  } catch (e) {
    main.append(notice('error', e.message || String(e)));
    announce(e.message || String(e));
  }
  const h1 = main.querySelector('h1');
  if (h1) { h1.setAttribute('tabindex', '-1'); if (!main.contains(document.activeElement)) h1.focus(); }
}

async function dispatch(main, [a, b, c, d], q) {
  const admin = app.isAdmin();
  if (admin && a === 'tenants') return operator.tenants(main);
  if (admin && a === 'cluster') return operator.cluster(main);
  if (admin && a === 'audit' && b === 'trace') return operator.trace(main, c, d);
  if (admin && a === 'audit') return operator.audit(main, q);
  if (admin && !app.tenant) { location.hash = '#/tenants'; return; }
  if (a === 'endpoints' && b === 'new') return tenant.newEndpoint(main);
  if (a === 'endpoints' && b) return tenant.endpoint(main, b);
  if (a === 'deliveries' && b) return tenant.delivery(main, b);
  if (a === 'deliveries') return tenant.deliveries(main, q);
  if (a === 'portal-links' && app.session.kind !== 'portal_token') return tenant.portalLinks(main);
  if (!a || a === 'endpoints') return tenant.endpoints(main);
  main.append(h('h1', {}, 'Not found'), h('p', {}, h('a', { href: app.link('/endpoints') }, 'Back to endpoints')));
}

// The skip link moves the focus to the content; it must not change the
// fragment, which is the route.
document.querySelector('.skip').addEventListener('click', (ev) => {
  ev.preventDefault();
  document.getElementById('main').focus();
});

start();

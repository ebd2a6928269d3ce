// The tenant's screens, in the portal and in the console: endpoints,
// deliveries, replay and recovery, portal links. Every call goes through
// the public API with the caller's token; what a token may not do is not
// offered, and the API refuses it anyway.
import { api, ApiError } from './api.js';
import { h, clear, announce, fmtTime, badge, field, showFieldError, clearFieldErrors, notice } from './dom.js';
import { healthChart } from './chart.js';
import { catalogPanel, describeEntry, showCoverage } from './catalog.js';
import { app } from './state.js';

const statusName = (s) => String(s || '').replace(/^STATUS_/, '').toLowerCase();
const circuitName = (c) => String(c || '').replace(/^CIRCUIT_/, '').toLowerCase();

// ---- endpoints ----

export async function endpoints(main) {
  main.append(h('h1', {}, 'Endpoints'));
  if (app.can('manage_endpoints')) {
    main.append(h('div', { class: 'actions' }, h('a', { href: app.link('/endpoints/new'), class: 'button-link', id: 'new-endpoint' }, 'New endpoint')));
  }
  const r = await api('GET', '/v1/webhook-endpoints', { query: { ...app.tq(), page_size: 500 } });
  const eps = r.endpoints || [];
  if (!eps.length) {
    main.append(h('p', {}, 'No endpoint yet.'));
    return;
  }
  main.append(h('table', {},
    h('caption', {}, `${eps.length} endpoint${eps.length === 1 ? '' : 's'}`),
    h('thead', {}, h('tr', {}, ['Endpoint', 'URL', 'Event types', 'Status', 'Version'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, eps.map((e) => h('tr', {},
      h('td', {}, h('a', { href: app.link(`/endpoints/${encodeURIComponent(e.endpoint_id)}`) }, e.endpoint_id)),
      h('td', { class: 'mono' }, e.settings?.url || ''),
      h('td', {}, eventTypes(e.settings?.event_types)),
      h('td', {}, badge(statusName(e.status))),
      h('td', { class: 'num' }, e.config_version || ''))))));
}

// eventTypes shows an endpoint's event types, each pattern with what it
// receives.
function eventTypes(types) {
  return (types || []).flatMap((t, i) => [i ? ', ' : '', h('code', { title: describeEntry(t) || undefined }, t)]);
}

// settingsForm builds the endpoint form; ids map the API's field names
// (settings.url …) to inputs, so an error lands at its field.
const settingsFields = [
  ['url', 'URL', 'text', 'https on an allowed port, with a public host; or a broker: nats://host/subject, amqp[s]://user:password@host/vhost?exchange=X&routing_key=Y (the password is sealed).'],
  ['event_types', 'Event types', 'text', 'Comma-separated: names (invoice.paid), patterns (order.* for every order.… type, at any depth) or * for all.'],
  ['description', 'Description', 'text', ''],
  ['rate_per_second', 'Rate limit (attempts/s)', 'number', '0 means the default.'],
  ['burst', 'Burst', 'number', ''],
  ['max_in_flight', 'Max in flight', 'number', ''],
  ['timeout_ms', 'Timeout (ms)', 'number', '0 means 15 s; at most 30 s.'],
  ['max_attempts', 'Max attempts', 'number', '0 means the default.'],
  ['filter', 'Filter', 'text', 'Optional CEL expression over type, data and headers, e.g. data.total > 1000; empty: every event of the types above.'],
];

function settingsForm(settings, readOnly, submitLabel, onSubmit) {
  const form = h('form', { class: 'grid', novalidate: true });
  for (const [name, label, type, hint] of settingsFields) {
    let v = settings?.[name];
    if (name === 'event_types') v = (v || []).join(', ');
    const input = h('input', { type, name, value: v ?? '', inputmode: name === 'url' ? 'url' : undefined, readonly: readOnly, step: type === 'number' ? 'any' : undefined, min: type === 'number' ? '0' : undefined });
    form.append(...field(`f-${name}`, label, input, hint));
  }
  form.append(h('h3', { class: 'span' }, 'Receiver authentication and headers'));
  for (const [name, label, type, hint] of authFields) {
    const v = authValue(settings, name);
    const input = type === 'textarea'
      ? h('textarea', { name, rows: 3, readonly: readOnly, placeholder: authPlaceholder(settings, name) }, v)
      : h('input', { type, name, value: v, readonly: readOnly, autocomplete: type === 'password' ? 'new-password' : undefined, placeholder: authPlaceholder(settings, name) });
    form.append(...field(`f-${name}`, label, input, hint));
  }
  if (!readOnly) {
    form.append(h('span'), h('div', {}, h('button', { type: 'submit' }, submitLabel)));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      clearFieldErrors(form);
      const out = {};
      for (const [name, , type] of settingsFields) {
        const raw = form.elements[name].value.trim();
        if (name === 'event_types') out[name] = raw ? raw.split(',').map((x) => x.trim()).filter(Boolean) : [];
        else if (type === 'number') { if (raw !== '') out[name] = Number(raw); }
        else out[name] = raw;
      }
      Object.assign(out, authSettings((name) => form.elements[name].value.trim()));
      try {
        await onSubmit(out);
      } catch (e) {
        if (!(e instanceof ApiError)) throw e;
        if (!showFieldError(fieldOf(e.field), e.detail)) {
          form.prepend(notice('error', e.message));
        }
        announce(`Not saved: ${e.message}`);
      }
    });
  }
  return form;
}

// authFields are the headers and the receiver's authentication: secret
// values are never shown back, and an empty secret keeps the stored one.
const authFields = [
  ['headers', 'Headers', 'textarea', 'One "Name: value" per line, sent with every attempt and shown here; put credentials under secret headers.'],
  ['secret_headers', 'Secret headers', 'textarea', 'One "Name: value" per line, sealed at rest and never shown. Empty keeps those stored; any line replaces them all.'],
  ['header_prefix', 'Signature header prefix', 'text', 'Empty: webhook- (Standard Webhooks). svix- gives svix-id, svix-signature, …'],
  ['oauth2_token_url', 'OAuth2 token URL', 'text', 'Client credentials: each attempt carries a bearer token from this token endpoint. Empty: none.'],
  ['oauth2_client_id', 'OAuth2 client id', 'text', ''],
  ['oauth2_client_secret', 'OAuth2 client secret', 'password', 'Sealed at rest, never shown; empty keeps the stored one.'],
  ['oauth2_scopes', 'OAuth2 scopes', 'text', 'Comma-separated.'],
  ['mtls_client_certificate', 'Client certificate (PEM)', 'textarea', 'Mutual TLS: the chain presented to the receiver, leaf first. Empty: none.'],
  ['mtls_client_key', 'Client key (PEM)', 'textarea', 'Sealed at rest, never shown; empty keeps the stored one for the same certificate.'],
  ['mtls_ca_bundle', 'Receiver CA bundle (PEM)', 'textarea', 'Optional: the receiver\'s private CA, trusted in place of the system\'s roots.'],
];

function authValue(s, name) {
  const o = s?.auth?.oauth2;
  const m = s?.auth?.mtls;
  switch (name) {
    case 'headers': return Object.entries(s?.headers || {}).map(([k, v]) => `${k}: ${v}`).join('\n');
    case 'header_prefix': return s?.header_prefix || '';
    case 'oauth2_token_url': return o?.token_url || '';
    case 'oauth2_client_id': return o?.client_id || '';
    case 'oauth2_scopes': return (o?.scopes || []).join(', ');
    case 'mtls_client_certificate': return m?.client_certificate || '';
    case 'mtls_ca_bundle': return m?.ca_bundle || '';
    default: return ''; // secrets are never shown
  }
}

function authPlaceholder(s, name) {
  if (name === 'secret_headers' && s?.secret_header_names?.length) return `Stored, sealed: ${s.secret_header_names.join(', ')}`;
  if (name === 'oauth2_client_secret' && s?.auth?.oauth2?.client_secret_set) return 'Stored, sealed';
  if (name === 'mtls_client_key' && s?.auth?.mtls?.client_key_set) return 'Stored, sealed';
  return undefined;
}

// headerLines parses "Name: value" lines.
function headerLines(text) {
  const out = {};
  for (const line of text.split('\n')) {
    const i = line.indexOf(':');
    if (line.trim() === '') continue;
    if (i <= 0) out[line.trim()] = ''; // the node names the bad line
    else out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

// authSettings builds the headers and auth of the settings from the form.
function authSettings(get) {
  const out = { headers: headerLines(get('headers')), header_prefix: get('header_prefix') };
  const secret = headerLines(get('secret_headers'));
  if (Object.keys(secret).length) out.secret_headers = secret;
  const auth = {};
  if (get('oauth2_token_url')) {
    auth.oauth2 = { token_url: get('oauth2_token_url'), client_id: get('oauth2_client_id'),
      scopes: get('oauth2_scopes').split(',').map((x) => x.trim()).filter(Boolean) };
    if (get('oauth2_client_secret')) auth.oauth2.client_secret = get('oauth2_client_secret');
  }
  if (get('mtls_client_certificate')) {
    auth.mtls = { client_certificate: get('mtls_client_certificate'), ca_bundle: get('mtls_ca_bundle') };
    if (get('mtls_client_key')) auth.mtls.client_key = get('mtls_client_key');
  }
  out.auth = auth;
  return out;
}

// fieldOf maps an error's field (settings.auth.oauth2.token_url) to the
// id of its input.
function fieldOf(f) {
  const m = /^settings\.(?:auth\.)?([a-z0-9_]+)(?:\.([a-z_]+))?/.exec(f || '');
  if (!m) return '';
  if (m[1] === 'auth') return 'f-oauth2_token_url';
  if (m[1] === 'mtls' && !m[2]) return 'f-mtls_client_certificate';
  return m[2] ? `f-${m[1]}_${m[2]}` : `f-${m[1]}`;
}

function secretNotice(secret, extra) {
  return notice('secret', h('p', {}, h('strong', {}, 'Signing secret, shown once: '), h('code', { id: 'secret' }, secret)),
    h('p', {}, 'Store it now in your receiver: Hookline keeps it sealed and will not show it again.'), extra);
}

export async function newEndpoint(main) {
  const catalog = await catalogPanel('f-event_types');
  main.append(h('h1', {}, 'New endpoint'), catalog);
  const holder = h('div');
  const form = settingsForm({ event_types: ['*'] }, false, 'Create endpoint', async (settings) => {
    const r = await api('POST', '/v1/webhook-endpoints', { query: app.tq(), body: settings });
    const ep = r.endpoint;
    clear(main).append(h('h1', {}, `Endpoint ${ep.endpoint_id} created`), secretNotice(r.secret),
      h('p', {}, h('a', { href: app.link(`/endpoints/${encodeURIComponent(ep.endpoint_id)}`), id: 'open-endpoint' }, 'Open the endpoint')));
    main.querySelector('h1').focus();
    announce(`Endpoint ${ep.endpoint_id} created`);
  });
  main.append(holder, form);
  const types = form.elements.event_types;
  types.addEventListener('input', () => showCoverage(catalog, types.value));
  showCoverage(catalog, types.value);
}

export async function endpoint(main, id) {
  const ep = await api('GET', `/v1/webhook-endpoints/${encodeURIComponent(id)}`, { query: app.tq() });
  const manage = app.can('manage_endpoints');
  const status = statusName(ep.status);
  main.append(h('h1', {}, `Endpoint ${ep.endpoint_id}`),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Status'), h('dd', {}, badge(status)),
      h('dt', {}, 'Circuit'), h('dd', {}, badge(circuitName(ep.circuit) || 'closed')),
      h('dt', {}, 'Config version'), h('dd', {}, ep.config_version),
      h('dt', {}, 'Secrets'), h('dd', {}, (ep.secrets || []).map((s) => `v${s.version}` + (s.expires_at ? ` (retires ${fmtTime(s.expires_at)})` : '')).join(', ')),
      h('dt', {}, 'Deliveries'), h('dd', {}, h('a', { href: app.link(`/deliveries?endpoint_id=${encodeURIComponent(ep.endpoint_id)}`) }, 'Search this endpoint\'s deliveries'))));

  const actions = h('div', { class: 'actions' });
  const act = async (verb, label) => {
    try {
      await api('POST', `/v1/webhook-endpoints/${encodeURIComponent(id)}/${verb}`, { query: app.tq(), body: {} });
      announce(`Endpoint ${label}`);
      await rerender(main, () => endpoint(main, id));
    } catch (e) { main.prepend(notice('error', e.message)); announce(e.message); }
  };
  if (manage && status === 'active') actions.append(h('button', { type: 'button', class: 'secondary', onclick: () => act('pause', 'paused') }, 'Pause'));
  if (manage && (status === 'paused' || status === 'disabled')) actions.append(h('button', { type: 'button', class: 'secondary', onclick: () => act('resume', 'resumed') }, 'Resume'));
  if (actions.childElementCount) main.append(actions);

  main.append(h('h2', {}, 'Health, last 24 hours'));
  const healthBox = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  main.append(healthBox);
  api('GET', `/v1/webhook-endpoints/${encodeURIComponent(id)}/health`, { query: app.tq() })
    .then((hl) => clear(healthBox).append(healthChart(hl)))
    .catch((e) => clear(healthBox).append(notice('error', e.message)));

  main.append(h('h2', {}, 'Settings'));
  const saved = h('div');
  main.append(saved, settingsForm(ep.settings, !manage, 'Save changes', async (settings) => {
    await api('PATCH', `/v1/webhook-endpoints/${encodeURIComponent(id)}`, { query: app.tq(), body: settings });
    announce('Settings saved');
    await rerender(main, () => endpoint(main, id));
  }));

  if (manage) main.append(rotateSection(id));
  if (app.can('replay')) main.append(recoverSection(id));
}

async function rerender(main, fn) {
  clear(main);
  await fn();
}

function rotateSection(id) {
  const sel = h('select', { id: 'rotate-overlap' },
    h('option', { value: '3600' }, '1 hour'), h('option', { value: '0', selected: true }, '24 hours (default)'), h('option', { value: '604800' }, '7 days'));
  const out = h('div');
  const sec = h('section', { 'aria-labelledby': 'rotate-h' }, h('h2', { id: 'rotate-h' }, 'Rotate the signing secret'),
    h('p', {}, 'A new secret starts signing at once. The previous one keeps signing beside it until the overlap ends, so every webhook carries two signatures meanwhile: your receiver accepts either, and you can switch it to the new secret without losing a delivery.'),
    h('form', { class: 'inline' }, h('label', { for: 'rotate-overlap' }, 'Overlap', sel),
      h('button', { type: 'submit' }, 'Rotate secret')), out);
  sec.querySelector('form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      const r = await api('POST', `/v1/webhook-endpoints/${encodeURIComponent(id)}/rotate-secret`, { query: app.tq(), body: { overlap_seconds: Number(sel.value) } });
      const prev = (r.endpoint.secrets || []).find((s) => s.expires_at);
      clear(out).append(secretNotice(r.secret, prev ? h('p', {}, `The previous secret (v${prev.version}) keeps signing until ${fmtTime(prev.expires_at)}.`) : null));
      announce('Secret rotated; the new secret is shown once');
    } catch (e) { clear(out).append(notice('error', e.message)); }
  });
  return sec;
}

function localInput(d) {
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

function recoverSection(id) {
  const now = new Date();
  const since = h('input', { type: 'datetime-local', id: 'recover-since', value: localInput(new Date(now - 24 * 3600e3)) });
  const until = h('input', { type: 'datetime-local', id: 'recover-until', value: localInput(new Date(now.getTime() + 60e3)) });
  const out = h('div', { role: 'status' });
  const form = h('form', { class: 'inline' }, h('label', { for: 'recover-since' }, 'Planned since', since), h('label', { for: 'recover-until' }, 'until', until),
    h('button', { type: 'submit' }, 'Recover failed deliveries'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      let r = await api('POST', `/v1/webhook-endpoints/${encodeURIComponent(id)}/recover`, {
        query: app.tq(), body: { since: new Date(since.value).toISOString(), until: new Date(until.value).toISOString() },
      });
      const show = () => clear(out).append(h('p', {}, `Recovery ${r.recovery_id}: found ${r.found || 0} failed, replayed ${r.replayed || 0}${r.done ? ' — done' : '…'}`));
      show();
      const poll = setInterval(async () => {
        if (!out.isConnected) { clearInterval(poll); return; }
        try { r = await api('GET', `/v1/webhook-endpoints/${encodeURIComponent(id)}/recoveries/${encodeURIComponent(r.recovery_id)}`, { query: app.tq() }); } catch { return; }
        show();
        if (r.done) { clearInterval(poll); announce(`Recovery done: ${r.replayed || 0} replayed`); }
      }, 1000);
    } catch (e) { clear(out).append(notice('error', e.message)); }
  });
  return h('section', { 'aria-labelledby': 'recover-h' }, h('h2', { id: 'recover-h' }, 'Recover a window'),
    h('p', {}, 'Replays every failed delivery of this endpoint planned in the window, once each, as a background job.'), form, out);
}

// ---- deliveries ----

// cursors remembers, per search, the cursors of the pages already seen,
// so "Previous page" goes back without the API having to page backwards.
const cursors = new Map();

export async function deliveries(main, q) {
  const filters = ['endpoint_id', 'status', 'event_type', 'since', 'until', 'page_size'];
  const get = (k) => q.get(k) || '';
  const key = filters.map((k) => get(k)).join('|');
  const cursor = get('cursor');
  const page = Number(get('page') || 1);
  if (!cursors.has(key)) cursors.set(key, ['']);
  const stack = cursors.get(key);
  stack[page - 1] = cursor;

  main.append(h('h1', {}, 'Deliveries'));
  const form = h('form', { class: 'inline', 'aria-label': 'Search deliveries' },
    h('label', { for: 'q-endpoint' }, 'Endpoint', h('input', { type: 'text', id: 'q-endpoint', name: 'endpoint_id', value: get('endpoint_id') })),
    h('label', { for: 'q-status' }, 'Status', h('select', { id: 'q-status', name: 'status' }, ['', 'pending', 'succeeded', 'failed'].map((s) => h('option', { value: s, selected: s === get('status') }, s || 'any')))),
    h('label', { for: 'q-type' }, 'Event type', h('input', { type: 'text', id: 'q-type', name: 'event_type', value: get('event_type') })),
    h('label', { for: 'q-since' }, 'Planned since', h('input', { type: 'datetime-local', id: 'q-since', name: 'since', value: get('since') })),
    h('label', { for: 'q-until' }, 'until', h('input', { type: 'datetime-local', id: 'q-until', name: 'until', value: get('until') })),
    h('label', { for: 'q-size' }, 'Rows', h('select', { id: 'q-size', name: 'page_size' }, ['25', '50', '100'].map((s) => h('option', { value: s, selected: s === (get('page_size') || '50') }, s)))),
    h('button', { type: 'submit' }, 'Search'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const el of form.elements) if (el.name && el.value) p.set(el.name, el.value);
    location.hash = app.link('/deliveries') + (p.toString() ? '?' + p : '');
  });
  main.append(form);

  const query = { ...app.tq(), endpoint_id: get('endpoint_id'), status: get('status'), event_type: get('event_type'), page_size: get('page_size') || 50, cursor };
  for (const k of ['since', 'until']) if (get(k)) query[k] = new Date(get(k)).toISOString();
  const table = h('table', { id: 'deliveries' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' });
  main.append(table, pager);

  const load = async () => {
    const t0 = performance.now();
    const r = await api('GET', '/v1/webhook-deliveries', { query });
    const ds = r.deliveries || [];
    clear(table).append(
      h('caption', {}, `Page ${page}: ${ds.length} deliver${ds.length === 1 ? 'y' : 'ies'}, newest first`),
      h('thead', {}, h('tr', {}, ['Event', 'Type', 'Endpoint', 'Status', 'Attempts', 'Last HTTP', 'Planned'].map((c) => h('th', { scope: 'col', class: c === 'Attempts' || c === 'Last HTTP' ? 'num' : undefined }, c)))),
      h('tbody', {}, ds.map((d) => h('tr', { 'data-delivery': d.delivery_id, 'data-event': d.event_id },
        h('td', {}, h('a', { href: app.link(`/deliveries/${encodeURIComponent(d.delivery_id)}`) }, d.event_id)),
        h('td', {}, d.event_type),
        h('td', {}, d.endpoint_id),
        h('td', {}, badge(d.status)),
        h('td', { class: 'num' }, d.attempt_count || 0),
        h('td', { class: 'num' }, d.last_http_status || ''),
        h('td', {}, fmtTime(d.planned_at))))));
    const nav = (p, c) => {
      const params = new URLSearchParams(q);
      params.set('page', p);
      if (c) params.set('cursor', c); else params.delete('cursor');
      return app.link('/deliveries') + '?' + params;
    };
    clear(pager);
    if (page > 1) pager.append(h('a', { href: nav(page - 1, stack[page - 2]), id: 'prev-page' }, '← Previous page'));
    pager.append(h('span', { class: 'muted' }, `Page ${page}`));
    if (r.next_cursor) pager.append(h('a', { href: nav(page + 1, r.next_cursor), id: 'next-page' }, 'Next page →'));
    table.dataset.loadMs = String(Math.round(performance.now() - t0));
    return ds.length;
  };
  const n = await load();
  announce(`Page ${page} of deliveries: ${n} rows`);
  // The first page follows new deliveries as they arrive.
  if (page === 1) app.every(2000, () => { if (!table.contains(document.activeElement)) load().catch(() => {}); });
}

export async function delivery(main, id) {
  const d = await api('GET', `/v1/webhook-deliveries/${encodeURIComponent(id)}`, { query: app.tq() });
  main.append(h('h1', {}, `Delivery of ${d.event_id}`));
  const facts = h('dl', { class: 'facts' },
    h('dt', {}, 'Delivery id (webhook-id)'), h('dd', { class: 'mono' }, d.delivery_id),
    h('dt', {}, 'Status'), h('dd', { id: 'delivery-status' }, badge(d.status)),
    h('dt', {}, 'Endpoint'), h('dd', {}, h('a', { href: app.link(`/endpoints/${encodeURIComponent(d.endpoint_id)}`) }, d.endpoint_id)),
    h('dt', {}, 'Event type'), h('dd', {}, d.event_type),
    h('dt', {}, 'Planned'), h('dd', {}, fmtTime(d.planned_at)),
    d.next_attempt_at ? [h('dt', {}, 'Next automatic attempt'), h('dd', {}, fmtTime(d.next_attempt_at))] : null,
    d.finished_at ? [h('dt', {}, 'Finished'), h('dd', {}, fmtTime(d.finished_at))] : null);
  main.append(facts);
  const actions = h('div', { class: 'actions' });
  const out = h('div');
  if (app.can('replay')) {
    actions.append(h('button', { type: 'button', id: 'replay', onclick: () => replay(main, d, out) }, 'Replay'));
  }
  if (app.isAdmin()) actions.append(h('a', { href: `#/audit/trace/${encodeURIComponent(d.tenant_id)}/${encodeURIComponent(d.delivery_id)}`, id: 'follow-audit' }, 'Follow it in the audit log'));
  main.append(actions, out, h('h2', {}, 'Attempts'), attemptsTable(d.attempts || [], d.erased));
}

async function replay(main, d, out) {
  const before = (d.attempts || []).length;
  try {
    await api('POST', `/v1/webhook-deliveries/${encodeURIComponent(d.delivery_id)}/replay`, { query: app.tq(), body: {} });
  } catch (e) { clear(out).append(notice('error', e.message)); announce(e.message); return; }
  clear(out).append(notice('info', 'Replay requested: one manual attempt, signed with the current secret. Waiting for it…'));
  announce('Replay requested');
  // The attempt runs on the endpoint's node; poll until it is recorded.
  for (let i = 0; i < 30; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    if (!out.isConnected) return;
    const now = await api('GET', `/v1/webhook-deliveries/${encodeURIComponent(d.delivery_id)}`, { query: app.tq() });
    if ((now.attempts || []).length > before) {
      await rerender(main, () => delivery(main, d.delivery_id));
      const a = now.attempts[now.attempts.length - 1];
      announce(`New attempt ${a.number}: ${a.http_status || a.error_class}`);
      return;
    }
  }
  clear(out).append(notice('error', 'The replay has not been attempted yet; reload in a while.'));
}

function hex(b64) {
  if (!b64) return '';
  const bin = atob(b64);
  let s = '';
  for (let i = 0; i < bin.length; i++) s += bin.charCodeAt(i).toString(16).padStart(2, '0');
  return s;
}

function text(b64) {
  if (!b64) return '';
  try { return new TextDecoder('utf-8', { fatal: false }).decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))); } catch { return ''; }
}

function attemptsTable(attempts, erased) {
  if (!attempts.length) return h('p', { id: 'attempts' }, 'No attempt yet.');
  return h('table', { id: 'attempts' },
    h('thead', {}, h('tr', {}, ['#', 'Kind', 'Started', 'Latency', 'HTTP', 'Error', 'Response (SHA-256, first bytes)'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, attempts.map((a) => h('tr', { 'data-attempt': a.number },
      h('td', { class: 'num' }, a.number),
      h('td', {}, a.manual ? 'manual' : 'automatic'),
      h('td', {}, fmtTime(a.started_at)),
      h('td', { class: 'num' }, a.latency_us ? `${(Number(a.latency_us) / 1000).toFixed(1)} ms` : ''),
      h('td', { class: 'num' }, a.http_status || ''),
      h('td', {}, [a.error_class && a.error_class !== 'ERROR_CLASS_UNSPECIFIED' ? String(a.error_class).replace('ERROR_CLASS_', '').toLowerCase() : '', a.error ? `: ${a.error}` : ''].join('')),
      h('td', {}, h('div', { class: 'mono muted' }, hex(a.response_sha256).slice(0, 16)), erased && !a.response_prefix ? h('p', { class: 'muted', 'data-erased': '' }, 'erased') : h('pre', {}, text(a.response_prefix)))))));
}

// ---- portal links (API key, or the admin for a tenant) ----

export async function portalLinks(main) {
  main.append(h('h1', {}, 'Portal links'),
    h('p', {}, 'A portal link opens this tenant\'s webhook portal for a short time, with the capabilities you choose, without revealing an API key. Embed it in an iframe on an origin the operator allowed, or send it to your customer.'));
  const caps = [['manage_endpoints', 'Manage endpoints'], ['replay', 'Replay and recover']];
  const form = h('form', { class: 'inline' },
    h('fieldset', {}, h('legend', {}, 'Capabilities'),
      h('label', {}, h('input', { type: 'checkbox', checked: true, disabled: true }), ' Read'),
      caps.map(([v, l]) => h('label', {}, h('input', { type: 'checkbox', name: 'cap', value: v }), ' ' + l))),
    h('label', { for: 'pl-ttl' }, 'Valid for', h('select', { id: 'pl-ttl' }, [['900', '15 minutes'], ['3600', '1 hour'], ['28800', '8 hours'], ['86400', '24 hours']].map(([v, l]) => h('option', { value: v, selected: v === '3600' }, l)))),
    h('label', { for: 'pl-label' }, 'Label', h('input', { type: 'text', id: 'pl-label' })),
    h('button', { type: 'submit' }, 'Create portal link'));
  const out = h('div');
  const list = h('div');
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const capabilities = [...form.querySelectorAll('input[name=cap]:checked')].map((i) => i.value);
    try {
      const r = await api('POST', '/v1/portal-tokens', { body: { ...app.tq(), capabilities, ttl_seconds: Number(form.querySelector('#pl-ttl').value), label: form.querySelector('#pl-label').value } });
      clear(out).append(notice('secret', h('p', {}, h('strong', {}, 'Portal link, shown once: ')),
        h('p', {}, h('code', { id: 'portal-link' }, location.origin + r.portal_path)),
        h('p', {}, `Valid until ${fmtTime(r.token.expires_at)}. Anyone holding it can use it until then or until you revoke it.`)));
      announce('Portal link created');
      await renderTokens(list);
    } catch (e) { clear(out).append(notice('error', e.message)); }
  });
  main.append(form, out, h('h2', {}, 'Active links'), list);
  await renderTokens(list);
}

async function renderTokens(list, cursor = '') {
  const r = await api('GET', '/v1/portal-tokens', { query: { ...app.tq(), cursor } });
  const toks = r.tokens || [];
  clear(list).append(toks.length ? h('table', {},
    h('thead', {}, h('tr', {}, ['Token', 'Label', 'Capabilities', 'Expires', ''].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, toks.map((t) => h('tr', {},
      h('td', { class: 'mono' }, t.token_id), h('td', {}, t.label || ''), h('td', {}, (t.capabilities || []).join(', ')),
      h('td', {}, fmtTime(t.expires_at)),
      h('td', {}, h('button', {
        type: 'button', class: 'danger', 'aria-label': `Revoke ${t.token_id}`,
        onclick: async () => { await api('DELETE', `/v1/portal-tokens/${encodeURIComponent(t.token_id)}`, { query: app.tq() }); announce(`Revoked ${t.token_id}`); await renderTokens(list); },
      }, 'Revoke')))))) : h('p', {}, cursor ? 'No more active links.' : 'No active link.'));
  if (r.next_cursor) {
    list.append(h('nav', { class: 'pager', 'aria-label': 'Pages' },
      h('button', { type: 'button', class: 'secondary', id: 'tokens-next', onclick: () => renderTokens(list, r.next_cursor) }, 'Next page →')));
  }
}

// The operator's screens (admin token): tenants and quotas, the cluster's
// health, and the audit browser over the log.
import { api, ApiError } from './api.js';
import { h, clear, announce, fmtTime, fmtDur, field, showFieldError, clearFieldErrors, notice } from './dom.js';
import { app } from './state.js';

// ---- tenants ----

export async function tenants(main) {
  main.append(h('h1', {}, 'Tenants'));
  const [r, held] = await Promise.all([api('GET', '/v1/tenants', { query: { page_size: 500 } }), throttledTenants()]);
  const ts = r.tenants || [];
  main.append(h('table', { id: 'tenants' },
    h('caption', {}, `${ts.length} tenant${ts.length === 1 ? '' : 's'}; quota 0 means the node's default; held back: what its attempts waited for over the last minute, over the cluster`),
    h('thead', {}, h('tr', {}, ['Tenant', 'Name', 'Attempts/s', 'In flight', 'Weight', 'Max endpoints', 'Held back', 'Created', ''].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, ts.map((t) => h('tr', { 'data-tenant': t.tenant_id, class: held.has(t.tenant_id) ? 'throttled' : undefined },
      h('td', {}, h('a', { href: `#/t/${encodeURIComponent(t.tenant_id)}/endpoints` }, t.tenant_id)),
      h('td', {}, t.name || ''),
      h('td', { class: 'num' }, t.quota?.attempts_per_second || 0),
      h('td', { class: 'num' }, t.quota?.max_in_flight || 0),
      h('td', { class: 'num' }, t.quota?.weight || 0),
      h('td', { class: 'num' }, t.quota?.max_endpoints || 0),
      h('td', { class: 'held' }, heldText(held.get(t.tenant_id))),
      h('td', {}, fmtTime(t.created_at)),
      h('td', {}, h('button', { type: 'button', class: 'secondary', 'aria-label': `Change the quota of ${t.tenant_id}`, onclick: () => quotaForm(main, t) }, 'Quota')))))));
  main.append(createTenantForm());
}

// throttledTenants sums the members' throttled tenants (GET /v1/cluster)
// by tenant: what held each back over the last minute, over the cluster.
async function throttledTenants() {
  const c = await api('GET', '/v1/cluster').catch(() => ({}));
  const out = new Map();
  for (const n of c.nodes || []) {
    for (const t of n.throttled || []) {
      const a = out.get(t.tenant_id) || { quota_seconds: 0, slot_seconds: 0, rate_limit_seconds: 0, waiting: 0, at_cap: false };
      a.quota_seconds += t.quota_seconds || 0;
      a.slot_seconds += t.slot_seconds || 0;
      a.rate_limit_seconds += t.rate_limit_seconds || 0;
      a.waiting += t.waiting || 0;
      a.at_cap = a.at_cap || !!t.at_cap;
      out.set(t.tenant_id, a);
    }
  }
  return out;
}

// heldText says what held a tenant back: "quota 12.0 s, slot 300 ms; 4
// waiting, at the slot cap", or "" when nothing did.
function heldText(t) {
  if (!t) return '';
  const parts = [['quota', t.quota_seconds], ['slot', t.slot_seconds], ['rate limit', t.rate_limit_seconds]]
    .filter(([, v]) => v > 0).map(([k, v]) => `${k} ${fmtDur(v)}`);
  let text = parts.join(', ');
  if (t.waiting) text += `${text ? '; ' : ''}${t.waiting} waiting`;
  if (t.at_cap) text += `${text ? ', ' : ''}at the slot cap`;
  return text;
}

function quotaForm(main, t) {
  const old = document.getElementById('quota-form');
  if (old) old.remove();
  const q = t.quota || {};
  const rate = h('input', { type: 'number', min: '0', step: 'any', value: q.attempts_per_second || 0 });
  const inFlight = h('input', { type: 'number', min: '0', value: q.max_in_flight || 0 });
  const weight = h('input', { type: 'number', min: '0', value: q.weight || 0 });
  const endpoints = h('input', { type: 'number', min: '0', value: q.max_endpoints || 0 });
  const form = h('form', { class: 'grid', id: 'quota-form', 'aria-labelledby': 'quota-h' },
    ...field('qa', 'Attempts per second', rate),
    ...field('qi', 'Max in flight', inFlight),
    ...field('qw', 'Weight (fair share)', weight),
    ...field('qe', 'Max endpoints', endpoints, '0 means the default, 1,000.'),
    h('span'), h('div', {}, h('button', { type: 'submit' }, 'Save quota')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearFieldErrors(form);
    try {
      await api('PUT', `/v1/tenants/${encodeURIComponent(t.tenant_id)}/quota`, {
        body: { attempts_per_second: Number(rate.value), max_in_flight: Number(inFlight.value), weight: Number(weight.value), max_endpoints: Number(endpoints.value) },
      });
      announce(`Quota of ${t.tenant_id} saved`);
      clear(main); await tenants(main);
    } catch (e) { form.prepend(notice('error', e.message)); }
  });
  main.append(h('h2', { id: 'quota-h' }, `Quota of ${t.tenant_id}`), form);
  rate.focus();
}

function createTenantForm() {
  const form = h('form', { class: 'grid', 'aria-labelledby': 'ct-h' },
    ...field('ct-id', 'Tenant id', h('input', { type: 'text', name: 'tenant_id' }), 'Letters, digits and _; empty generates one.'),
    ...field('ct-name', 'Name', h('input', { type: 'text', name: 'name' })),
    h('span'), h('div', {}, h('button', { type: 'submit' }, 'Create tenant')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearFieldErrors(form);
    try {
      const t = await api('POST', '/v1/tenants', { body: { tenant_id: form.elements.tenant_id.value.trim(), name: form.elements.name.value.trim() } });
      announce(`Tenant ${t.tenant_id} created`);
      location.hash = `#/t/${encodeURIComponent(t.tenant_id)}/endpoints`;
    } catch (e) {
      if (!(e instanceof ApiError) || !showFieldError(e.field === 'name' ? 'ct-name' : 'ct-id', e.detail)) form.prepend(notice('error', e.message));
    }
  });
  return h('section', {}, h('h2', { id: 'ct-h' }, 'New tenant'), form);
}

// ---- cluster ----

export async function cluster(main) {
  main.append(h('h1', {}, 'Cluster'));
  const box = h('div');
  main.append(box);
  const load = async () => {
    const c = await api('GET', '/v1/cluster');
    const nodes = c.nodes || [];
    clear(box).append(
      h('dl', { class: 'facts' },
        h('dt', {}, 'Members'), h('dd', { id: 'members' }, String(nodes.length)),
        h('dt', {}, 'Log'), h('dd', {}, c.store),
        h('dt', {}, 'Partitions'), h('dd', {}, `${c.partitions}, of which ${c.unserved || 0} served by no live member`),
        h('dt', {}, 'As of'), h('dd', {}, fmtTime(c.at))),
      h('table', { id: 'nodes' },
        h('caption', {}, 'Each member\'s own figures (those of /metrics)'),
        h('thead', {}, h('tr', {}, ['Member', 'Grains', 'Partitions owned / live', 'Projection lag', 'Oldest new', 'Most overdue retry', 'Endpoints with due work', 'Slots used', 'Waiting new / retry'].map((x) => h('th', { scope: 'col' }, x)))),
        h('tbody', {}, nodes.map((n) => h('tr', {},
          h('td', {}, h('div', { class: 'mono' }, n.address), h('div', { class: 'muted' }, n.member_id + (n.answered ? ' (this node)' : '')), n.error ? h('div', { class: 'field-error' }, n.error) : null),
          h('td', {}, Object.entries(n.grains || {}).map(([k, v]) => `${k} ${v}`).join(', ')),
          h('td', { class: 'num' }, `${n.partitions_owned || 0} / ${n.partitions_live || 0}`),
          h('td', { class: 'num' }, `${fmtDur(n.projection_lag_seconds || 0)}${n.projection_behind ? ` (${n.projection_behind} behind)` : ''}`),
          h('td', { class: 'num' }, fmtDur(n.oldest_new_seconds || 0)),
          h('td', { class: 'num' }, fmtDur(n.oldest_retry_seconds || 0)),
          h('td', { class: 'num' }, n.due_endpoints || 0),
          h('td', { class: 'num' }, `${n.slots_used || 0} of ${n.slots || 0}`),
          h('td', { class: 'num' }, `${n.waiting_new || 0} / ${n.waiting_retry || 0}`))))),
      throttledTable(nodes));
  };
  await load();
  app.every(5000, () => load().catch(() => {}));
}

// throttledTable lists, member by member, the tenants it held back most
// over the last minute and by what.
function throttledTable(nodes) {
  const rows = nodes.flatMap((n) => (n.throttled || []).map((t) => ({ node: n.address, ...t })));
  if (!rows.length) return h('p', { id: 'throttled-none' }, 'No tenant was held back over the last minute.');
  return h('table', { id: 'throttled' },
    h('caption', {}, 'Tenants held back over the last minute: seconds their attempts waited, by what held them (at most 20 per member)'),
    h('thead', {}, h('tr', {}, ['Member', 'Tenant', 'Quota', 'Dispatcher slot', 'Rate limits', 'Waiting now', 'At slot cap'].map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, rows.map((t) => h('tr', { 'data-tenant': t.tenant_id },
      h('td', { class: 'mono' }, t.node),
      h('td', {}, h('a', { href: `#/t/${encodeURIComponent(t.tenant_id)}/endpoints` }, t.tenant_id)),
      h('td', { class: 'num' }, fmtDur(t.quota_seconds || 0)),
      h('td', { class: 'num' }, fmtDur(t.slot_seconds || 0)),
      h('td', { class: 'num' }, fmtDur(t.rate_limit_seconds || 0)),
      h('td', { class: 'num' }, t.waiting || 0),
      h('td', {}, t.at_cap ? 'yes' : '')))));
}

// ---- audit ----

const categories = ['tenant', 'endpoint', 'event', 'delivery', 'portal'];

export async function audit(main, q) {
  main.append(h('h1', {}, 'Audit log'),
    h('p', {}, 'Every change Hookline made, as recorded in its log: read a stream by name, a whole category, or follow a delivery.'));
  const streamForm = h('form', { class: 'inline', 'aria-label': 'Read a stream' },
    h('label', { for: 'a-stream' }, 'Stream', h('input', { type: 'text', id: 'a-stream', value: q.get('stream') || '', placeholder: 'endpoint-ep_123', size: 40 })),
    h('label', {}, h('span', {}, 'Order'), h('select', { id: 'a-order' }, h('option', { value: 'f' }, 'oldest first'), h('option', { value: 'b', selected: q.get('backwards') === '1' }, 'newest first'))),
    h('button', { type: 'submit' }, 'Read stream'));
  streamForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    location.hash = `#/audit?stream=${encodeURIComponent(streamForm.querySelector('#a-stream').value.trim())}${streamForm.querySelector('#a-order').value === 'b' ? '&backwards=1' : ''}`;
  });
  const catForm = h('form', { class: 'inline', 'aria-label': 'Read a category' },
    h('label', { for: 'a-cat' }, 'Category', h('select', { id: 'a-cat' }, categories.map((c) => h('option', { value: c, selected: c === q.get('category') }, c)))),
    h('label', { for: 'a-type' }, 'Event type', h('input', { type: 'text', id: 'a-type', value: q.get('event_type') || '', placeholder: 'any' })),
    h('button', { type: 'submit' }, 'Read category'));
  catForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = catForm.querySelector('#a-type').value.trim();
    location.hash = `#/audit?category=${catForm.querySelector('#a-cat').value}${t ? '&event_type=' + encodeURIComponent(t) : ''}`;
  });
  const traceForm = h('form', { class: 'inline', 'aria-label': 'Follow a delivery' },
    h('label', { for: 'a-tenant' }, 'Tenant', h('input', { type: 'text', id: 'a-tenant' })),
    h('label', { for: 'a-dlv' }, 'Delivery id', h('input', { type: 'text', id: 'a-dlv', size: 34 })),
    h('button', { type: 'submit' }, 'Follow delivery'));
  traceForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    location.hash = `#/audit/trace/${encodeURIComponent(traceForm.querySelector('#a-tenant').value.trim())}/${encodeURIComponent(traceForm.querySelector('#a-dlv').value.trim())}`;
  });
  main.append(streamForm, catForm, traceForm);

  const out = h('section', { 'aria-label': 'Events', id: 'audit-events' });
  main.append(out);
  let path = null;
  const query = { cursor: q.get('cursor') || '' };
  if (q.get('stream')) { path = `/v1/audit/streams/${encodeURIComponent(q.get('stream'))}`; query.backwards = q.get('backwards') === '1'; }
  else if (q.get('category')) { path = `/v1/audit/categories/${encodeURIComponent(q.get('category'))}`; query.event_type = q.get('event_type') || ''; }
  if (!path) return;
  const page = await api('GET', path, { query });
  const evs = page.events || [];
  out.append(h('div', {}, h('h2', {}, q.get('stream') ? `Stream ${q.get('stream')}` : `Category ${q.get('category')}`),
    page.esdb_url ? h('p', {}, h('a', { href: page.esdb_url, target: '_blank', rel: 'noopener noreferrer' }, 'Open this stream in the EventStoreDB UI')) : null,
    h('p', { class: 'muted' }, `${evs.length} event${evs.length === 1 ? '' : 's'}` + (page.scanned ? ` (${page.scanned} log records scanned)` : '')),
    evs.map(eventView)));
  if (page.next_cursor) {
    const p = new URLSearchParams(q);
    p.set('cursor', page.next_cursor);
    out.append(h('nav', { class: 'pager', 'aria-label': 'Pages' }, h('a', { href: '#/audit?' + p, id: 'audit-next' }, 'Next page →')));
  }
  announce(`${evs.length} events`);
}

export async function trace(main, tenantID, deliveryID) {
  const t = await api('GET', `/v1/audit/deliveries/${encodeURIComponent(deliveryID)}`, { query: { tenant_id: tenantID } });
  const d = t.delivery;
  main.append(h('h1', {}, `Delivery ${d.delivery_id}`),
    h('p', {}, `Event ${d.event_id} (${d.event_type}) of tenant ${d.tenant_id} to endpoint ${d.endpoint_id}: ${d.status} after ${d.attempt_count || 0} attempt(s). From its publish to its last attempt, as the log recorded it:`),
    h('p', {}, 'Streams: ', streamLink(t.event_stream), ', ', streamLink(t.delivery_stream)),
    h('ol', { id: 'trace', class: 'plain' }, (t.events || []).map((e) => h('li', {}, eventView(e)))));
}

function streamLink(stream) {
  return h('a', { href: `#/audit?stream=${encodeURIComponent(stream)}` }, stream);
}

function actor(a) {
  if (!a) return '';
  return `${String(a.kind || '').replace('KIND_', '').toLowerCase()}:${a.id || ''}`;
}

function eventView(e) {
  const data = e.data ? { ...e.data } : null;
  // An event's payload is shown as the text it is, when it is text.
  let payload = null;
  if (data && typeof data.payload === 'string') {
    try { payload = new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(atob(data.payload), (c) => c.charCodeAt(0))); } catch { payload = null; }
  }
  return h('article', { class: 'event', 'data-type': e.type },
    h('header', {},
      h('span', { class: 'type' }, e.type),
      h('span', {}, streamLink(e.stream), `@${e.revision || 0}`),
      h('span', { class: 'muted' }, `position ${e.position}`),
      h('span', { class: 'muted' }, fmtTime(e.recorded_at)),
      e.issued_by ? h('span', {}, 'issued by ', h('code', {}, actor(e.issued_by))) : null,
      e.esdb_url ? h('a', { href: e.esdb_url, target: '_blank', rel: 'noopener noreferrer' }, 'EventStoreDB UI') : null),
    payload !== null ? h('p', {}, 'Payload: ', h('code', {}, payload)) : null,
    h('pre', {}, data ? JSON.stringify(data, null, 2) : '(this build cannot decode the event)'));
}

// The tenant's event catalog beside the endpoint form, and the rule by
// which an endpoint's event types match an event's type: the node's rule
// (package eventtype), which the browser test checks this copy against.
// A name matches itself; a prefix pattern, order.*, every type that
// starts with "order." at any depth; * every type but Hookline's
// operational ones (hookline.…); no entry at all counts as *.
import { api } from './api.js';
import { h, announce } from './dom.js';
import { app } from './state.js';

const reserved = 'hookline.';

// patterns returns the entries that match typ, the most specific first:
// typ, then each prefix pattern, longest first, then * (not for an
// operational type).
export function patterns(typ) {
  if (typ === '*') return ['*'];
  const out = [typ];
  for (let i = typ.length - 1; i > 0; i--) {
    if (typ[i] === '.') out.push(`${typ.slice(0, i)}.*`);
  }
  if (!typ.startsWith(reserved)) out.push('*');
  return out;
}

// matchedBy returns the entry of types that matches typ, the most
// specific one, or '' when none does.
export function matchedBy(types, typ) {
  const entries = types.length ? types : ['*'];
  return patterns(typ).find((p) => entries.includes(p)) || '';
}

// entriesOf reads the form's comma-separated event types.
export function entriesOf(value) {
  return String(value || '').split(',').map((x) => x.trim()).filter(Boolean);
}

// describeEntry says what an entry of an endpoint's event types receives.
export function describeEntry(entry) {
  if (entry === '*') return 'every event type';
  if (entry.endsWith('.*')) return `every type that starts with ${entry.slice(0, -1)}`;
  return '';
}

// showCoverage marks each catalog type with the entry of the form's event
// types that receives it, if any.
export function showCoverage(panel, value) {
  const types = entriesOf(value);
  for (const li of panel.querySelectorAll('li[data-type]')) {
    const by = types.length ? matchedBy(types, li.dataset.type) : '';
    const note = li.querySelector('.covered');
    note.textContent = by === '' ? '' : by === li.dataset.type ? 'subscribed' : `subscribed through ${by}`;
    li.dataset.covered = by;
  }
}

// groupsOf returns the prefixes (first segments) that two or more catalog
// types share, for a pattern that subscribes to each group at once.
function groupsOf(types) {
  const count = new Map();
  for (const t of types) {
    const i = t.indexOf('.');
    if (i > 0 && !t.startsWith(reserved)) count.set(t.slice(0, i), (count.get(t.slice(0, i)) || 0) + 1);
  }
  return [...count].filter(([, n]) => n > 1).map(([p]) => `${p}.*`).sort();
}

// catalogPanel lists the tenant's event catalog: each type with its
// description, example and schema, whether the form's event types
// receive it (and through which pattern), a button that adds it, and one
// per shared prefix that adds its pattern. The field is the form's event
// types input, made after the panel: the buttons find it by its id. Empty
// when the tenant has no catalog.
export async function catalogPanel(fieldId) {
  let r;
  try { r = await api('GET', '/v1/event-types', { query: app.tq() }); } catch { return h('div'); }
  const types = r.event_types || [];
  if (!types.length) return h('div');
  let panel;
  const add = (entry) => {
    const f = document.getElementById(fieldId);
    const cur = entriesOf(f.value).filter((x) => x !== '*');
    const by = matchedBy(cur, entry);
    if (by !== '' && cur.length) {
      announce(`${entry} is already subscribed${by === entry ? '' : ` through ${by}`}`);
      return;
    }
    // A pattern takes the place of the names and patterns it covers.
    const kept = entry.endsWith('.*') ? cur.filter((x) => !x.startsWith(entry.slice(0, -1))) : cur;
    f.value = [...kept, entry].join(', ');
    showCoverage(panel, f.value);
    announce(`${entry} added to the event types`);
  };
  const json = (v) => h('pre', {}, JSON.stringify(v, null, 2));
  const groups = groupsOf(types.map((t) => t.event_type));
  panel = h('section', { 'aria-labelledby': 'catalog-h' },
    h('h2', { id: 'catalog-h' }, 'Event types you can subscribe to'),
    groups.length ? h('div', { class: 'actions', id: 'catalog-groups' }, groups.map((g) => h('button', {
      type: 'button', class: 'secondary', 'data-pattern': g, onclick: () => add(g),
    }, `Subscribe to ${g}`))) : null,
    h('ul', { id: 'catalog', class: 'catalog' }, types.map((t) => h('li', { 'data-type': t.event_type },
      h('code', {}, t.event_type), ' ', h('span', { class: 'muted' }, `version ${t.version}`), ' ',
      h('button', { type: 'button', onclick: () => add(t.event_type) }, 'Subscribe'), ' ',
      h('span', { class: 'covered muted', 'aria-live': 'polite' }),
      t.description ? h('p', {}, t.description) : null,
      t.example ? h('details', {}, h('summary', {}, 'Example payload'), json(t.example)) : null,
      t.schema ? h('details', {}, h('summary', {}, 'Schema'), json(t.schema)) : null))));
  return panel;
}

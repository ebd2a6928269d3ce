// DOM helpers. The console builds every node with these and sets text
// with textContent only: no HTML strings, so nothing from the API can
// become markup (the CSP requires Trusted Types, which enforces it).

const SVG = 'http://www.w3.org/2000/svg';

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = String(v);
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// h builds an HTML element: h('a', {href: '#/x', onclick: f}, 'text', child).
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

// s builds an SVG element.
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG, tag), attrs, children);
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

// announce says msg in the polite live region (screen readers read it).
export function announce(msg) {
  const st = document.getElementById('status');
  st.textContent = '';
  // A new text node after a clear is announced even when msg repeats.
  setTimeout(() => { st.textContent = msg; }, 20);
}

export function fmtTime(ts) {
  if (!ts) return '';
  const d = new Date(ts);
  if (isNaN(d)) return String(ts);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

export function fmtDur(seconds) {
  if (seconds === undefined || seconds === null) return '';
  const v = Number(seconds);
  if (v < 1) return `${Math.round(v * 1000)} ms`;
  if (v < 120) return `${v.toFixed(1)} s`;
  if (v < 7200) return `${Math.round(v / 60)} min`;
  return `${(v / 3600).toFixed(1)} h`;
}

export function badge(text) {
  const t = String(text || '').toLowerCase().replace(/^(status|circuit)_/, '');
  return h('span', { class: `badge ${t}` }, t.replace('_', ' '));
}

// field builds a labelled input of a grid form, with the place where the
// API's error for that field is shown.
export function field(id, label, input, hint) {
  input.id = id;
  const err = h('p', { id: `${id}-err`, class: 'field-error', hidden: true });
  const hintEl = hint ? h('p', { id: `${id}-hint`, class: 'hint' }, hint) : null;
  input.setAttribute('aria-describedby', [hint ? `${id}-hint` : '', `${id}-err`].join(' ').trim());
  return [h('label', { for: id }, label), h('div', {}, input, hintEl, err)];
}

// showFieldError puts msg under the input id and moves the focus there.
export function showFieldError(id, msg) {
  const input = document.getElementById(id);
  const err = document.getElementById(`${id}-err`);
  if (!input || !err) return false;
  input.setAttribute('aria-invalid', 'true');
  err.textContent = msg;
  err.hidden = false;
  input.focus();
  return true;
}

export function clearFieldErrors(form) {
  for (const el of form.querySelectorAll('[aria-invalid="true"]')) el.removeAttribute('aria-invalid');
  for (const el of form.querySelectorAll('.field-error')) { el.hidden = true; el.textContent = ''; }
}

export function notice(kind, ...children) {
  return h('div', { class: `notice ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, ...children);
}

// The endpoint's health over the last day: a bar per hour (succeeded,
// failed, pending deliveries, stacked) and a line of the median time to
// deliver, as SVG built node by node, with the same figures as a table for
// screen readers.
import { h, s, badge } from './dom.js';

export function healthChart(hl) {
  const buckets = hl.buckets || [];
  const W = 720, H = 160, pad = 28, bw = (W - pad * 2) / Math.max(buckets.length, 1);
  const n = (b) => Number(b.succeeded || 0) + Number(b.failed || 0) + Number(b.pending || 0);
  const maxN = Math.max(1, ...buckets.map(n));
  const maxLat = Math.max(1, ...buckets.map((b) => Number(b.p50_ms || 0)));
  const svg = s('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-labelledby': 'health-title' },
    s('title', { id: 'health-title' }, 'Deliveries per hour and median time to deliver, last 24 hours'),
    s('line', { class: 'axis', x1: pad, y1: H - pad, x2: W - pad, y2: H - pad }));
  const pts = [];
  buckets.forEach((b, i) => {
    const x = pad + i * bw + 1;
    let base = H - pad;
    for (const [k, cls] of [['succeeded', 'ok'], ['failed', 'bad'], ['pending', 'pend']]) {
      const v = Number(b[k] || 0);
      if (!v) continue;
      const top = base - (v / maxN) * (H - pad * 2);
      svg.append(s('rect', { class: cls, x, y: top, width: Math.max(bw - 2, 1), height: base - top }));
      base = top;
    }
    if (b.p50_ms) pts.push(`${x + bw / 2},${H - pad - (Number(b.p50_ms) / maxLat) * (H - pad * 2)}`);
    if (i % 6 === 0) svg.append(s('text', { x, y: H - 8 }, new Date(b.start).getHours() + ':00'));
  });
  if (pts.length > 1) svg.append(s('polyline', { class: 'lat', points: pts.join(' ') }));
  svg.append(s('text', { x: 2, y: pad - 10 }, `${maxN} deliveries`), s('text', { x: W - pad - 90, y: pad - 10 }, `p50 up to ${maxLat} ms`));

  const total = Number(hl.succeeded || 0) + Number(hl.failed || 0);
  const rate = total ? `${(Number(hl.success_rate || 0) * 100).toFixed(1)} %` : 'no finished delivery';
  const summary = h('p', { id: 'health-summary' }, `Success rate ${rate} (succeeded ${hl.succeeded || 0}, failed ${hl.failed || 0}, pending ${hl.pending || 0})`,
    hl.sampled ? ' — counted over the most recent 5,000 deliveries' : '', '. Circuit ', badge(String(hl.circuit || 'CIRCUIT_CLOSED').replace('CIRCUIT_', '')), '.',
    Number(hl.blocked_keys || 0) ? ` Ordering: ${hl.blocked_keys} key${Number(hl.blocked_keys) === 1 ? '' : 's'} blocked behind a failed delivery, the oldest for ${hl.oldest_blocked_seconds || 0} s.` : '');
  const table = h('details', {}, h('summary', {}, 'The same figures as a table'),
    h('table', {}, h('thead', {}, h('tr', {}, ['Hour', 'Succeeded', 'Failed', 'Pending', 'p50 to deliver', 'Max'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, buckets.filter((b) => n(b) > 0).map((b) => h('tr', {},
        h('td', {}, new Date(b.start).toLocaleString()), h('td', { class: 'num' }, b.succeeded || 0), h('td', { class: 'num' }, b.failed || 0),
        h('td', { class: 'num' }, b.pending || 0), h('td', { class: 'num' }, b.p50_ms ? `${b.p50_ms} ms` : ''), h('td', { class: 'num' }, b.max_ms ? `${b.max_ms} ms` : ''))))));
  return h('div', {}, summary,
    h('div', { class: 'legend', 'aria-hidden': 'true' }, h('span', { class: 'ok' }, 'succeeded'), h('span', { class: 'bad' }, 'failed'), h('span', { class: 'pend' }, 'pending'), h('span', { class: 'lat' }, 'median time to deliver')),
    svg, table);
}

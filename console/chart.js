// A stacked bar chart as inline SVG: buckets on x, one colour per series, the value axis from 0.
// The SVG has a title and a description for screen readers, and a data table follows it.
import { el } from './common.js';

const NS = 'http://www.w3.org/2000/svg';
// Colours with at least 3:1 contrast against white, distinguishable in common colour blindness.
export const PALETTE = ['#1d4ed8', '#b45309', '#047857', '#7c3aed', '#be123c', '#0e7490', '#4d7c0f', '#9d174d'];

function svg(tag, attrs = {}, text) {
  const n = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
  if (text !== undefined) n.textContent = text;
  return n;
}

function nice(max) {
  if (max <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= max) return m * p;
  return 10 * p;
}

/**
 * buckets: ISO starts; series: [{name, values: number[]}]; label: what is measured.
 * Returns a figure element holding the SVG, a legend and a table of the same numbers.
 */
export function stackedBars({ buckets, series, label, format = (v) => String(v), bucketLabel = (b) => b }) {
  const W = 760;
  const H = 260;
  const L = 64;
  const B = 36;
  const T = 12;
  const totals = buckets.map((_, i) => series.reduce((a, s) => a + (s.values[i] ?? 0), 0));
  const top = nice(Math.max(0, ...totals));
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-labelledby': 'chart-title chart-desc' });
  root.append(svg('title', { id: 'chart-title' }, label));
  const sum = totals.reduce((a, b) => a + b, 0);
  root.append(svg('desc', { id: 'chart-desc' }, `${buckets.length} buckets, total ${format(sum)}; the table below holds every value.`));
  const plotW = W - L - 8;
  const plotH = H - T - B;
  for (let i = 0; i <= 4; i++) {
    const y = T + plotH - (plotH * i) / 4;
    root.append(svg('line', { x1: L, x2: W - 8, y1: y, y2: y, stroke: '#d1d5db' }));
    root.append(svg('text', { x: L - 6, y: y + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#111827' }, format((top * i) / 4)));
  }
  const n = Math.max(buckets.length, 1);
  const slot = plotW / n;
  const bw = Math.max(1, slot * 0.75);
  buckets.forEach((b, i) => {
    let y = T + plotH;
    series.forEach((s, si) => {
      const v = s.values[i] ?? 0;
      if (v <= 0) return;
      const h = (plotH * v) / top;
      y -= h;
      const rect = svg('rect', { x: L + i * slot + (slot - bw) / 2, y, width: bw, height: h, fill: PALETTE[si % PALETTE.length] });
      rect.append(svg('title', {}, `${bucketLabel(b)} ${s.name}: ${format(v)}`));
      root.append(rect);
    });
    const every = Math.ceil(n / 8);
    if (i % every === 0)
      root.append(svg('text', { x: L + i * slot + slot / 2, y: H - 14, 'text-anchor': 'middle', 'font-size': 11, fill: '#111827' }, bucketLabel(b)));
  });
  root.append(svg('line', { x1: L, x2: W - 8, y1: T + plotH, y2: T + plotH, stroke: '#111827' }));
  const legend = el(
    'ul',
    { class: 'legend', 'aria-label': 'series' },
    series.map((s, si) => {
      // Set through the CSSOM: the CSP refuses style attributes.
      const swatch = el('span', { class: 'swatch', 'aria-hidden': 'true' });
      swatch.style.background = PALETTE[si % PALETTE.length];
      return el('li', {}, swatch, s.name);
    }),
  );
  const data = el('details', {}, el('summary', {}, 'Chart data as a table'));
  const t = el('table', {}, el('caption', {}, label));
  t.append(
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        el('th', { scope: 'col' }, 'bucket'),
        series.map((s) => el('th', { scope: 'col', class: 'num' }, s.name)),
      ),
    ),
  );
  const body = el('tbody');
  buckets.forEach((b, i) =>
    body.append(
      el(
        'tr',
        {},
        el('th', { scope: 'row' }, bucketLabel(b)),
        series.map((s) => el('td', { class: 'num' }, format(s.values[i] ?? 0))),
      ),
    ),
  );
  t.append(body);
  data.append(t);
  return el('figure', { class: 'chart', 'data-total': String(sum) }, root, legend, data);
}

/** Every bucket start (ISO, UTC) from since's bucket up to until: empty buckets are drawn too. */
export function bucketsBetween(since, until, bucket) {
  const step = bucket === 'day' ? 86_400_000 : 3_600_000;
  const out = [];
  for (let t = Math.floor(Date.parse(since) / step) * step; t < Date.parse(until); t += step) out.push(new Date(t).toISOString());
  return out;
}

/** Summary rows ({start, [group]: name, ...}) to buckets and series of one measure; `range` fills the empty buckets. */
export function seriesOf(rows, groupKey, measure, range) {
  const buckets = [...new Set([...(range ? bucketsBetween(range.since, range.until, range.bucket) : []), ...rows.map((r) => r.start)])].sort();
  const names = [...new Set(rows.map((r) => r[groupKey] ?? 'all'))].sort();
  const index = new Map(buckets.map((b, i) => [b, i]));
  const series = names.map((name) => ({ name, values: new Array(buckets.length).fill(0) }));
  const byName = new Map(series.map((s) => [s.name, s]));
  for (const r of rows) byName.get(r[groupKey] ?? 'all').values[index.get(r.start)] += Number(r[measure]);
  return { buckets, series };
}

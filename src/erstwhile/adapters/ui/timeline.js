// A validity timeline: one bar per item over a date axis, and an "as of" cursor.
// Moving the cursor marks the items valid at that instant by the rule of SPEC §3
// (valid_from <= t < valid_to, open-ended when valid_to is absent; a tombstone is
// never valid) and names them in the "as of" panel.
import { h, s, fill } from './dom.js';

const WIDTH = 960;
const LEFT = 8;
const RIGHT = 8;
const ROW = 40;
const AXIS = 30;
const DAY = 86400000;

function axisOf(items, now) {
  const starts = items.map((i) => i.start);
  const ends = items.map((i) => i.end ?? now);
  let lo = Math.min(...starts, now);
  let hi = Math.max(...starts, ...ends, now);
  if (hi - lo < DAY) { lo -= DAY; hi += DAY; }
  const pad = (hi - lo) * 0.04;
  return [lo - pad, hi + pad];
}

function ticks(lo, hi) {
  const out = [];
  // interior ticks only: a label at either edge would be cut off
  for (let k = 1; k < 6; k += 1) out.push(lo + ((hi - lo) * k) / 6);
  return out;
}

const day = (t) => new Date(t).toISOString().slice(0, 10);

export function validAt(item, t) {
  return item.live && item.start <= t && (item.end === null || t < item.end);
}

/**
 * items: [{id, label, start, end (ms or null), live, status, href}]
 * Returns {element, setCursor(t)}; `onCursor(t, validItems)` runs on every move.
 */
export function timeline(items, { now = Date.now(), cursor = now, onCursor } = {}) {
  const [lo, hi] = axisOf(items, now);
  const x = (t) => LEFT + ((t - lo) / (hi - lo)) * (WIDTH - LEFT - RIGHT);
  const height = AXIS + ROW * items.length + 8;
  const bars = [];
  const chart = s('svg', {
    class: 'timeline', viewBox: `0 0 ${WIDTH} ${height}`, role: 'img',
    'aria-label': 'validity timeline',
  });
  for (const t of ticks(lo, hi)) {
    chart.append(
      s('line', { class: 'tick', x1: x(t), x2: x(t), y1: AXIS - 6, y2: height }),
      s('text', { class: 'tick-label', x: x(t), y: AXIS - 12, 'text-anchor': 'middle' }, day(t)));
  }
  chart.append(s('line', { class: 'now', x1: x(now), x2: x(now), y1: AXIS - 6, y2: height },
    s('title', {}, 'now')));
  items.forEach((it, row) => {
    const top = AXIS + row * ROW;
    const end = it.end ?? hi;
    // a bar that starts in the right part of the chart is labelled leftwards from its end
    const late = x(it.start) > WIDTH * 0.6;
    const link = s('a', { href: it.href, class: 'bar-link' },
      s('text', {
        class: 'bar-label', y: top + 13, x: late ? x(end) - 2 : Math.max(x(it.start), LEFT) + 2,
        'text-anchor': late ? 'end' : 'start',
      }, it.label.length > 90 ? `${it.label.slice(0, 90)}…` : it.label),
      s('rect', {
        class: `bar status-${it.status}${it.end === null ? ' open' : ''}`,
        x: x(it.start), y: top + 18, width: Math.max(x(end) - x(it.start), 2), height: 14,
        rx: 3, 'data-id': it.id,
      }, s('title', {}, `${it.status}: ${new Date(it.start).toISOString()} → ` +
        (it.end === null ? 'open' : new Date(it.end).toISOString()))));
    bars.push(link.querySelector('rect'));
    chart.append(link);
  });
  const line = s('line', { class: 'cursor', y1: AXIS - 6, y2: height });
  chart.append(line);

  const slider = h('input', {
    type: 'range', id: 'asof-cursor', class: 'cursor-slider', min: lo, max: hi, step: DAY / 24,
    'aria-label': 'as of',
  });
  const label = h('output', { id: 'asof-instant', for: 'asof-cursor' });
  const current = h('ul', { id: 'asof-current', class: 'asof-current' });

  function setCursor(t) {
    const at = Math.min(Math.max(t, lo), hi);
    slider.value = String(at);
    line.setAttribute('x1', x(at));
    line.setAttribute('x2', x(at));
    const valid = items.filter((it) => validAt(it, at));
    bars.forEach((bar, i) => bar.classList.toggle('valid', valid.includes(items[i])));
    fill(label, new Date(at).toISOString());
    fill(current, valid.length
      ? valid.map((it) => h('li', { 'data-id': it.id }, h('a', { href: it.href }, it.label)))
      : h('li', { class: 'muted' }, 'nothing is valid at this instant'));
    if (onCursor) onCursor(at, valid);
  }
  slider.addEventListener('input', () => setCursor(Number(slider.value)));
  const element = h('div', { class: 'timeline-box' },
    chart,
    // the slider spans the chart's width, so its thumb stands under the cursor line
    slider,
    h('div', { class: 'cursor-row' }, h('label', { for: 'asof-cursor' }, 'as of'), label,
      h('small', { class: 'muted' }, 'drag, click, or use the arrow, Home and End keys')),
    h('div', { class: 'asof-panel' }, h('h3', {}, 'Valid at the cursor'), current),
    legend());
  setCursor(cursor);
  return { element, setCursor };
}

export function legend() {
  return h('p', { class: 'legend' }, ['current', 'future', 'superseded', 'invalidated', 'deleted']
    .map((state) => h('span', { class: `key status-${state}` }, state)));
}

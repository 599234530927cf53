// Namespaces: what each holds (records by state) and what is still to do (backlogs).
import { get, paths } from '../api.js';
import { h, route, table } from '../dom.js';

// the states of GET …/audit's `records`, one per record: together they make `records`
const STATES = [
  ['current', 'valid now'],
  ['future', 'not yet valid'],
  ['superseded', 'closed by a successor'],
  ['invalidated', 'closed with none'],
  ['deleted', 'soft-deleted'],
];

export async function namespacesView(box) {
  const { namespaces } = await get(paths.namespaces());
  box.append(h('h2', {}, 'Namespaces'));
  if (!namespaces.length) {
    box.append(h('p', { class: 'muted' }, 'No namespace yet: nothing has been written.'));
    return;
  }
  const audits = await Promise.all(namespaces.map((ns) => get(paths.audit(ns.name))));
  box.append(table(
    ['namespace', 'records', ...STATES.map(([state, meaning]) => h('abbr', { title: meaning }, state)),
      'vector backlog', 'graph backlog', 'embedder', 'extractor', ''],
    audits.map((a) => [
      h('a', { href: route('search', a.namespace) }, a.namespace),
      a.records.records, ...STATES.map(([state]) => a.records[state]),
      h('span', { class: a.backlog ? 'warn' : '' }, a.backlog),
      h('span', { class: a.extraction_backlog ? 'warn' : '' }, a.extraction_backlog),
      h('code', {}, a.embedder), h('code', {}, a.extractor),
      h('span', { class: 'links' },
        h('a', { href: route('search', a.namespace) }, 'search'),
        h('a', { href: route('timeline', a.namespace) }, 'timeline'),
        h('a', { href: route('entities', a.namespace) }, 'entities')),
    ]),
    { id: 'namespaces', class: 'grid' }),
    h('p', { class: 'muted', id: 'states-note' }, 'Each record is in one state now: ',
      STATES.map(([state, meaning], i) => [i ? ' + ' : '', h('b', {}, state), ` (${meaning})`]),
      ' = records.'));
}

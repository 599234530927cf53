// Namespaces: what each holds (records by state) and what is still to do (backlogs).
import { get, paths } from '../api.js';
import { h, route, table } from '../dom.js';

export async function namespacesView(box) {
  const { namespaces } = await get(paths.namespaces());
  box.append(h('h2', {}, 'Namespaces'));
  if (!namespaces.length) {
    box.append(h('p', { class: 'muted' }, 'No namespace yet: nothing has been written.'));
    return;
  }
  const audits = await Promise.all(namespaces.map((ns) => get(paths.audit(ns.name))));
  box.append(table(
    ['namespace', 'records', 'current', 'superseded', 'invalidated', 'deleted',
      'vector backlog', 'graph backlog', 'embedder', 'extractor', ''],
    audits.map((a) => [
      h('a', { href: route('search', a.namespace) }, a.namespace),
      a.records.records, a.records.current, a.records.superseded, a.records.invalidated,
      a.records.deleted,
      h('span', { class: a.backlog ? 'warn' : '' }, a.backlog),
      h('span', { class: a.extraction_backlog ? 'warn' : '' }, a.extraction_backlog),
      h('code', {}, a.embedder), h('code', {}, a.extractor),
      h('span', { class: 'links' },
        h('a', { href: route('search', a.namespace) }, 'search'),
        h('a', { href: route('timeline', a.namespace) }, 'timeline'),
        h('a', { href: route('entities', a.namespace) }, 'entities')),
    ]),
    { id: 'namespaces', class: 'grid' }));
}

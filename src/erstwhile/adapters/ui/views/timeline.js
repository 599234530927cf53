// The timeline of a key (the supersession chain of a record that holds it: the key is
// handed over along it) or of a query (its records, historical ones included), with
// the "as of" cursor.
import { get, post, paths } from '../api.js';
import { h, route } from '../dom.js';
import { item } from '../records.js';
import { timeline } from '../timeline.js';
import { searchBody } from './query.js';
import { searchForm } from './search.js';

function byStart(a, b) {
  return a.start - b.start || (a.id < b.id ? -1 : 1);
}

async function records(ns, params) {
  if (params.get('record')) {
    const { versions } = await get(paths.history(ns, params.get('record')));
    return versions;
  }
  // every record the query finds, whenever it was valid: the time option is the cursor's
  const result = await post(paths.search(ns), searchBody(params, { time: 'historical' }));
  return result.hits.map((hit) => hit.record).filter((r) => r.valid_from);
}

export async function timelineView(box, [ns], params) {
  box.append(h('h2', {}, 'Timeline ', h('span', { class: 'muted' }, ns)),
    h('p', { class: 'muted' }, 'A query\'s records (any time option is replaced by the cursor), ' +
      'or a key\'s: open it from a record page, or give the key as scope.'),
    searchForm(ns, params, { submitTo: 'timeline' }));
  if (!params.has('q') && !params.has('record')) return;
  const found = await records(ns, params);
  if (!found.length) {
    box.append(h('p', { class: 'muted', id: 'timeline-empty' }, 'No records to show.'));
    return;
  }
  const items = found.map((r) => item(r, route('record', ns, r.id))).sort(byStart);
  const asOf = h('a', { id: 'search-as-of', href: route('search', ns) }, 'search as of the cursor');
  const query = params.get('q');
  const { element } = timeline(items, {
    onCursor: (t) => {
      if (!query) { asOf.hidden = true; return; }
      const next = new URLSearchParams(params);
      next.set('time', 'as_of');
      next.set('as_of', new Date(t).toISOString());
      asOf.setAttribute('href', route('search', ns, next));
    },
  });
  box.append(h('section', { id: 'timeline' }, element, h('p', {}, asOf)));
}

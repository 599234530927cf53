// Search with every option of SPEC §6, and each hit with its signals.
import { post, paths } from '../api.js';
import { errorBox, h, route, table, when } from '../dom.js';
import { badge, status } from '../records.js';
import { FLAGS, RANKINGS, TIMES, formParams, searchBody, timeAsked } from './query.js';

// A placeholder is never a value: an empty field shows its format or an example, and
// the hint under it says what is used while it is empty.
const INSTANT = 'YYYY-MM-DD';

function field(label, input, hint) {
  if (hint) input.setAttribute('aria-describedby', `${input.id}-hint`);
  return h('label', { class: 'field' }, h('span', {}, label), input,
    hint ? h('small', { id: `${input.id}-hint`, class: 'hint' }, hint) : null);
}

function text(name, params, attrs = {}) {
  return h('input', { type: 'text', name, id: `f-${name}`, value: params.get(name) || '', ...attrs });
}

function select(name, options, params) {
  const chosen = params.get(name) || '';
  return h('select', { name, id: `f-${name}` }, options.map(([value, label]) =>
    h('option', { value, selected: value === chosen }, label)));
}

export function searchForm(ns, params, { submitTo = 'search' } = {}) {
  const time = params.get('time') || 'now';
  const form = h('form', { id: 'search-form', class: 'search-form' },
    h('div', { class: 'row main-row' },
      field('Query', text('q', params, { placeholder: 'what to look for', size: 40 })),
      field('Ranking', select('ranking', RANKINGS.map((r) => [r, r]), params)),
      field('top_k', text('top_k', params, { inputmode: 'numeric', size: 4 }), 'empty: 10'),
      field('candidate_k', text('candidate_k', params, { inputmode: 'numeric', size: 4 })),
      h('button', { type: 'submit', id: 'search-submit' }, 'Search')),
    h('fieldset', {}, h('legend', {}, 'Time'),
      h('div', { class: 'row' },
        TIMES.map(([value, label]) => h('label', { class: 'radio' },
          h('input', { type: 'radio', name: 'time', value, checked: value === time }), label)),
        field('as_of', text('as_of', params, { placeholder: INSTANT }), 'empty: now'),
        field('from', text('from', params, { placeholder: INSTANT }), 'needed for between'),
        field('until', text('until', params, { placeholder: INSTANT }), 'needed for between'),
        field('known_at', text('known_at', params, { placeholder: INSTANT }),
          'record time, as memory knew it then; empty: now')),
      h('small', {}, 'Instants are RFC 3339 or YYYY-MM-DD (midnight UTC). ' +
        'An empty field is unset: the hint under it says what is used instead.')),
    h('fieldset', {}, h('legend', {}, 'Scope'),
      h('div', { class: 'row' },
        field('kind', text('kind', params, { size: 10 })),
        field('tags (all of)', text('tags', params, { placeholder: 'e.g. work, team', size: 14 })),
        field('key', text('key', params, { size: 16 })),
        field('min_trust', select('min_trust',
          [['', 'any'], ['unverified', 'unverified'], ['verified', 'verified']], params)),
        field('created_after', text('created_after', params, { size: 12 })),
        field('created_before', text('created_before', params, { size: 12 }))),
      h('div', { class: 'row' },
        field('filter', h('textarea', { name: 'filter', id: 'f-filter', rows: 2,
          placeholder: 'e.g. team=core' }, params.get('filter') || ''), 'one key=value a line'),
        field('predicates', h('textarea', { name: 'predicates', id: 'f-predicates', rows: 2,
          placeholder: 'e.g. priority GTE 3' }, params.get('predicates') || ''),
          'key EQ|NEQ|GT|GTE|LT|LTE|IN value[,value…]'))),
    h('fieldset', {}, h('legend', {}, 'Options'),
      h('div', { class: 'row' },
        FLAGS.map((flag) => h('label', { class: 'check' },
          h('input', { type: 'checkbox', name: flag, id: `f-${flag}`, checked: params.get(flag) === 'on' }),
          flag)),
        field('expand hops', text('hops', params, { size: 3 }), 'empty: 1'),
        field('expand limit', text('limit', params, { size: 3 }), 'empty: 10'))));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    location.hash = route(submitTo, ns, formParams(form));
  });
  return form;
}

function signals(hit) {
  const sig = hit.signals || {};
  const rows = [];
  if (sig.lexical) rows.push(['lexical', `rank ${sig.lexical.rank}`, `BM25 ${sig.lexical.score.toFixed(4)}`]);
  if (sig.semantic) rows.push(['semantic', `rank ${sig.semantic.rank}`, `cosine ${sig.semantic.similarity.toFixed(4)}`]);
  if (sig.graph) rows.push(['graph', `${sig.graph.hops} hop(s)`, `from ${[].concat(sig.graph.from).join(', ')}`]);
  return rows.length ? table(['signal', 'rank', 'value'], rows, { class: 'signals' }) : null;
}

function via(hit, ns) {
  if (!hit.via || !hit.via.length) return null;
  return h('p', { class: 'via' }, 'via ', hit.via.map((v, i) => [i ? '; ' : '',
    h('a', { href: route('entity', ns, v.entity) }, v.name || v.entity), ` ${v.predicate || ''}`]));
}

export function hitCard(hit, index, ns) {
  const r = hit.record;
  const state = r.valid_from ? status(r) : null;
  return h('article', { class: 'hit', 'data-id': r.id },
    h('header', {},
      h('span', { class: 'rank' }, `#${index + 1}`),
      h('a', { class: 'record-link', href: route('record', ns, r.id) }, r.id),
      state ? badge(state) : null,
      h('span', { class: 'score' }, `score ${hit.score.toFixed(4)}`)),
    r.content !== undefined ? h('p', { class: 'content' }, r.content) : null,
    r.valid_from ? h('p', { class: 'meta' },
      'valid ', when(r.valid_from), ' → ', when(r.valid_to),
      r.key ? [' · key ', h('code', {}, r.key)] : null,
      r.kind ? [' · kind ', h('code', {}, r.kind)] : null,
      r.trust ? [' · ', r.trust] : null) : null,
    signals(hit), via(hit, ns));
}

export async function searchView(box, [ns], params) {
  box.append(h('h2', {}, 'Search ', h('span', { class: 'muted' }, ns)), searchForm(ns, params));
  if (!params.has('q')) return;
  const results = h('section', { id: 'results' });
  box.append(results);
  let body;
  let result;
  try {
    body = searchBody(params);
    result = await post(paths.search(ns), body);
  } catch (error) {
    results.append(errorBox(error));
    return;
  }
  results.append(h('p', { class: 'summary' },
    `${result.hits.length} hit(s) · ${timeAsked(body)} · ranking ${result.ranking} · ` +
    `unembedded ${result.unembedded} · `,
    h('a', { href: route('timeline', ns, params), id: 'to-timeline' }, 'show as a timeline')));
  for (const warning of result.warnings) results.append(h('p', { class: 'warn' }, warning));
  results.append(h('div', { class: 'hits' }, result.hits.map((hit, i) => hitCard(hit, i, ns))));
}

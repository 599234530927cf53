// The knowledge graph: entities by name, and one entity's relationships over time
// (asserted and extracted, retracted ones included) with the records that mention it,
// each shown by what it says (read through GET …/records/{id}, so the token's view holds).
import { ApiError, get, paths } from '../api.js';
import { h, route, table } from '../dom.js';
import { badge, ms, status } from '../records.js';
import { timeline } from '../timeline.js';

export async function entitiesView(box, [ns], params) {
  const q = h('input', { type: 'text', id: 'entity-q', value: params.get('q') || '', placeholder: 'part of a name' });
  const kind = h('input', { type: 'text', id: 'entity-kind', value: params.get('kind') || '', size: 10 });
  const form = h('form', { class: 'row', id: 'entity-form' },
    h('label', {}, 'Name ', q), h('label', {}, 'Kind ', kind), h('button', { type: 'submit' }, 'Find'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    if (q.value.trim()) next.set('q', q.value.trim());
    if (kind.value.trim()) next.set('kind', kind.value.trim());
    location.hash = route('entities', ns, next);
  });
  box.append(h('h2', {}, 'Entities ', h('span', { class: 'muted' }, ns)), form);
  const { entities } = await get(paths.entities(ns, params.get('q'), params.get('kind')));
  box.append(entities.length ? table(['name', 'kind', 'aliases', 'id'], entities.map((e) => [
    h('a', { href: route('entity', ns, e.id) }, e.name), e.kind, e.aliases.join(', '), h('code', {}, e.id),
  ]), { id: 'entities', class: 'grid' }) : h('p', { class: 'muted' }, 'No entities (is an extractor configured?).'));
}

async function names(ns, ids) {
  const found = new Map();
  await Promise.all([...ids].map(async (id) => {
    try {
      found.set(id, (await get(paths.entity(ns, id))).name);
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) throw error;
      found.set(id, id);
    }
  }));
  return found;
}

export async function entityView(box, [ns, id]) {
  const [entity, { relationships }, { mentions }] = await Promise.all([
    get(paths.entity(ns, id)), get(paths.relationships(ns, id)), get(paths.mentions(ns, id))]);
  box.append(h('h2', {}, entity.name, ' ', h('span', { class: 'muted' }, `${entity.kind} · ${ns}`)),
    h('p', {}, 'aliases: ', entity.aliases.join(', ') || '—'));
  if (entity.possibly_same_as && entity.possibly_same_as.length) {
    box.append(h('p', {}, 'possibly the same as: ', entity.possibly_same_as.map((other, i) =>
      [i ? ', ' : '', h('a', { href: route('entity', ns, other) }, other)])));
  }
  const ends = new Set(relationships.flatMap((r) => [r.subject, r.object]));
  const sources = relationships.map((r) => r.provenance && r.provenance.record).filter(Boolean);
  const [named, read] = await Promise.all([names(ns, ends), records(ns,
    [...mentions.slice(0, LABELLED).map((m) => m.record), ...sources.slice(0, LABELLED)])]);
  const phrase = (r) => `${named.get(r.subject)} ${r.predicate} ${named.get(r.object)}`;
  box.append(h('h3', {}, `Relationships over time (${relationships.length})`));
  if (relationships.length) {
    const now = Date.now();
    const items = relationships.map((r) => ({
      id: r.id, label: phrase(r), start: ms(r.valid_from), end: ms(r.valid_to), live: true,
      status: r.valid_to && ms(r.valid_to) <= now ? 'invalidated' : 'current',
      href: route('entity', ns, r.subject === id ? r.object : r.subject),
    })).sort((a, b) => a.start - b.start);
    box.append(timeline(items).element, table(['relationship', 'valid', 'confidence', 'from'],
      relationships.map((r) => [phrase(r), `${r.valid_from} → ${r.valid_to || 'open'}`,
        r.confidence.toFixed(2),
        r.provenance && r.provenance.record ? recordLabel(ns, r.provenance.record, read) : 'asserted']),
      { id: 'relationships', class: 'grid' }));
  }
  box.append(h('h3', {}, `Mentioned by (${mentions.length})`), table(['record', 'state', 'spelling'],
    mentions.map((m) => [recordLabel(ns, m.record, read), stateOf(read.get(m.record)), m.spelling]),
    { id: 'mentions', class: 'grid' }));
  if (mentions.length > LABELLED) {
    box.append(h('p', { class: 'muted' }, `the first ${LABELLED} shown by their content, the rest by id`));
  }
}

const LABELLED = 100; // records read for their labels; the rest are listed by id
const SNIPPET = 90;

/** id -> the record, or null when this token cannot read it (its trust view, or gone). */
async function records(ns, ids) {
  const found = new Map();
  await Promise.all([...new Set(ids)].map(async (id) => {
    try {
      found.set(id, await get(paths.record(ns, id)));
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) throw error;
      found.set(id, null);
    }
  }));
  return found;
}

function snippet(text) {
  const flat = (text || '').replace(/\s+/g, ' ').trim();
  return flat.length > SNIPPET ? `${flat.slice(0, SNIPPET)}…` : flat;
}

// a record by what it says (its key first, when it has one), linked to its page, its id
// beside it and in the link's title; by its id alone when it was not read
function recordLabel(ns, recordId, read) {
  const r = read.get(recordId);
  const href = route('record', ns, recordId);
  if (!r) {
    return [h('a', { href, title: recordId, class: 'record-link' }, recordId),
      r === null ? [' ', h('small', { class: 'muted' }, 'not readable with this token')] : null];
  }
  return h('span', { class: 'record-label', 'data-id': recordId },
    r.key ? [h('code', { class: 'record-key' }, r.key), ' '] : null,
    h('a', { href, title: recordId, class: 'record-link' }, snippet(r.content) || recordId), ' ',
    h('small', { class: 'muted record-id' }, h('code', {}, recordId)));
}

function stateOf(r) {
  return r ? badge(status(r)) : '—';
}

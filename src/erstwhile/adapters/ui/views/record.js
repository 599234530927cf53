// A record: its fields, its versions, its ledger entries, its supersession chain on a
// timeline, and (for an admin token) verify.
import { ApiError, get, post, paths } from '../api.js';
import { errorBox, fill, h, json, route, table, when } from '../dom.js';
import { badge, item, status } from '../records.js';
import { timeline } from '../timeline.js';

const MAX_VERSIONS = 50;

function fields(r) {
  const rows = [
    ['id', h('code', {}, r.id)], ['status', badge(status(r))], ['version', r.version],
    ['content', h('p', { class: 'content', id: 'record-content' }, r.content)],
    ['kind', r.kind], ['key', r.key ? h('code', {}, r.key) : '—'], ['tags', (r.tags || []).join(', ') || '—'],
    ['trust', r.trust], ['valid', [when(r.valid_from), ' → ', when(r.valid_to)]],
    ['created', when(r.created_at)], ['updated', when(r.updated_at)],
    ['deleted', when(r.deleted_at)], ['source', r.source || '—'],
    ['supersedes', (r.supersedes || []).map((id) => h('a', { href: route('record', r.namespace, id) }, id))],
    ['superseded by', r.superseded_by ? h('a', { href: route('record', r.namespace, r.superseded_by) }, r.superseded_by) : '—'],
  ];
  if (r.metadata && Object.keys(r.metadata).length) rows.push(['metadata', json(r.metadata)]);
  if (r.origin) rows.push(['origin', json(r.origin)]);
  return h('table', { class: 'fields', id: 'record-fields' },
    h('tbody', {}, rows.map(([k, v]) => h('tr', {}, h('th', {}, k), h('td', {}, v)))));
}

function chain(ns, history, id) {
  return h('ol', { class: 'chain', id: 'chain' }, history.map((r, i) => [
    i ? h('li', { class: 'arrow', 'aria-hidden': 'true' }, '→') : null,
    h('li', { class: `link${r.id === id ? ' here' : ''}`, 'data-id': r.id },
      h('a', { href: route('record', ns, r.id) }, r.id), ' ', badge(status(r)),
      h('span', { class: 'content' }, r.content), h('small', {}, when(r.valid_from), ' → ', when(r.valid_to))),
  ]));
}

function verifyForm(ns, id) {
  const reviewer = h('input', { type: 'text', id: 'reviewer', placeholder: 'your name', required: true });
  const out = h('span', { id: 'verify-status' });
  const form = h('form', { id: 'verify', class: 'row' },
    h('label', { for: 'reviewer' }, 'Verify as'), reviewer,
    h('button', { type: 'submit' }, 'Verify'), h('small', {}, 'needs an admin token'), out);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      const { version } = await post(paths.verify(ns, id), { reviewer: reviewer.value });
      fill(out, `verified: version ${version}`);
      setTimeout(() => window.dispatchEvent(new HashChangeEvent('hashchange')), 0);
    } catch (error) {
      fill(out, errorBox(error));
    }
  });
  return form;
}

async function orNull(promise) {
  try {
    return await promise;
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
}

export async function recordView(box, [ns, id]) {
  box.append(h('h2', {}, 'Record ', h('code', {}, id), ' ', h('span', { class: 'muted' }, ns)));
  const [record, ledger] = await Promise.all([
    orNull(get(paths.record(ns, id))), orNull(get(paths.ledger(ns, id)))]);
  if (!record) {
    box.append(h('p', { class: 'error' }, ledger
      ? 'This record was hard-deleted: only its ledger entries are left.'
      : 'No such record in this namespace.'));
  } else {
    const count = Math.min(record.version, MAX_VERSIONS);
    const [history, ...versions] = await Promise.all([
      get(paths.history(ns, id)),
      ...Array.from({ length: count }, (_, i) => get(paths.record(ns, id, record.version - i))),
    ]);
    box.append(fields(record));
    if (record.trust !== 'verified' && !record.deleted_at) box.append(verifyForm(ns, id));
    box.append(h('h3', {}, 'Supersession chain'), chain(ns, history.versions, id));
    const items = history.versions.map((r) => item(r, route('record', ns, r.id)));
    box.append(timeline(items).element);
    box.append(h('h3', {}, `Versions (${record.version})`), table(
      ['version', 'updated', 'content', 'valid', 'trust', 'deleted'],
      versions.map((v) => [v.version, when(v.updated_at), h('span', { class: 'content' }, v.content),
        [when(v.valid_from), ' → ', when(v.valid_to)], v.trust, when(v.deleted_at)]),
      { id: 'versions', class: 'grid' }));
    if (record.version > MAX_VERSIONS) box.append(h('p', { class: 'muted' }, `the latest ${MAX_VERSIONS} shown`));
    if (record.key) {
      box.append(h('p', {}, h('a', { href: route('timeline', ns, new URLSearchParams({ record: id })) },
        `timeline of key ${record.key}`)));
    }
  }
  if (ledger) {
    box.append(h('h3', {}, 'Ledger'), table(['seq', 'at', 'op', 'version', 'actor', 'detail'],
      ledger.entries.map((e) => [e.seq, when(e.at), h('code', {}, e.op), e.version ?? '—',
        h('code', {}, e.actor), e.detail ? h('code', {}, JSON.stringify(e.detail)) : '—']),
      { id: 'ledger', class: 'grid' }));
  }
}

// A namespace's latest jobs (from its audit, so a read-only token sees them): state and
// progress, and for an extract job what its provider spent — calls, retries, failures,
// answers read as nothing found, tokens (unknown when the provider reported none) and
// time — and why a job stopped early (its budget) or failed.
import { get, paths } from '../api.js';
import { h, table, when } from '../dom.js';

const dash = () => h('span', { class: 'muted' }, '—');
const unknown = () => h('span', { class: 'muted', title: 'the provider reported no usage' }, 'unknown');

function figures(usage) {
  if (!usage) return Array(7).fill(null).map(dash);
  const tokens = (n) => (n === null || n === undefined ? unknown() : n);
  return [usage.calls, usage.retries,
    h('span', { class: usage.failed ? 'warn' : '' }, usage.failed),
    h('span', { class: usage.unreadable ? 'warn' : '' }, usage.unreadable),
    tokens(usage.tokens_in), tokens(usage.tokens_out), `${(usage.provider_ms / 1000).toFixed(2)} s`];
}

export async function jobsView(box, [ns]) {
  box.append(h('h2', {}, 'Jobs ', h('span', { class: 'muted' }, ns)));
  const { jobs } = await get(paths.audit(ns));
  if (!jobs.length) {
    box.append(h('p', { class: 'muted' }, 'No job has run in this namespace.'));
    return;
  }
  box.append(h('p', { class: 'muted' }, 'The latest jobs, newest first. Provider figures are an ',
    'extract job\'s: a call is one record shown to the extractor.'));
  box.append(table(
    ['id', 'type', 'state', 'done', 'calls', 'retries', 'failed', 'unreadable', 'tokens in',
      'tokens out', 'provider time', 'updated', 'why it ended'],
    [...jobs].reverse().map((job) => [
      job.id, job.type, h('span', { class: job.state === 'failed' ? 'warn' : '' }, job.state),
      job.done, ...figures(job.usage), when(job.updated_at),
      job.error || job.stopped || dash(),
    ]),
    { id: 'jobs', class: 'grid' }));
}

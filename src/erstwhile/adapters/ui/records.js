// How a record stands, for showing it: the state its own fields say it is in.
import { h } from './dom.js';

/** Milliseconds of an RFC 3339 instant (microseconds cut to what Date holds). */
export function ms(instant) {
  return instant ? Date.parse(instant.replace(/(\.\d{3})\d+/, '$1')) : null;
}

/**
 * deleted, superseded (closed by its successor), invalidated (closed, no successor),
 * future (not yet valid) or current: the one state GET …/audit counts it in at `now`,
 * so a record handed over to a successor later is still current (or future) until then.
 */
export function status(record, now = Date.now()) {
  if (record.deleted_at) return 'deleted';
  const end = ms(record.valid_to);
  if (end !== null && end <= now) return record.superseded_by ? 'superseded' : 'invalidated';
  if (ms(record.valid_from) > now) return 'future';
  return 'current';
}

export function badge(state) {
  return h('span', { class: `badge status-${state}` }, state);
}

/** The record as a timeline item: its validity, its state and its page. */
export function item(record, href) {
  return {
    id: record.id,
    label: record.content,
    start: ms(record.valid_from),
    end: ms(record.valid_to),
    // a tombstone is valid nowhere, whatever its range says (SPEC §3)
    live: !record.deleted_at,
    status: status(record),
    href,
  };
}

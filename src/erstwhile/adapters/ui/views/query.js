// The search request as the inspector's form and its #/ parameters spell it: one
// place that turns the form's fields into the JSON body of POST …/search.

export const RANKINGS = ['auto', 'lexical', 'semantic', 'hybrid'];
export const TIMES = [
  ['now', 'now (current)'],
  ['as_of', 'as of'],
  ['between', 'between'],
  ['historical', 'include historical'],
];
export const FLAGS = ['expand', 'require_complete', 'include_payload', 'ids_only'];
const TEXT = ['kind', 'key', 'created_after', 'created_before', 'min_trust'];
const NUMBERS = ['top_k', 'candidate_k'];

class FormError extends Error {
  constructor(message) {
    super(message);
    this.code = 'erstwhile.input.invalid';
  }
}

function lines(text) {
  return (text || '').split('\n').map((line) => line.trim()).filter(Boolean);
}

/** The search body for these #/ parameters (the names are the request's own). */
export function searchBody(params, { time = params.get('time') || 'now' } = {}) {
  const body = { query: params.get('q') || '' };
  if (params.get('ranking')) body.ranking = params.get('ranking');
  for (const name of NUMBERS) {
    if (params.get(name)) body[name] = Number(params.get(name));
  }
  for (const name of TEXT) {
    if (params.get(name)) body[name] = params.get(name);
  }
  const tags = (params.get('tags') || '').split(',').map((t) => t.trim()).filter(Boolean);
  if (tags.length) body.tags = tags;
  const filter = {};
  for (const line of lines(params.get('filter'))) {
    const at = line.indexOf('=');
    if (at < 1) throw new FormError(`filter: "${line}" is not key=value`);
    filter[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  if (Object.keys(filter).length) body.filter = filter;
  const predicates = lines(params.get('predicates')).map((line) => {
    const [key, op, ...rest] = line.split(/\s+/);
    if (!op || !rest.length) throw new FormError(`predicates: "${line}" is not "key OP value[,value…]"`);
    return { key, op: op.toUpperCase(), values: rest.join(' ').split(',').map((v) => v.trim()) };
  });
  if (predicates.length) body.predicates = predicates;
  // an empty as_of is now (the default question); between sends the ends it has, so
  // the server names a missing one
  if (time === 'as_of' && params.get('as_of')) body.as_of = params.get('as_of');
  if (time === 'between') {
    body.between = Object.fromEntries(['from', 'until']
      .filter((end) => params.get(end)).map((end) => [end, params.get(end)]));
  }
  if (time === 'historical') body.include_historical = true;
  if (params.get('known_at')) body.known_at = params.get('known_at'); // record time
  for (const flag of FLAGS) {
    if (params.get(flag) === 'on') body[flag] = true;
  }
  if (body.expand && (params.get('hops') || params.get('limit'))) {
    body.expand = {};
    if (params.get('hops')) body.expand.hops = Number(params.get('hops'));
    if (params.get('limit')) body.expand.limit = Number(params.get('limit'));
  }
  return body;
}

/** The #/ parameters a submitted form stands for (empty fields left out). */
export function formParams(form) {
  const params = new URLSearchParams();
  for (const [name, value] of new FormData(form)) {
    if (String(value).trim() !== '') params.set(name, String(value));
  }
  return params;
}

/** The time question a search body asks, in words: what the results summary states. */
export function timeAsked(body) {
  let when = 'now';
  if (body.as_of) when = `as of ${body.as_of}`;
  if (body.between) when = `between ${body.between.from} and ${body.between.until}`;
  if (body.include_historical) when = 'any time (historical included)';
  return body.known_at ? `${when}, as known at ${body.known_at}` : when;
}

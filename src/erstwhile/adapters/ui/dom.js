// Building the DOM without ever parsing data as HTML: every piece of data becomes a
// text node or an attribute value, so a record that reads "<script>" shows as text.

const SVG_NS = 'http://www.w3.org/2000/svg';

function build(el, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith('on')) {
      el.addEventListener(name.slice(2), value);
    } else if (name === 'href' && !String(value).startsWith('#')) {
      // links only ever lead to the inspector's own views
      throw new Error('an inspector link must be a #/ route');
    } else {
      el.setAttribute(name, value === true ? '' : String(value));
    }
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** An HTML element: h('a', {href: '#/'}, 'text', otherNode). */
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** An SVG element, the same way. */
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** Replaces everything inside `el` with `children`. */
export function fill(el, ...children) {
  el.replaceChildren();
  return build(el, {}, children);
}

/** A route link: the parts are percent-encoded, so an id with '/' stays one part. */
export function route(...parts) {
  const [path, query] = parts.at(-1) instanceof URLSearchParams
    ? [parts.slice(0, -1), parts.at(-1)] : [parts, null];
  const hash = '#/' + path.map((p) => encodeURIComponent(p)).join('/');
  return query && [...query].length ? `${hash}?${query}` : hash;
}

export function table(headings, rows, attrs = {}) {
  return h('table', attrs,
    h('thead', {}, h('tr', {}, headings.map((t) => h('th', {}, t)))),
    h('tbody', {}, rows.map((cells) => h('tr', {}, cells.map((c) => h('td', {}, c))))));
}

export function errorBox(error) {
  return h('p', { class: 'error', role: 'alert' },
    error.code ? h('code', {}, error.code) : null, error.code ? ': ' : null, error.message);
}

/** A compact RFC 3339 instant for people (the full one in the title). */
export function when(instant) {
  if (!instant) return h('span', { class: 'muted' }, '—');
  return h('time', { datetime: instant, title: instant }, instant.replace(/\.\d+Z$/, 'Z'));
}

export function json(value) {
  return h('pre', { class: 'json' }, JSON.stringify(value, null, 2));
}

// The inspector's shell: the hash router, the navigation and the login page.
// Routes live in the fragment (#/…), which the browser never sends to the server.
import { ApiError, get, paths, session } from './api.js';
import { errorBox, fill, h, route } from './dom.js';
import { namespacesView } from './views/namespaces.js';
import { searchView } from './views/search.js';
import { recordView } from './views/record.js';
import { timelineView } from './views/timeline.js';
import { entitiesView, entityView } from './views/entities.js';
import { jobsView } from './views/jobs.js';

const VIEWS = {
  '': namespacesView,
  search: searchView,
  record: recordView,
  timeline: timelineView,
  entities: entitiesView,
  entity: entityView,
  jobs: jobsView,
};

const main = () => document.getElementById('main');

// The route in the fragment; a part that is not valid percent-encoding (`#/%`, typed or
// pasted) makes it unreadable rather than throwing past the view.
function parse() {
  const [path, query] = location.hash.replace(/^#\/?/, '').split('?');
  let parts = [];
  try {
    parts = path ? path.split('/').map(decodeURIComponent) : [];
  } catch (error) {
    if (!(error instanceof URIError)) throw error;
    return { name: null, args: [], params: new URLSearchParams() };
  }
  return { name: parts[0] || '', args: parts.slice(1), params: new URLSearchParams(query || '') };
}

function nav(ns) {
  const links = [h('a', { href: route('') }, 'Namespaces')];
  if (ns) {
    links.push(h('span', { class: 'ns' }, ns),
      h('a', { href: route('search', ns) }, 'Search'),
      h('a', { href: route('timeline', ns) }, 'Timeline'),
      h('a', { href: route('entities', ns) }, 'Entities'),
      h('a', { href: route('jobs', ns) }, 'Jobs'));
  }
  const out = session.token()
    ? h('button', { type: 'button', id: 'logout', onclick: logout }, 'Log out') : null;
  fill(document.getElementById('nav'), links, out);
}

function logout() {
  session.clear();
  location.hash = '#/login';
}

function loginView() {
  nav(null);
  const input = h('input', {
    type: 'password', id: 'token', autocomplete: 'off', spellcheck: 'false',
    placeholder: 'mst_…', required: true,
  });
  const status = h('div', { id: 'login-status' });
  // no name on the input and no action: even without script, nothing carries the
  // token anywhere; with script it goes to sessionStorage and the Authorization header
  const form = h('form', { id: 'login', class: 'card' },
    h('h2', {}, 'Log in'),
    h('p', {}, 'Paste a token from ', h('code', {}, 'erstwhile token create'),
      '. A read-only token is enough to look; verifying a record needs an admin token. ',
      'The token stays in this tab (sessionStorage) and is sent only as the ',
      h('code', {}, 'Authorization'), ' header of this server\'s API.'),
    h('label', { for: 'token' }, 'Token'), input,
    h('button', { type: 'submit' }, 'Log in'), status);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    session.save(input.value.trim());
    try {
      await get(paths.namespaces());
      location.hash = '#/';
    } catch (error) {
      session.clear();
      fill(status, errorBox(error));
    }
  });
  fill(main(), form);
  input.focus();
}

let rendering = 0;

async function render() {
  const mine = ++rendering;
  const { name, args, params } = parse();
  if (name === 'login') { loginView(); return; }
  const view = VIEWS[name];
  nav(args[0]);
  const box = h('div', { class: 'view', 'aria-busy': 'true' });
  fill(main(), box);
  try {
    if (name === null) {
      throw new ApiError(400, 'erstwhile.input.invalid',
        'this address is not a route of the inspector (a % not followed by two hex ' +
        'digits); fix it, or start again from Namespaces');
    }
    if (!view) throw new ApiError(404, 'erstwhile.not_found', `no view ${name}`);
    await view(box, args, params);
  } catch (error) {
    if (mine !== rendering) return;
    if (error instanceof ApiError && error.status === 401) {
      session.clear();
      location.hash = '#/login';
      return;
    }
    box.append(errorBox(error));
  } finally {
    box.setAttribute('aria-busy', 'false');
  }
}

window.addEventListener('hashchange', render);
render();

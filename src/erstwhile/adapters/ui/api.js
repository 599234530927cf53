// The one way the inspector talks to the server: the /v1 REST API, with the token
// held in sessionStorage (this tab only, gone when it closes) and sent as the
// Authorization header. It never goes into a URL, a cookie or a log line.

const TOKEN_KEY = 'erstwhile.token';

export const session = {
  token: () => sessionStorage.getItem(TOKEN_KEY),
  save: (secret) => sessionStorage.setItem(TOKEN_KEY, secret),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  const secret = session.token();
  if (secret) headers.Authorization = `Bearer ${secret}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'omit',
      cache: 'no-store',
      referrerPolicy: 'no-referrer',
    });
  } catch (error) {
    throw new ApiError(0, 'erstwhile.client.unreachable', `the server did not answer: ${error}`);
  }
  if (response.status === 204) return null;
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const problem = (data && data.error) || {};
    throw new ApiError(response.status, problem.code || `http.${response.status}`,
      problem.message || response.statusText);
  }
  return data;
}

const part = encodeURIComponent; // '/' in an id becomes %2F: one path segment

export const get = (path) => api('GET', path);
export const post = (path, body) => api('POST', path, body);

export const paths = {
  namespaces: () => '/v1/namespaces',
  audit: (ns) => `/v1/namespaces/${part(ns)}/audit`,
  search: (ns) => `/v1/namespaces/${part(ns)}/search`,
  record: (ns, id, version) => `/v1/namespaces/${part(ns)}/records/${part(id)}` +
    (version ? `?version=${version}` : ''),
  history: (ns, id) => `/v1/namespaces/${part(ns)}/records/${part(id)}/history`,
  ledger: (ns, id) => `/v1/namespaces/${part(ns)}/records/${part(id)}/ledger`,
  verify: (ns, id) => `/v1/namespaces/${part(ns)}/records/${part(id)}/verify`,
  entities: (ns, q, kind) => `/v1/namespaces/${part(ns)}/entities?` +
    new URLSearchParams(Object.entries({ q, kind }).filter(([, v]) => v)),
  entity: (ns, id) => `/v1/namespaces/${part(ns)}/entities/${part(id)}`,
  relationships: (ns, id) =>
    `/v1/namespaces/${part(ns)}/entities/${part(id)}/relationships?include_expired=true`,
  mentions: (ns, id) => `/v1/namespaces/${part(ns)}/entities/${part(id)}/mentions`,
};

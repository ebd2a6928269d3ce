// The public REST API, called with the bearer token held in this module's
// memory only: never in a cookie or in storage, so the browser never sends
// it on its own (that is what makes CSRF moot) and it is gone when the tab
// closes.

let token = null;

export function setToken(t) { token = t; }
export function signedIn() { return token !== null; }

// ApiError carries the API's answer: HTTP status, gRPC code and message,
// and the field the message names ("settings.url: …"), if any.
export class ApiError extends Error {
  constructor(httpStatus, body) {
    const msg = (body && body.message) || `HTTP ${httpStatus}`;
    super(msg);
    this.httpStatus = httpStatus;
    this.code = body && body.code;
    const m = /^([a-z_][a-z0-9_.\[\]]*): (.*)$/s.exec(msg);
    this.field = m ? m[1] : '';
    this.detail = m ? m[2] : msg;
  }
}

// api calls the REST API: api('GET', '/v1/webhook-endpoints', {query: {...}}).
export async function api(method, path, { query, body } = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== '') url.searchParams.set(k, v);
  }
  const headers = { Accept: 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(url, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'omit', cache: 'no-store', referrerPolicy: 'no-referrer',
  });
  let data = null;
  const text = await res.text();
  if (text) { try { data = JSON.parse(text); } catch { data = { message: text }; } }
  if (!res.ok) throw new ApiError(res.status, data);
  return data || {};
}

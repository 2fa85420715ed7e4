// The public API, called with the signed-in user's bearer token (kept for the browser tab's
// session only). Errors carry the problem+json reason the server gave.
import { observable } from './store.js';
import { parseWarnings } from './logic/warnings.js';

const TOKEN_KEY = 'gpuaas.token';
export const session = observable({ token: sessionStorage.getItem(TOKEN_KEY), who: null });
// What the server warned of on the last writes (its Warning headers), until the user dismisses it.
export const serverWarnings = observable([]);

export class ApiError extends Error {
  constructor(status, detail, reason) {
    super(detail || `HTTP ${status}`);
    this.status = status;
    this.reason = reason;
  }
}

export function authHeaders() {
  const t = session.get().token;
  return t ? { Authorization: `Bearer ${t}` } : {};
}

async function problem(res) {
  let detail = `HTTP ${res.status}`, reason = '';
  try {
    const j = await res.json();
    detail = j.detail || j.message || j.title || detail;
    reason = j.reason || '';
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(res.status, detail, reason);
}

export async function api(path, { method = 'GET', body, signal, raw = false } = {}) {
  // problem+json: errors as RFC 9457 problems (Kubernetes clients get Status objects instead).
  const headers = { Accept: 'application/json, application/problem+json', ...authHeaders() };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal });
  if (!res.ok) {
    const err = await problem(res);
    if (res.status === 401 && session.get().token) signOut();
    throw err;
  }
  if (method !== 'GET') {
    const said = parseWarnings(res.headers.get('Warning'));
    if (said.length > 0) serverWarnings.set((w) => [...w, ...said]);
  }
  if (raw) return res;
  return res.status === 204 ? null : res.json();
}

export async function signIn(token) {
  const res = await fetch('/api/v1/whoami', { headers: { Authorization: `Bearer ${token}`, Accept: 'application/json' } });
  if (!res.ok) throw await problem(res);
  const who = await res.json();
  // Node agents push telemetry; the dashboard is for operators and project members.
  if (who.role !== 'operator' && who.role !== 'member') throw new ApiError(403, 'not an operator or member token', 'AgentToken');
  sessionStorage.setItem(TOKEN_KEY, token);
  session.set({ token, who });
  return who;
}

export async function restore() {
  const { token } = session.get();
  if (!token) return null;
  try {
    return await signIn(token);
  } catch {
    signOut();
    return null;
  }
}

export function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  session.set({ token: null, who: null });
}

export const isOperator = () => session.get().who?.role === 'operator';

// The path of a namespaced kind for the caller: operators list every project's objects,
// members their own project's.
export function namespaced(plural) {
  const who = session.get().who;
  return who?.role === 'operator' ? `/apis/gpuaas.io/v1/${plural}` : `/apis/gpuaas.io/v1/namespaces/${encodeURIComponent(who?.project ?? '')}/${plural}`;
}

// Fetches `path` with the token and saves the answer as `filename` (links cannot carry the token).
export async function download(path, filename) {
  const res = await api(path, { raw: true });
  const url = URL.createObjectURL(await res.blob());
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

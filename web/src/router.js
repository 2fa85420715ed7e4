// Client-side routes: the server answers every page's path with the app.
import { observable } from './store.js';

export const route = observable({ path: location.pathname, query: new URLSearchParams(location.search) });

export function navigate(href, replace = false) {
  const u = new URL(href, location.origin);
  if (replace) history.replaceState(null, '', u);
  else history.pushState(null, '', u);
  route.set({ path: u.pathname, query: u.searchParams });
  window.scrollTo(0, 0);
}

window.addEventListener('popstate', () => route.set({ path: location.pathname, query: new URLSearchParams(location.search) }));

// The page for a path: {page, params}.
export function match(path) {
  if (path === '/' || path === '') return { page: 'overview', params: {} };
  if (path === '/fleet') return { page: 'fleet', params: {} };
  const gpu = /^\/fleet\/gpus\/([^/]+)$/.exec(path);
  if (gpu) return { page: 'gpu', params: { uuid: decodeURIComponent(gpu[1]) } };
  if (path === '/pools') return { page: 'pools', params: {} };
  if (path === '/monitoring') return { page: 'monitoring', params: {} };
  if (path === '/billing') return { page: 'billing', params: {} };
  return { page: 'notfound', params: {} };
}

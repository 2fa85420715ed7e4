// Live updates: watch streams of the API (Kubernetes watch format, one JSON event a line) move a
// refresh tick, debounced, that the views reload on; telemetry, which has no watch, moves it on
// a timer. The state says when data last arrived, whether updates are paused, and whether a
// stream dropped (the stale banner).
import { authHeaders, api } from './api.js';
import { observable } from './store.js';
import { coalescer } from './logic/coalesce.js';

export const live = observable({ tick: 0, updated: 0, paused: false, connected: true, since: 0 });

// Changes within this window after the first one make one refresh (a burst of changes, such as
// a pool's devices being provisioned, reloads the page once; a steady stream at most once a
// second, never starved).
const DEBOUNCE_MS = 1000;
const TELEMETRY_MS = 15000;
let timer = null, streams = [], pendingWhilePaused = false;

function bump() {
  if (live.get().paused) {
    pendingWhilePaused = true;
    return;
  }
  live.set((s) => ({ ...s, tick: s.tick + 1 }));
}

const changes = coalescer(DEBOUNCE_MS, bump);
const changed = () => changes.poke();

export function markUpdated() {
  live.set((s) => ({ ...s, updated: Date.now() }));
}

export function setPaused(paused) {
  live.set((s) => ({ ...s, paused }));
  if (!paused && pendingWhilePaused) {
    pendingWhilePaused = false;
    bump();
  }
}

function setConnected(ok) {
  if (live.get().connected !== ok) live.set((s) => ({ ...s, connected: ok, since: Date.now() }));
}

// Follows one kind's watch from now on, reconnecting with backoff; a reconnect reloads the views.
function follow(listPath, ctl) {
  let backoff = 1000;
  const run = async () => {
    while (!ctl.signal.aborted) {
      try {
        const first = await api(`${listPath}?limit=1`, { signal: ctl.signal });
        const rv = first.metadata?.resourceVersion ?? '';
        const res = await fetch(`${listPath}?watch=1&allowWatchBookmarks=true&resourceVersion=${encodeURIComponent(rv)}`, {
          headers: { ...authHeaders(), Accept: 'application/json' },
          signal: ctl.signal,
        });
        if (!res.ok || !res.body) throw new Error(`watch ${res.status}`);
        setConnected(true);
        changed();  // whatever happened while disconnected
        backoff = 1000;
        const reader = res.body.getReader();
        const dec = new TextDecoder();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let nl;
          while ((nl = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, nl).trim();
            buf = buf.slice(nl + 1);
            if (!line) continue;
            try {
              const ev = JSON.parse(line);
              if (ev.type !== 'BOOKMARK') changed();
            } catch {
              // a partial or foreign line: ignore
            }
          }
        }
      } catch (e) {
        if (ctl.signal.aborted) return;
      }
      if (ctl.signal.aborted) return;
      setConnected(false);
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, 15000);
    }
  };
  run();
}

export function startLive(paths) {
  stopLive();
  for (const p of paths) {
    const ctl = new AbortController();
    streams.push(ctl);
    follow(p, ctl);
  }
  timer = setInterval(bump, TELEMETRY_MS);
}

export function stopLive() {
  for (const c of streams) c.abort();
  streams = [];
  clearInterval(timer);
  changes.cancel();
}

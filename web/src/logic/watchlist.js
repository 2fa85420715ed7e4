// A kind's objects kept as the API lists them and then as its watch changes them (Kubernetes'
// list-then-watch): what each event does to the list, the resourceVersion to watch on from, and
// when the list must be read again. Framework-free; src/live.js does the reading.
//
// The server (src/api/internal/watch.cc) sends one JSON event a line: ADDED, MODIFIED, DELETED
// with the object (a DELETED one as it was last), BOOKMARK with only metadata.resourceVersion,
// and ERROR with a Kubernetes Status, code 410 when the resourceVersion asked for is older than
// its change feed keeps. Right after a list it may send again, as MODIFIED or ADDED, changes the
// list already had; an event older than the object held is therefore skipped.

// The key of an object in its kind: "namespace/name" ("/name" for cluster-scoped kinds).
export const keyOf = (o) => `${o?.metadata?.namespace ?? ''}/${o?.metadata?.name ?? ''}`;

const rvOf = (o) => o?.metadata?.resourceVersion ?? '';

// True when resourceVersion `a` comes after `b`. This server's are revision numbers; anything
// else is compared as unequal-means-later, the only order Kubernetes promises for opaque ones.
export function later(a, b) {
  if (a === '' || a === undefined || a === null) return false;
  if (b === '' || b === undefined || b === null) return true;
  const x = Number(a), y = Number(b);
  if (Number.isInteger(x) && Number.isInteger(y)) return x > y;
  return a !== b;
}

// The state of a kind from a list answer ({items, metadata: {resourceVersion}}). `keep: false`
// follows the kind for its changes only, holding no object (a fleet's GPUs, which the dashboard
// reads through derived routes).
export function listed(list, { keep = true } = {}) {
  const objects = keep ? new Map() : null;
  if (keep) for (const o of list?.items ?? []) objects.set(keyOf(o), o);
  return { objects, resourceVersion: String(list?.metadata?.resourceVersion ?? '') };
}

// Applies one event to `state` (in place). Returns
//   'changed'   the objects changed (or, for a kind kept without objects, an object changed),
//   'progress'  only the resourceVersion moved (a bookmark, an event already applied),
//   'relist'    the watch cannot go on from here (410 Expired): list again now,
//   'error'     the server reported another failure: back off, then list again,
//   'ignored'   not an event this format has.
export function applyEvent(state, ev) {
  const type = ev?.type;
  const obj = ev?.object;
  if (type === 'ERROR') return Number(obj?.code) === 410 ? 'relist' : 'error';
  if (type === 'BOOKMARK') {
    const rv = rvOf(obj);
    if (later(rv, state.resourceVersion)) state.resourceVersion = String(rv);
    return 'progress';
  }
  if (type !== 'ADDED' && type !== 'MODIFIED' && type !== 'DELETED') return 'ignored';
  if (!obj?.metadata?.name) return 'ignored';
  const rv = String(rvOf(obj));
  if (later(rv, state.resourceVersion)) state.resourceVersion = rv;
  if (state.objects === null) return 'changed';
  const key = keyOf(obj);
  const held = state.objects.get(key);
  if (held && later(rvOf(held), rv)) return 'progress';
  if (type === 'DELETED') {
    if (!held) return 'progress';
    state.objects.delete(key);
    return 'changed';
  }
  state.objects.set(key, obj);
  return 'changed';
}

// The objects in the list's order (namespace, then name), as the API lists them.
export function itemsOf(state) {
  const ns = (o) => o.metadata.namespace ?? '';
  return [...(state.objects?.values() ?? [])].sort((a, b) => {
    if (ns(a) !== ns(b)) return ns(a) < ns(b) ? -1 : 1;
    return a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0;
  });
}

// Splits a stream's text into lines as its chunks arrive: push(chunk) returns the complete,
// non-empty lines so far and keeps the unfinished rest.
export function lineSplitter() {
  let rest = '';
  return {
    push(chunk) {
      rest += chunk;
      const parts = rest.split('\n');
      rest = parts.pop();
      return parts.map((l) => l.trim()).filter(Boolean);
    },
  };
}

// Parses one line as an event; null for a line that is not JSON.
export function parseEvent(line) {
  try {
    return JSON.parse(line);
  } catch {
    return null;
  }
}

export const BACKOFF_MIN_MS = 1000;
export const BACKOFF_MAX_MS = 15000;

// Follows one kind until `signal` aborts: lists it, then watches from the list's
// resourceVersion and applies each event. A watch that ends after events is opened again from
// the resourceVersion reached; 410 (the answer to the watch, or an ERROR event) lists again at
// once; any other failure (no answer, another status, an ERROR event, a stream that ends
// without a line) says so through `health(false)` and lists again after a backoff of 1 s
// doubling to 15 s, reset once a watch delivers. The I/O is given:
//   list(signal)          the list answer, or throws
//   watch(rv, signal)     {status, chunks}: the stream's text as an async iterable, or throws
//   sleep(ms, signal)     resolves after ms, or at once when signal aborts
//   publish(state, why)   the objects changed: 'listed' after each list, 'events' after a chunk
//   changed()             something changed that views derived from the kind must reread: a
//                         chunk's events, or a list other than the first
//   health(ok)            whether the kind is followed now
export async function followKind({ list, watch, sleep, signal, keep = true, publish = () => {}, changed = () => {}, health = () => {} }) {
  let backoff = BACKOFF_MIN_MS;
  let lists = 0;
  const fail = async () => {
    health(false);
    await sleep(backoff, signal);
    backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
  };
  // One watch from state.resourceVersion: 'again', 'relist', 'error' or 'stop'.
  const watchOnce = async (state) => {
    let res;
    try {
      res = await watch(state.resourceVersion, signal);
    } catch {
      return signal.aborted ? 'stop' : 'error';
    }
    if (res.status === 410) return 'relist';
    if (res.status < 200 || res.status > 299) return 'error';
    const lines = lineSplitter();
    let heard = false;
    try {
      for await (const chunk of res.chunks) {
        let moved = false;
        for (const line of lines.push(chunk)) {
          if (!heard) {
            heard = true;
            backoff = BACKOFF_MIN_MS;
            health(true);
          }
          const ev = parseEvent(line);
          if (ev === null) continue;
          const r = applyEvent(state, ev);
          if (r === 'changed') moved = true;
          if (r === 'relist' || r === 'error') {
            if (moved) {
              publish(state, 'events');
              changed();
            }
            return r;
          }
        }
        if (moved) {
          publish(state, 'events');
          changed();
        }
      }
    } catch {
      return signal.aborted ? 'stop' : 'error';
    }
    if (signal.aborted) return 'stop';
    return heard ? 'again' : 'error';
  };
  while (!signal.aborted) {
    let state;
    try {
      state = listed(await list(signal), { keep });
    } catch {
      if (signal.aborted) return;
      await fail();
      continue;
    }
    if (signal.aborted) return;
    publish(state, 'listed');
    if (lists++ > 0) changed();
    let next;
    do next = await watchOnce(state);
    while (next === 'again' && !signal.aborted);
    if (next === 'error') await fail();
  }
}

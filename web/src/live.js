// Live data. The resource kinds the pages show (pools, workloads, projects, clusters) are listed
// once and then followed through the API's watch (Kubernetes format, one JSON event a line):
// each event is applied to the kind's list here (logic/watchlist.js), and the views holding it
// redraw. The views derived on the server (the summary, fleet rows and cells, series, alerts,
// invoices), which have no watch, are read again on a tick: one second after a pool or a GPU
// changes (the changes of that second make the same tick), and every 15 s for telemetry. The
// state says when data last arrived, whether updates are paused, and whether a stream dropped
// (the stale banner).
import { authHeaders, api, namespaced } from './api.js';
import { observable } from './store.js';
import { coalescer } from './logic/coalesce.js';
import { followKind, itemsOf } from './logic/watchlist.js';

export const live = observable({ tick: 0, updated: 0, paused: false, connected: true, since: 0 });

const DERIVED_MS = 1000;
const TELEMETRY_MS = 15000;
// A kind no view holds any more is followed this much longer, so that the next page, which
// takes its hold after it is drawn, finds it still there.
const LINGER_MS = 250;

// The kinds followed, and how: `namespaced` ones are the caller's project's for a member;
// `derives`: the server's derived views change with them (a change moves the tick); `keep`:
// false follows the fleet's GPUs for their changes only (the pages read them through the
// derived routes, and a fleet's whole list is large).
const KINDS = {
  gpupools: { namespaced: true, derives: true },
  gpucapacities: { derives: true, keep: false },
  profiles: { namespaced: true },
  projects: {},
  clusters: {},
  loans: {},  // operators': what the pools lend now
};

let timer = null, pendingTick = false, shellKinds = [];
// Holds belong to one signed-in session: signing out drops them all, and a release from an
// earlier session is ignored.
let generation = 0;

function bump() {
  if (live.get().paused) {
    pendingTick = true;
    return;
  }
  live.set((s) => ({ ...s, tick: s.tick + 1 }));
}

const derived = coalescer(DERIVED_MS, bump);

export function markUpdated() {
  live.set((s) => ({ ...s, updated: Date.now() }));
}

export function setPaused(paused) {
  live.set((s) => ({ ...s, paused }));
  if (paused) return;
  for (const f of followers.values()) f.flush();
  if (pendingTick) {
    pendingTick = false;
    bump();
  }
}

// Kinds whose stream is down now; the banner shows while there is any.
const down = new Set();
function setHealth(plural, ok) {
  if (ok) down.delete(plural);
  else down.add(plural);
  const connected = down.size === 0;
  if (live.get().connected !== connected) live.set((s) => ({ ...s, connected, since: Date.now() }));
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const id = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => { clearTimeout(id); resolve(); }, { once: true });
  });
}

// The watch of `path` from `rv`: its status and its body's text as it arrives.
async function watch(path, rv, signal) {
  const res = await fetch(`${path}?watch=1&allowWatchBookmarks=true&resourceVersion=${encodeURIComponent(rv)}`, {
    headers: { ...authHeaders(), Accept: 'application/json' },
    signal,
  });
  async function* chunks() {
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        yield dec.decode(value, { stream: true });
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  }
  if (!res.ok || !res.body) {
    res.body?.cancel().catch(() => {});
    return { status: res.ok ? 502 : res.status, chunks: [] };
  }
  return { status: res.status, chunks: chunks() };
}

// One kind: its list as the views see it ({items, error}; items null until listed), and the
// holds on it. Followed while held; dropped when the last hold goes, so that the next user
// (another sign-in) starts from a list of its own.
class Follower {
  constructor(plural) {
    this.plural = plural;
    this.spec = KINDS[plural];
    this.list = observable({ items: null, error: null });
    this.holds = 0;
    this.ctl = null;
    this.state = null;
    this.unpublished = false;
    this.stopTimer = null;
  }

  hold() {
    const gen = generation;
    let held = true;
    this.holds++;
    clearTimeout(this.stopTimer);
    if (!this.ctl) this.start();
    return () => {
      if (!held || gen !== generation) return;
      held = false;
      if (--this.holds === 0) this.stopTimer = setTimeout(() => this.holds === 0 && this.stop(), LINGER_MS);
    };
  }

  // Signed out: nothing held, nothing followed, nothing shown.
  reset() {
    clearTimeout(this.stopTimer);
    this.holds = 0;
    this.stop();
  }

  start() {
    const ctl = (this.ctl = new AbortController());
    const path = this.spec.namespaced ? namespaced(this.plural) : `/apis/gpuaas.io/v1/${this.plural}`;
    const keep = this.spec.keep !== false;
    // What a stopped follow still reports (a load in flight as it was aborted) is dropped.
    const current = () => this.ctl === ctl;
    followKind({
      keep,
      signal: ctl.signal,
      sleep,
      list: (signal) => api(keep ? path : `${path}?limit=1`, { signal }).catch((error) => {
        if (current() && keep && this.list.get().items === null) this.list.set({ items: null, error });
        throw error;
      }),
      watch: (rv, signal) => watch(path, rv, signal),
      publish: (state) => {
        if (!current()) return;
        this.state = state;
        this.unpublished = true;
        this.flush();
      },
      changed: () => { if (current() && this.spec.derives) derived.poke(); },
      health: (ok) => { if (current()) setHealth(this.plural, ok); },
    });
  }

  // Shows the list as it stands, unless updates are paused (then on Resume); a page opened while
  // paused still gets its first list.
  flush() {
    if (!this.unpublished || !this.ctl) return;
    if (live.get().paused && this.list.get().items !== null) return;
    this.unpublished = false;
    if (this.spec.keep === false) return;
    this.list.set({ items: itemsOf(this.state), error: null });
    markUpdated();
  }

  stop() {
    this.ctl?.abort();
    this.ctl = null;
    this.state = null;
    this.unpublished = false;
    setHealth(this.plural, true);
    this.list.set({ items: null, error: null });
  }
}

const followers = new Map(Object.keys(KINDS).map((k) => [k, new Follower(k)]));

// Takes a hold on a kind's list: it is listed and followed until the returned function is
// called. The list is the follower's observable ({items, error}).
export function holdList(plural) {
  const f = followers.get(plural);
  if (!f) throw new Error(`no such kind: ${plural}`);
  return { list: f.list, release: f.hold() };
}

export const listOf = (plural) => followers.get(plural).list;

// For the signed-in user: follows pools and GPUs for the whole session (every page's derived
// views change with them) and moves the telemetry tick. The pages' own holds may come first.
export function startLive() {
  for (const release of shellKinds) release();
  shellKinds = ['gpupools', 'gpucapacities'].map((k) => followers.get(k).hold());
  clearInterval(timer);
  timer = setInterval(bump, TELEMETRY_MS);
}

// Signing out: every kind is dropped at once, whoever held it.
export function stopLive() {
  generation++;
  shellKinds = [];
  for (const f of followers.values()) f.reset();
  clearInterval(timer);
  derived.cancel();
  pendingTick = false;
}

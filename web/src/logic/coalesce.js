// Coalescing of change notifications: the first poke schedules one call `windowMs` later, and
// pokes until then join it. A burst makes one refresh; a steady stream one per window, never
// starved (a plain debounce would wait for the stream to stop). Framework-free; timers injectable.
export function coalescer(windowMs, fire, timers = globalThis) {
  let pending = null;
  return {
    poke() {
      if (pending !== null) return;
      pending = timers.setTimeout(() => {
        pending = null;
        fire();
      }, windowMs);
    },
    cancel() {
      if (pending !== null) timers.clearTimeout(pending);
      pending = null;
    },
    get pending() {
      return pending !== null;
    },
  };
}

// One load at a time for a view: ask() starts `load` (a function returning a promise) now, or,
// while one is in flight, once more after it ends, however often it was asked meanwhile. A slow
// view is neither cut off by the next refresh nor loaded twice at once. stop() drops what is
// still asked for.
export function refresher(load) {
  let busy = false, again = false, stopped = false;
  const run = () => {
    busy = true;
    Promise.resolve()
      .then(load)
      .catch(() => {})
      .finally(() => {
        busy = false;
        if (again && !stopped) {
          again = false;
          run();
        }
      });
  };
  return {
    ask() {
      if (stopped) return;
      if (busy) again = true;
      else run();
    },
    stop() {
      stopped = true;
    },
    get busy() {
      return busy;
    },
  };
}

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

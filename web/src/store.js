// Small observable values the views subscribe to (session, language, live state).
import { useEffect, useState } from 'preact/hooks';

export function observable(initial) {
  let value = initial;
  const subs = new Set();
  return {
    get: () => value,
    set(v) {
      value = typeof v === 'function' ? v(value) : v;
      for (const fn of [...subs]) fn(value);
    },
    subscribe(fn) {
      subs.add(fn);
      return () => subs.delete(fn);
    },
  };
}

export function useObservable(o) {
  const [v, setV] = useState(o.get());
  useEffect(() => {
    setV(o.get());
    return o.subscribe(setV);
  }, [o]);
  return v;
}

// Loading data for a view: the server's derived views (summary, fleet rows, series, invoices)
// on mount, when the view's inputs change, and on every live tick; the kinds the API watches
// from the live lists (useList).
import { useEffect, useRef, useState } from 'preact/hooks';
import { holdList, listOf, live, markUpdated } from '../live.js';
import { useObservable } from '../store.js';
import { refresher } from '../logic/coalesce.js';

// {data, error, loading} of `loader(signal)`. A change of `deps` drops the load in flight and
// loads afresh; a tick loads again once the one in flight ends (a slow route is not cut off by
// the next tick, and never asked twice at once).
export function useLoad(loader, deps = []) {
  const { tick } = useObservable(live);
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const latest = useRef(loader);
  latest.current = loader;
  const loads = useRef(null);
  useEffect(() => {
    const ctl = new AbortController();
    setState((s) => ({ ...s, loading: true }));
    const r = refresher(() => latest.current(ctl.signal).then(
      (data) => {
        if (ctl.signal.aborted) return;
        setState({ data, error: null, loading: false });
        markUpdated();
      },
      (error) => {
        if (ctl.signal.aborted) return;
        setState((s) => ({ data: s.data, error, loading: false }));
      },
    ));
    loads.current = r;
    r.ask();
    return () => {
      r.stop();
      ctl.abort();
    };
  }, deps);
  const seen = useRef(tick);
  useEffect(() => {
    if (seen.current === tick) return;
    seen.current = tick;
    loads.current?.ask();
  }, [tick]);
  return state;
}

// {items, error} of a kind the API watches ('gpupools', 'profiles', 'projects', 'clusters'),
// as the caller may see it: listed once, then kept by its watch events while a view holds it;
// items is null until listed.
export function useList(plural) {
  useEffect(() => holdList(plural).release, [plural]);
  return useObservable(listOf(plural));
}

// Prefers-color-scheme, followed live.
export function useDark() {
  const q = window.matchMedia('(prefers-color-scheme: dark)');
  const [dark, setDark] = useState(q.matches);
  useEffect(() => {
    const fn = (e) => setDark(e.matches);
    q.addEventListener('change', fn);
    return () => q.removeEventListener('change', fn);
  }, []);
  return dark;
}

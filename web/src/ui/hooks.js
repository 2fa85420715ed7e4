// Loading data for a view: on mount, when its inputs change, and on every live tick.
import { useEffect, useRef, useState } from 'preact/hooks';
import { live, markUpdated } from '../live.js';
import { useObservable } from '../store.js';

export function useLoad(loader, deps = []) {
  const { tick } = useObservable(live);
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const seq = useRef(0);
  useEffect(() => {
    const n = ++seq.current;
    const ctl = new AbortController();
    setState((s) => ({ ...s, loading: true }));
    loader(ctl.signal).then(
      (data) => {
        if (n !== seq.current) return;
        setState({ data, error: null, loading: false });
        markUpdated();
      },
      (error) => {
        if (n !== seq.current || ctl.signal.aborted) return;
        setState((s) => ({ data: s.data, error, loading: false }));
      },
    );
    return () => ctl.abort();
  }, [...deps, tick]);
  return state;
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

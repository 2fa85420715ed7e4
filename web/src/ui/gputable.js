// The GPU table: sorted and filtered on the server, fetched a page at a time as rows come into
// view, and virtualised (only the visible rows, plus a few, are in the page). aria-rowcount and
// aria-rowindex tell assistive technology the whole table's size and each row's place.
import { useEffect, useLayoutEffect, useMemo, useReducer, useRef, useState } from 'preact/hooks';
import { Virtualizer, elementScroll, observeElementOffset, observeElementRect } from '@tanstack/virtual-core';
import { api } from '../api.js';
import { html, HealthBadge, Link, useT } from './parts.js';
import { mib, number, percent, watts } from '../logic/format.js';

const ROW = 40;
const PAGE = 100;

const COLUMNS = [
  ['gpu', 'col.gpu', 'cluster'],
  ['node', 'col.node', 'node'],
  ['model', 'col.model', 'model'],
  ['mig', 'col.mig', 'mig'],
  ['health', 'col.health', 'health'],
  ['allocation', 'col.allocation', 'allocated'],
  ['sm', 'col.sm', 'sm'],
  ['power', 'col.power', 'power'],
  ['temp', 'col.temp', 'temp'],
  ['memory', 'col.memUsed', 'memory'],
  ['pools', 'col.pools', null],
];

// A GPU's devices lent now: who borrows them (a project the caller may not see is "another
// project"), one badge for the GPU.
function lentBadge(lent, t, loc) {
  if (!lent || lent.length === 0) return null;
  const who = [...new Set(lent.map((l) => l.borrower ?? t('lending.anotherProject')))].join(', ');
  const label = lent.length === 1 ? t('lending.lentTo', { who }) : `${t('lending.lentCount', { n: number(lent.length, loc) })} · ${who}`;
  return html` <span class="badge lent" data-testid="lent" title=${lent.map((l) => `${l.device} ← ${l.pool}`).join('\n')}>${label}</span>`;
}

export function GpuTable({ filter, sort, order, onSort, onNode, tick }) {
  const { t, loc } = useT();
  const scroller = useRef(null);
  const [, rerender] = useReducer((x) => x + 1, 0);
  const [total, setTotal] = useState(null);
  const pages = useRef(new Map());
  const loading = useRef(new Set());
  const query = `sort=${sort}&order=${order}` + Object.entries(filter).filter(([, v]) => v).map(([k, v]) => `&${k}=${encodeURIComponent(v)}`).join('');
  const v = useMemo(() => new Virtualizer({
    count: 0,
    getScrollElement: () => scroller.current,
    estimateSize: () => ROW,
    overscan: 6,
    scrollToFn: elementScroll,
    observeElementRect,
    observeElementOffset,
    onChange: () => rerender(),
  }), []);
  v.setOptions({ ...v.options, count: total ?? 0 });
  useLayoutEffect(() => v._didMount(), []);
  useLayoutEffect(() => v._willUpdate());

  const load = async (page, gen) => {
    const key = `${gen}:${page}`;
    if (loading.current.has(key)) return;
    loading.current.add(key);
    try {
      const r = await api(`/api/v1/fleet/gpus?${query}&offset=${page * PAGE}&limit=${PAGE}`);
      if (gen !== generation.current) return;
      pages.current.set(page, r.items);
      setTotal(r.total);
      rerender();
    } catch {
      // the next scroll or tick tries again
    } finally {
      loading.current.delete(key);
    }
  };
  const generation = useRef(0);
  // A new query starts over at the top; a live tick reloads the pages in view, in place.
  useEffect(() => {
    generation.current++;
    pages.current = new Map();
    if (scroller.current) scroller.current.scrollTop = 0;
    load(0, generation.current);
  }, [query]);
  const items = v.getVirtualItems();
  const ticked = useRef(tick);
  useEffect(() => {
    if (ticked.current === tick) return;
    ticked.current = tick;
    const inView = new Set(items.map((i) => Math.floor(i.index / PAGE)));
    if (inView.size === 0) inView.add(0);
    for (const p of inView) load(p, generation.current);
  }, [tick]);
  useEffect(() => {
    const want = new Set(items.map((i) => Math.floor(i.index / PAGE)));
    for (const p of want) if (!pages.current.has(p)) load(p, generation.current);
  });
  const rowAt = (i) => pages.current.get(Math.floor(i / PAGE))?.[i % PAGE];
  const sortButton = ([id, key, s]) => {
    if (!s) return html`<div role="columnheader" class=${'c-' + id}>${t(key)}</div>`;
    const active = sort === s;
    const ariaSort = active ? (order === 'asc' ? 'ascending' : 'descending') : 'none';
    return html`<div role="columnheader" aria-sort=${ariaSort} class=${'c-' + id}>
      <button type="button" class="th-sort" onClick=${() => onSort(s, active && order === 'asc' ? 'desc' : 'asc')}>
        ${t(key)}<span aria-hidden="true">${active ? (order === 'asc' ? ' ▲' : ' ▼') : ''}</span>
      </button></div>`;
  };
  return html`<div class="vtable-wrap"><div class="vtable" role="table" aria-label=${t('fleet.table')} aria-rowcount=${total === null ? -1 : total + 1} data-testid="gpu-table">
    <div role="rowgroup" class="vhead"><div role="row" aria-rowindex="1" class="vrow">${COLUMNS.map(sortButton)}</div></div>
    <div role="rowgroup" ref=${scroller} class="vbody" tabindex="0" aria-label=${t('fleet.tableRows')}>
      <div style=${{ height: `${v.getTotalSize()}px`, position: 'relative' }}>
        ${items.map((it) => {
          const g = rowAt(it.index);
          return html`<div role="row" class="vrow" aria-rowindex=${it.index + 2} key=${it.index}
              style=${{ position: 'absolute', top: 0, left: 0, right: 0, height: `${ROW}px`, transform: `translateY(${it.start}px)` }}>
            ${g ? html`
              <div role="cell" class="c-gpu"><${Link} href=${'/fleet/gpus/' + encodeURIComponent(g.uuid)} title=${g.uuid}>${g.cluster} · #${g.index}</${Link}></div>
              <div role="cell" class="c-node"><button type="button" class="linkish" title=${t('fleet.onlyNode', { node: g.node })} onClick=${() => onNode(g.node)}>${g.node}</button></div>
              <div role="cell" class="c-model">${g.model}</div>
              <div role="cell" class="c-mig">${g.migMode === 'Enabled' ? t('mig.on', { n: g.devices }) : t('mig.off')}</div>
              <div role="cell" class="c-health"><${HealthBadge} health=${g.health} /></div>
              <div role="cell" class="c-allocation">${number(g.allocatedDevices, loc)}/${number(g.devices, loc)}</div>
              <div role="cell" class="c-sm">${percent(g.smActive, loc)}</div>
              <div role="cell" class="c-power">${watts(g.powerW, loc)}</div>
              <div role="cell" class="c-temp">${g.tempC === null ? '–' : `${number(g.tempC, loc)} °C`}</div>
              <div role="cell" class="c-memory">${mib(g.fbUsedMiB, loc)}</div>
              <div role="cell" class="c-pools">${g.pools.join(', ')}${lentBadge(g.lent, t, loc)}</div>`
            : html`<div role="cell" class="c-gpu muted">${t('loading')}</div>`}
          </div>`;
        })}
      </div>
    </div>
  </div>
  <p class="muted" role="status">${total === null ? t('loading') : t('fleet.count', { n: number(total, loc) })}</p>
  </div>`;
}

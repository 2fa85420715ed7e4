// Fleet: clusters, the heatmap of every GPU, the GPU table (server-side sort and filter), and
// the MIG GPUs drawn slice by slice.
import { useEffect, useState } from 'preact/hooks';
import { api, isOperator } from '../api.js';
import { html, Section, Loading, ErrorBox, useT } from '../ui/parts.js';
import { useList, useLoad } from '../ui/hooks.js';
import { Heatmap } from '../ui/heatmap.js';
import { GpuTable } from '../ui/gputable.js';
import { MigDrawing, annotate } from '../ui/migdraw.js';
import { describe } from '../logic/heatmap.js';
import { number } from '../logic/format.js';
import { navigate } from '../router.js';
import { live } from '../live.js';
import { useObservable } from '../store.js';
import * as data from './data.js';
import { Defrag } from './defrag.js';

const MIG_SHOWN = 12;

function qs(filter) {
  return Object.entries(filter).filter(([, v]) => v).map(([k, v]) => `&${k}=${encodeURIComponent(v)}`).join('');
}

export function Fleet() {
  const { t, loc } = useT();
  const { tick } = useObservable(live);
  const [text, setText] = useState('');
  const [filter, setFilter] = useState({ q: '', cluster: '', model: '', health: '', mig: '' });
  const [sort, setSort] = useState({ by: 'cluster', order: 'asc' });
  const [metric, setMetric] = useState('allocated');
  useEffect(() => {
    const id = setTimeout(() => setFilter((f) => (f.q === text ? f : { ...f, q: text })), 250);
    return () => clearTimeout(id);
  }, [text]);
  const clusters = useList('clusters');
  const pools = useList('gpupools');
  const profiles = useList('profiles');
  const base = useLoad(async (signal) => ({ sum: await data.summary(signal) }));
  const cells = useLoad((signal) => api(`/api/v1/fleet/gpus?view=cells${qs(filter)}`, { signal }), [JSON.stringify(filter)]);
  const mig = useLoad((signal) => api(`/api/v1/fleet/gpus?limit=${MIG_SHOWN}${qs({ ...filter, mig: 'enabled' })}`, { signal }), [JSON.stringify(filter)]);
  const migShown = mig.data && pools.items && profiles.items;
  const set = (k) => (e) => setFilter((f) => ({ ...f, [k]: e.target.value }));
  const sum = base.data?.sum;
  const models = sum ? sum.physical.byModel.map((m) => m.model) : [];
  const clusterNames = sum ? (sum.physical.byCluster ?? []).map((c) => c.cluster) : [];
  const c = cells.data;
  const d = c ? describe(c) : null;
  return html`
    <h1>${t('page.fleet')}</h1>
    <${ErrorBox} error=${base.error || cells.error || clusters.error} />
    <${Section} id="clusters" title=${t('fleet.clusters')}>
      ${!base.data || !clusters.items ? html`<${Loading} />` : html`<table data-testid="cluster-table">
        <thead><tr><th scope="col">${t('col.cluster')}</th><th scope="col">${t('col.driver')}</th><th scope="col">${t('col.region')}</th><th scope="col">${t('col.reachable')}</th><th scope="col" class="num">${t('col.nodes')}</th><th scope="col" class="num">${t('col.gpus')}</th><th scope="col" class="num">${t('col.migEnabled')}</th><th scope="col" class="num">${t('col.unhealthy')}</th></tr></thead>
        <tbody>${clusters.items.map((cl) => {
          const n = (sum.physical.byCluster ?? []).find((x) => x.cluster === cl.metadata.name) ?? { nodes: 0, gpus: 0, migEnabled: 0, unhealthy: 0 };
          const ok = (cl.status?.conditions ?? []).find((x) => x.type === 'Reachable');
          return html`<tr><td>${cl.metadata.name}</td><td>${cl.spec?.driver === 'kubernetes' ? 'Kubernetes' : t('driver.simulated')}</td><td>${cl.spec?.region || '–'}</td>
            <td>${ok ? (ok.status === 'True' ? t('yes') : t('no')) : '–'}</td>
            <td class="num">${number(n.nodes, loc)}</td><td class="num">${number(n.gpus, loc)}</td><td class="num">${number(n.migEnabled, loc)}</td><td class="num">${number(n.unhealthy, loc)}</td></tr>`;
        })}</tbody></table>`}
    </${Section}>
    <form class="filters" role="search" aria-label=${t('fleet.filters')} onSubmit=${(e) => e.preventDefault()}>
      <label>${t('fleet.search')}<input type="search" value=${text} onInput=${(e) => setText(e.target.value)} /></label>
      <label>${t('col.cluster')}<select value=${filter.cluster} onChange=${set('cluster')}><option value="">${t('all')}</option>${clusterNames.map((n) => html`<option value=${n}>${n}</option>`)}</select></label>
      <label>${t('col.model')}<select value=${filter.model} onChange=${set('model')}><option value="">${t('all')}</option>${models.map((n) => html`<option value=${n}>${n}</option>`)}</select></label>
      <label>${t('col.health')}<select value=${filter.health} onChange=${set('health')}><option value="">${t('all')}</option>${['Healthy', 'Unhealthy', 'Unknown'].map((h) => html`<option value=${h}>${t('health.' + h)}</option>`)}</select></label>
      <label>${t('col.mig')}<select value=${filter.mig} onChange=${set('mig')}><option value="">${t('all')}</option><option value="enabled">${t('mig.enabled')}</option><option value="disabled">${t('mig.disabled')}</option></select></label>
    </form>
    <${Section} id="heatmap" title=${t('fleet.heatmap')} actions=${html`<fieldset class="seg"><legend class="sr-only">${t('fleet.colourBy')}</legend>
        <label><input type="radio" name="metric" checked=${metric === 'allocated'} onChange=${() => setMetric('allocated')} />${t('col.allocation')}</label>
        <label><input type="radio" name="metric" checked=${metric === 'sm'} onChange=${() => setMetric('sm')} />${t('col.sm')}</label></fieldset>`}>
      ${!c ? html`<${Loading} />` : html`<${Heatmap} cells=${c} metric=${metric} onPick=${(u) => navigate('/fleet/gpus/' + encodeURIComponent(u))}
        label=${t('fleet.heatmap.label', { total: number(d.total, loc), allocated: number(d.allocated, loc), free: number(d.free, loc), unhealthy: number(d.unhealthy, loc) })} />`}
    </${Section}>
    <${Section} id="gpus" title=${t('fleet.gpus')}>
      <${GpuTable} filter=${filter} sort=${sort.by} order=${sort.order} tick=${tick} onSort=${(by, order) => setSort({ by, order })}
        onNode=${(node) => setText(node)} />
    </${Section}>
    <${Section} id="mig" title=${t('fleet.mig')}>
      ${!migShown ? html`<${Loading} />` : html`
        <p class="muted">${t('fleet.mig.shown', { shown: number(mig.data.items.length, loc), total: number(mig.data.total, loc) })}</p>
        <div class="mig-grid">${mig.data.items.map((g) => {
          if (!g.migRoom) return null;
          return html`<div class="mig-card"><h3><a href=${'/fleet/gpus/' + encodeURIComponent(g.uuid)} onClick=${(e) => { e.preventDefault(); navigate('/fleet/gpus/' + encodeURIComponent(g.uuid)); }}>${g.node} · #${g.index}</a> <span class="muted">${g.model}</span></h3>
            <${MigDrawing} room=${g.migRoom} uuid=${g.uuid} instances=${annotate(g.uuid, g.migInstances, pools.items, profiles.items)} /></div>`;
        })}</div>`}
    </${Section}>
    ${isOperator() ? html`<${Defrag} />` : null}`;
}

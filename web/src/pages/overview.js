// Overview: physical GPUs and logical devices, allocated and free, allocated and used (kept
// apart), pending requests, unhealthy GPUs with the action to take, power, and what fits now.
import { isOperator } from '../api.js';
import { html, Section, Tile, Chart, Link, Loading, ErrorBox, HealthBadge, Worded, useT } from '../ui/parts.js';
import { useList, useLoad } from '../ui/hooks.js';
import { number, percent, watts } from '../logic/format.js';
import { fitsNowTable, poolState } from '../logic/pools.js';
import { alertAction, alertEvent, conditionType } from '../logic/serverText.js';
import * as data from './data.js';

const DAY = 86400;

export function Overview({ wall }) {
  const { t, loc, word } = useT();
  // The counts first; the series (slower on a large fleet) fill in when they come.
  const pools = useList('gpupools');
  const { data: d, error: loadError } = useLoad(async (signal) => {
    const [sum, sick] = await Promise.all([data.summary(signal), data.unhealthy(signal)]);
    return { sum, sick };
  });
  const error = loadError || pools.error;
  const series = useLoad(async (signal) => {
    const sum = await data.summary(signal);
    const [power, alloc, used] = await Promise.all([
      data.fleetSeries(sum, isOperator() ? 'fleet_power_w' : 'power_w', DAY, 900, signal),
      data.fleetSeries(sum, 'allocated_gpus', 3600, 300, signal),
      data.fleetSeries(sum, 'used_gpus', 3600, 300, signal),
    ]);
    return { power, alloc, used };
  });
  if (!d || !pools.items) return html`<h1>${t('page.overview')}</h1>${error ? html`<${ErrorBox} error=${error} />` : html`<${Loading} />`}`;
  const { sum, sick } = d;
  const poolList = pools.items;
  const empty = { x: [], values: [] };
  const { power, alloc, used } = series.data ?? { power: empty, alloc: empty, used: empty };
  const lastOf = (s) => [...s.values].reverse().find((v) => v !== null && v !== undefined) ?? null;
  const allocNow = lastOf(alloc), usedNow = lastOf(used);
  const pending = poolList.filter((p) => poolState(p) === 'New');
  const fits = fitsNowTable(sum.logical.byProfile);
  const n = (v) => number(v, loc);
  return html`
    <h1>${t('page.overview')}</h1>
    <${ErrorBox} error=${error} />
    <div class="tiles">
      <${Tile} testid="physical" label=${t('ov.physical')} value=${n(sum.physical.gpus)}
        detail=${t('ov.physical.detail', { mig: n(sum.physical.migEnabled), full: n(sum.physical.full) })} />
      <${Tile} testid="logical" label=${t('ov.logical')} value=${n(sum.logical.count)}
        detail=${t('ov.logical.detail', { allocated: n(sum.logical.allocated), free: n(sum.logical.free) })} />
      <${Tile} testid="allocated" label=${t('ov.allocated')} value=${percent(sum.logical.count ? sum.logical.allocated / sum.logical.count : 0, loc)}
        detail=${t('ov.allocated.detail', { allocated: n(sum.logical.allocated), count: n(sum.logical.count) })} />
      <${Tile} testid="used" label=${t('ov.used')} value=${allocNow ? percent((usedNow ?? 0) / allocNow, loc) : '–'}
        detail=${t('ov.used.detail', { used: number(usedNow, loc, 1), allocated: number(allocNow, loc, 1) })} />
      <${Tile} testid="pending" label=${t('ov.pending')} value=${n(pending.length)} detail=${html`<${Link} href="/pools">${t('ov.pending.link')}</${Link}>`} />
      <${Tile} testid="unhealthy" label=${t('ov.unhealthy')} value=${n(sum.physical.unhealthy)} detail=${t('ov.unhealthy.detail')} />
      <${Tile} testid="power" label=${t('ov.power')} value=${watts(lastOf(power), loc)} detail=${t(isOperator() ? 'ov.power.detail' : 'ov.power.detailProject')} />
      <${Tile} testid="clusters" label=${t('ov.clusters')} value=${n(sum.clusters)} detail=${t('ov.nodes', { n: n(sum.nodes) })} />
    </div>
    <div class=${wall ? 'grid wall-grid' : 'grid'}>
      <${Section} id="fits" title=${t('ov.fits')}>
        <p class="muted">${t('ov.fits.help')}</p>
        <table data-testid="fits-table">
          <caption class="sr-only">${t('ov.fits')}</caption>
          <thead><tr><th scope="col">${t('col.model')}</th><th scope="col">${t('col.profile')}</th><th scope="col" class="num">${t('col.fitsNow')}</th><th scope="col" class="num">${t('col.devices')}</th></tr></thead>
          <tbody>${fits.map((f) => html`<tr><td>${f.model}</td><td>${f.profile === 'full' ? t('profile.full') : f.profile}</td><td class="num">${n(f.available)}</td><td class="num">${n(f.count)}</td></tr>`)}</tbody>
        </table>
      </${Section}>
      <${Section} id="unhealthy-list" wide=${sick.length > 0} title=${t('ov.unhealthyList')}>
        ${sick.length === 0 ? html`<p class="muted">${t('ov.allHealthy')}</p>` : html`<table data-testid="unhealthy-table">
          <thead><tr><th scope="col">${t('col.gpu')}</th><th scope="col">${t('col.node')}</th><th scope="col">${t('col.health')}</th><th scope="col">${t('col.action')}</th></tr></thead>
          <tbody>${sick.map((g) => html`<tr>
            <td><${Link} href=${'/fleet/gpus/' + encodeURIComponent(g.uuid)}>${g.model} #${g.index}</${Link}><div class="muted mono">${g.uuid}</div></td>
            <td>${g.node}</td>
            <td><${HealthBadge} health=${g.health} />${g.alerts.map((a) => html`<div class="muted" data-testid="event">
              <${Worded} msg=${alertEvent(a)} />${a.condition ? ` (${word(conditionType(a.condition))})` : ''}</div>`)}</td>
            <td>${g.alerts.length ? g.alerts.map((a) => html`<div data-testid="action"><${Worded} msg=${alertAction(a)} /></div>`) : html`<span class="muted">${t('ov.actionOperators')}</span>`}</td>
          </tr>`)}</tbody></table>`}
      </${Section}>
      <${Section} id="power-24h" title=${t('ov.power24')}>
        ${!series.data ? html`<${Loading} />` : html`<${Chart} testid="power-chart" label=${t('ov.power24.label', { now: watts(lastOf(power), loc) })} x=${power.x}
          series=${[{ label: t('series.power'), values: power.values }]} fmt=${(v) => watts(v, loc)} />`}
      </${Section}>
      <${Section} id="by-model" title=${t('ov.byModel')}>
        <table>
          <thead><tr><th scope="col">${t('col.model')}</th><th scope="col" class="num">${t('col.gpus')}</th><th scope="col" class="num">${t('col.migEnabled')}</th><th scope="col" class="num">${t('col.full')}</th><th scope="col" class="num">${t('col.unhealthy')}</th></tr></thead>
          <tbody>${sum.physical.byModel.map((m) => html`<tr><td>${m.model}</td><td class="num">${n(m.gpus)}</td><td class="num">${n(m.migEnabled)}</td><td class="num">${n(m.full)}</td><td class="num">${n(m.unhealthy)}</td></tr>`)}</tbody>
        </table>
        <h3>${t('ov.byCluster')}</h3>
        <table>
          <thead><tr><th scope="col">${t('col.cluster')}</th><th scope="col" class="num">${t('col.gpus')}</th><th scope="col" class="num">${t('col.migEnabled')}</th><th scope="col" class="num">${t('col.full')}</th><th scope="col" class="num">${t('col.unhealthy')}</th></tr></thead>
          <tbody>${(sum.physical.byCluster ?? []).map((c) => html`<tr><td>${c.cluster}</td><td class="num">${n(c.gpus)}</td><td class="num">${n(c.migEnabled)}</td><td class="num">${n(c.full)}</td><td class="num">${n(c.unhealthy)}</td></tr>`)}</tbody>
        </table>
      </${Section}>
      <${Section} id="by-profile" title=${t('ov.byProfile')}>
        <table data-testid="profile-table">
          <thead><tr><th scope="col">${t('col.model')}</th><th scope="col">${t('col.profile')}</th><th scope="col" class="num">${t('col.devices')}</th><th scope="col" class="num">${t('col.allocated')}</th><th scope="col" class="num">${t('col.free')}</th></tr></thead>
          <tbody>${sum.logical.byProfile.map((p) => html`<tr><td>${p.model}</td><td>${p.profile === 'full' ? t('profile.full') : p.profile}</td><td class="num">${n(p.count)}</td><td class="num">${n(p.allocated)}</td><td class="num">${n(p.free)}</td></tr>`)}</tbody>
        </table>
      </${Section}>
    </div>`;
}

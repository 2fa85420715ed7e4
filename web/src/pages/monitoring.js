// Monitoring: power and utilisation over 24 h, the health alerts (XID, ECC, row remapping,
// temperature, budgets) with their actions, and how much of what is allocated is used.
import { api, isOperator } from '../api.js';
import { html, Section, Chart, Loading, ErrorBox, Link, Worded, useT } from '../ui/parts.js';
import { useLoad } from '../ui/hooks.js';
import { dateTime, number, percent, watts } from '../logic/format.js';
import { alertAction, alertEvent, severity } from '../logic/serverText.js';
import * as data from './data.js';

const DAY = 86400;

export function Monitoring() {
  const { t, loc, word } = useT();
  const { data: d, error } = useLoad(async (signal) => {
    const sum = await data.summary(signal);
    const [power, alloc, used, alerts, assessment] = await Promise.all([
      data.fleetSeries(sum, isOperator() ? 'fleet_power_w' : 'power_w', DAY, 900, signal),
      data.fleetSeries(sum, 'allocated_gpus', DAY, 900, signal),
      data.fleetSeries(sum, 'used_gpus', DAY, 900, signal),
      isOperator() ? api('/api/v1/alerts', { signal }).then((a) => a.items) : Promise.resolve(null),
      api('/api/v1/assessment', { signal }).catch(() => null),
    ]);
    return { power, alloc, used, alerts, assessment };
  });
  if (!d) return html`<h1>${t('page.monitoring')}</h1>${error ? html`<${ErrorBox} error=${error} />` : html`<${Loading} />`}`;
  return html`
    <h1>${t('page.monitoring')}</h1>
    <${ErrorBox} error=${error} />
    <div class="grid">
      <${Section} id="m-power" title=${t('ov.power24')}>
        <${Chart} label=${t('ov.power24')} x=${d.power.x} series=${[{ label: t('series.power'), values: d.power.values }]} fmt=${(v) => watts(v, loc)} />
      </${Section}>
      <${Section} id="m-util" title=${t('mon.allocUsed')}>
        <${Chart} label=${t('mon.allocUsed')} x=${d.alloc.x} fmt=${(v) => number(v, loc, 1)}
          series=${[{ label: t('series.allocatedGpus'), values: d.alloc.values }, { label: t('series.usedGpus'), values: d.used.values }]} />
      </${Section}>
    </div>
    <${Section} id="m-alerts" title=${t('mon.alerts')}>
      ${d.alerts === null ? html`<p class="muted">${t('gpu.errorsOperators')}</p>` : d.alerts.length === 0 ? html`<p class="muted">${t('mon.noAlerts')}</p>` : html`
      <table data-testid="alert-table"><thead><tr><th scope="col">${t('col.time')}</th><th scope="col">${t('col.severity')}</th><th scope="col">${t('col.gpu')}</th><th scope="col">${t('col.host')}</th><th scope="col">${t('col.event')}</th><th scope="col">${t('col.action')}</th><th scope="col">${t('col.status')}</th></tr></thead>
      <tbody>${d.alerts.slice(0, 200).map((a) => html`<tr>
        <td>${dateTime(a.time, loc)}</td><td>${word(severity(a.severity))}</td>
        <td>${a.gpu ? html`<${Link} href=${'/fleet/gpus/' + encodeURIComponent(a.gpu)} class="mono">${a.gpu}</${Link}>` : a.project ?? '–'}</td>
        <td>${a.node || '–'}</td><td data-testid="event"><${Worded} msg=${alertEvent(a)} /></td><td data-testid="action"><${Worded} msg=${alertAction(a)} /></td><td>${a.active ? t('alert.active') : t('alert.resolved')}</td></tr>`)}</tbody></table>`}
    </${Section}>
    <${Section} id="m-projects" title=${t('mon.projects')}>
      ${!d.assessment || d.assessment.projects.length === 0 ? html`<p class="muted">${t('pools.noUsage')}</p>` : html`<table>
        <thead><tr><th scope="col">${t('col.project')}</th><th scope="col" class="num">${t('col.pools')}</th><th scope="col" class="num">${t('mon.idlePools')}</th><th scope="col" class="num">${t('billing.allocatedHours')}</th><th scope="col" class="num">${t('billing.usedHours')}</th><th scope="col" class="num">${t('col.utilisation')}</th></tr></thead>
        <tbody>${d.assessment.projects.map((p) => html`<tr><td>${p.project}</td><td class="num">${number(p.pools, loc)}</td><td class="num">${number(p.idlePools, loc)}</td><td class="num">${number(p.allocatedGpuHours, loc, 1)}</td><td class="num">${number(p.usedGpuHours, loc, 1)}</td><td class="num">${percent(p.utilization, loc)}</td></tr>`)}</tbody></table>`}
    </${Section}>`;
}

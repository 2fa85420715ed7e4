// One GPU: where it is (cluster and host), its health and conditions, its MIG layout, its charts
// (power, SM activity, memory, temperature) and its error history (XID, ECC) with the host named.
import { api, isOperator } from '../api.js';
import { html, Section, Chart, Loading, ErrorBox, HealthBadge, Link, Worded, useT } from '../ui/parts.js';
import { useState } from 'preact/hooks';
import { useList, useLoad } from '../ui/hooks.js';
import { MigDrawing, annotate } from '../ui/migdraw.js';
import { dateTime, mib, number, percent, watts } from '../logic/format.js';
import { alertAction, alertEvent, alertSource, conditionReason, conditionType, showsServerText } from '../logic/serverText.js';
import * as data from './data.js';

const DAY = 86400;
// The chart ranges, and the step each is read at. Past gpuaas's hot window (six hours by default)
// the server reads from the TSDB it writes to (--telemetry-query) or from its rollups.
const RANGES = { day: { span: DAY, step: 600, label: 'gpu.chartLabel' }, week: { span: 7 * DAY, step: 3600, label: 'gpu.chartLabelWeek' } };
// What stays when the history does not answer: the last hour, from gpuaas's own memory.
const LIVE = { span: 3600, step: 60, label: 'gpu.chartLabelHour' };

export function GpuPage({ uuid }) {
  const { t, loc, lang, word } = useT();
  const pools = useList('gpupools');
  const profiles = useList('profiles');
  const [range, setRange] = useState('day');
  const { data: d, error: loadError } = useLoad(async (signal) => {
    const [gpu, rows] = await Promise.all([
      api(`/apis/gpuaas.io/v1/gpucapacities/${encodeURIComponent(uuid.toLowerCase())}`, { signal }),
      api(`/api/v1/fleet/gpus?q=${encodeURIComponent(uuid)}&limit=1`, { signal }),
    ]);
    // GPU series are for operators, and only the readings the GPU has are asked for.
    const row = rows.items[0] ?? {};
    // A history that does not answer (503) leaves the charts to the live hour, and says so.
    let historyError = null;
    const read = async (m) => {
      const { span, step } = RANGES[range];
      try {
        return await data.series(`gpu:${gpu.spec.uuid}`, m, span, step, signal);
      } catch (e) {
        if (e.status !== 503) return null;
        historyError = e;
        return data.series(`gpu:${gpu.spec.uuid}`, m, LIVE.span, LIVE.step, signal).catch(() => null);
      }
    };
    const metric = (m, latest) => (isOperator() && latest !== null && latest !== undefined ? read(m) : Promise.resolve(null));
    const [power, sm, fb, temp, alerts] = await Promise.all([
      metric('power_w', row.powerW), metric('sm_active', row.smActive), metric('fb_used_mib', row.fbUsedMiB), metric('temp_c', row.tempC),
      isOperator() ? api('/api/v1/alerts', { signal }).then((a) => a.items) : Promise.resolve(null),
    ]);
    return { gpu, row, power, sm, fb, temp, alerts, historyError };
  }, [uuid, range]);
  const error = loadError || pools.error || profiles.error;
  if (!d || !pools.items || !profiles.items) return html`<h1>${t('page.gpu')}</h1>${error ? html`<${ErrorBox} error=${error} />` : html`<${Loading} />`}`;
  const g = d.gpu;
  const mig = g.status.migMode === 'Enabled';
  const mine = (d.alerts ?? []).filter((a) => a.gpu?.toLowerCase() === g.spec.uuid.toLowerCase());
  const shown = d.historyError ? LIVE : RANGES[range];
  const chart = (s, label, fmt, testid) => (s ? html`<${Chart} testid=${testid} label=${t(shown.label, { what: label })} x=${s.x} series=${[{ label, values: s.values }]} fmt=${fmt} height=${150} />`
    : html`<p class="muted">${isOperator() ? t('gpu.noSeries', { what: label }) : t('gpu.readingsOperators')}</p>`);
  // The fleet row's instances say which a pool holds (whoever's), and its migRoom what the free
  // slices can still take.
  const room = d.row.migRoom;
  return html`
    <p><${Link} href="/fleet">${t('gpu.back')}</${Link}></p>
    <h1>${g.spec.model} #${g.spec.index} <span class="muted mono">${g.spec.uuid}</span></h1>
    <${ErrorBox} error=${error} />
    <dl class="facts" data-testid="gpu-facts">
      <div><dt>${t('col.cluster')}</dt><dd>${g.spec.cluster}</dd></div>
      <div><dt>${t('col.host')}</dt><dd data-testid="gpu-host">${g.spec.node}</dd></div>
      <div><dt>${t('col.health')}</dt><dd data-testid="gpu-health"><${HealthBadge} health=${g.status.health} /></dd></div>
      <div><dt>${t('col.mig')}</dt><dd>${mig ? t('mig.on', { n: g.status.migInstances?.length ?? 0 }) : t('mig.off')}</dd></div>
      <div><dt>${t('col.memory')}</dt><dd>${mib(g.spec.memoryMiB, loc)}</dd></div>
      <div><dt>${t('col.product')}</dt><dd>${g.spec.product}</dd></div>
    </dl>
    ${mine.some((a) => a.active) ? html`<div class="banner warn" role="alert" data-testid="gpu-action">
      ${mine.filter((a) => a.active).map((a) => html`<p><strong>${word(a.condition ? conditionType(a.condition) : alertSource(a.source))}</strong>: <${Worded} msg=${alertEvent(a)} testid="event" /> — ${t('gpu.action')}: <${Worded} msg=${alertAction(a)} testid="action" /></p>`)}</div>` : null}
    <${Section} id="conditions" title=${t('gpu.conditions')}>
      <table><thead><tr><th scope="col">${t('col.condition')}</th><th scope="col">${t('col.status')}</th><th scope="col">${t('col.reason')}</th><th scope="col">${t('col.since')}</th></tr></thead>
      <tbody>${(g.status.conditions ?? []).map((c) => html`<tr data-condition=${c.type}><td>${word(conditionType(c.type))}</td><td>${c.status === 'True' ? t('yes') : c.status === 'False' ? t('no') : '–'}</td>
        <td title=${c.message && !showsServerText(lang) ? c.message : undefined}>${word(conditionReason(c.type, c.reason))}${c.message && showsServerText(lang) ? html`<div class="muted">${c.message}</div>` : null}</td>
        <td>${dateTime(c.lastTransitionTime, loc)}</td></tr>`)}</tbody></table>
    </${Section}>
    ${mig && room ? html`<${Section} id="layout" title=${t('gpu.layout')}>
      <${MigDrawing} room=${room} uuid=${g.spec.uuid} width=${640} instances=${annotate(g.spec.uuid, d.row.migInstances ?? [], pools.items, profiles.items)} />
    </${Section}>` : null}
    ${isOperator() ? html`<div class="tabs" role="group" aria-label=${t('gpu.range')} data-testid="chart-range">
      ${Object.keys(RANGES).map((r) => html`<button type="button" class="tab" aria-pressed=${range === r ? 'true' : 'false'} onClick=${() => setRange(r)}>${t(`gpu.range.${r}`)}</button>`)}
    </div>` : null}
    ${d.historyError ? html`<div class="banner warn" role="status" data-testid="history-unavailable">
      <p title=${showsServerText(lang) ? undefined : d.historyError.message}>${t('gpu.historyUnavailable')}${showsServerText(lang) ? html` <span class="muted">${d.historyError.message}</span>` : null}</p></div>` : null}
    <div class="grid">
      <${Section} id="c-power" title=${t('series.power')}>${chart(d.power, t('series.power'), (v) => watts(v, loc), 'chart-power')}</${Section}>
      <${Section} id="c-sm" title=${t('series.sm')}>${chart(d.sm, t('series.sm'), (v) => percent(v, loc), 'chart-sm')}</${Section}>
      <${Section} id="c-fb" title=${t('series.memory')}>${chart(d.fb, t('series.memory'), (v) => mib(v, loc), 'chart-memory')}</${Section}>
      <${Section} id="c-temp" title=${t('series.temp')}>${chart(d.temp, t('series.temp'), (v) => `${number(v, loc)} °C`, 'chart-temp')}</${Section}>
    </div>
    <${Section} id="errors" title=${t('gpu.errors')}>
      ${d.alerts === null ? html`<p class="muted">${t('gpu.errorsOperators')}</p>` : mine.length === 0 ? html`<p class="muted">${t('gpu.noErrors')}</p>` : html`
      <table data-testid="error-history"><thead><tr><th scope="col">${t('col.time')}</th><th scope="col">${t('col.host')}</th><th scope="col">${t('col.source')}</th><th scope="col">${t('col.event')}</th><th scope="col">${t('col.action')}</th><th scope="col">${t('col.status')}</th></tr></thead>
      <tbody>${mine.map((a) => html`<tr><td>${dateTime(a.time, loc)}</td><td>${a.node}</td><td>${word(alertSource(a.source))}</td>
        <td data-testid="event"><${Worded} msg=${alertEvent(a)} /></td><td data-testid="action"><${Worded} msg=${alertAction(a)} /></td><td>${a.active ? t('alert.active') : t('alert.resolved')}</td></tr>`)}</tbody></table>`}
    </${Section}>`;
}

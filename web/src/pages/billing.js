// Billing: per project and month, the invoice (lines, GPU-hours allocated and used), the cost
// trend over the months billed, the budget, and CSV and FOCUS exports.
import { useState } from 'preact/hooks';
import { api, download, isOperator, session } from '../api.js';
import { html, Section, Loading, ErrorBox, Bar, useT } from '../ui/parts.js';
import { useList, useLoad } from '../ui/hooks.js';
import { money, month, number, percent, recentPeriods } from '../logic/format.js';
import { invoiceTotals } from '../logic/billing.js';

export function Billing() {
  const { t, loc } = useT();
  const periods = recentPeriods(Date.now(), 12);
  const who = session.get().who;
  const [project, setProject] = useState(who.role === 'operator' ? '' : who.project);
  const [period, setPeriod] = useState(periods[0]);
  const projects = useList('projects');
  const chosen = project || projects.items?.[0]?.metadata.name || '';
  const inv = useLoad(async (signal) => {
    if (!chosen) return null;
    const p = encodeURIComponent(chosen);
    const [invoice, all] = await Promise.all([
      api(`/api/v1/projects/${p}/invoices/${period}`, { signal }),
      api(`/api/v1/projects/${p}/invoices`, { signal }).then((l) => l.items),
    ]);
    return { invoice, all };
  }, [chosen, period]);
  const fleet = useLoad((signal) => (isOperator() ? api(`/api/v1/billing/summary?from=${period}&to=${nextMonth(period)}`, { signal }) : Promise.resolve(null)), [period]);
  const proj = projects.items?.find((p) => p.metadata.name === chosen);
  const budget = proj?.spec?.budget;
  const d = inv.data;
  const tot = d ? invoiceTotals(d.invoice) : null;
  const cur = d?.invoice.currency || 'USD';
  const maxTrend = d ? Math.max(1, ...d.all.map((i) => i.totalMicros)) : 1;
  return html`
    <h1>${t('page.billing')}</h1>
    <${ErrorBox} error=${projects.error || inv.error} />
    <form class="filters" onSubmit=${(e) => e.preventDefault()} aria-label=${t('billing.choose')}>
      <label>${t('col.project')}<select value=${chosen} onChange=${(e) => setProject(e.target.value)}>
        ${(projects.items ?? []).map((p) => html`<option value=${p.metadata.name}>${p.metadata.name}</option>`)}</select></label>
      <label>${t('billing.period')}<select value=${period} onChange=${(e) => setPeriod(e.target.value)}>
        ${periods.map((p) => html`<option value=${p}>${month(p, loc)}</option>`)}</select></label>
      <button type="button" class="secondary" disabled=${!chosen} onClick=${() => download(`/api/v1/projects/${encodeURIComponent(chosen)}/invoices/${period}?format=csv`, `${chosen}-${period}.csv`)}>${t('billing.csv')}</button>
      ${isOperator() ? html`<button type="button" class="secondary" onClick=${() => download(`/api/v1/billing/focus?from=${period}&to=${nextMonth(period)}`, `focus-${period}.csv`)}>${t('billing.focus')}</button>` : null}
    </form>
    ${!d ? (inv.error ? null : html`<${Loading} />`) : html`
      <div class="tiles">
        <div class="tile" data-testid="invoice-total"><div class="tile-label">${t('billing.total')}</div><div class="tile-value">${money(d.invoice.totalMicros, cur, loc)}</div><div class="tile-detail">${t('billing.state.' + d.invoice.state)}</div></div>
        <div class="tile"><div class="tile-label">${t('billing.allocatedHours')}</div><div class="tile-value">${number(d.invoice.allocatedGpuHours, loc, 1)}</div></div>
        <div class="tile"><div class="tile-label">${t('billing.usedHours')}</div><div class="tile-value">${tot.used === null ? '–' : number(tot.used, loc, 1)}</div><div class="tile-detail">${tot.used === null ? t('billing.noReadings') : percent(d.invoice.allocatedGpuHours ? tot.used / d.invoice.allocatedGpuHours : 0, loc)}</div></div>
      </div>
      ${budget ? html`<${Section} id="budget" title=${t('billing.budget')}>
        ${budget.amountMicros ? html`<${Bar} value=${d.invoice.totalMicros} max=${budget.amountMicros} label=${t('billing.budgetMoney')}
          text=${t('billing.budgetText', { used: money(d.invoice.totalMicros, cur, loc), limit: money(budget.amountMicros, cur, loc) })} />` : null}
        ${budget.gpuHours ? html`<${Bar} value=${d.invoice.allocatedGpuHours} max=${budget.gpuHours} label=${t('billing.budgetHours')}
          text=${t('billing.budgetText', { used: number(d.invoice.allocatedGpuHours, loc, 1), limit: number(budget.gpuHours, loc) })} />` : null}
      </${Section}>` : null}
      <${Section} id="invoice" title=${t('billing.invoiceOf', { project: chosen, period: month(period, loc) })}>
        ${d.invoice.lines.length === 0 ? html`<p class="muted">${t('billing.noLines')}</p>` : html`<table data-testid="invoice-lines">
          <thead><tr><th scope="col">${t('col.pool')}</th><th scope="col">${t('billing.item')}</th><th scope="col" class="num">${t('billing.quantity')}</th><th scope="col" class="num">${t('billing.hours')}</th><th scope="col" class="num">${t('billing.unitPrice')}</th><th scope="col" class="num">${t('billing.amount')}</th><th scope="col" class="num">${t('billing.usedHours')}</th></tr></thead>
          <tbody>${d.invoice.lines.map((l) => html`<tr data-pool=${l.pool}><td>${l.pool}</td><td>${l.item}</td><td class="num">${number(l.quantity, loc)}</td><td class="num">${number(l.seconds / 3600, loc, 2)}</td><td class="num">${money(l.unitPriceMicros, cur, loc)}</td><td class="num">${money(l.amountMicros, cur, loc)}</td><td class="num">${l.usedGpuHours === undefined ? '–' : number(l.usedGpuHours, loc, 2)}</td></tr>`)}</tbody></table>`}
      </${Section}>
      <${Section} id="trend" title=${t('billing.trend')}>
        ${d.all.length === 0 ? html`<p class="muted">${t('billing.noLines')}</p>` : html`<ul class="trend" data-testid="cost-trend">
          ${[...d.all].reverse().map((i) => html`<li><span class="trend-label">${month(i.period.name, loc)}</span>
            <${Bar} value=${i.totalMicros} max=${maxTrend} label=${month(i.period.name, loc)} text=${money(i.totalMicros, i.currency || cur, loc)} /></li>`)}</ul>`}
      </${Section}>`}
    ${fleet.data ? html`<${Section} id="revenue" title=${t('billing.revenue', { period: month(period, loc) })}>
      <div class="grid">${['byProject', 'byModel', 'byCluster'].map((k) => html`<table>
        <thead><tr><th scope="col">${t('billing.' + k)}</th><th scope="col" class="num">${t('billing.amount')}</th><th scope="col" class="num">${t('billing.allocatedHours')}</th></tr></thead>
        <tbody>${fleet.data[k].map((r) => html`<tr><td>${r.project ?? r.model ?? r.cluster}</td><td class="num">${money(r.amountMicros, fleet.data.currency || cur, loc)}</td><td class="num">${number(r.allocatedGpuHours, loc, 1)}</td></tr>`)}</tbody></table>`)}</div>
    </${Section}>` : null}`;
}

function nextMonth(period) {
  let [y, m] = period.split('-').map(Number);
  m += 1;
  if (m === 13) { m = 1; y += 1; }
  return `${y}-${String(m).padStart(2, '0')}`;
}

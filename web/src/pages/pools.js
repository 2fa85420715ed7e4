// Pools: the approval queue (New, Approved, Ready, Rejected, Released) with Approve and Reject on
// each new request (a dialog asks for the reason; a rejection needs one), whether each request
// fits now, and each pool's devices, workloads, utilisation, quota and suggestions.
import { useState } from 'preact/hooks';
import { api, isOperator } from '../api.js';
import { html, Section, Chart, Dialog, Loading, ErrorBox, StateBadge, Bar, Link, Worded, useT } from '../ui/parts.js';
import { useList, useLoad } from '../ui/hooks.js';
import { dateTime, number, percent } from '../logic/format.js';
import { POOL_STATES, fitsNow, itemsText, poolState } from '../logic/pools.js';
import { quotaUse } from '../logic/quota.js';
import { suggestion } from '../logic/serverText.js';
import * as data from './data.js';

// Words "N of a thing" in the language's order ("4 × A100-80GB 1g.10gb", "A100-80GB 1g.10gb 4개").
const counter = (t, loc) => (n, thing) => t('count.items', { n: number(n, loc), thing });

function Decide({ pool, action, onDone, onClose }) {
  const { t, loc } = useT();
  const counted = counter(t, loc);
  const [reason, setReason] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const verb = action === 'approve' ? t('pools.approve') : t('pools.reject');
  const submit = async (e) => {
    e.preventDefault();
    if (action === 'reject' && !reason.trim()) {
      setError(t('pools.reasonRequired'));
      return;
    }
    setBusy(true);
    try {
      await api(`/apis/gpuaas.io/v1/namespaces/${encodeURIComponent(pool.metadata.namespace)}/gpupools/${encodeURIComponent(pool.metadata.name)}/approval`,
        { method: 'PUT', body: { approve: action === 'approve', reason: reason.trim() } });
      onDone();
    } catch (err) {
      setError(err.message);
    } finally {
      setBusy(false);
    }
  };
  return html`<form onSubmit=${submit} novalidate>
    <p>${t('pools.decideWhat', { pool: `${pool.metadata.namespace}/${pool.metadata.name}`, items: itemsText(pool, t('profile.full'), counted) })}</p>
    <label for="reason">${t('pools.reason')}${action === 'reject' ? html` <span class="muted">(${t('required')})</span>` : null}</label>
    <textarea id="reason" rows="3" value=${reason} onInput=${(e) => { setReason(e.target.value); setError(''); }} autofocus
      aria-required=${action === 'reject' ? 'true' : 'false'} aria-invalid=${error ? 'true' : 'false'} aria-describedby=${error ? 'reason-error' : undefined}></textarea>
    ${error ? html`<p id="reason-error" class="error" role="alert">${error}</p>` : null}
    <div class="dialog-actions">
      <button type="button" class="secondary" onClick=${onClose}>${t('cancel')}</button>
      <button type="submit" class=${action === 'reject' ? 'danger' : ''} disabled=${busy}>${verb}</button>
    </div>
  </form>`;
}

// The loans of a pool's devices now: which other project's preemptible work runs on which device
// (the Loan receipts, which operators read).
function LentDevices({ pool }) {
  const { t, loc } = useT();
  const loans = useList('loans');
  if (loans.error) return null;
  if (!loans.items) return html`<${Loading} />`;
  const open = loans.items.filter((l) => l.spec.lender === pool.metadata.namespace && l.spec.pool === pool.metadata.name && !l.spec.end);
  if (open.length === 0) return html`<p class="muted" data-testid="lent-none">${t('lending.noneLent')}</p>`;
  return html`<table data-testid="lent-devices">
    <thead><tr><th scope="col">${t('col.gpu')}</th><th scope="col">${t('lending.borrower')}</th><th scope="col">${t('lending.since')}</th></tr></thead>
    <tbody>${open.flatMap((l) => l.spec.devices.map((d) => html`<tr>
      <td class="mono">${d.instanceUUID || d.gpuUUID}</td>
      <td>${l.spec.borrower}/${l.spec.workload}</td>
      <td>${dateTime(l.spec.start, loc)}</td></tr>`))}</tbody></table>`;
}

// A pool's lending switch and what it lends; a reservation's window.
function Lending({ pool, operator }) {
  const { t, loc } = useT();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const lending = pool.spec.lending ?? { enabled: false, idleAfterSeconds: 600, reclaimGraceSeconds: 30 };
  const live = pool.status?.approval?.approved && !pool.spec.releaseRequested;
  const toggle = async () => {
    setBusy(true);
    setError('');
    try {
      const path = `/apis/gpuaas.io/v1/namespaces/${encodeURIComponent(pool.metadata.namespace)}/gpupools/${encodeURIComponent(pool.metadata.name)}`;
      const cur = await api(path);
      cur.spec.lending = { ...lending, ...(cur.spec.lending ?? {}), enabled: !lending.enabled };
      await api(path, { method: 'PUT', body: cur });
    } catch (err) {
      setError(err.message);
    } finally {
      setBusy(false);
    }
  };
  const reserved = pool.spec.startTime
    ? t(pool.spec.endTime ? 'lending.window' : 'lending.windowOpen', { start: dateTime(pool.spec.startTime, loc), end: pool.spec.endTime ? dateTime(pool.spec.endTime, loc) : '' })
    : null;
  return html`<div data-testid="pool-lending">
    <h3>${t('lending.title')}</h3>
    ${reserved ? html`<p data-testid="reservation">${reserved}</p>` : null}
    <p>${lending.enabled ? t('lending.on', { idle: number(lending.idleAfterSeconds, loc), grace: number(lending.reclaimGraceSeconds, loc) }) : t('lending.off')}</p>
    ${live ? html`<label><input type="checkbox" role="switch" data-testid="lending-switch" checked=${!!lending.enabled} disabled=${busy} onChange=${toggle} /> ${t('lending.switch')}</label>` : null}
    ${error ? html`<p class="error" role="alert">${error}</p>` : null}
    ${operator ? html`<h4>${t('lending.lentNow')}</h4><${LentDevices} pool=${pool} />` : null}
  </div>`;
}

// Reservations on a timeline: each pool with a start time, as a bar over the next two weeks.
function Reservations({ pools }) {
  const { t, loc } = useT();
  const now = Date.now();
  const span = 14 * 86400 * 1000;
  const rows = pools.filter((p) => p.spec.startTime && !p.spec.releaseRequested && !(p.status?.approval && !p.status.approval.approved))
    .filter((p) => !p.spec.endTime || Date.parse(p.spec.endTime) > now)
    .sort((a, b) => Date.parse(a.spec.startTime) - Date.parse(b.spec.startTime));
  if (rows.length === 0) return html`<p class="muted">${t('lending.noReservations')}</p>`;
  const pct = (ms) => Math.max(0, Math.min(100, ((ms - now) / span) * 100));
  return html`<ul class="timeline" data-testid="reservations">${rows.map((p) => {
    const from = pct(Date.parse(p.spec.startTime));
    const to = p.spec.endTime ? pct(Date.parse(p.spec.endTime)) : 100;
    const label = t(p.spec.endTime ? 'lending.window' : 'lending.windowOpen', { start: dateTime(p.spec.startTime, loc), end: p.spec.endTime ? dateTime(p.spec.endTime, loc) : '' });
    return html`<li data-pool=${`${p.metadata.namespace}/${p.metadata.name}`}>
      <span class="timeline-name">${p.metadata.namespace}/${p.metadata.name}</span>
      <span class="timeline-track" role="img" aria-label=${label}><span class="timeline-bar" style=${`left:${from}%;width:${Math.max(0.5, to - from)}%`}></span></span>
      <span class="muted">${label}</span></li>`;
  })}</ul>`;
}

function PoolDetails({ pool, assessment, profiles, projects, poolList, operator }) {
  const { t, loc } = useT();
  const ns = pool.metadata.namespace, name = pool.metadata.name;
  const util = useLoad((signal) => data.series(`pool:${ns}/${name}`, 'utilization', 86400, 900, signal).catch(() => null), [ns, name]);
  const a = assessment?.pools?.find((p) => p.project === ns && p.pool === name);
  const work = profiles.filter((p) => p.metadata.namespace === ns && p.spec.pool === name && !p.spec.end);
  const project = projects.find((p) => p.metadata.name === ns);
  const quota = quotaUse(project, poolList.filter((p) => p.metadata.namespace === ns));
  return html`<div class="details" data-testid="pool-details">
    <div class="grid">
      <div>
        <h3>${t('pools.devices')}</h3>
        ${(pool.status?.allocation ?? []).length === 0 ? html`<p class="muted">${t('pools.noDevices')}</p>` : html`<table>
          <thead><tr><th scope="col">${t('col.node')}</th><th scope="col">${t('col.gpu')}</th><th scope="col">${t('col.profile')}</th></tr></thead>
          <tbody>${pool.status.allocation.map((d) => html`<tr><td>${d.node}</td><td><${Link} href=${'/fleet/gpus/' + encodeURIComponent(d.gpuUUID)} class="mono">${d.gpuUUID}</${Link}></td><td>${d.profile === 'full' ? t('profile.full') : `${d.profile} @ ${d.start}`}</td></tr>`)}</tbody></table>`}
        <h3>${t('pools.workloads')}</h3>
        ${work.length === 0 ? html`<p class="muted">${t('pools.noWorkloads')}</p>` : html`<ul>${work.map((w) => html`<li>Profile <strong>${w.spec.pod}</strong> · ${t('pools.devicesN', { n: w.spec.devices.length })} · ${dateTime(w.spec.start, loc)}</li>`)}</ul>`}
      </div>
      <div>
        <h3>${t('pools.quota')}</h3>
        ${quota.length === 0 ? html`<p class="muted">${t('pools.noQuota')}</p>` : quota.map((q) => {
          const what = t(q.kind === 'full' ? 'pools.quotaFull' : 'pools.quotaSlices', { model: q.model });
          return html`<${Bar} value=${q.used} max=${q.limit} label=${what} text=${t('pools.quotaText', { what, used: number(q.used, loc), limit: number(q.limit, loc) })} />`;
        })}
        <h3>${t('pools.usage')}</h3>
        ${a ? html`<p>${t('pools.usageText', { util: percent(a.utilization, loc), used: number(a.usedGpuHours, loc, 1), allocated: number(a.allocatedGpuHours, loc, 1) })}</p>
          ${a.idle ? html`<p class="badge warn-badge">${t('pools.idle')}</p>` : null}
          ${a.suggestion || a.suggestionCode ? html`<p data-testid="suggestion">${t('pools.suggestion')}: <${Worded} msg=${suggestion(a)} /></p>` : null}` : html`<p class="muted">${t('pools.noUsage')}</p>`}
        ${util.data ? html`<${Chart} label=${t('pools.utilChart', { pool: `${ns}/${name}` })} x=${util.data.x} series=${[{ label: t('series.util'), values: util.data.values }]} fmt=${(v) => percent(v, loc)} height=${140} />` : null}
        <${Lending} pool=${pool} operator=${operator} />
      </div>
    </div>
  </div>`;
}

export function Pools() {
  const { t, loc } = useT();
  const [filter, setFilter] = useState('All');
  const [open, setOpen] = useState(null);
  const [deciding, setDeciding] = useState(null);
  const [notice, setNotice] = useState('');
  const operator = isOperator();
  const pools = useList('gpupools');
  const profiles = useList('profiles');
  const projects = useList('projects');
  const derived = useLoad(async (signal) => {
    const [sum, assessment] = await Promise.all([
      data.summary(signal),
      api('/api/v1/assessment', { signal }).catch(() => null),
    ]);
    return { sum, assessment };
  });
  const error = derived.error || pools.error || profiles.error || projects.error;
  const d = derived.data && pools.items && profiles.items && projects.items
    ? { ...derived.data, poolList: pools.items, profiles: profiles.items, projects: projects.items } : null;
  if (!d) return html`<h1>${t('page.pools')}</h1>${error ? html`<${ErrorBox} error=${error} />` : html`<${Loading} />`}`;
  const counts = Object.fromEntries(POOL_STATES.map((s) => [s, 0]));
  for (const p of d.poolList) counts[poolState(p)]++;
  const rows = d.poolList
    .filter((p) => filter === 'All' || poolState(p) === filter)
    .sort((a, b) => POOL_STATES.indexOf(poolState(a)) - POOL_STATES.indexOf(poolState(b)) || (a.metadata.creationTimestamp < b.metadata.creationTimestamp ? -1 : 1));
  const key = (p) => `${p.metadata.namespace}/${p.metadata.name}`;
  const counted = counter(t, loc);
  return html`
    <h1>${t('page.pools')}</h1>
    <${ErrorBox} error=${error} />
    ${notice ? html`<p class="banner info" role="status">${notice}</p>` : html`<p class="sr-only" role="status"></p>`}
    <div class="tabs" role="group" aria-label=${t('pools.filter')}>
      ${['All', ...POOL_STATES].map((s) => html`<button type="button" class="tab" aria-pressed=${filter === s ? 'true' : 'false'} onClick=${() => setFilter(s)}>
        ${s === 'All' ? t('all') : t('state.' + s)} <span class="count">${number(s === 'All' ? d.poolList.length : counts[s], loc)}</span></button>`)}
    </div>
    <${Section} id="queue" title=${t('pools.queue')}>
      ${rows.length === 0 ? html`<p class="muted">${t('pools.none')}</p>` : html`<table data-testid="pool-table">
        <thead><tr><th scope="col">${t('col.project')}</th><th scope="col">${t('col.pool')}</th><th scope="col">${t('col.request')}</th><th scope="col">${t('col.state')}</th><th scope="col">${t('col.fitsNow')}</th><th scope="col">${t('col.created')}</th><th scope="col"><span class="sr-only">${t('col.actions')}</span></th></tr></thead>
        <tbody>${rows.map((p) => {
          const st = poolState(p);
          const f = st === 'New' ? fitsNow(p, d.sum.logical.byProfile) : null;
          const k = key(p);
          return html`<tr data-pool=${k} data-state=${st}>
            <td>${p.metadata.namespace}</td>
            <td>${p.metadata.name}${p.status?.approval?.reason ? html`<div class="muted">${t('pools.reasonWas', { reason: p.status.approval.reason })}</div>` : null}</td>
            <td>${itemsText(p, t('profile.full'), counted)}</td>
            <td><${StateBadge} state=${st} /></td>
            <td>${f ? (f.fits ? html`<span class="badge good"><span aria-hidden="true">✓ </span>${t('pools.fits')}</span>`
              : html`<span class="badge warn-badge"><span aria-hidden="true">⏳ </span>${t('pools.waits')}</span><div class="muted">${f.short.map((s) => t('pools.short', { profile: `${s.model} ${s.profile === 'full' ? t('profile.full') : s.profile}`, need: number(s.count, loc), have: number(s.available, loc) })).join('; ')}</div>`) : '–'}</td>
            <td>${dateTime(p.metadata.creationTimestamp, loc)}</td>
            <td><div class="actions">
              ${operator && st === 'New' ? html`
                <button type="button" onClick=${() => setDeciding({ pool: p, action: 'approve' })} aria-label=${t('pools.approveLabel', { pool: k })}>${t('pools.approve')}</button>
                <button type="button" class="danger" onClick=${() => setDeciding({ pool: p, action: 'reject' })} aria-label=${t('pools.rejectLabel', { pool: k })}>${t('pools.reject')}</button>` : null}
              <button type="button" class="secondary" aria-expanded=${open === k ? 'true' : 'false'} onClick=${() => setOpen(open === k ? null : k)} aria-label=${t('pools.detailsLabel', { pool: k })}>${t('pools.details')}</button>
            </div></td>
          </tr>`;
        })}</tbody></table>`}
    </${Section}>
    ${open && d.poolList.find((p) => key(p) === open) ? html`<${Section} id="pool-detail" title=${t('pools.detailsOf', { pool: open })}>
      <${PoolDetails} pool=${d.poolList.find((p) => key(p) === open)} assessment=${d.assessment} profiles=${d.profiles} projects=${d.projects} poolList=${d.poolList} operator=${operator} />
    </${Section}>` : null}
    <${Section} id="reservations" title=${t('lending.reservations')}>
      <${Reservations} pools=${d.poolList} />
    </${Section}>
    <${Dialog} id="decide" open=${!!deciding} onClose=${() => setDeciding(null)}
      title=${deciding ? (deciding.action === 'approve' ? t('pools.approveTitle') : t('pools.rejectTitle')) : ''}>
      ${deciding ? html`<${Decide} pool=${deciding.pool} action=${deciding.action} onClose=${() => setDeciding(null)}
        onDone=${() => { setNotice(t(deciding.action === 'approve' ? 'pools.approved' : 'pools.rejected', { pool: key(deciding.pool) })); setDeciding(null); }} />` : null}
    </${Dialog}>`;
}

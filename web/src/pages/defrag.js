// MIG defragmentation on the fleet page (operators): the planner's moves (free instances that
// keep a larger profile off a GPU a pool uses in part), what the fleet could hand out now and
// after, and Apply, one GPU or every move, after a confirmation. Planning reads the whole fleet,
// so it runs when the operator asks (and again after a move), not with every live update; the
// server plans again when it applies, so an instance a pool took meanwhile is never destroyed.
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { html, Section, Dialog, Loading, ErrorBox, useT } from '../ui/parts.js';
import { roomGains } from '../logic/defrag.js';
import { number } from '../logic/format.js';
import { navigate } from '../router.js';

export function Defrag() {
  const { t, loc } = useT();
  const [plan, setPlan] = useState({ data: null, error: null, loading: false });
  const load = async () => {
    setPlan((p) => ({ ...p, loading: true }));
    try {
      setPlan({ data: await api('/api/v1/defrag'), error: null, loading: false });
    } catch (err) {
      setPlan({ data: null, error: err, loading: false });
    }
  };
  const [asking, setAsking] = useState(null);  // null, or the GPUs to defragment ([] for every move)
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const [notice, setNotice] = useState('');
  const moves = plan.data?.moves ?? [];
  const apply = async (e) => {
    e.preventDefault();
    setBusy(true);
    try {
      const r = await api('/api/v1/defrag', { method: 'POST', body: { gpus: asking } });
      // The answer is the request (a Defragmentation) as the pool controller left it.
      setNotice(r.status?.phase === 'Applied'
        ? t('defrag.applied', { n: number(r.status.moves.length, loc) })
        : t('defrag.pending', { name: r.metadata?.name ?? '' }));
      setAsking(null);
      await load();
    } catch (err) {
      setError(err.message);
    } finally {
      setBusy(false);
    }
  };
  const gains = plan.data ? roomGains(plan.data.room) : [];
  const link = (uuid) => html`<a href=${'/fleet/gpus/' + encodeURIComponent(uuid)} onClick=${(ev) => { ev.preventDefault(); navigate('/fleet/gpus/' + encodeURIComponent(uuid)); }}>${uuid}</a>`;
  return html`<${Section} id="defrag" title=${t('defrag.title')}
      actions=${html`<div class="actions">
        <button type="button" class="secondary" onClick=${load} disabled=${plan.loading}>${plan.data ? t('defrag.planAgain') : t('defrag.plan')}</button>
        ${moves.length > 0 ? html`<button type="button" onClick=${() => { setError(''); setAsking([]); }}>${t('defrag.applyAll', { n: number(moves.length, loc) })}</button>` : null}</div>`}>
    <${ErrorBox} error=${plan.error} />
    ${notice ? html`<p class="banner info" role="status">${notice}</p>` : html`<p class="sr-only" role="status"></p>`}
    ${plan.loading ? html`<${Loading} />` : !plan.data ? html`<p class="muted">${t('defrag.ask')}</p>` : moves.length === 0 ? html`<p class="muted" data-testid="defrag-none">${t('defrag.none')}</p>` : html`
      <p class="muted">${t('defrag.explain')}</p>
      <table data-testid="defrag-table">
        <thead><tr><th scope="col">${t('col.gpu')}</th><th scope="col">${t('col.node')}</th><th scope="col">${t('col.model')}</th>
          <th scope="col">${t('defrag.now')}</th><th scope="col">${t('defrag.destroys')}</th><th scope="col">${t('defrag.largest')}</th>
          <th scope="col"><span class="sr-only">${t('col.actions')}</span></th></tr></thead>
        <tbody>${moves.map((m) => html`<tr data-gpu=${m.gpu}>
          <td>${link(m.gpu)}</td><td>${m.node}</td><td>${m.model}</td><td>${m.before}</td><td>${(m.moves ?? []).length > 0
            ? t('defrag.moves', { moves: m.moves.map((r) => t('defrag.moveOne', { pool: r.pool, profile: r.profile, gpu: r.to.gpu })).join('; ') })
            : m.destroys}</td>
          <td>${t('defrag.largestChange', { before: m.largestBefore || t('defrag.nothing'), after: m.largestAfter || t('defrag.nothing') })}</td>
          <td><button type="button" class="secondary" aria-label=${t('defrag.applyOneLabel', { gpu: m.gpu })} onClick=${() => { setError(''); setAsking([m.gpu]); }}>${t('defrag.applyOne')}</button></td>
        </tr>`)}</tbody></table>
      ${gains.length > 0 ? html`<h3>${t('defrag.room')}</h3><table data-testid="defrag-room">
        <thead><tr><th scope="col">${t('col.model')}</th><th scope="col">${t('col.profile')}</th><th scope="col" class="num">${t('defrag.now')}</th><th scope="col" class="num">${t('defrag.after')}</th></tr></thead>
        <tbody>${gains.map((g) => html`<tr><td>${g.model}</td><td>${g.profile}</td><td class="num">${number(g.now, loc)}</td><td class="num">${number(g.after, loc)}</td></tr>`)}</tbody></table>` : null}`}
    <${Dialog} id="defrag-confirm" open=${asking !== null} onClose=${() => setAsking(null)} title=${t('defrag.confirmTitle')}>
      ${asking !== null ? html`<form onSubmit=${apply}>
        <p>${asking.length === 0 ? t('defrag.confirmAll', { n: number(moves.length, loc) }) : t('defrag.confirmOne', { gpu: asking[0] })}</p>
        ${error ? html`<p class="error" role="alert">${error}</p>` : null}
        <div class="dialog-actions">
          <button type="button" class="secondary" onClick=${() => setAsking(null)}>${t('cancel')}</button>
          <button type="submit" disabled=${busy}>${t('defrag.confirm')}</button>
        </div></form>` : null}
    </${Dialog}>
  </${Section}>`;
}

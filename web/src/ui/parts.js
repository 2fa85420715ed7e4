// Building blocks the pages share.
import { h } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import uPlot from 'uplot';
import { language, locale, translate } from '../i18n.js';
import { useObservable } from '../store.js';
import { useDark } from './hooks.js';
import { navigate } from '../router.js';
import { clock } from '../logic/format.js';
import { say } from '../logic/serverText.js';

export const html = htm.bind(h);

// `t` words a catalogue key; `word` a message made from a server code (logic/serverText.js).
export function useT() {
  const lang = useObservable(language);
  return { lang, loc: locale(lang), t: (key, params) => translate(lang, key, params), word: (msg) => say(lang, msg) };
}

// A message made from a server code, with the server's own English as its tooltip where that
// says something else (in English it may add detail; elsewhere it is not the reader's language).
export function Worded({ msg, testid }) {
  const { word } = useT();
  const text = word(msg);
  const title = msg?.text && msg.text !== text ? msg.text : undefined;
  return html`<span title=${title} data-testid=${testid}>${text}</span>`;
}

export function Link({ href, children, ...rest }) {
  const onClick = (e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(href);
  };
  return html`<a href=${href} onClick=${onClick} ...${rest}>${children}</a>`;
}

export function Tile({ label, value, detail, testid }) {
  return html`<div class="tile" data-testid=${testid}>
    <div class="tile-label">${label}</div>
    <div class="tile-value">${value}</div>
    ${detail ? html`<div class="tile-detail">${detail}</div>` : null}
  </div>`;
}

// `wide`: the panel takes two columns of a grid that has them.
export function Section({ title, id, children, actions, wide }) {
  return html`<section class=${wide ? 'panel wide' : 'panel'} aria-labelledby=${id}>
    <div class="panel-head"><h2 id=${id}>${title}</h2>${actions}</div>
    ${children}
  </section>`;
}

export function Loading() {
  const { t } = useT();
  return html`<p class="muted" role="status">${t('loading')}</p>`;
}

export function ErrorBox({ error }) {
  const { t } = useT();
  if (!error) return null;
  return html`<p class="error" role="alert">${t('error.load', { detail: error.message })}</p>`;
}

// A bar of `value` out of `max`, with its numbers written beside it (never colour alone).
export function Bar({ value, max, label, text }) {
  const pct = max > 0 ? Math.min(100, (value / max) * 100) : 0;
  const over = max > 0 && value > max;
  return html`<div class="bar-wrap">
    <div class=${'bar' + (over ? ' bar-over' : '')} role="meter" aria-valuemin="0" aria-valuemax=${max} aria-valuenow=${value} aria-label=${label}>
      <div class="bar-fill" style=${{ width: `${pct}%` }}></div>
    </div>
    <span class="bar-text">${text}</span>
  </div>`;
}

// The width in CSS pixels of an axis's widest label: uPlot does not measure its labels, and a
// fixed width cuts long ones ("6,000 W") or runs time labels together ("12:00 AM04:00 AM").
function labelWidth(u, axisIdx, labels) {
  const [font, size, cssSize] = u.axes[axisIdx].font;
  u.ctx.save();
  u.ctx.font = font;
  const widest = Math.max(0, ...labels.map((l) => u.ctx.measureText(String(l ?? '')).width));
  u.ctx.restore();
  return (widest * (cssSize || size)) / (size || 1);
}

// The left axis: as wide as its labels plus the tick and the gap. Later passes keep the width
// found, so the layout settles.
function yAxisSize(u, values, axisIdx, cycleNum) {
  const axis = u.axes[axisIdx];
  if (!values || values.length === 0) return 60;
  if (cycleNum > 1 && axis._size) return axis._size;
  return Math.ceil(labelWidth(u, axisIdx, values) + (axis.ticks?.size ?? 10) + (axis.gap ?? 5) + 4);
}

const LIGHT = ['#0b57d0', '#b45309', '#15803d', '#7e22ce'];
const DARK = ['#8ab4f8', '#fbbf24', '#4ade80', '#d8b4fe'];
const DASH = [[], [6, 4], [2, 3], [10, 3, 2, 3]];

// A time-series chart (uPlot on a canvas, role="img" with a label); the legend below names every
// series with its line style and last value.
export function Chart({ label, x, series, height = 180, fmt = (v) => String(v), testid }) {
  const box = useRef(null);
  const plot = useRef(null);
  const dark = useDark();
  const { loc } = useT();
  useEffect(() => {
    if (!box.current) return undefined;
    const colours = dark ? DARK : LIGHT;
    const axis = dark ? '#c9ced6' : '#3d4450';
    const grid = dark ? '#2c323b' : '#e3e6ea';
    const opts = {
      width: Math.max(240, box.current.clientWidth),
      height,
      legend: { show: false },
      cursor: { show: true, points: { show: false } },
      scales: { x: { time: true } },
      axes: [
        // Time labels at least their own width and a gap apart ("12:00 AM" is wider than "00:00").
        { stroke: axis, grid: { stroke: grid }, ticks: { stroke: grid }, space: (u, i) => labelWidth(u, i, [clock(new Date(2026, 0, 1, 12, 0), loc)]) + 24 },
        { stroke: axis, grid: { stroke: grid }, ticks: { stroke: grid }, size: yAxisSize, values: (u, vals) => vals.map((v) => fmt(v)) },
      ],
      series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: colours[i % 4], width: 2, dash: DASH[i % 4], spanGaps: false }))],
      tzDate: (ts) => new Date(ts * 1000),
      fmtDate: () => (d) => clock(d, loc),
    };
    const u = new uPlot(opts, [x, ...series.map((s) => s.values)], box.current);
    u.ctx.canvas.setAttribute('role', 'img');
    u.ctx.canvas.setAttribute('aria-label', label);
    plot.current = u;
    const ro = new ResizeObserver(() => {
      if (box.current) u.setSize({ width: Math.max(240, box.current.clientWidth), height });
    });
    ro.observe(box.current);
    return () => {
      ro.disconnect();
      u.destroy();
    };
  }, [dark, JSON.stringify(series.map((s) => s.label)), label, loc, height]);
  useEffect(() => {
    if (plot.current) plot.current.setData([x, ...series.map((s) => s.values)]);
  }, [x, series]);
  const colours = dark ? DARK : LIGHT;
  return html`<figure class="chart" data-testid=${testid}>
    <div ref=${box} class="chart-box"></div>
    <figcaption class="legend">
      ${series.map((s, i) => {
        const last = [...s.values].reverse().find((v) => v !== null && v !== undefined);
        return html`<span class="legend-item"><svg width="28" height="10" aria-hidden="true"><line x1="0" y1="5" x2="28" y2="5" stroke=${colours[i % 4]} stroke-width="2" stroke-dasharray=${DASH[i % 4].join(' ')} /></svg>
          ${s.label}: <strong>${last === undefined ? '–' : fmt(last)}</strong></span>`;
      })}
    </figcaption>
  </figure>`;
}

// A modal dialog (the native <dialog>: focus stays inside, Escape closes).
export function Dialog({ open, title, onClose, children, id }) {
  const ref = useRef(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) d.showModal();
    if (!open && d.open) d.close();
  }, [open]);
  return html`<dialog ref=${ref} aria-labelledby=${id + '-title'} onClose=${onClose} onCancel=${onClose}>
    <h2 id=${id + '-title'}>${title}</h2>
    ${open ? children : null}
  </dialog>`;
}

// Health as a word and a symbol, never colour alone.
export function HealthBadge({ health }) {
  const { t } = useT();
  const cls = health === 'Unhealthy' ? 'badge bad' : health === 'Healthy' ? 'badge good' : 'badge';
  const sym = health === 'Unhealthy' ? '✕' : health === 'Healthy' ? '✓' : '?';
  return html`<span class=${cls}><span aria-hidden="true">${sym} </span>${t('health.' + (health || 'Unknown'))}</span>`;
}

export function StateBadge({ state }) {
  const { t } = useT();
  return html`<span class=${'badge state-' + state.toLowerCase()}>${t('state.' + state)}</span>`;
}

export function useNow(everyMs = 1000) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const id = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(id);
  }, [everyMs]);
  return now;
}

// The fleet heatmap: one cell per GPU on a canvas, drawn in one pass (10,000 cells are a few
// milliseconds). Colour shows the chosen value; unhealthy GPUs carry a cross and GPUs without a
// reading a dot, so no state is told by colour alone. Pointer: the GPU under it; click opens it.
import { useEffect, useRef, useState } from 'preact/hooks';
import { colour, hit, layout } from '../logic/heatmap.js';
import { html, useT } from './parts.js';
import { useDark } from './hooks.js';
import { percent } from '../logic/format.js';

export function Heatmap({ cells, metric, label, onPick }) {
  const canvas = useRef(null);
  const wrap = useRef(null);
  const dark = useDark();
  const { t, loc } = useT();
  const [width, setWidth] = useState(800);
  const [hover, setHover] = useState(-1);
  useEffect(() => {
    const ro = new ResizeObserver(() => wrap.current && setWidth(wrap.current.clientWidth));
    ro.observe(wrap.current);
    return () => ro.disconnect();
  }, []);
  const n = cells.total;
  const l = layout(n, width);
  const value = (i) => (metric === 'sm' ? cells.smActive[i] : cells.allocated[i]);
  useEffect(() => {
    const c = canvas.current;
    const dpr = window.devicePixelRatio || 1;
    c.width = Math.round(l.width * dpr);
    c.height = Math.max(1, Math.round(l.height * dpr));
    c.style.width = `${l.width}px`;
    c.style.height = `${l.height}px`;
    const ctx = c.getContext('2d', { alpha: false });
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = dark ? '#14171c' : '#ffffff';
    ctx.fillRect(0, 0, l.width, l.height);
    const pitch = l.cell + l.gap;
    const mark = dark ? '#ff8a80' : '#b3261e';
    const edge = dark ? '#6b7380' : '#8a929e';
    for (let i = 0; i < n; i++) {
      const x = (i % l.cols) * pitch, y = Math.floor(i / l.cols) * pitch;
      ctx.fillStyle = colour(value(i), dark);
      ctx.fillRect(x, y, l.cell, l.cell);
      if (l.cell >= 6) {
        // An edge of 3:1 against the page, so a free (pale) cell is still seen as a cell.
        ctx.strokeStyle = edge;
        ctx.lineWidth = 1;
        ctx.strokeRect(x + 0.5, y + 0.5, l.cell - 1, l.cell - 1);
      }
      if (cells.health[i] === 'Unhealthy') {
        ctx.strokeStyle = mark;
        ctx.lineWidth = Math.max(1, l.cell / 6);
        ctx.beginPath();
        ctx.moveTo(x + 1, y + 1); ctx.lineTo(x + l.cell - 1, y + l.cell - 1);
        ctx.moveTo(x + l.cell - 1, y + 1); ctx.lineTo(x + 1, y + l.cell - 1);
        ctx.stroke();
      } else if (value(i) === null && l.cell >= 8) {
        ctx.fillStyle = dark ? '#c9ced6' : '#3d4450';
        ctx.fillRect(x + l.cell / 2 - 1, y + l.cell / 2 - 1, 2, 2);
      }
    }
  }, [cells, metric, dark, width]);
  const pick = (e) => {
    const r = canvas.current.getBoundingClientRect();
    return hit(l, n, e.clientX - r.left, e.clientY - r.top);
  };
  const tip = hover >= 0 ? `${cells.uuid[hover]} · ${cells.node[hover]} · ${t('health.' + cells.health[hover])} · ${
    metric === 'sm' ? t('col.sm') : t('col.allocation')} ${percent(value(hover), loc)}` : '';
  return html`<div ref=${wrap} class="heatmap">
    <canvas ref=${canvas} role="img" aria-label=${label} data-testid="heatmap" data-cells=${n}
      onMouseMove=${(e) => setHover(pick(e))} onMouseLeave=${() => setHover(-1)}
      onClick=${(e) => { const i = pick(e); if (i >= 0) onPick(cells.uuid[i]); }}></canvas>
    <p class="heatmap-tip muted" aria-hidden="true">${tip || '\u00a0'}</p>
    <div class="heatmap-legend" aria-hidden="true">
      <span><i class="sw" style=${{ background: colour(0, dark) }}></i>0%</span>
      <span><i class="sw" style=${{ background: colour(0.5, dark) }}></i>50%</span>
      <span><i class="sw" style=${{ background: colour(1, dark) }}></i>100%</span>
      <span><i class="sw sw-x"></i>${t('health.Unhealthy')}</span>
      <span><i class="sw" style=${{ background: colour(null, dark) }}></i>${t('heatmap.noData')}</span>
    </div>
  </div>`;
}

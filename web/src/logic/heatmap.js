// Geometry and colour of the fleet heatmap (one cell per GPU on a canvas). Framework-free.

// Cell size and grid for `n` cells in a box `width` wide, aiming at `targetHeight`: cells from
// 4 to 28 px, a 1 px gap when cells are at least 6 px.
export function layout(n, width, targetHeight = 360) {
  const w = Math.max(1, Math.floor(width));
  if (n <= 0) return { cell: 28, gap: 2, cols: 1, rows: 0, width: w, height: 0 };
  let cell = Math.floor(Math.sqrt((w * targetHeight) / n));
  cell = Math.max(4, Math.min(28, cell));
  const gap = cell >= 12 ? 2 : cell >= 6 ? 1 : 0;
  const cols = Math.max(1, Math.floor((w + gap) / (cell + gap)));
  const rows = Math.ceil(n / cols);
  return { cell, gap, cols, rows, width: w, height: rows * (cell + gap) - gap };
}

// The cell index under (x, y) in CSS pixels, or -1.
export function hit(l, n, x, y) {
  const pitch = l.cell + l.gap;
  const col = Math.floor(x / pitch), row = Math.floor(y / pitch);
  if (col < 0 || col >= l.cols || row < 0 || x - col * pitch >= l.cell || y - row * pitch >= l.cell) return -1;
  const i = row * l.cols + col;
  return i < n ? i : -1;
}

// A value from 0 to 1 on a sequential scale from the surface colour to a strong blue; null (no
// reading) draws as the neutral colour. Lightness steps keep 3:1 between the ends.
export function colour(v, dark) {
  if (v === null || v === undefined || Number.isNaN(v)) return dark ? '#3a414c' : '#d5d9df';
  const t = Math.max(0, Math.min(1, v));
  // Interpolate in HSL: pale to deep blue (light theme), dim to bright (dark theme).
  const l = dark ? 22 + t * 50 : 92 - t * 60;
  return `hsl(214 ${dark ? 70 : 80}% ${l.toFixed(1)}%)`;
}

// Counts for the heatmap's accessible label.
export function describe(cells) {
  let unhealthy = 0, busy = 0, idle = 0;
  for (let i = 0; i < cells.total; i++) {
    if (cells.health[i] === 'Unhealthy') unhealthy++;
    if (cells.allocated[i] > 0) busy++;
    else idle++;
  }
  return { total: cells.total, unhealthy, allocated: busy, free: idle };
}

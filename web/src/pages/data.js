// Loaders shared by the pages: every one reads the public API with the caller's token, so what
// a page shows is what the API lets the caller see.
import { api, isOperator, session } from '../api.js';

export const summary = (signal) => api('/api/v1/summary', { signal });

// The series of one scope over the last `span` seconds, as {x, values}.
export async function series(scope, metric, span, step, signal) {
  const from = Math.floor(Date.now() / 1000) - span;
  const r = await api(`/api/v1/metrics/query?series=${encodeURIComponent(`${scope}:${metric}`)}&from=${from}&step=${step}`, { signal });
  return { x: r.points.map((p) => p.t), values: r.points.map((p) => p.value) };
}

// Sums series point by point (null where none has a value).
export function sumSeries(list) {
  if (list.length === 0) return { x: [], values: [] };
  const x = list[0].x;
  const values = x.map((_, i) => {
    let s = null;
    for (const l of list) if (l.values[i] !== null && l.values[i] !== undefined) s = (s ?? 0) + l.values[i];
    return s;
  });
  return { x, values };
}

// The scopes whose series make up what the caller may see: every cluster for operators, the
// member's project otherwise.
export function scopes(sum) {
  if (isOperator()) return (sum.physical.byCluster ?? []).map((c) => `cluster:${c.cluster}`);
  return [`project:${session.get().who.project}`];
}

export async function fleetSeries(sum, metric, span, step, signal) {
  const parts = await Promise.all(scopes(sum).map((s) => series(s, metric, span, step, signal).catch(() => null)));
  return sumSeries(parts.filter(Boolean));
}

export async function unhealthy(signal) {
  const rows = await api('/api/v1/fleet/gpus?health=Unhealthy&limit=200', { signal });
  let alerts = [];
  if (isOperator()) alerts = (await api('/api/v1/alerts?active=true', { signal })).items;
  return rows.items.map((g) => {
    const mine = alerts.filter((a) => a.gpu && a.gpu.toLowerCase() === g.uuid.toLowerCase());
    return { ...g, alerts: mine };
  });
}

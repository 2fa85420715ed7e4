// A project's quota against what its live pools hold: whole GPUs and MIG compute slices per
// model. Framework-free.
import { poolState } from './pools.js';

export function computeSlices(profile) {
  const m = /^(\d+)g\./.exec(profile);
  return m ? Number(m[1]) : 0;
}

// [{model, kind: 'full' | 'slices', used, limit}] for every model the project's quota names;
// approved pools (Approved or Ready) count.
export function quotaUse(project, pools) {
  const q = project?.spec?.quota;
  if (!q) return [];
  const live = pools.filter((p) => ['Approved', 'Ready'].includes(poolState(p)));
  const full = {}, slices = {};
  for (const p of live) {
    for (const it of p.spec?.items ?? []) {
      if (it.profile === 'full') full[it.model] = (full[it.model] ?? 0) + it.count;
      else slices[it.model] = (slices[it.model] ?? 0) + it.count * computeSlices(it.profile);
    }
  }
  const out = [];
  for (const [model, limit] of Object.entries(q.fullGpus ?? {})) out.push({ model, kind: 'full', used: full[model] ?? 0, limit });
  for (const [model, limit] of Object.entries(q.migComputeSlices ?? {})) out.push({ model, kind: 'slices', used: slices[model] ?? 0, limit });
  return out;
}

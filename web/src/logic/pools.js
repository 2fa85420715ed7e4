// Pool requests as the dashboard shows them: the state a pool is in, what it asks for, and
// whether it fits now (every item's count is at most the devices of its model and profile that
// are free on healthy GPUs, from the summary's logical.byProfile[].available). Framework-free.

export const POOL_STATES = ['New', 'Approved', 'Ready', 'Rejected', 'Released'];

function conditionTrue(pool, type) {
  return (pool.status?.conditions ?? []).some((c) => c.type === type && c.status === 'True');
}

export function poolState(pool) {
  if (conditionTrue(pool, 'Released')) return 'Released';
  const a = pool.status?.approval;
  if (a && a.approved === false) return 'Rejected';
  if (a && a.approved) return conditionTrue(pool, 'Ready') ? 'Ready' : 'Approved';
  return 'New';
}

// Devices asked for, summed per (model, profile).
export function poolDemand(pool) {
  const need = new Map();
  for (const it of pool.spec?.items ?? []) {
    const k = `${it.model}\u0000${it.profile}`;
    need.set(k, (need.get(k) ?? 0) + it.count);
  }
  return [...need].map(([k, count]) => {
    const [model, profile] = k.split('\u0000');
    return { model, profile, count };
  });
}

// {fits, short: [{model, profile, count, available}]} against summary.logical.byProfile.
export function fitsNow(pool, byProfile) {
  const avail = new Map(byProfile.map((d) => [`${d.model}\u0000${d.profile}`, d.available ?? d.free ?? 0]));
  const short = [];
  for (const d of poolDemand(pool)) {
    const a = avail.get(`${d.model}\u0000${d.profile}`) ?? 0;
    if (a < d.count) short.push({ ...d, available: a });
  }
  return { fits: short.length === 0, short };
}

// "Fits now" for the overview: per model and profile, how many more devices could be handed out
// without reconfiguring anything, largest first within a model.
export function fitsNowTable(byProfile) {
  return byProfile
    .map((d) => ({ model: d.model, profile: d.profile, available: d.available ?? 0, count: d.count }))
    .sort((a, b) => a.model.localeCompare(b.model) || profileSize(b.profile) - profileSize(a.profile));
}

// Compute slices of a profile name ("3g.71gb" -> 3); a whole GPU sorts above every profile.
export function profileSize(profile) {
  if (profile === 'full') return 100;
  const m = /^(\d+)g\./.exec(profile);
  return m ? Number(m[1]) : 0;
}

// "2 × H200-SXM-141GB whole GPU, 4 × H200-SXM-141GB 3g.71gb", with `full` naming a whole GPU;
// `say(count, thing)` words one item, since languages put the count on either side of the thing
// ("H200-SXM-141GB 3g.71gb 4개" in Korean).
export function itemsText(pool, full = 'full', say = (n, thing) => `${n} × ${thing}`) {
  return (pool.spec?.items ?? []).map((i) => say(i.count, `${i.model} ${i.profile === 'full' ? full : i.profile}`)).join(', ');
}

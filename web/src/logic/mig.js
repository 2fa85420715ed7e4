// MIG slot geometry for drawing a GPU: which memory slices hold which instance, which free ones
// could still take an instance ("open") and which no profile can use any more ("stranded"), and
// how many more instances of each profile fit. Framework-free; the catalogue comes from
// GET /api/v1/catalog (profiles with their legal placement starts).

// True when an instance of `profile` may start at `start` given `used` instances.
function canPlace(model, profile, start, used) {
  if (!profile.starts.includes(start)) return false;
  const end = start + profile.memorySlices;
  if (end > model.memorySlices) return false;
  for (const u of used) {
    if (start < u.start + u.size && u.start < end) return false;
  }
  const compute = used.reduce((n, u) => n + (u.computeSlices ?? 0), 0);
  if (compute + profile.computeSlices > model.computeSlices) return false;
  const same = used.filter((u) => u.profile === profile.name).length;
  if (same >= profile.maxCount) return false;
  if (profile.name.includes('+me') && used.some((u) => u.profile.includes('+me'))) return false;
  return true;
}

// Instances as the API lists them ({profile, start, size, ...}), with their compute slices.
export function withCompute(model, instances) {
  return instances.map((i) => {
    const p = model.profiles.find((q) => q.name === i.profile);
    return { ...i, size: i.size || p?.memorySlices || 1, computeSlices: p?.computeSlices ?? 0 };
  });
}

// One entry per memory slice: {slot, state: 'used'|'open'|'stranded', instance?}.
export function slotStates(model, instances) {
  const used = withCompute(model, instances);
  const slots = [];
  for (let s = 0; s < model.memorySlices; s++) {
    const inst = used.find((u) => s >= u.start && s < u.start + u.size);
    if (inst) {
      slots.push({ slot: s, state: 'used', instance: inst });
      continue;
    }
    let open = false;
    for (const p of model.profiles) {
      for (const start of p.starts) {
        if (start <= s && s < start + p.memorySlices && canPlace(model, p, start, used)) {
          open = true;
          break;
        }
      }
      if (open) break;
    }
    slots.push({ slot: s, state: open ? 'open' : 'stranded' });
  }
  return slots;
}

// For each profile, how many more instances of it alone fit (placed greedily at the lowest legal
// start, which is optimal for one profile: its placements are aligned blocks). Profiles that fit
// none are left out.
export function fitsMore(model, instances) {
  const out = [];
  for (const p of model.profiles) {
    const used = withCompute(model, instances);
    let n = 0;
    for (;;) {
      const start = p.starts.find((s) => canPlace(model, p, s, used));
      if (start === undefined) break;
      used.push({ profile: p.name, start, size: p.memorySlices, computeSlices: p.computeSlices });
      n++;
    }
    if (n > 0) out.push({ profile: p.name, count: n });
  }
  return out;
}

// Rectangles of the drawing, in slot units: one per instance and one per run of free slots of
// the same state, left to right.
export function segments(model, instances) {
  const slots = slotStates(model, instances);
  const out = [];
  for (const s of slots) {
    const last = out[out.length - 1];
    if (s.state === 'used') {
      if (last && last.instance === s.instance) last.size++;
      else out.push({ start: s.slot, size: 1, state: 'used', instance: s.instance });
    } else if (last && last.state === s.state) {
      last.size++;
    } else {
      out.push({ start: s.slot, size: 1, state: s.state });
    }
  }
  return out;
}

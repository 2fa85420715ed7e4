// MIG slot geometry for drawing a GPU: which memory slices hold which instance, and which free
// ones are open (some profile could still start an instance covering them) or stranded (none
// can). Whether a slice is open, and what still fits, is the server's catalogue's answer: a
// fleet row's `migRoom` ({memorySlices, openSlots, fits}) from GET /api/v1/fleet/gpus; this
// module only lays it out. Framework-free.

// One entry per memory slice: {slot, state: 'used'|'open'|'stranded', instance?}. `instances`
// as the API lists them ({profile, start, size, ...}).
export function slotStates(room, instances) {
  const open = new Set(room.openSlots);
  const slots = [];
  for (let s = 0; s < room.memorySlices; s++) {
    const inst = instances.find((i) => s >= i.start && s < i.start + (i.size || 1));
    if (inst) slots.push({ slot: s, state: 'used', instance: inst });
    else slots.push({ slot: s, state: open.has(s) ? 'open' : 'stranded' });
  }
  return slots;
}

// Rectangles of the drawing, in slot units: one per instance and one per run of free slots of
// the same state, left to right.
export function segments(room, instances) {
  const out = [];
  for (const s of slotStates(room, instances)) {
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

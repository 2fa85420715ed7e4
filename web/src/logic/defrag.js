// What a defragmentation plan gains: the profiles the fleet could hand out more of once every
// move is made, from GET /api/v1/defrag's `room` ({model: {profile: {now, after}}}), by model,
// then the largest gain first.
export function roomGains(room) {
  const out = [];
  for (const [model, profiles] of Object.entries(room ?? {})) {
    for (const [profile, r] of Object.entries(profiles)) {
      if (r.after !== r.now) out.push({ model, profile, now: r.now, after: r.after });
    }
  }
  return out.sort((a, b) => (a.model < b.model ? -1 : a.model > b.model ? 1 : 0) || (b.after - b.now) - (a.after - a.now) || (a.profile < b.profile ? -1 : 1));
}

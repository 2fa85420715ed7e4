#include "allocator/defrag.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>

namespace gpuaas::allocator {
namespace {

// The largest profile (by memory slices, then compute) the GPU could hand out, or null.
const catalog::MigProfile* Largest(const catalog::GpuModel& m, const catalog::Layout& layout, const catalog::Layout& free) {
  const catalog::MigProfile* best = nullptr;
  for (const catalog::MigProfile& p : m.profiles) {
    if (RoomFor(m, layout, free, p) == 0) continue;
    if (best == nullptr || p.memory_slices > best->memory_slices ||
        (p.memory_slices == best->memory_slices && p.compute_slices > best->compute_slices)) {
      best = &p;
    }
  }
  return best;
}

}  // namespace

int RoomFor(const catalog::GpuModel& m, const catalog::Layout& layout, const catalog::Layout& free,
            const catalog::MigProfile& p) {
  int n = 0;
  for (const catalog::Instance& i : free) n += i.profile == &p ? 1 : 0;
  // What the free slots take depends on the layout alone, and layouts repeat across a fleet:
  // asked once per (model, layout, profile) and thread.
  uint64_t key = 0;
  for (const catalog::Instance& i : layout) key |= uint64_t{1} << ((i.profile - m.profiles.data()) * 8 + i.start);
  thread_local std::map<std::tuple<const catalog::GpuModel*, uint64_t, const catalog::MigProfile*>, int> memo;
  auto [it, added] = memo.try_emplace({&m, key, &p}, 0);
  if (added) {
    catalog::Layout grown = layout;
    for (;;) {
      const std::vector<int> starts = catalog::FreeStarts(m, grown, p);
      if (starts.empty()) break;
      grown.push_back({&p, starts.front()});
      ++it->second;
    }
  }
  return n + it->second;
}

DefragPlan PlanDefrag(const FleetSnapshot& fleet) {
  DefragPlan plan;
  for (const GpuState& g : fleet.gpus) {
    if (g.model == nullptr || !g.model->mig_capable || !g.mig_enabled) continue;
    const catalog::GpuModel& m = *g.model;
    catalog::Layout layout, free, kept, removed;
    bool running = g.busy;
    for (const InstanceState& i : g.instances) {
      layout.push_back({i.profile, i.start});
      running = running || i.busy;
      if (!i.owner.empty()) {
        kept.push_back({i.profile, i.start});
      } else {
        free.push_back({i.profile, i.start});
        if (!i.busy) removed.push_back({i.profile, i.start});
      }
    }
    bool moved = false;
    // An idle GPU is laid out anew by the allocator when a pool needs it: only GPUs a pool uses
    // in part are stuck with what their free instances block.
    if (!running && g.healthy && !removed.empty() && !kept.empty()) {
      const catalog::MigProfile* before = Largest(m, layout, free);
      const catalog::MigProfile* after = Largest(m, kept, {});
      if (after != nullptr && (before == nullptr || after->memory_slices > before->memory_slices)) {
        DefragMove mv{g.uuid, g.cluster, g.node, &m, layout, kept, removed,
                      before == nullptr ? "" : std::string(before->name), std::string(after->name)};
        catalog::SortLayout(mv.before);
        catalog::SortLayout(mv.after);
        catalog::SortLayout(mv.removed);
        plan.moves.push_back(std::move(mv));
        moved = true;
      }
    }
    for (const catalog::MigProfile& p : m.profiles) {
      const int now = RoomFor(m, layout, free, p);
      plan.before[std::string(m.name)][std::string(p.name)] += now;
      plan.after[std::string(m.name)][std::string(p.name)] += moved ? RoomFor(m, kept, {}, p) : now;
    }
  }
  return plan;
}

}  // namespace gpuaas::allocator

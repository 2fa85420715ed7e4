#include "allocator/defrag.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "catalog/room.h"

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
  if (added) it->second = catalog::FitsMore(m, layout, p);
  return n + it->second;
}

DefragPlan PlanDefrag(const FleetSnapshot& fleet, const std::set<std::string>& movable) {
  DefragPlan plan;
  // Per GPU, what it looks like after the plan: its layout, which of its instances are free,
  // and whether a move empties it.
  struct After {
    catalog::Layout layout, free;
    bool destroys = false, emptied = false, receives = false;
  };
  std::vector<After> after(fleet.gpus.size());
  auto mig_gpu = [](const GpuState& g) { return g.model != nullptr && g.model->mig_capable && g.mig_enabled; };
  for (size_t gi = 0; gi < fleet.gpus.size(); ++gi) {
    const GpuState& g = fleet.gpus[gi];
    if (!mig_gpu(g)) continue;
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
    after[gi] = {layout, free};
    // An idle GPU is laid out anew by the allocator when a pool needs it: only GPUs a pool uses
    // in part are stuck with what their free instances block.
    if (!running && g.healthy && !removed.empty() && !kept.empty()) {
      const catalog::MigProfile* before = Largest(m, layout, free);
      const catalog::MigProfile* larger = Largest(m, kept, {});
      if (larger != nullptr && (before == nullptr || larger->memory_slices > before->memory_slices)) {
        DefragMove mv{g.uuid, g.cluster, g.node, &m, layout, kept, removed,
                      before == nullptr ? "" : std::string(before->name), std::string(larger->name)};
        catalog::SortLayout(mv.before);
        catalog::SortLayout(mv.after);
        catalog::SortLayout(mv.removed);
        plan.moves.push_back(std::move(mv));
        after[gi] = {kept, {}, true};
      }
    }
  }

  if (!movable.empty()) {
    // GPUs to empty: every held instance a movable pool's, no work on the GPU; those holding
    // least first (cheapest to empty). Emptying a GPU supersedes destroying its free instances.
    std::vector<size_t> sources;
    for (size_t gi = 0; gi < fleet.gpus.size(); ++gi) {
      const GpuState& g = fleet.gpus[gi];
      if (!mig_gpu(g) || !g.healthy || g.busy) continue;
      bool held = false, all_movable = true;
      for (const InstanceState& i : g.instances) {
        all_movable = all_movable && !i.busy && (i.owner.empty() || movable.contains(i.owner));
        held = held || !i.owner.empty();
      }
      if (held && all_movable) sources.push_back(gi);
    }
    auto held_compute = [&](size_t gi) {
      int n = 0;
      for (const InstanceState& i : fleet.gpus[gi].instances) n += i.owner.empty() ? 0 : i.profile->compute_slices;
      return n;
    };
    std::stable_sort(sources.begin(), sources.end(), [&](size_t a, size_t b) { return held_compute(a) < held_compute(b); });
    for (const size_t si : sources) {
      const GpuState& src = fleet.gpus[si];
      if (after[si].receives) continue;  // took instances from an earlier move: it stays in use
      // The GPUs this move changes, over `after`: committed only if every instance finds a place
      // (a copy of the GPUs touched, not of the fleet, per GPU tried).
      std::unordered_map<size_t, After> changed;
      auto trial = [&](size_t i) -> After& {
        auto it = changed.find(i);
        if (it == changed.end()) it = changed.emplace(i, after[i]).first;
        return it->second;
      };
      auto seen = [&](size_t i) -> const After& {
        auto it = changed.find(i);
        return it == changed.end() ? after[i] : it->second;
      };
      std::vector<Relocation> moved;
      trial(si).emptied = true;
      bool all = true;
      for (const InstanceState& inst : src.instances) {
        if (inst.owner.empty()) continue;
        // The fullest GPU in use that takes it: a free instance of its profile first (nothing
        // changes there), else free slots.
        size_t best = fleet.gpus.size();
        int best_free = 0;
        bool best_existing = false;
        int best_start = 0;
        for (size_t ti = 0; ti < fleet.gpus.size(); ++ti) {
          const GpuState& t = fleet.gpus[ti];
          if (ti == si || t.model != src.model || t.cluster != src.cluster || !mig_gpu(t) || !t.healthy ||
              !t.schedulable || seen(ti).destroys || seen(ti).emptied || t.Idle()) {
            continue;
          }
          int used = 0;
          const After& here = seen(ti);
          for (const catalog::Instance& i : here.layout) used += i.profile->compute_slices;
          for (const catalog::Instance& i : here.free) used -= i.profile->compute_slices;
          const int free_after = t.model->compute_slices - used - inst.profile->compute_slices;
          auto existing = std::find_if(here.free.begin(), here.free.end(),
                                       [&](const catalog::Instance& i) { return i.profile == inst.profile; });
          if (existing != here.free.end()) {
            const bool busy_instance = std::any_of(t.instances.begin(), t.instances.end(), [&](const InstanceState& i) {
              return i.start == existing->start && i.profile == existing->profile && i.busy;
            });
            if (!busy_instance && (best == fleet.gpus.size() || !best_existing || free_after < best_free)) {
              best = ti, best_free = free_after, best_existing = true, best_start = existing->start;
            }
            continue;
          }
          if (best_existing) continue;
          const std::vector<int> starts = catalog::FreeStarts(*t.model, here.layout, *inst.profile);
          if (!starts.empty() && (best == fleet.gpus.size() || free_after < best_free)) {
            best = ti, best_free = free_after, best_start = starts.front();
          }
        }
        if (best == fleet.gpus.size()) {
          all = false;
          break;
        }
        const GpuState& t = fleet.gpus[best];
        Relocation r{inst.owner, inst.profile, src.uuid, inst.start, t.uuid, t.cluster, t.node, best_start, ""};
        if (best_existing) {
          After& into = trial(best);
          auto f = std::find_if(into.free.begin(), into.free.end(), [&](const catalog::Instance& i) {
            return i.profile == inst.profile && i.start == best_start;
          });
          into.free.erase(f);
          for (const InstanceState& i : t.instances) {
            if (i.profile == inst.profile && i.start == best_start) r.to_instance = i.uuid;
          }
        } else {
          trial(best).layout.push_back({inst.profile, best_start});
        }
        trial(best).receives = true;
        moved.push_back(std::move(r));
      }
      if (!all) continue;
      const catalog::GpuModel& m = *src.model;
      catalog::Layout layout, free;
      for (const InstanceState& i : src.instances) {
        layout.push_back({i.profile, i.start});
        if (i.owner.empty()) free.push_back({i.profile, i.start});
      }
      std::erase_if(plan.moves, [&](const DefragMove& d) { return d.gpu_uuid == src.uuid; });
      const catalog::MigProfile* before = Largest(m, layout, free);
      const catalog::MigProfile* whole = Largest(m, {}, {});
      DefragMove mv{src.uuid, src.cluster, src.node, &m, layout, {}, {},
                    before == nullptr ? "" : std::string(before->name), whole == nullptr ? "" : std::string(whole->name),
                    std::move(moved)};
      catalog::SortLayout(mv.before);
      plan.moves.push_back(std::move(mv));
      After& emptied = trial(si);
      emptied.layout.clear();  // idle: laid out anew when it is needed
      emptied.free.clear();
      emptied.destroys = false;
      for (auto& [i, a] : changed) after[i] = std::move(a);
    }
    // In fleet order, as the rest.
    std::unordered_map<std::string_view, size_t> position;
    for (size_t gi = 0; gi < fleet.gpus.size(); ++gi) position[fleet.gpus[gi].uuid] = gi;
    std::stable_sort(plan.moves.begin(), plan.moves.end(), [&](const DefragMove& a, const DefragMove& b) {
      return position.at(a.gpu_uuid) < position.at(b.gpu_uuid);
    });
  }

  for (size_t gi = 0; gi < fleet.gpus.size(); ++gi) {
    const GpuState& g = fleet.gpus[gi];
    if (!mig_gpu(g)) continue;
    const catalog::GpuModel& m = *g.model;
    catalog::Layout layout, free;
    for (const InstanceState& i : g.instances) {
      layout.push_back({i.profile, i.start});
      if (i.owner.empty()) free.push_back({i.profile, i.start});
    }
    for (const catalog::MigProfile& p : m.profiles) {
      plan.before[std::string(m.name)][std::string(p.name)] += RoomFor(m, layout, free, p);
      plan.after[std::string(m.name)][std::string(p.name)] += RoomFor(m, after[gi].layout, after[gi].free, p);
    }
  }
  return plan;
}

}  // namespace gpuaas::allocator

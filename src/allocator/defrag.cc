#include "allocator/defrag.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "catalog/room.h"
#include "common/strings.h"
#include "fmt/format.h"

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


DefragFleet BuildDefragFleet(std::span<const model::GpuCapacity* const> gpus,
                             std::span<const model::NodeCapacity* const> nodes,
                             std::span<const model::MigLayout* const> layouts,
                             std::span<const model::GpuPool* const> pools,
                             std::span<const model::Workload* const> workloads) {
  DefragFleet out;
  for (const model::GpuPool* p : pools) {
    if (p->spec.move_idle_instances && model::PoolIsLive(*p)) out.movable.insert(PoolKey(*p));
  }
  out.snapshot = BuildPoolSnapshot(gpus, nodes, layouts, DeviceOwners(pools));
  std::map<std::string, std::vector<const model::WorkloadDevice*>> used;  // GPU UUID -> devices Running work uses
  for (const model::Workload* w : workloads) {
    if (w->status.phase != model::WorkloadPhase::kRunning) continue;
    for (const model::WorkloadDevice& d : w->status.devices) used[d.gpu_uuid].push_back(&d);
  }
  for (GpuState& gs : out.snapshot.gpus) {
    auto u = used.find(gs.uuid);
    if (u == used.end()) continue;
    for (const model::WorkloadDevice* d : u->second) {
      if (d->instance_uuid.empty()) gs.busy = true;
      for (InstanceState& i : gs.instances) i.busy = i.busy || (!d->instance_uuid.empty() && i.uuid == d->instance_uuid);
    }
  }
  return out;
}

absl::StatusOr<DefragWrites> ChooseMoves(const DefragFleet& fleet, const DefragPlan& plan,
                                         const std::set<std::string>& gpus) {
  DefragWrites out;
  if (gpus.empty() && plan.moves.empty()) {
    return absl::FailedPreconditionError(
        "nothing to defragment now: no GPU's free instances stand in the way of a larger profile, and no GPU can "
        "be emptied by moving idle instances of pools that allow it");
  }
  std::set<std::string> found;
  for (const DefragMove& mv : plan.moves) {
    const std::string uuid = ToLower(mv.gpu_uuid);
    if (!gpus.empty() && !gpus.contains(uuid)) continue;
    found.insert(uuid);
    out.moves.push_back(mv);
  }
  for (const std::string& u : gpus) {
    if (!found.contains(u)) {
      return absl::FailedPreconditionError(fmt::format(
          "GPU {} has no defragmentation move now (its free instances free no larger profile, a pool holds them, "
          "work runs on it, or it is not a MIG GPU of this fleet)",
          u));
    }
  }
  // The GPUs moved instances go to: what they have, and the new instances in free slots.
  std::map<std::string, DefragWrites::GpuLayout> grown;
  for (const DefragMove& mv : out.moves) {
    if (mv.relocations.empty()) {
      out.layouts.push_back({mv.cluster, mv.node, mv.gpu_uuid, mv.after});
      continue;
    }
    for (const Relocation& r : mv.relocations) {
      out.relocations[r.pool].push_back(r);
      if (!r.to_instance.empty()) continue;  // a free instance there: the layout stays
      auto [it, added] = grown.try_emplace(r.to_gpu);
      if (added) {
        auto g = std::find_if(fleet.snapshot.gpus.begin(), fleet.snapshot.gpus.end(),
                              [&](const GpuState& s) { return s.uuid == r.to_gpu; });
        if (g == fleet.snapshot.gpus.end()) {
          return absl::InternalError(fmt::format("GPU {} that a move goes to is not in the fleet", r.to_gpu));
        }
        it->second = {g->cluster, g->node, g->uuid, g->Layout()};
      }
      it->second.layout.push_back({r.profile, r.to_start});
    }
  }
  for (auto& [uuid, target] : grown) {
    catalog::SortLayout(target.layout);
    out.layouts.push_back(std::move(target));
  }
  return out;
}

bool Relocate(std::vector<model::AllocatedDevice>& allocation, const Relocation& r) {
  for (model::AllocatedDevice& d : allocation) {
    if (d.gpu_uuid == r.from_gpu && d.profile == r.profile->name && d.start == r.from_start) {
      d = {r.to_cluster, r.to_node, r.to_gpu, d.profile, r.to_start, r.to_instance};
      return true;
    }
  }
  return false;
}

model::Defragmentation::Move Record(const DefragMove& mv) {
  model::Defragmentation::Move out{mv.gpu_uuid,
                                   mv.cluster,
                                   mv.node,
                                   mv.model == nullptr ? "" : std::string(mv.model->name),
                                   catalog::FormatLayout(mv.before),
                                   catalog::FormatLayout(mv.after),
                                   catalog::FormatLayout(mv.removed),
                                   mv.largest_before,
                                   mv.largest_after,
                                   {}};
  for (const Relocation& r : mv.relocations) {
    out.relocations.push_back({r.pool, std::string(r.profile->name), r.from_gpu, r.from_start, r.to_gpu, r.to_node,
                               r.to_start, r.to_instance});
  }
  return out;
}

}  // namespace gpuaas::allocator

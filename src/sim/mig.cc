#include "sim/mig.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "absl/status/status.h"
#include "allocator/allocator.h"
#include "allocator/defrag.h"
#include "allocator/snapshot.h"
#include "sim/allocated.h"
#include "sim/replay.h"

namespace gpuaas::sim {
namespace {

using allocator::FleetSnapshot;
using allocator::GpuState;
using allocator::InstanceState;

// A pod as MIG mode sees it: CPU and memory, and a profile or a number of whole GPUs.
struct Demand {
  int64_t cpu = 0;
  int64_t memory = 0;
  const catalog::MigProfile* profile = nullptr;
  int whole = 0;
  bool Gpu() const { return profile != nullptr || whole > 0; }
  double GpuEquivalents(const MigModel& m) const {
    return profile != nullptr ? static_cast<double>(profile->compute_slices) / m.compute_slices : whole;
  }
};

Demand DemandOf(const TracePod& p, const MigModel& model) {
  Demand d{p.shape.cpu_milli, p.shape.memory_mib, nullptr, 0};
  if (p.shape.num_gpu == 0 || p.shape.gpu_milli == 0) return d;
  if (p.shape.Shares()) d.profile = ProfileForShare(model, p.shape.gpu_milli);
  if (d.profile == nullptr) d.whole = p.shape.num_gpu;
  return d;
}

// The node list as a fleet of `model` GPUs, every one with MIG disabled, and where each pod
// runs. Node names carry their position in the seed's node order, so that the snapshot's order
// (and so the allocator's first-best choice) is that order.
class MigCluster {
 public:
  MigCluster(const std::vector<allocator::NodeSpec>& specs, const MigModel& model, uint64_t seed)
      : model_(model), profile_(allocator::ProfileByName("default")) {
    fleet_ = SimFleet(specs, NodeOrder(specs.size(), seed), [&](const allocator::NodeSpec&) { return &model; }, first_gpu_);
    for (size_t k = 0; k < fleet_.nodes.size(); ++k) room_of_[fleet_.nodes[k].name] = k;
  }

  // Places pod instance `id`; false when it fits nowhere.
  bool Place(size_t id, const Demand& d) {
    if (!d.Gpu()) return PlaceCpuOnly(id, d);
    allocator::Request req;
    req.pool = fmt::format("p{}", id);
    allocator::RequestItem item;
    item.model = std::string(model_.name);
    item.profile = d.profile != nullptr ? d.profile->name : std::string(catalog::kFullProfile);
    item.count = d.profile != nullptr ? 1 : d.whole;
    item.cpu_milli = d.cpu;
    item.memory_mib = d.memory;
    item.one_node = true;
    req.items.push_back(std::move(item));
    const allocator::Outcome o = allocator::Allocate(fleet_, req, *profile_);
    if (o.code != allocator::Code::kSuccess) return false;
    allocator::ApplyPlan(fleet_, req, o.plan);
    const size_t room = room_of_.at(o.plan.placements.front().node);
    Take(room, d, 1);
    held_[id] = {room, true};
    return true;
  }

  void Remove(size_t id, const Demand& d) {
    auto it = held_.find(id);
    if (it == held_.end()) return;
    Take(it->second.room, d, -1);
    if (it->second.gpu) allocator::ReleasePool(fleet_, fmt::format("p{}", id));
    held_.erase(it);
  }

  // Free compute and memory slices of the GPUs whose nodes have `d`'s CPU and memory: free
  // instances count as free (they could be destroyed), as do whole GPUs nobody holds.
  bool SlicesFreeInTotal(const Demand& d) const {
    int64_t compute = 0, memory = 0;
    for (const GpuState& g : fleet_.gpus) {
      const allocator::NodeRoom& room = fleet_.nodes[static_cast<size_t>(g.node_room)];
      if (room.cpu_free_milli < d.cpu || room.memory_free_mib < d.memory) continue;
      const auto [c, m] = FreeSlices(g);
      compute += c;
      memory += m;
    }
    const int64_t need_compute = d.profile != nullptr ? d.profile->compute_slices : int64_t{d.whole} * model_.compute_slices;
    const int64_t need_memory = d.profile != nullptr ? d.profile->memory_slices : int64_t{d.whole} * model_.memory_slices;
    return compute >= need_compute && memory >= need_memory;
  }

  // Applies the defragmentation planner's whole plan; the free instances it destroyed.
  int64_t Defragment() {
    const allocator::DefragPlan plan = allocator::PlanDefrag(fleet_);
    int64_t removed = 0;
    std::unordered_map<std::string_view, GpuState*> by_uuid;
    for (GpuState& g : fleet_.gpus) by_uuid[g.uuid] = &g;
    for (const allocator::DefragMove& m : plan.moves) {
      GpuState& g = *by_uuid.at(m.gpu_uuid);
      std::erase_if(g.instances, [](const InstanceState& i) { return i.owner.empty() && !i.busy; });
      removed += static_cast<int64_t>(m.removed.size());
    }
    if (!plan.moves.empty()) fleet_.Reindex();
    return removed;
  }

  int64_t GpusUsed() const {
    int64_t n = 0;
    for (const GpuState& g : fleet_.gpus) n += g.Idle() ? 0 : 1;
    return n;
  }
  int64_t ComputeSlicesHeld() const {
    int64_t n = 0;
    for (const GpuState& g : fleet_.gpus) {
      if (!g.owner.empty()) n += model_.compute_slices;
      for (const InstanceState& i : g.instances) n += i.owner.empty() ? 0 : i.profile->compute_slices;
    }
    return n;
  }
  int64_t ComputeSlices() const { return static_cast<int64_t>(fleet_.gpus.size()) * model_.compute_slices; }

 private:
  struct Held {
    size_t room = 0;
    bool gpu = false;
  };

  // A GPU's compute and memory slices that no pod holds (a free instance's count as free).
  std::pair<int, int> FreeSlices(const GpuState& g) const {
    if (!g.mig_enabled) return g.owner.empty() ? std::pair{model_.compute_slices, model_.memory_slices} : std::pair{0, 0};
    std::pair<int, int> free{model_.compute_slices, model_.memory_slices};
    for (const InstanceState& i : g.instances) {
      if (i.owner.empty()) continue;
      free.first -= i.profile->compute_slices;
      free.second -= i.profile->memory_slices;
    }
    return free;
  }

  void Take(size_t room, const Demand& d, int sign) {
    allocator::NodeRoom& r = fleet_.nodes[room];
    r.cpu_free_milli -= sign * d.cpu;
    r.memory_free_mib -= sign * d.memory;
  }

  // The fullest node that holds the pod, by CPU and free compute slices, each normalised by the
  // trace's largest node (128 CPUs, 8 GPUs), as the FGD artifact's best fit; the first in node
  // order among equals.
  bool PlaceCpuOnly(size_t id, const Demand& d) {
    size_t best = fleet_.nodes.size();
    double best_left = 0;
    for (size_t k = 0; k < fleet_.nodes.size(); ++k) {
      const allocator::NodeRoom& r = fleet_.nodes[k];
      if (r.cpu_free_milli < d.cpu || r.memory_free_mib < d.memory) continue;
      int free_slices = 0;
      for (size_t i = first_gpu_[k]; i < first_gpu_[k + 1]; ++i) free_slices += FreeSlices(fleet_.gpus[i]).first;
      const double left = 0.5 * static_cast<double>(r.cpu_free_milli - d.cpu) / 128000.0 +
                          0.5 * free_slices / (8.0 * model_.compute_slices);
      if (best == fleet_.nodes.size() || left < best_left) best = k, best_left = left;
    }
    if (best == fleet_.nodes.size()) return false;
    Take(best, d, 1);
    held_[id] = {best, false};
    return true;
  }

  const MigModel& model_;
  std::shared_ptr<const allocator::Profile> profile_;
  FleetSnapshot fleet_;
  std::unordered_map<std::string, size_t> room_of_;  // node name -> index in fleet_.nodes
  std::vector<size_t> first_gpu_;  // node k's GPUs are fleet_.gpus[first_gpu_[k], first_gpu_[k + 1])
  std::unordered_map<size_t, Held> held_;  // by pod instance
};

}  // namespace

absl::StatusOr<const MigModel*> FindMigModel(std::string_view name) {
  const catalog::GpuModel* m = catalog::FindModel(name);
  if (m == nullptr || !m->mig_capable) {
    return absl::InvalidArgumentError(
        fmt::format("--mig-model \"{}\": not a MIG-capable model of the catalogue", name));
  }
  return m;
}

const catalog::MigProfile* ProfileForShare(const MigModel& model, int32_t gpu_milli) {
  const catalog::MigProfile* best = nullptr;
  for (const catalog::MigProfile& p : model.profiles) {
    if (p.media_extensions() || p.memory_slices >= model.memory_slices) continue;
    if (p.memory_slices * allocator::kMilliGpu < gpu_milli * model.memory_slices) continue;
    if (best == nullptr || p.memory_slices < best->memory_slices ||
        (p.memory_slices == best->memory_slices && p.compute_slices < best->compute_slices)) {
      best = &p;
    }
  }
  return best;
}

MigResult RunMig(const std::vector<allocator::NodeSpec>& nodes, const std::vector<TracePod>& pods,
                 const MigModel& model, uint64_t seed, double tune) {
  MigResult out;
  out.seed = seed;
  std::vector<Demand> demand;
  demand.reserve(pods.size());
  for (const TracePod& p : pods) demand.push_back(DemandOf(p, model));
  int64_t capacity = 0;
  for (const allocator::NodeSpec& n : nodes) capacity += int64_t{n.gpus} * allocator::kMilliGpu;
  MigCluster cluster(nodes, model, seed);
  size_t id = 0;
  for (size_t i : ArrivalOrder(pods, capacity, tune, seed)) {
    ++out.pods;
    if (!cluster.Place(id++, demand[i])) continue;
    ++out.accepted;
    out.accepted_gpus += demand[i].GpuEquivalents(model);
  }
  out.gpus_used = cluster.GpusUsed();
  out.used_gpu_util =
      out.gpus_used > 0 ? out.accepted_gpus / static_cast<double>(out.gpus_used) * 100 : 0;
  return out;
}

absl::StatusOr<MigChurnResult> RunMigChurn(const std::vector<allocator::NodeSpec>& nodes,
                                           const std::vector<TracePod>& pods, const MigModel& model,
                                           uint64_t seed, double speedup, bool defrag) {
  absl::StatusOr<ChurnTimeline> timeline = MakeChurnTimeline(pods, speedup);
  if (!timeline.ok()) return timeline.status();
  const int64_t first_arrival = timeline->first_arrival, last_arrival = timeline->last_arrival;
  MigChurnResult out;
  out.seed = seed;
  std::vector<Demand> demand;
  demand.reserve(pods.size());
  for (const TracePod& p : pods) demand.push_back(DemandOf(p, model));
  MigCluster cluster(nodes, model, seed);
  double held_integral = 0;
  int64_t last = first_arrival;
  for (const ChurnEvent& e : timeline->events) {
    const int64_t until = std::min(e.time, last_arrival);
    if (until > last) held_integral += static_cast<double>(cluster.ComputeSlicesHeld()) * static_cast<double>(until - last);
    last = std::max(last, until);
    const Demand& d = demand[e.pod];
    if (e.kind == 0) {
      cluster.Remove(e.pod, d);
      continue;
    }
    if (!d.Gpu()) {
      cluster.Place(e.pod, d);
      continue;
    }
    ++out.requests;
    if (cluster.Place(e.pod, d)) {
      ++out.accepted;
      continue;
    }
    const bool fragmented = cluster.SlicesFreeInTotal(d);
    if (fragmented && defrag) {
      const int64_t removed = cluster.Defragment();
      if (removed > 0) {
        ++out.defrags;
        out.instances_removed += removed;
        if (cluster.Place(e.pod, d)) {
          ++out.accepted;
          ++out.recovered;
          continue;
        }
      }
    }
    ++out.failed;
    if (fragmented) ++out.failed_fragmented;
    if (fragmented && d.profile != nullptr) ++out.failed_fragmented_mig;
  }
  const double span = static_cast<double>(last_arrival - first_arrival);
  if (span > 0) out.time_avg_alloc = held_integral / span / static_cast<double>(cluster.ComputeSlices()) * 100.0;
  return out;
}

}  // namespace gpuaas::sim

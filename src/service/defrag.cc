#include "service/defrag.h"

#include <map>
#include <set>

#include "allocator/snapshot.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "model/fleet.h"
#include "model/pool.h"
#include "service/pools.h"
#include "store/objects.h"

namespace gpuaas::service {
namespace {

// What a plan is made from, as `tx` reads it: the pool allocator's view of the fleet, with the
// devices Running workloads use marked busy, and the pools that let their instances move.
struct Fleet {
  allocator::FleetSnapshot snapshot;
  std::set<std::string> movable;
};

absl::StatusOr<Fleet> ReadFleet(store::Txn& tx) {
  ASSIGN_OR_RETURN(std::vector<model::GpuCapacity> gpus, store::ListObjects<model::GpuCapacity>(tx));
  ASSIGN_OR_RETURN(std::vector<model::NodeCapacity> nodes, store::ListObjects<model::NodeCapacity>(tx));
  ASSIGN_OR_RETURN(std::vector<model::MigLayout> layouts, store::ListObjects<model::MigLayout>(tx));
  ASSIGN_OR_RETURN(std::vector<model::GpuPool> pools, store::ListObjects<model::GpuPool>(tx));
  ASSIGN_OR_RETURN(std::vector<model::Workload> workloads, store::ListObjects<model::Workload>(tx));
  std::vector<const model::GpuCapacity*> g;
  for (const model::GpuCapacity& x : gpus) g.push_back(&x);
  std::vector<const model::NodeCapacity*> n;
  for (const model::NodeCapacity& x : nodes) n.push_back(&x);
  std::vector<const model::MigLayout*> l;
  for (const model::MigLayout& x : layouts) l.push_back(&x);
  std::vector<const model::GpuPool*> p;
  Fleet out;
  for (const model::GpuPool& x : pools) {
    p.push_back(&x);
    if (x.spec.move_idle_instances && model::PoolIsLive(x)) out.movable.insert(allocator::PoolKey(x));
  }
  out.snapshot = allocator::BuildPoolSnapshot(g, n, l, allocator::DeviceOwners(p));
  std::map<std::string, std::vector<model::WorkloadDevice>> used;  // GPU UUID -> devices Running work uses
  for (const model::Workload& w : workloads) {
    if (w.status.phase != model::WorkloadPhase::kRunning) continue;
    for (const model::WorkloadDevice& d : w.status.devices) used[d.gpu_uuid].push_back(d);
  }
  for (allocator::GpuState& gs : out.snapshot.gpus) {
    auto u = used.find(gs.uuid);
    if (u == used.end()) continue;
    for (const model::WorkloadDevice& d : u->second) {
      if (d.instance_uuid.empty()) gs.busy = true;
      for (allocator::InstanceState& i : gs.instances) i.busy = i.busy || (!d.instance_uuid.empty() && i.uuid == d.instance_uuid);
    }
  }
  return out;
}

absl::StatusOr<allocator::DefragPlan> PlanIn(store::Txn& tx) {
  ASSIGN_OR_RETURN(Fleet fleet, ReadFleet(tx));
  return allocator::PlanDefrag(fleet.snapshot, fleet.movable);
}

// Writes the desired layout of a GPU (MigLayout), as the pool controller does.
absl::Status WriteLayout(store::Txn& tx, Time now, const std::string& cluster, const std::string& node,
                         const std::string& gpu_uuid, const catalog::Layout& layout) {
  model::MigLayout l;
  l.metadata.name = ToLower(gpu_uuid);
  l.metadata.labels = {{"gpuaas.io/cluster", cluster}};
  l.spec = {cluster, node, gpu_uuid, true, {}};
  for (const catalog::Instance& i : layout) l.spec.instances.push_back({std::string(i.profile->name), i.start});
  ASSIGN_OR_RETURN(std::optional<model::MigLayout> old, store::GetObject<model::MigLayout>(tx, "", l.metadata.name));
  if (old) {
    // A new spec is a new generation; its status stays the MIG controller's to move on.
    l.metadata = old->metadata;
    l.status = old->status;
    return store::UpdateObject(tx, l);
  }
  return store::CreateObject(tx, l, now);
}

}  // namespace

absl::StatusOr<allocator::DefragPlan> DefragService::Plan() {
  allocator::DefragPlan plan;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(plan, PlanIn(tx));
    return absl::OkStatus();
  }));
  return plan;
}

absl::StatusOr<std::vector<allocator::DefragMove>> DefragService::Apply(const std::vector<std::string>& gpus,
                                                                        const std::string& user) {
  // GPUs by UUID in any letter case (the inventory keeps NVIDIA's spelling, GPU-<hex>).
  std::set<std::string> wanted;
  for (const std::string& u : gpus) {
    if (u.size() < 5 || u.size() > 128 || !EqualsIgnoreCase(std::string_view(u).substr(0, 4), "GPU-")) {
      return absl::InvalidArgumentError(fmt::format("\"{}\" is not a GPU UUID (GPU-..., in any letter case)", u));
    }
    wanted.insert(ToLower(u));
  }
  std::vector<allocator::DefragMove> made;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    made.clear();
    ASSIGN_OR_RETURN(Fleet fleet, ReadFleet(tx));
    allocator::DefragPlan plan = allocator::PlanDefrag(fleet.snapshot, fleet.movable);
    std::set<std::string> found;
    for (allocator::DefragMove& mv : plan.moves) {
      if (!wanted.empty() && !wanted.contains(ToLower(mv.gpu_uuid))) continue;
      found.insert(ToLower(mv.gpu_uuid));
      made.push_back(std::move(mv));
    }
    for (const std::string& u : wanted) {
      if (!found.contains(u)) {
        return absl::FailedPreconditionError(fmt::format(
            "GPU {} has no defragmentation move now (its free instances free no larger profile, a pool holds them, "
            "work runs on it, or it is not a MIG GPU of this fleet)",
            u));
      }
    }
    const Time now = clock_.Now();
    // The instances moves create, by the GPU they go to, on top of what that GPU has.
    std::map<std::string, std::pair<const allocator::GpuState*, catalog::Layout>> grown;
    std::map<std::string, std::vector<const allocator::Relocation*>> by_pool;
    for (const allocator::DefragMove& mv : made) {
      if (mv.relocations.empty()) {
        RETURN_IF_ERROR(WriteLayout(tx, now, mv.cluster, mv.node, mv.gpu_uuid, mv.after));
        RETURN_IF_ERROR(RecordAudit(tx, now, user, "Defragment", "miglayouts/" + ToLower(mv.gpu_uuid),
                                    fmt::format("{} -> {} (destroys {}; largest profile {} -> {})",
                                                catalog::FormatLayout(mv.before), catalog::FormatLayout(mv.after),
                                                catalog::FormatLayout(mv.removed),
                                                mv.largest_before.empty() ? "none" : mv.largest_before,
                                                mv.largest_after)));
        continue;
      }
      for (const allocator::Relocation& r : mv.relocations) {
        by_pool[r.pool].push_back(&r);
        if (!r.to_instance.empty()) continue;
        auto [it, added] = grown.try_emplace(r.to_gpu);
        if (added) {
          for (const allocator::GpuState& g : fleet.snapshot.gpus) {
            if (g.uuid == r.to_gpu) it->second = {&g, g.Layout()};
          }
        }
        it->second.second.push_back({r.profile, r.to_start});
      }
      RETURN_IF_ERROR(RecordAudit(tx, now, user, "Defragment", "gpucapacities/" + ToLower(mv.gpu_uuid),
                                  fmt::format("empties the GPU ({}): moves {}", catalog::FormatLayout(mv.before), [&] {
                                    std::string list;
                                    for (const allocator::Relocation& r : mv.relocations) {
                                      list += fmt::format("{}{}'s {}@{} to {}@{}", list.empty() ? "" : ", ", r.pool,
                                                          r.profile->name, r.from_start, r.to_gpu, r.to_start);
                                    }
                                    return list;
                                  }())));
    }
    for (auto& [uuid, target] : grown) {
      if (target.first == nullptr) return absl::InternalError(fmt::format("GPU {} left the fleet while planning", uuid));
      catalog::SortLayout(target.second);
      RETURN_IF_ERROR(WriteLayout(tx, now, target.first->cluster, target.first->node, uuid, target.second));
    }
    // The pools' allocations follow their instances.
    for (const auto& [key, moves] : by_pool) {
      const size_t slash = key.find('/');
      ASSIGN_OR_RETURN(std::optional<model::GpuPool> pool,
                       store::GetObject<model::GpuPool>(tx, key.substr(0, slash), key.substr(slash + 1)));
      if (!pool) return absl::InternalError(fmt::format("pool {} left while planning", key));
      for (const allocator::Relocation* r : moves) {
        for (model::AllocatedDevice& d : pool->status.allocation) {
          if (d.gpu_uuid == r->from_gpu && d.profile == r->profile->name && d.start == r->from_start) {
            d = {r->to_cluster, r->to_node, r->to_gpu, d.profile, r->to_start, r->to_instance};
          }
        }
      }
      RETURN_IF_ERROR(store::UpdateObject(tx, *pool));
    }
    return absl::OkStatus();
  }));
  return made;
}

}  // namespace gpuaas::service

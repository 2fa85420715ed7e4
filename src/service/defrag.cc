#include "service/defrag.h"

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

// The plan from what `tx` reads: the pool allocator's view of the fleet.
absl::StatusOr<allocator::DefragPlan> PlanIn(store::Txn& tx) {
  ASSIGN_OR_RETURN(std::vector<model::GpuCapacity> gpus, store::ListObjects<model::GpuCapacity>(tx));
  ASSIGN_OR_RETURN(std::vector<model::NodeCapacity> nodes, store::ListObjects<model::NodeCapacity>(tx));
  ASSIGN_OR_RETURN(std::vector<model::MigLayout> layouts, store::ListObjects<model::MigLayout>(tx));
  ASSIGN_OR_RETURN(std::vector<model::GpuPool> pools, store::ListObjects<model::GpuPool>(tx));
  std::vector<const model::GpuCapacity*> g;
  for (const model::GpuCapacity& x : gpus) g.push_back(&x);
  std::vector<const model::NodeCapacity*> n;
  for (const model::NodeCapacity& x : nodes) n.push_back(&x);
  std::vector<const model::MigLayout*> l;
  for (const model::MigLayout& x : layouts) l.push_back(&x);
  std::vector<const model::GpuPool*> p;
  for (const model::GpuPool& x : pools) p.push_back(&x);
  return allocator::PlanDefrag(allocator::BuildPoolSnapshot(g, n, l, allocator::DeviceOwners(p)));
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
  for (const std::string& u : gpus) {
    if (!u.starts_with("GPU-") || u.size() > 128) {
      return absl::InvalidArgumentError(fmt::format("\"{}\" is not a GPU UUID (GPU-...)", u));
    }
  }
  const std::set<std::string> wanted(gpus.begin(), gpus.end());
  std::vector<allocator::DefragMove> made;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    made.clear();
    ASSIGN_OR_RETURN(allocator::DefragPlan plan, PlanIn(tx));
    std::set<std::string> found;
    for (allocator::DefragMove& mv : plan.moves) {
      if (!wanted.empty() && !wanted.contains(mv.gpu_uuid)) continue;
      found.insert(mv.gpu_uuid);
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
    for (const allocator::DefragMove& mv : made) {
      model::MigLayout l;
      l.metadata.name = ToLower(mv.gpu_uuid);
      l.metadata.labels = {{"gpuaas.io/cluster", mv.cluster}};
      l.spec = {mv.cluster, mv.node, mv.gpu_uuid, true, {}};
      for (const catalog::Instance& i : mv.after) l.spec.instances.push_back({std::string(i.profile->name), i.start});
      ASSIGN_OR_RETURN(std::optional<model::MigLayout> old, store::GetObject<model::MigLayout>(tx, "", l.metadata.name));
      if (old) {
        l.metadata = old->metadata;
        l.status = {model::MigLayout::State::kPending, "", 0, Time{}, old->status.observed_generation};
        RETURN_IF_ERROR(store::UpdateObject(tx, l));
      } else {
        RETURN_IF_ERROR(store::CreateObject(tx, l, now));
      }
      RETURN_IF_ERROR(RecordAudit(tx, now, user, "Defragment", "miglayouts/" + l.metadata.name,
                                  fmt::format("{} -> {} (destroys {}; largest profile {} -> {})",
                                              catalog::FormatLayout(mv.before), catalog::FormatLayout(mv.after),
                                              catalog::FormatLayout(mv.removed),
                                              mv.largest_before.empty() ? "none" : mv.largest_before,
                                              mv.largest_after)));
    }
    return absl::OkStatus();
  }));
  return made;
}

}  // namespace gpuaas::service

// The pool controller's defragmentation step: makes the moves an operator asked for (a
// Defragmentation, written by service/defrag.h) in one transaction that plans again from what it
// reads, so that an instance a pool took since the request is never destroyed: the MigLayouts of
// the GPUs that change (the MIG controller applies them) and the allocations of the pools whose
// idle instances move. A GPU whose move is gone by then fails the whole request, naming it, and
// nothing is made. The request's status records the moves made; the request is deleted
// kDefragRetention later.
#include <optional>
#include <set>

#include "allocator/defrag.h"
#include "common/status.h"
#include "controller/pool_allocation.h"
#include "controller/pools.h"
#include "fmt/format.h"
#include "service/defrag.h"
#include "store/objects.h"

namespace gpuaas::controller {

absl::StatusOr<runtime::Result> PoolController::Defragment(const std::string& name) {
  const Time now = manager_.clock().Now();
  runtime::Result result = runtime::Result::Done();
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<model::Defragmentation> d, store::GetObject<model::Defragmentation>(tx, "", name));
    if (!d) return absl::OkStatus();
    if (d->status.phase != model::Defragmentation::Phase::kPending) {
      // Made or failed: kept as the record of what moved, then deleted.
      const Time due = d->status.completed.value_or(now) + kDefragRetention;
      if (now < due) {
        result = runtime::Result::After(due - now);
        return absl::OkStatus();
      }
      return store::DeleteObject<model::Defragmentation>(tx, "", name, d->metadata.resource_version);
    }
    ASSIGN_OR_RETURN(allocator::DefragFleet fleet, service::ReadDefragFleet(tx));
    const allocator::DefragPlan plan = allocator::PlanDefrag(fleet.snapshot, fleet.movable);
    absl::StatusOr<allocator::DefragWrites> writes =
        allocator::ChooseMoves(fleet, plan, std::set<std::string>(d->spec.gpus.begin(), d->spec.gpus.end()));
    d->status.completed = now;
    if (!writes.ok()) {
      if (!absl::IsFailedPrecondition(writes.status())) return writes.status();
      d->status.phase = model::Defragmentation::Phase::kFailed;
      d->status.message = std::string(writes.status().message());
      return store::UpdateObject(tx, *d);
    }
    for (const allocator::DefragWrites::GpuLayout& l : writes->layouts) {
      RETURN_IF_ERROR(WriteLayout(tx, now, l.cluster, l.node, l.gpu_uuid, /*mig_enabled=*/true, l.layout));
    }
    // The pools' allocations follow their instances.
    for (const auto& [key, relocations] : writes->relocations) {
      const size_t slash = key.find('/');
      ASSIGN_OR_RETURN(std::optional<model::GpuPool> pool,
                       store::GetObject<model::GpuPool>(tx, key.substr(0, slash), key.substr(slash + 1)));
      if (!pool) return absl::InternalError(fmt::format("pool {} of a planned move is not in the store", key));
      for (const allocator::Relocation& r : relocations) {
        if (!allocator::Relocate(pool->status.allocation, r)) {
          return absl::InternalError(fmt::format("pool {} holds no {} at {}@{} to move", key, r.profile->name,
                                                 r.from_gpu, r.from_start));
        }
      }
      RETURN_IF_ERROR(store::UpdateObject(tx, *pool));
    }
    d->status.phase = model::Defragmentation::Phase::kApplied;
    for (const allocator::DefragMove& mv : writes->moves) d->status.moves.push_back(allocator::Record(mv));
    return store::UpdateObject(tx, *d);
  }));
  return result;
}

}  // namespace gpuaas::controller

// The pool controller's allocation step: what a pool lacks, placed by the allocator on a snapshot
// of only the GPUs that could hold it (the models asked for, in the pool's cluster if it names
// one), built from the informers' indexes: each candidate GPU's owners come from the pools
// indexed on it and its desired MIG layout from the layout of its name, so that one allocation
// costs in proportion to its candidates, not to every pool and layout of the fleet.
//
// The informers may lag the store: pools and layouts written after the revision the snapshot
// was read at are read again in the transaction, and a plan that would take a device another
// pool now holds, or build on a layout that changed meanwhile, is Aborted (the caller retries on
// fresher informers).
#ifndef GPUAAS_CONTROLLER_POOL_ALLOCATION_H_
#define GPUAAS_CONTROLLER_POOL_ALLOCATION_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "allocator/allocator.h"
#include "catalog/catalog.h"
#include "controller/runtime/informer.h"
#include "model/fleet.h"
#include "model/pool.h"
#include "store/store.h"

namespace gpuaas::controller {

// The informers an allocation reads, with the indexes AddAllocationIndexes registers.
struct AllocationInformers {
  runtime::Informer<model::GpuPool>& pools;
  runtime::Informer<model::GpuCapacity>& gpus;
  runtime::Informer<model::NodeCapacity>& nodes;
  runtime::Informer<model::MigLayout>& layouts;
};

// Pools by the UUIDs of the GPUs their allocation uses.
inline constexpr std::string_view kPoolsByGpu = "gpu";
// GPUs by "<model>" and by "<cluster>/<model>".
inline constexpr std::string_view kGpusByModel = "model";

// Registers kPoolsByGpu and kGpusByModel (before the informers start).
void AddAllocationIndexes(AllocationInformers& informers);

// Writes in `tx` the MigLayout that gpuaas wants on a GPU (created, or its spec replaced: a new
// generation, for the MIG controller to apply): the one writer of MigLayout specs, for
// allocations and defragmentation alike.
absl::Status WriteLayout(store::Txn& tx, Time now, const std::string& cluster, const std::string& node,
                         const std::string& gpu_uuid, bool mig_enabled, const catalog::Layout& layout);

// Places `deficit` for `pool` (approved, live) on the informers as of store revision `seen`, and
// writes in `tx` the MigLayouts the plan needs. Returns the allocator's outcome: a failure code
// (Unschedulable, Unresolvable) is an answer, not an error. The placements are not added to the
// pool; the caller does, in the same transaction. Aborted as said above; a store error otherwise.
absl::StatusOr<allocator::Outcome> AllocateDeficit(store::Txn& tx, const model::GpuPool& pool,
                                                   const std::vector<model::PoolItem>& deficit,
                                                   const AllocationInformers& informers, int64_t seen,
                                                   const allocator::Profile& profile, Time now);

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_POOL_ALLOCATION_H_

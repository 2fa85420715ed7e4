// MIG defragmentation as operators use it (`gpuaas defrag plan|apply`, /api/v1/defrag): the plan
// of allocator/defrag.h for the fleet as the store holds it, and applying its moves. Applying
// writes each GPU's desired layout (a MigLayout, as the pool controller does for new instances)
// in one transaction that plans again from what it reads, so an instance a pool took meanwhile is
// never destroyed; the MIG controller then changes the GPUs, through their cluster's driver. A
// move that empties a GPU (pools with spec.moveIdleInstances; an instance counts as used while a
// Running workload of gpuaas or the cluster holds it) points each moved device of the pool's
// allocation at its new place in the same transaction, and asks for the new instances it needs
// (a MigLayout that adds them to what the GPU has); the pool controller then waits for them as
// for any new device. Every application is in the audit log. Thread-safe.
#ifndef GPUAAS_SERVICE_DEFRAG_H_
#define GPUAAS_SERVICE_DEFRAG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "allocator/defrag.h"
#include "common/clock.h"
#include "store/store.h"

namespace gpuaas::service {

class DefragService {
 public:
  DefragService(store::Store& store, const Clock& clock) : store_(store), clock_(clock) {}

  // The plan for the fleet now.
  absl::StatusOr<allocator::DefragPlan> Plan();

  // Makes the moves of the plan now for `gpus` (GPU UUIDs; every move when empty), as `user`.
  // The moves made. FailedPrecondition, naming the GPU, for a GPU with no move now (nothing
  // written then); InvalidArgument for a name that is not a GPU UUID.
  absl::StatusOr<std::vector<allocator::DefragMove>> Apply(const std::vector<std::string>& gpus, const std::string& user);

 private:
  store::Store& store_;
  const Clock& clock_;
};

}  // namespace gpuaas::service

#endif  // GPUAAS_SERVICE_DEFRAG_H_

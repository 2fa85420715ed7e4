// MIG defragmentation as operators use it (`gpuaas defrag plan|apply`, /api/v1/defrag): the plan
// of allocator/defrag.h for the fleet as the store holds it, and requests to make its moves.
// A request is a Defragmentation object (model/pool.h); the pool controller, which owns every
// pool's allocation and every MigLayout spec, makes the moves in one transaction that plans
// again from what it reads, so an instance a pool took meanwhile is never destroyed
// (controller/pool_defrag.cc), and writes what it made into the request's status. Every request
// is in the audit log. Thread-safe.
#ifndef GPUAAS_SERVICE_DEFRAG_H_
#define GPUAAS_SERVICE_DEFRAG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "allocator/defrag.h"
#include "common/clock.h"
#include "model/pool.h"
#include "store/store.h"

namespace gpuaas::service {

class DefragService {
 public:
  DefragService(store::Store& store, const Clock& clock) : store_(store), clock_(clock) {}

  // The plan for the fleet now.
  absl::StatusOr<allocator::DefragPlan> Plan();

  // Asks, as `user`, for the moves of the plan for `gpus` (GPU UUIDs in any letter case; every
  // move when empty): the Defragmentation written, Pending. InvalidArgument for a name that is
  // not a GPU UUID; FailedPrecondition, naming the GPU, for a GPU with no move now. Nothing is
  // written then. (The pool controller plans again when it makes the moves, and fails the
  // request if a GPU's move is gone by then.)
  absl::StatusOr<model::Defragmentation> Request(const std::vector<std::string>& gpus, const std::string& user);

  // The request `name` once the pool controller has made its moves or failed it, or as it
  // stands when `timeout` has passed (still Pending: no controller runs, or it is busy).
  // NotFound when there is no such request.
  absl::StatusOr<model::Defragmentation> Await(const std::string& name, Duration timeout);

 private:
  store::Store& store_;
  const Clock& clock_;
};

// The fleet that defragmentation plans on, as `tx` reads it (the service checks a request with
// it, the pool controller makes the moves with it).
absl::StatusOr<allocator::DefragFleet> ReadDefragFleet(store::Txn& tx);

}  // namespace gpuaas::service

#endif  // GPUAAS_SERVICE_DEFRAG_H_

// The pool and MIG controllers. Level-triggered: each pass reads pools, layouts and inventory
// afresh, and every step is persisted before it acts, so a restart at any point resumes and
// converges without allocating a device twice.
//
// Pool controller: approved -> allocate (allocator on a fresh snapshot; the allocation and the
// MIG layouts it needs are written in one transaction that re-checks no other pool holds the
// devices) -> provisioned (every device exists in the inventory) -> Ready; release -> free.
// MIG controller: each MigLayout that differs from the observed GPU is applied through the
// cluster driver, never while workloads would lose their instances; failures retry with
// exponential backoff and show in the layout's status and the pool's conditions.
#ifndef GPUAAS_CONTROLLER_POOLS_H_
#define GPUAAS_CONTROLLER_POOLS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "allocator/allocator.h"
#include "cluster/driver.h"
#include "common/clock.h"
#include "store/store.h"

namespace gpuaas::controller {

struct PassStats {
  int allocated = 0;
  int ready = 0;
  int released = 0;
  int unschedulable = 0;
  int replaced = 0;  // pools that lost devices on failed GPUs this pass
  int layouts_applied = 0;   // layouts requested from a driver this pass
  int layouts_failed = 0;
  bool needs_observation = false;  // a driver is applying a layout: sync the inventory soon
};

class PoolController {
 public:
  // `drivers` by cluster name; not owned.
  PoolController(store::Store& store, const Clock& clock,
                 std::map<std::string, cluster::ClusterDriver*> drivers);

  // One pass of both controllers over every pool and layout. Errors of single objects are
  // recorded on them and do not stop the pass; the returned error is a store failure.
  absl::StatusOr<PassStats> RunOnce();

 private:
  absl::Status ReconcileLayouts(PassStats& stats);
  absl::Status ReconcilePools(PassStats& stats);

  store::Store& store_;
  const Clock& clock_;
  std::map<std::string, cluster::ClusterDriver*> drivers_;
  std::shared_ptr<const allocator::Profile> profile_;
};

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_POOLS_H_

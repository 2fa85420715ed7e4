// The workload controller: admits a project's workloads onto its pool's devices. A device takes
// as many workloads as the pool's time-slicing replicas (one without). Pending work is taken in
// priority order (inference before batch, then oldest first); an inference workload that does
// not fit preempts running batch workloads of the same pool, newest first, which go back to the
// queue. Each run is recorded as a Profile (pod -> devices -> pool -> project, start and end).
// Workloads of a released pool are evicted. Level-triggered, one transaction per pool.
#ifndef GPUAAS_CONTROLLER_WORKLOADS_H_
#define GPUAAS_CONTROLLER_WORKLOADS_H_

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "store/store.h"

namespace gpuaas::controller {

struct WorkloadStats {
  int admitted = 0;
  int preempted = 0;
  int evicted = 0;
  int queued = 0;
  int requeued = 0;  // runs whose device left the pool (a failed GPU)
};

class WorkloadController {
 public:
  WorkloadController(store::Store& store, const Clock& clock) : store_(store), clock_(clock) {}
  absl::StatusOr<WorkloadStats> RunOnce();

 private:
  store::Store& store_;
  const Clock& clock_;
};

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_WORKLOADS_H_

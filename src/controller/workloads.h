// The workload controller: commits the admission decisions of allocator/admission.h for one pool
// at a time (the key is "namespace/pool"): ends runs (closing their Profiles), starts runs
// (creating a Profile: pod -> devices -> pool -> project, from when), and updates what pending
// workloads show, in one transaction that reads the pool and its workloads afresh. It owns
// Workload status and the Profiles of workloads' runs: a workload deleted while it ran (the API
// only removes it) has its Profile closed here, as the record of what ran where.
//
// Keys come from a workload's changes and from its pool's (Ready, released, a device lost).
#ifndef GPUAAS_CONTROLLER_WORKLOADS_H_
#define GPUAAS_CONTROLLER_WORKLOADS_H_

#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "controller/runtime/manager.h"
#include "model/pool.h"
#include "store/store.h"

namespace gpuaas::controller {

struct WorkloadStats {
  int64_t admitted = 0;
  int64_t preempted = 0;
  int64_t evicted = 0;
  int64_t queued = 0;
  int64_t requeued = 0;  // runs whose device left the pool (a failed GPU)
};

class WorkloadController final : public runtime::Reconciler {
 public:
  // Registers itself with `manager`.
  WorkloadController(store::Store& store, runtime::Manager& manager);
  absl::StatusOr<runtime::Result> Reconcile(const std::string& key) override;
  WorkloadStats stats() const;

 private:
  store::Store& store_;
  runtime::Manager& manager_;
  runtime::Informer<model::Workload>& workloads_;
  runtime::Informer<model::Profile>& profiles_;
  mutable std::mutex mu_;
  WorkloadStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_WORKLOADS_H_

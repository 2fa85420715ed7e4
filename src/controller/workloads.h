// The workload controller: commits the admission decisions of allocator/admission.h for one pool
// at a time (the key is "namespace/pool"): ends runs (closing their Profiles), starts runs
// (creating a Profile: pod -> devices -> pool -> project, from when), and updates what pending
// workloads show, in one transaction that reads the pool and its workloads afresh. It owns
// Workload status and the Profiles of workloads' runs: a workload deleted while it ran (the API
// only removes it) has its Profile closed here, as the record of what ran where.
//
// It also keeps the loans of the pool's lent devices after they start (controller/lending.h
// starts them): the reclaim when the pool's work needs the devices (allocator/admission.h),
// the removal of a borrower still there at its deadline, and the end of a loan's receipt
// (model::Loan) with its run.
//
// Keys come from a workload's changes and from its pool's (Ready, released, a device lost),
// from a borrower's changes (its lending pool's key) and from the next reclaim deadline.
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
  int64_t reclaimed = 0;  // borrowers told to leave the pool's lent devices
  int64_t removed = 0;    // borrowers still there at their deadline, removed
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
  runtime::Informer<model::Loan>& loans_;
  mutable std::mutex mu_;
  WorkloadStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_WORKLOADS_H_

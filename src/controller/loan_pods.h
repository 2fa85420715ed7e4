// The loan-pod controller: in clusters with pods of their own (Kubernetes), a borrower's pods
// follow its loan (model::Loan). The key is a loan.
//   - When the lender reclaims the devices (the borrower's status.reclaimDeadline, set by the
//     workload controller), each pod of the borrower's namespace on them is told the deadline
//     (ClusterDriver::TellPodsOfReclaim: on Kubernetes the annotation
//     gpuaas.io/reclaim-deadline), so that it may save its work.
//   - Once the loan has ended (at the deadline, or when the borrower was deleted, the pool
//     released or the device failed), every such pod still there is removed at once
//     (ClusterDriver::RemovePods: deleted with a grace period of 0), and named in the loan's
//     status.removedPods.
//   - One still there a minute after the end is stuck: named in status.stuckPods, said in the
//     log, and emptied once it is gone. It holds back the device it is on, and only that one:
//     the others went back to the owner at the end.
// Which pods are on which device it reads from the inventory (GpuCapacity status.pods and each
// MIG instance's pods, as the cluster's driver reports them). It writes only Loan status.
#ifndef GPUAAS_CONTROLLER_LOAN_PODS_H_
#define GPUAAS_CONTROLLER_LOAN_PODS_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "cluster/registry.h"
#include "common/clock.h"
#include "controller/runtime/manager.h"
#include "model/fleet.h"
#include "model/pool.h"
#include "store/store.h"

namespace gpuaas::controller {

// A borrower's pods still on a loan's devices this long after its end are stuck.
inline constexpr Duration kStuckAfter = std::chrono::seconds(60);
// An ended loan's devices are looked at for this long after its end, then no more.
inline constexpr Duration kLoanPodsWatchedFor = std::chrono::minutes(10);

// The pods of the borrower's namespace on the loan's devices, by the cluster of each device
// ("namespace/name", sorted). `gpu` finds a GPU by UUID (null when unknown). Pure.
std::map<std::string, std::vector<std::string>> BorrowerPods(
    const model::Loan& loan, const std::function<const model::GpuCapacity*(const std::string&)>& gpu);

struct LoanPodStats {
  int64_t told = 0;     // times a loan's pods in one cluster were told of its reclaim
  int64_t removed = 0;  // pods asked to go at once
  int64_t stuck = 0;    // loans whose pods were found stuck
};

class LoanPodController final : public runtime::Reconciler {
 public:
  // Pods still there `stuck_after` past a loan's end are stuck (kStuckAfter; less in tests).
  LoanPodController(store::Store& store, runtime::Manager& manager, cluster::Registry& registry,
                    Duration stuck_after = kStuckAfter);
  absl::StatusOr<runtime::Result> Reconcile(const std::string& loan) override;
  LoanPodStats stats() const;

 private:
  store::Store& store_;
  cluster::Registry& registry_;
  const Clock& clock_;
  const Duration stuck_after_;
  const Duration watched_for_;  // an ended loan's devices are looked at this long
  runtime::Informer<model::Loan>& loans_;
  runtime::Informer<model::Workload>& workloads_;
  runtime::Informer<model::GpuCapacity>& gpus_;
  mutable std::mutex mu_;
  LoanPodStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_LOAN_PODS_H_

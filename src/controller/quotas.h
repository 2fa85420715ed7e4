// The quota controller: each cluster holds a project to what the project's live pools hold
// there (model::DevicesByCluster), through ClusterDriver::EnforceProjectQuota (on Kubernetes a
// namespace per project and a ResourceQuota over the GPU resources). The key is a project; it is
// queued when any of its pools changes. A cluster is told when the project holds something there,
// or held something there before (so that a released pool's quota goes back to none). Each
// cluster is also told which devices the project's pools hold there (EnforceProjectDevices),
// whenever that changes. While a loan runs (model::Loan), its devices count for the borrower, not
// the lender (model::PoolsWithLoans): its namespace's quota and the devices' taints follow the
// loan, and go back when it ends. It writes nothing to the store.
#ifndef GPUAAS_CONTROLLER_QUOTAS_H_
#define GPUAAS_CONTROLLER_QUOTAS_H_

#include <map>
#include <mutex>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "cluster/driver.h"
#include "cluster/registry.h"
#include "controller/runtime/manager.h"
#include "model/pool.h"

namespace gpuaas::controller {

// Open loans by their borrower and lender projects (an informer index).
inline constexpr std::string_view kOpenLoansByProject = "open-loans-by-project";

class QuotaController final : public runtime::Reconciler {
 public:
  // Holds every project to its pools on each cluster of `registry` (not owned); a cluster that
  // joins is told of every project. Registers itself with `manager`.
  QuotaController(runtime::Manager& manager, cluster::Registry& registry);
  absl::StatusOr<runtime::Result> Reconcile(const std::string& project) override;

  // What was last enforced, by project and cluster (for tests and the log).
  std::map<std::string, std::map<std::string, int64_t>> enforced(const std::string& project) const;

 private:
  cluster::Registry& registry_;
  const Clock& clock_;
  runtime::Informer<model::GpuPool>& pools_;
  runtime::Informer<model::Loan>& loans_;
  mutable std::mutex mu_;
  // project -> cluster -> devices last enforced
  std::map<std::string, std::map<std::string, std::map<std::string, int64_t>>> enforced_ ABSL_GUARDED_BY(mu_);
  // project -> cluster -> device UUIDs last enforced
  std::map<std::string, std::map<std::string, std::set<std::string>>> devices_enforced_ ABSL_GUARDED_BY(mu_);
  cluster::Registry::Subscription subscription_;  // last: it goes first
};

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_QUOTAS_H_

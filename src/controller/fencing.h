// The fencing controller: nodes a pool holds whole are kept for it in their cluster (labelled and
// tainted `gpuaas.io/pool`, model::WholeNodeOwners), through ClusterDriver::EnforceNodeOwners;
// the admission webhook gives the owning project's pods the toleration. Keyed by cluster; a
// cluster is asked again when a pool or one of its nodes changes, and when it joins. Writes
// nothing to the store.
#ifndef GPUAAS_CONTROLLER_FENCING_H_
#define GPUAAS_CONTROLLER_FENCING_H_

#include <map>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "cluster/registry.h"
#include "controller/runtime/manager.h"
#include "model/fleet.h"
#include "model/pool.h"

namespace gpuaas::controller {

class FencingController final : public runtime::Reconciler {
 public:
  FencingController(runtime::Manager& manager, cluster::Registry& registry);
  absl::StatusOr<runtime::Result> Reconcile(const std::string& cluster) override;
  // What was last enforced on `cluster` (node -> owner), for tests and the log.
  std::map<std::string, cluster::ClusterDriver::NodeOwner> enforced(const std::string& cluster) const;

 private:
  cluster::Registry& registry_;
  runtime::Informer<model::GpuPool>& pools_;
  runtime::Informer<model::NodeCapacity>& nodes_;
  mutable std::mutex mu_;
  std::map<std::string, std::map<std::string, cluster::ClusterDriver::NodeOwner>> enforced_ ABSL_GUARDED_BY(mu_);
  cluster::Registry::Subscription subscription_;  // last: it goes first
};

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_FENCING_H_

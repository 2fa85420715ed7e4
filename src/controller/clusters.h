// The cluster connection controller: keeps the clusters registered through the API
// (ClusterRegistration, service/clusters.h) connected. A registration gets a driver, made by the
// server's `connect` and started, that joins the cluster registry (the inventory then follows
// it); a deleted registration takes its driver out of the registry and stops it (the inventory
// then deletes its objects). A driver that cannot be made is retried with backoff and logged.
// Writes nothing to the store.
#ifndef GPUAAS_CONTROLLER_CLUSTERS_H_
#define GPUAAS_CONTROLLER_CLUSTERS_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "cluster/registry.h"
#include "controller/runtime/manager.h"
#include "model/fleet.h"

namespace gpuaas::controller {

// Makes the driver of a registration, not started.
using ClusterConnector =
    std::function<absl::StatusOr<std::shared_ptr<cluster::ClusterDriver>>(const model::ClusterRegistration&)>;

class ClusterConnectionController final : public runtime::Reconciler {
 public:
  // `connect` null: registrations are logged and left unconnected (a server built without a
  // driver for them).
  ClusterConnectionController(runtime::Manager& manager, cluster::Registry& registry, ClusterConnector connect);
  absl::StatusOr<runtime::Result> Reconcile(const std::string& name) override;
  // Stops every registered cluster's driver (they stay in the registry); for shutdown, after
  // the controllers stopped.
  void StopAll();

 private:
  cluster::Registry& registry_;
  ClusterConnector connect_;
  runtime::Informer<model::ClusterRegistration>& registrations_;
  std::mutex mu_;
  std::map<std::string, std::string> connected_ ABSL_GUARDED_BY(mu_);  // name -> registration uid
};

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_CLUSTERS_H_

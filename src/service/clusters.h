// The cluster service: what operators may do to the set of managed clusters while the server
// runs: register a Kubernetes cluster (`gpuaas cluster add`), list every cluster with where it
// came from, remove a registered one. Each change and its audit event in one store transaction;
// the cluster connection controller (controller/clusters.h) makes or stops the driver. Thread-safe.
#ifndef GPUAAS_SERVICE_CLUSTERS_H_
#define GPUAAS_SERVICE_CLUSTERS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/registry.h"
#include "common/clock.h"
#include "model/fleet.h"
#include "store/store.h"

namespace gpuaas::service {

// One managed (or registered) cluster, as `gpuaas cluster list` shows it. Never the credentials.
struct ClusterEntry {
  std::string name;
  std::string driver;   // simulated, kubernetes
  std::string source;   // "start" (given when the server started) or "registered"
  std::string server;   // the API server's URL (registered clusters)
  std::string context;  // the kubeconfig context (registered clusters)
  std::string registered_by;
  std::optional<Time> registered;
  bool connected = false;         // a driver follows it now
  std::optional<model::Cluster> cluster;  // the inventory's object, once observed
  // Why a connected cluster was never observed (a wrong address, a refused credential).
  std::string unreached;
};

class ClusterService {
 public:
  // Checks a registration can make a driver (the kubeconfig parses, its certificates load);
  // returns InvalidArgument saying what is wrong. Sees the kubeconfig: must not log it.
  using Validator = std::function<absl::Status(const model::ClusterRegistration&)>;
  // Where a registration points: its API server's URL and the context used (for listing).
  struct Endpoint {
    std::string server;
    std::string context;
  };
  using EndpointOf = std::function<Endpoint(const model::ClusterRegistration&)>;
  ClusterService(store::Store& store, const Clock& clock, const cluster::Registry& registry, Validator validate,
                 EndpointOf endpoint_of)
      : store_(store),
        clock_(clock),
        registry_(registry),
        validate_(std::move(validate)),
        endpoint_of_(std::move(endpoint_of)) {}

  // InvalidArgument (a bad name or kubeconfig), AlreadyExists (a cluster of that name is managed
  // or registered). The stored registration is returned without its kubeconfig.
  absl::StatusOr<model::ClusterRegistration> Register(model::ClusterRegistration r, const std::string& user);
  // NotFound (not registered: a cluster given at start says so), FailedPrecondition (pools hold
  // devices there; they are named).
  absl::Status Unregister(const std::string& name, const std::string& user);
  // Every cluster managed or registered, by name.
  absl::StatusOr<std::vector<ClusterEntry>> List() const;

 private:
  store::Store& store_;
  const Clock& clock_;
  const cluster::Registry& registry_;
  Validator validate_;
  EndpointOf endpoint_of_;
};

}  // namespace gpuaas::service

#endif  // GPUAAS_SERVICE_CLUSTERS_H_

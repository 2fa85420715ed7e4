// The Kubernetes drivers of `gpuaas server`: those its flags name (--kubernetes) and those
// registered through the API (gpuaas cluster add). Neither is started here.
#ifndef GPUAAS_EXE_CLUSTER_DRIVERS_H_
#define GPUAAS_EXE_CLUSTER_DRIVERS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/driver.h"
#include "cluster/kubernetes/driver.h"
#include "cluster/simulated/fleet.h"
#include "model/fleet.h"

namespace gpuaas::exe {

// Every cluster the server manages from its start, by name.
struct ClusterDrivers {
  std::vector<std::unique_ptr<cluster::ClusterDriver>> owned;
  std::map<std::string, cluster::ClusterDriver*> by_name;
  std::vector<cluster::kubernetes::KubernetesDriver*> kubernetes;  // to start and stop
  size_t simulated = 0;
};

// The simulated clusters of `fleet` and a Kubernetes driver for each of `kubernetes`
// (KubernetesDriverFor), none started. InvalidArgument as KubernetesDriverFor, or when two
// clusters have one name.
absl::StatusOr<ClusterDrivers> MakeClusterDrivers(const cluster::simulated::FleetSpec& fleet,
                                                  const std::vector<std::string>& kubernetes);

// "NAME=KUBECONFIG[#CONTEXT]" or "NAME=in-cluster": a Kubernetes driver, not started.
// InvalidArgument, naming the flag, for another form, a bad name or a kubeconfig that does not load.
absl::StatusOr<std::unique_ptr<cluster::kubernetes::KubernetesDriver>> KubernetesDriverFor(const std::string& arg);

// The driver of a cluster registered through the API, not started. InvalidArgument when its
// kubeconfig does not make a client (the API refuses such registrations).
absl::StatusOr<std::shared_ptr<cluster::ClusterDriver>> RegisteredDriver(const model::ClusterRegistration& r);

}  // namespace gpuaas::exe

#endif  // GPUAAS_EXE_CLUSTER_DRIVERS_H_

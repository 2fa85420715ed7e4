#include "exe/cluster_drivers.h"

#include <cstdlib>

#include "cluster/kubernetes/client_config.h"
#include "common/files.h"
#include "common/status.h"
#include "fmt/format.h"
#include "model/object.h"

namespace gpuaas::exe {

absl::StatusOr<std::unique_ptr<cluster::kubernetes::KubernetesDriver>> KubernetesDriverFor(const std::string& arg) {
  namespace k8s = cluster::kubernetes;
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size()) {
    return absl::InvalidArgumentError(fmt::format("--kubernetes \"{}\": expected NAME=KUBECONFIG[#CONTEXT] or NAME=in-cluster", arg));
  }
  const std::string name = arg.substr(0, eq);
  if (absl::Status s = model::ValidateName(name); !s.ok()) {
    return absl::InvalidArgumentError(fmt::format("--kubernetes: cluster name \"{}\": {}", name, s.message()));
  }
  std::string source = arg.substr(eq + 1);
  absl::StatusOr<k8s::ClientConfig> config;
  if (source == "in-cluster") {
    config = k8s::InClusterConfig(
        [](const std::string& var) {
          const char* v = std::getenv(var.c_str());
          return std::string(v == nullptr ? "" : v);
        },
        ReadWholeFile);
  } else {
    std::string context;
    if (const size_t hash = source.rfind('#'); hash != std::string::npos) {
      context = source.substr(hash + 1);
      source.resize(hash);
    }
    config = k8s::ParseKubeconfigFile(source, context, ReadWholeFile);
  }
  if (!config.ok()) {
    return absl::Status(config.status().code(), fmt::format("--kubernetes {}: {}", name, config.status().message()));
  }
  absl::StatusOr<std::unique_ptr<k8s::KubernetesDriver>> driver = k8s::KubernetesDriver::Make(name, *config);
  if (!driver.ok()) {
    return absl::Status(driver.status().code(), fmt::format("--kubernetes {}: {}", name, driver.status().message()));
  }
  return driver;
}

absl::StatusOr<std::shared_ptr<cluster::ClusterDriver>> RegisteredDriver(const model::ClusterRegistration& r) {
  cluster::kubernetes::DriverOptions options;
  options.display_name = r.spec.display_name;
  options.region = r.spec.region;
  ASSIGN_OR_RETURN(std::unique_ptr<cluster::kubernetes::KubernetesDriver> d,
                   cluster::kubernetes::DriverFromKubeconfig(r.metadata.name, r.spec.kubeconfig, r.spec.context, options));
  return std::shared_ptr<cluster::ClusterDriver>(std::move(d));
}

absl::StatusOr<ClusterDrivers> MakeClusterDrivers(const cluster::simulated::FleetSpec& fleet,
                                                  const std::vector<std::string>& kubernetes) {
  ClusterDrivers out;
  out.owned = cluster::simulated::MakeDrivers(fleet);
  out.simulated = out.owned.size();
  for (const std::string& arg : kubernetes) {
    ASSIGN_OR_RETURN(std::unique_ptr<cluster::kubernetes::KubernetesDriver> d, KubernetesDriverFor(arg));
    out.kubernetes.push_back(d.get());
    out.owned.push_back(std::move(d));
  }
  for (const auto& d : out.owned) {
    if (!out.by_name.emplace(std::string(d->ClusterName()), d.get()).second) {
      return absl::InvalidArgumentError(fmt::format("two clusters are named {}", d->ClusterName()));
    }
  }
  return out;
}

}  // namespace gpuaas::exe

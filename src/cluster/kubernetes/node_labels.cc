#include "cluster/kubernetes/node_labels.h"

#include <optional>
#include <string_view>

#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"

namespace gpuaas::cluster::kubernetes {
namespace {

constexpr std::string_view kPrefix = "nvidia.com/";

absl::StatusOr<int64_t> Count(const std::map<std::string, std::string>& labels, const std::string& key,
                              int64_t fallback) {
  auto it = labels.find(key);
  if (it == labels.end()) return fallback;
  std::optional<int64_t> v = ParseInt(it->second);
  if (!v || *v < 0) return absl::InvalidArgumentError(fmt::format("label {}: \"{}\" is not a count", key, it->second));
  return *v;
}

std::string Label(const std::map<std::string, std::string>& labels, std::string_view key) {
  auto it = labels.find(std::string(kPrefix) + std::string(key));
  return it == labels.end() ? "" : it->second;
}

}  // namespace

absl::StatusOr<NodeGpus> ReadNodeLabels(const std::map<std::string, std::string>& labels) {
  NodeGpus n;
  n.product = Label(labels, "gpu.product");
  if (n.product.empty()) return absl::NotFoundError("no nvidia.com/gpu.product label: not a GPU node, or GFD has not run");
  // "<product>-MIG-<profile>" under the single strategy; "-SHARED" when time slicing renames.
  std::string base = n.product;
  if (base.size() > 7 && base.ends_with("-SHARED")) base.resize(base.size() - 7);
  std::string single_profile;
  if (const size_t mig = base.find("-MIG-"); mig != std::string::npos) {
    single_profile = base.substr(mig + 5);
    base.resize(mig);
    if (single_profile == "INVALID") {
      return absl::InvalidArgumentError(fmt::format(
          "label nvidia.com/gpu.product: \"{}\": the device plugin found the GPUs' MIG layouts mixed, which the single "
          "strategy cannot advertise",
          n.product));
    }
  }
  absl::StatusOr<const catalog::GpuModel*> model = catalog::ModelFromProduct(base);
  if (!model.ok()) {
    return absl::InvalidArgumentError(fmt::format("label nvidia.com/gpu.product: {}", model.status().message()));
  }
  n.model = *model;
  n.mig_capable = Label(labels, "mig.capable") == "true";
  const std::string strategy = Label(labels, "mig.strategy");
  n.mig_strategy = strategy == "mixed" ? MigStrategy::kMixed : strategy == "single" ? MigStrategy::kSingle : MigStrategy::kNone;
  n.mig_config = Label(labels, "mig.config");
  n.mig_config_state = Label(labels, "mig.config.state");
  ASSIGN_OR_RETURN(n.memory_mib, Count(labels, "nvidia.com/gpu.memory", 0));
  ASSIGN_OR_RETURN(int64_t replicas, Count(labels, "nvidia.com/gpu.replicas", 1));
  n.replicas = replicas < 1 ? 1 : replicas;
  ASSIGN_OR_RETURN(int64_t count, Count(labels, "nvidia.com/gpu.count", 0));
  if (!single_profile.empty()) {
    // Single strategy: gpu.count counts MIG devices of the one profile, laid out alike on every
    // GPU (mig-parted's all-<profile> configs give each GPU the profile's most instances).
    const catalog::MigProfile* p = catalog::FindProfile(*n.model, single_profile);
    if (p == nullptr) {
      return absl::InvalidArgumentError(fmt::format("label nvidia.com/gpu.product: \"{}\": {} has no MIG profile {}",
                                                    n.product, n.model->name, single_profile));
    }
    n.mig_devices[std::string(p->name)] = count;
    n.gpus = (count + p->max_count - 1) / p->max_count;
    return n;
  }
  n.gpus = count;
  // Mixed strategy: one count label per profile present on the node.
  for (const auto& [key, value] : labels) {
    if (!key.starts_with("nvidia.com/mig-") || !key.ends_with(".count")) continue;
    const std::string profile = key.substr(15, key.size() - 15 - 6);
    if (catalog::FindProfile(*n.model, profile) == nullptr) {
      return absl::InvalidArgumentError(fmt::format("label {}: {} has no MIG profile {}", key, n.model->name, profile));
    }
    ASSIGN_OR_RETURN(int64_t devices, Count(labels, key, 0));
    if (devices > 0) n.mig_devices[profile] = devices;
  }
  return n;
}

}  // namespace gpuaas::cluster::kubernetes

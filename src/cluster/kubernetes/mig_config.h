// mig-parted configs, as the GPU Operator's MIG manager reads them from its ConfigMap (key
// `config.yaml`): `version: v1` and `mig-configs`, each config a list of `{devices: [indices],
// mig-enabled, mig-devices: {profile: count}}` (../shared/reference/mig-facts.md, section 2).
// Pure.
#ifndef GPUAAS_CLUSTER_KUBERNETES_MIG_CONFIG_H_
#define GPUAAS_CLUSTER_KUBERNETES_MIG_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpuaas::cluster::kubernetes {

// One GPU's wanted state: MIG off, or on with these instances (profile -> count; placements are
// mig-parted's to choose).
struct GpuMigSpec {
  bool enabled = false;
  std::map<std::string, int64_t> devices;
  friend bool operator==(const GpuMigSpec&, const GpuMigSpec&) = default;
};

// `existing` (a config.yaml, possibly empty) with config `name` set to `gpus` (GPU index ->
// spec; GPUs with the same spec share an entry), and every other config whose name starts with
// `replaces_prefix` removed (the earlier configs of the same node). Other configs are kept as
// they were. InvalidArgument when `existing` is not a mig-parted config.
absl::StatusOr<std::string> MergeMigConfig(std::string_view existing, const std::string& name,
                                           const std::string& replaces_prefix, const std::map<int, GpuMigSpec>& gpus);

// The NVIDIA device plugin's config (v1) sharing each whole GPU into `replicas` time slices, the
// value of one key of the plugin's ConfigMap (a node's `nvidia.com/device-plugin.config` label
// names the key): `version: v1`, `sharing.timeSlicing.resources: [{name: nvidia.com/gpu,
// replicas: N}]` (../shared/reference/mig-facts.md).
std::string TimeSlicingConfig(int64_t replicas);

// Config `name` of a config.yaml, back as GPU index -> spec (a `devices: all` entry applies to
// indices 0..gpus-1). NotFound when the document has no such config.
absl::StatusOr<std::map<int, GpuMigSpec>> ReadMigConfig(std::string_view yaml, const std::string& name, int gpus);

}  // namespace gpuaas::cluster::kubernetes

#endif  // GPUAAS_CLUSTER_KUBERNETES_MIG_CONFIG_H_

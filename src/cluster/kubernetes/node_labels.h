// What a Kubernetes node says of its GPUs through the labels of NVIDIA's GPU Feature Discovery
// and the GPU Operator (../shared/reference/mig-facts.md has them, with sources):
//   nvidia.com/gpu.product   NVML's name with spaces as '-': "NVIDIA-H100-80GB-HBM3"; under the
//                            single MIG strategy "<product>-MIG-<profile>"; "-SHARED" when time
//                            slicing renames resources
//   nvidia.com/gpu.count     physical GPUs; under the single strategy the MIG devices
//   nvidia.com/gpu.memory    MiB per GPU
//   nvidia.com/gpu.replicas  time-slicing replicas per device (0 or 1: none)
//   nvidia.com/mig.capable, nvidia.com/mig.strategy (single | mixed; absent: none)
//   nvidia.com/mig-<profile>.count   MIG devices of a profile (mixed strategy)
//   nvidia.com/mig.config, nvidia.com/mig.config.state (pending | rebooting | success | failed)
// Pure: the first piece of the Kubernetes cluster driver (the inventory reads these).
#ifndef GPUAAS_CLUSTER_KUBERNETES_NODE_LABELS_H_
#define GPUAAS_CLUSTER_KUBERNETES_NODE_LABELS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "catalog/catalog.h"

namespace gpuaas::cluster::kubernetes {

enum class MigStrategy { kNone, kSingle, kMixed };

struct NodeGpus {
  const catalog::GpuModel* model = nullptr;  // the catalogue model of gpu.product
  std::string product;                       // gpu.product as labelled
  int64_t gpus = 0;                          // physical GPUs
  int64_t memory_mib = 0;                    // per GPU; 0 when not labelled
  int64_t replicas = 1;                      // time-slicing replicas per device
  bool mig_capable = false;
  MigStrategy mig_strategy = MigStrategy::kNone;
  std::map<std::string, int64_t> mig_devices;  // profile -> MIG devices on the node
  std::string mig_config;                      // the mig-parted config asked for
  std::string mig_config_state;                // the MIG manager's progress with it
};

// The GPUs of a node from its labels. NotFound when the node carries no nvidia.com/gpu.product
// (not a GPU node, or GFD has not run yet); InvalidArgument, naming the label, for a product the
// catalogue does not know, a count that is not a non-negative integer, or a single-strategy
// layout the device plugin marked invalid ("-MIG-INVALID").
absl::StatusOr<NodeGpus> ReadNodeLabels(const std::map<std::string, std::string>& labels);

}  // namespace gpuaas::cluster::kubernetes

#endif  // GPUAAS_CLUSTER_KUBERNETES_NODE_LABELS_H_

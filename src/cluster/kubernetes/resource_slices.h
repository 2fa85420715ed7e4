// GPUs as NVIDIA's DRA driver (driver `gpu.nvidia.com`, one pool per node) advertises them in
// `resource.k8s.io/v1` ResourceSlices: the device-level source, with real UUIDs and MIG
// placements, where labels only count. Facts: ../shared/reference/kubernetes.md §1. Pure.
//
// What is read, per device (attributes may be qualified with the driver's name):
//   type=gpu: uuid, productName, capacity memory, name gpu-<minor>;
//   type=mig: uuid (MIG-…), parentUUID, profile, capacity memorySlice<i> (the placement).
// A pool counts only when complete: every one of its resourceSliceCount slices seen at its
// newest generation. A GPU advertised beside its own MIG devices (dra-driver-nvidia-gpu #719)
// is one GPU in MIG mode, never two. Devices that consume counters (dynamic MIG, KEP-4815) are
// partitions that could be made, not ones that exist, and are not read as instances.
#ifndef GPUAAS_CLUSTER_KUBERNETES_RESOURCE_SLICES_H_
#define GPUAAS_CLUSTER_KUBERNETES_RESOURCE_SLICES_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/driver.h"

namespace gpuaas::cluster::kubernetes {

inline constexpr std::string_view kNvidiaDraDriver = "gpu.nvidia.com";
inline constexpr std::string_view kResourceSlices = "/apis/resource.k8s.io/v1/resourceslices";

struct SliceDevice {
  std::string name;     // "gpu-0", "gpu-0-mig-19-2-1"
  std::string type;     // "gpu", "mig"
  std::string uuid;
  std::string parent_uuid;  // MIG devices
  std::string profile;      // MIG devices: "1g.10gb"
  std::string product;      // "NVIDIA A100 80GB PCIe"
  int64_t memory_bytes = 0;
  int start = -1;  // MIG placement: the first memory slice it holds
  int size = 0;    // and how many
  bool partition = false;  // consumes counters: a partition that could be made
  friend bool operator==(const SliceDevice&, const SliceDevice&) = default;
};

struct ResourceSlice {
  std::string name;
  std::string driver;
  std::string node;  // spec.nodeName
  std::string pool;
  int64_t generation = 0;
  int64_t slice_count = 1;
  std::vector<SliceDevice> devices;
  friend bool operator==(const ResourceSlice&, const ResourceSlice&) = default;
};

// A ResourceSlice's JSON (text). InvalidArgument, naming the slice and field, for JSON that is
// not a ResourceSlice.
absl::StatusOr<ResourceSlice> ReadResourceSlice(std::string_view json);

// The GPUs of each node whose gpu.nvidia.com pool is complete (by spec.nodeName), sorted by
// minor number and indexed 0, 1, ... in that order; MIG devices under their parent, by
// placement.
std::map<std::string, std::vector<ObservedGpu>> GpusFromSlices(const std::vector<ResourceSlice>& slices);

// A ResourceClaim's allocation: the devices the scheduler gave it (status.allocation.devices.
// results), each named by driver, pool and device as in the ResourceSlices. A claim not (yet)
// allocated has none.
inline constexpr std::string_view kResourceClaims = "/apis/resource.k8s.io/v1/resourceclaims";
struct ClaimDevice {
  std::string driver;
  std::string pool;
  std::string device;
  friend bool operator==(const ClaimDevice&, const ClaimDevice&) = default;
};
struct ResourceClaim {
  std::string key;  // namespace/name
  std::vector<ClaimDevice> devices;
  friend bool operator==(const ResourceClaim&, const ResourceClaim&) = default;
};
// A ResourceClaim's JSON (text). InvalidArgument for JSON that is not a ResourceClaim.
absl::StatusOr<ResourceClaim> ReadResourceClaim(std::string_view json);

// Fencing a pool's exact devices (KEP-5055, device taints; resource.k8s.io/v1beta2 in 1.36):
// one DeviceTaintRule `gpuaas.io/project=<project>:NoSchedule` per device a project's pools
// hold, and (admission.h) only that project's claims tolerate it.
inline constexpr std::string_view kDeviceTaintRules = "/apis/resource.k8s.io/v1beta2/devicetaintrules";
inline constexpr std::string_view kProjectTaintKey = "gpuaas.io/project";
// The device classes NVIDIA's DRA driver installs, for whole GPUs and MIG devices.
inline constexpr std::array<std::string_view, 2> kNvidiaDeviceClasses = {"gpu.nvidia.com", "mig.nvidia.com"};

// The DeviceTaintRule (JSON) keeping device `device` of pool `pool` for `project`, and its name.
std::string DeviceTaintRuleName(std::string_view project, std::string_view pool, std::string_view device);
std::string DeviceTaintRule(std::string_view project, std::string_view pool, std::string_view device);

// The UUID each device of the complete gpu.nvidia.com pools goes by in the inventory, by
// "pool/device": a GPU's own, a MIG device's instance UUID.
std::map<std::string, std::string> DeviceUuids(const std::vector<ResourceSlice>& slices);

}  // namespace gpuaas::cluster::kubernetes

#endif  // GPUAAS_CLUSTER_KUBERNETES_RESOURCE_SLICES_H_

// The fleet inventory kinds: Cluster, NodeCapacity (a node's GPU capacity), GpuCapacity (one GPU
// device) and SpecAndCount (how many devices of one spec a node provisions). Written by the
// inventory controller from what a ClusterDriver observes; read by the API, the allocator and
// the dashboard.
#ifndef GPUAAS_MODEL_FLEET_H_
#define GPUAAS_MODEL_FLEET_H_

#include <map>
#include <string>
#include <vector>

#include "model/object.h"

namespace gpuaas::model {

// Resource names as the NVIDIA device plugin advertises them: nvidia.com/gpu, nvidia.com/mig-3g.71gb.
using ResourceList = std::map<std::string, int64_t>;

struct Cluster {
  static constexpr std::string_view kKind = "Cluster";
  static constexpr std::string_view kPlural = "clusters";
  static constexpr bool kNamespaced = false;

  struct Spec {
    std::string display_name;
    std::string driver;  // "simulated" or "kubernetes"
    std::string region;
    friend bool operator==(const Spec&, const Spec&) = default;
  };
  struct Status {
    int64_t nodes = 0;
    int64_t gpus = 0;
    std::vector<Condition> conditions;  // Reachable
    friend bool operator==(const Status&, const Status&) = default;
  };
  ObjectMeta metadata;
  Spec spec;
  Status status;
  friend bool operator==(const Cluster&, const Cluster&) = default;
};

// A cluster registered while the server runs (`gpuaas cluster add`): how to reach it. The
// server makes the cluster's driver from it; the Cluster object is the inventory's, as for
// clusters given at start. The kubeconfig holds credentials: the API never serves it back.
struct ClusterRegistration {
  static constexpr std::string_view kKind = "ClusterRegistration";
  static constexpr std::string_view kPlural = "clusterregistrations";
  static constexpr bool kNamespaced = false;

  struct Spec {
    std::string driver = "kubernetes";
    std::string kubeconfig;  // self-contained: certificates, keys and token inline
    std::string context;     // empty: the kubeconfig's current-context
    std::string display_name;
    std::string region;
    std::string registered_by;
    friend bool operator==(const Spec&, const Spec&) = default;
  };
  ObjectMeta metadata;
  Spec spec;
  friend bool operator==(const ClusterRegistration&, const ClusterRegistration&) = default;
};

struct NodeCapacity {
  static constexpr std::string_view kKind = "NodeCapacity";
  static constexpr std::string_view kPlural = "nodecapacities";
  static constexpr bool kNamespaced = false;

  struct Spec {
    std::string cluster;
    std::string node_name;    // the Kubernetes node name
    std::string gpu_model;    // catalogue name, "H200-SXM-141GB"
    std::string gpu_product;  // nvidia.com/gpu.product, "NVIDIA-H200"
    int64_t gpu_count = 0;
    int64_t cpu_cores = 0;
    int64_t memory_bytes = 0;
    bool schedulable = true;
    friend bool operator==(const Spec&, const Spec&) = default;
  };
  struct Status {
    // Physical capacity: whole GPUs and their memory, independent of MIG.
    int64_t physical_gpus = 0;
    int64_t physical_gpu_memory_mib = 0;
    int64_t mig_enabled_gpus = 0;
    // Logical capacity: devices as the device plugin exposes them (full GPUs and MIG instances).
    ResourceList allocatable;
    ResourceList allocated;
    // What the pods running on the node request (all pods, not only GPU ones): with the spec's
    // CPU and memory, what the node has left for a pool's work (what the allocator avoids
    // stranding GPUs behind). Zero where the cluster does not report pods.
    int64_t pod_cpu_milli = 0;
    int64_t pod_memory_bytes = 0;
    std::vector<Condition> conditions;
    friend bool operator==(const Status&, const Status&) = default;
  };
  ObjectMeta metadata;
  Spec spec;
  Status status;
  friend bool operator==(const NodeCapacity&, const NodeCapacity&) = default;
};

enum class MigMode { kDisabled, kEnabled };
enum class Health { kHealthy, kUnhealthy, kUnknown };

struct MigInstance {
  std::string profile;  // "3g.71gb"
  int64_t start = 0;    // placement start, in memory slices
  int64_t size = 0;     // placement size, in memory slices
  std::string uuid;     // "MIG-..."
  bool allocated = false;
  std::vector<std::string> pods = {};  // the pods holding it ("namespace/name"), where the cluster says
  friend bool operator==(const MigInstance&, const MigInstance&) = default;
};

struct GpuCapacity {
  static constexpr std::string_view kKind = "GpuCapacity";
  static constexpr std::string_view kPlural = "gpucapacities";
  static constexpr bool kNamespaced = false;

  struct Spec {
    std::string cluster;
    std::string node;  // NodeCapacity name
    std::string uuid;  // "GPU-..."
    int64_t index = 0;
    std::string model;
    std::string product;
    int64_t memory_mib = 0;
    bool mig_capable = false;
    friend bool operator==(const Spec&, const Spec&) = default;
  };
  struct Status {
    MigMode mig_mode = MigMode::kDisabled;
    std::vector<MigInstance> mig_instances;  // sorted by start
    bool allocated = false;                  // the whole GPU (MIG disabled) is in use
    std::vector<std::string> pods = {};      // the pods holding the whole GPU ("namespace/name")
    Health health = Health::kUnknown;
    std::vector<Condition> conditions;
    friend bool operator==(const Status&, const Status&) = default;
  };
  ObjectMeta metadata;
  Spec spec;
  Status status;
  friend bool operator==(const GpuCapacity&, const GpuCapacity&) = default;
};

struct SpecAndCount {
  static constexpr std::string_view kKind = "SpecAndCount";
  static constexpr std::string_view kPlural = "specandcounts";
  static constexpr bool kNamespaced = false;

  struct Spec {
    std::string cluster;
    std::string node;     // NodeCapacity name
    std::string model;    // "H200-SXM-141GB"
    std::string profile;  // "3g.71gb" or "full"
    std::string resource_name;  // "nvidia.com/mig-3g.71gb"
    friend bool operator==(const Spec&, const Spec&) = default;
  };
  struct Status {
    int64_t count = 0;
    int64_t allocated = 0;
    int64_t free = 0;
    friend bool operator==(const Status&, const Status&) = default;
  };
  ObjectMeta metadata;
  Spec spec;
  Status status;
  friend bool operator==(const SpecAndCount&, const SpecAndCount&) = default;
};

// GpuCapacity condition types, each with one writer:
//   - DriverHealthy: the cluster driver's own view, written by the inventory controller;
//   - MemoryErrors, ResetRequired, Overheating: the health rules' verdicts (telemetry/health.h),
//     and Healthy, which sums them up with DriverHealthy, and status.health: written by the
//     health controller (controller/health.h).
// The inventory rewrites whole objects but carries the health controller's fields over as stored.
inline constexpr std::string_view kGpuDriverHealthy = "DriverHealthy";
inline constexpr std::string_view kGpuHealthy = "Healthy";
inline constexpr std::string_view kGpuMemoryErrors = "MemoryErrors";
inline constexpr std::string_view kGpuResetRequired = "ResetRequired";
inline constexpr std::string_view kGpuOverheating = "Overheating";
inline constexpr std::string_view kReasonDriverUnhealthy = "DriverUnhealthy";

// Sets the DriverHealthy condition from the driver's view. Returns true when it changed. Pure.
bool SetDriverHealth(GpuCapacity& g, bool driver_healthy, Time now);
// The driver's last view (DriverHealthy; a GPU without it counts as healthy).
bool DriverReportedHealthy(const GpuCapacity& g);
// Sets status.health and the Healthy condition: Unhealthy (and out of allocation) when the driver
// reports the GPU unhealthy or MemoryErrors or ResetRequired is True; Overheating alone is a
// warning. Returns true when anything changed. Pure.
bool SummarizeGpuHealth(GpuCapacity& g, Time now);

std::string_view ToString(MigMode m);
std::string_view ToString(Health h);
std::string_view ToString(ConditionStatus s);

}  // namespace gpuaas::model

#endif  // GPUAAS_MODEL_FLEET_H_

// ClusterDriver: how gpuaas sees and acts on one cluster. Layer 7 of docs/architecture.md.
// Drivers report what the cluster shows, in the cluster's own terms (node names, GPU product
// labels as GPU Feature Discovery writes them, MIG devices as the device plugin lists them);
// turning that into gpuaas objects is the inventory controller's job, the same for every driver.
#ifndef GPUAAS_CLUSTER_DRIVER_H_
#define GPUAAS_CLUSTER_DRIVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuaas::cluster {

struct ObservedMigInstance {
  std::string profile;  // "3g.71gb"
  int start = 0;        // placement start (memory slice)
  int size = 0;         // placement size (memory slices)
  std::string uuid;     // "MIG-..."
  bool in_use = false;  // a pod holds it
  std::vector<std::string> pods = {};  // the pods holding it ("namespace/name"), where known
  friend bool operator==(const ObservedMigInstance&, const ObservedMigInstance&) = default;
};

struct ObservedGpu {
  std::string uuid;  // "GPU-..."
  int index = 0;
  int64_t memory_mib = 0;
  bool mig_enabled = false;
  std::vector<ObservedMigInstance> mig_instances;
  bool in_use = false;  // a pod holds the whole GPU
  std::vector<std::string> pods = {};  // the pods holding the whole GPU ("namespace/name"), where known
  bool healthy = true;
  friend bool operator==(const ObservedGpu&, const ObservedGpu&) = default;
};

struct ObservedNode {
  std::string name;
  std::string gpu_product;  // nvidia.com/gpu.product, e.g. "NVIDIA-H200"
  int64_t cpu_cores = 0;
  int64_t memory_bytes = 0;
  // What the pods running on the node request, all of them (a driver that does not know: 0).
  int64_t pod_cpu_milli = 0;
  int64_t pod_memory_bytes = 0;
  bool schedulable = true;
  std::map<std::string, std::string> labels;
  std::vector<ObservedGpu> gpus;
  friend bool operator==(const ObservedNode&, const ObservedNode&) = default;
};

struct ObservedCluster {
  std::string name;
  std::string display_name;
  std::string region;
  std::string driver;  // "simulated", "kubernetes"
  std::vector<ObservedNode> nodes;
};

class ClusterDriver {
 public:
  virtual ~ClusterDriver() = default;
  // The cluster's name in gpuaas.
  virtual std::string_view ClusterName() const = 0;

  // Starts following the cluster (drivers that watch an API server); Stop ends that and waits.
  // A driver is started once and stopped once; drivers with nothing running keep the defaults.
  virtual void Start() {}
  virtual void Stop() {}
  // A fresh observation of the whole cluster. Unavailable when the cluster cannot be reached.
  // Thread-safe.
  virtual absl::StatusOr<ObservedCluster> Observe() = 0;

  // Asks to be told when the next Observe may show something new: `on_change` is then called
  // (from any thread, with no lock of the driver held; it must be quick). Returns false for a
  // driver that cannot tell, which is then observed periodically. Call once.
  virtual bool Watch(std::function<void()> on_change) {
    (void)on_change;
    return false;
  }

  // Asks the cluster to bring one GPU to a MIG layout: MIG disabled when `mig_enabled` is false,
  // else exactly `instances` (profile and start each). Asynchronous, as the GPU Operator's MIG
  // manager is: the result shows in later observations (and in MigState). FailedPrecondition
  // when workloads run on the GPU. Thread-safe.
  virtual absl::Status ApplyMigLayout(const std::string& node, const std::string& gpu_uuid,
                                      bool mig_enabled,
                                      const std::vector<ObservedMigInstance>& instances) = 0;

  // The MIG manager's state for a node, as `nvidia.com/mig.config.state`: "success", "pending"
  // or "failed" (with `message`).
  struct MigState {
    std::string state = "success";
    std::string message;
  };
  virtual MigState NodeMigState(const std::string& node) = 0;

  // Makes the cluster hold a project to what its pools hold there: `devices` (extended resource
  // -> devices, "nvidia.com/gpu" -> 2, "nvidia.com/mig-3g.71gb" -> 4) is the most the project's
  // pods may request, and every other GPU resource none; empty takes everything away. Idempotent:
  // writes only what differs. Drivers of clusters without pods of their own (simulated) accept
  // and keep nothing. Thread-safe.
  virtual absl::Status EnforceProjectQuota(const std::string& project, const std::map<std::string, int64_t>& devices) {
    (void)project;
    (void)devices;
    return absl::OkStatus();
  }

  // Makes the cluster keep the devices (whole GPUs' and MIG instances' UUIDs) the pools of
  // `project` hold there, all of them (empty: none), for the project: on Kubernetes with DRA,
  // device taints that only the project's claims tolerate; and a driver that cannot tell which
  // device a pod holds places the project's pods on these first. Idempotent: writes only what
  // differs. Thread-safe.
  virtual absl::Status EnforceProjectDevices(const std::string& project, const std::set<std::string>& uuids) {
    (void)project;
    (void)uuids;
    return absl::OkStatus();
  }

  // Makes the cluster keep nodes a pool holds whole for that pool: `owners` (node -> owner) is
  // the complete set; those nodes get the label and NoSchedule taint `gpuaas.io/pool=<pool>`, and
  // when the pool shares its GPUs by time, the device plugin's time-slicing config for that many
  // slices. Every other node loses what gpuaas set (its other taints and configs are kept).
  // Idempotent: writes only what differs. Drivers without nodes of their own (simulated) accept
  // and keep nothing. Thread-safe.
  struct NodeOwner {
    std::string pool;         // model::NodePoolValue
    int64_t time_slices = 0;  // 0 or 1: none
    friend bool operator==(const NodeOwner&, const NodeOwner&) = default;
  };
  virtual absl::Status EnforceNodeOwners(const std::map<std::string, NodeOwner>& owners) {
    (void)owners;
    return absl::OkStatus();
  }

  // Tells pods ("namespace/name") that the devices they run on go back to their owner at
  // `deadline`, so that they may save their work first: on Kubernetes the annotation
  // gpuaas.io/reclaim-deadline (RFC 3339, UTC) on each pod. Pods already gone are skipped. The
  // first error, every pod tried. Drivers without pods of their own (simulated) accept and do
  // nothing. Thread-safe.
  virtual absl::Status TellPodsOfReclaim(const std::vector<std::string>& pods,
                                         std::chrono::system_clock::time_point deadline) {
    (void)pods;
    (void)deadline;
    return absl::OkStatus();
  }

  // Removes pods ("namespace/name") at once: on Kubernetes deleted with a grace period of 0
  // (a pod with finalizers, or on a node that does not answer, may stay on as terminating).
  // Pods already gone are skipped. The first error, every pod tried. Thread-safe.
  virtual absl::Status RemovePods(const std::vector<std::string>& pods) {
    (void)pods;
    return absl::OkStatus();
  }
};

}  // namespace gpuaas::cluster

#endif  // GPUAAS_CLUSTER_DRIVER_H_

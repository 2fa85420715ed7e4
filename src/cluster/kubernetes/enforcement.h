// Holding projects to their pools in a Kubernetes cluster, for the Kubernetes driver (driver.h):
// what ClusterDriver's Enforce* calls write to the API server.
//   - A project's namespace and its ResourceQuota `gpuaas-pools` (ProjectQuota): the GPU
//     resources its pods may request.
//   - DeviceTaintRules (ProjectDeviceTaints): the exact DRA devices a project's pools hold,
//     tainted so that only the project's claims tolerate them (resource_slices.h, admission.h).
//   - Nodes a pool holds whole (PlanNodeOwner, then NodeOwners): labelled and tainted
//     `gpuaas.io/pool=<pool>`, and for a time-sliced pool pointed at the device plugin's
//     time-slicing config `gpuaas-time-slicing-<n>`, which is written first.
//   - A borrower's pods when the lender reclaims its devices (ReclaimDeadline, RemovePods):
//     annotated with the deadline, then deleted with a grace period of 0.
// Each writes only what differs from what the API server has, and counts every write.
//
// The plans (ProjectDeviceTaintRules, PlanNodeOwner) are pure; Enforcer does the I/O.
// Enforcer is thread-safe: it keeps no state but the client's and a log-once flag.
#ifndef GPUAAS_CLUSTER_KUBERNETES_ENFORCEMENT_H_
#define GPUAAS_CLUSTER_KUBERNETES_ENFORCEMENT_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "cluster/driver.h"
#include "cluster/kubernetes/client.h"
#include "cluster/kubernetes/nodes.h"

namespace gpuaas::cluster::kubernetes {

// The annotation on a borrower's pod once the lender reclaims its devices: when they go back
// (RFC 3339, UTC), for the pod's last checkpoint (docs/lending.md).
inline constexpr std::string_view kReclaimDeadlineAnnotation = "gpuaas.io/reclaim-deadline";

// The DeviceTaintRules a project's devices want: rule name (DeviceTaintRuleName) -> (pool,
// device).
using DeviceTaintRules = std::map<std::string, std::pair<std::string, std::string>>;

// The rules keeping `uuids` for `project`: one per device of `pool_devices` ("pool/device" ->
// UUID, of the complete gpu.nvidia.com pools: DeviceUuids) whose UUID is among `uuids`.
DeviceTaintRules ProjectDeviceTaintRules(const std::string& project,
                                         const std::set<std::string>& uuids,
                                         const std::map<std::string, std::string>& pool_devices);

// What EnforceNodeOwners writes: a merge patch per node that differs, and the time-slicing
// configs those patches (and the nodes already right) name.
struct NodeOwnerPlan {
  std::vector<std::pair<std::string, std::string>> patches;  // node -> merge patch (JSON text)
  std::set<int64_t> time_slices;                             // slices per GPU, each above 1
};

// Adds to `plan` what GPU node `node` (with `meta`) needs to be as `owners` (node -> owner, the
// complete set) wants: the label and NoSchedule taint `gpuaas.io/pool` of its pool (none when
// it has no owner), keeping the node's other taints, and the device plugin config label of a
// time-sliced pool (a config gpuaas did not set is left alone). The patch is at the node's
// resourceVersion (a node changed meanwhile answers 409). Nothing for a node as wanted.
void PlanNodeOwner(const ObservedNode& node, const NodeMeta& meta,
                   const std::map<std::string, ClusterDriver::NodeOwner>& owners,
                   NodeOwnerPlan& plan);

class Enforcer {
 public:
  // Writes to cluster `cluster` (for logs) through `client`; the device plugin's ConfigMap is
  // `device_plugin_config_map` in `config_namespace`. `client` and `writes` (one added per
  // write) must outlive this.
  Enforcer(std::string cluster, Client& client, std::string config_namespace,
           std::string device_plugin_config_map, std::atomic<int64_t>& writes);

  // The project's namespace (named like the project; created when `devices` is not empty) and
  // its ResourceQuota `gpuaas-pools`: `requests.<resource>` for every GPU resource the device
  // plugin may advertise (nvidia.com/gpu and every catalogue MIG profile), `devices` or 0.
  // The API server's error when a read or write fails; Aborted when the quota kept changing.
  absl::Status ProjectQuota(const std::string& project,
                            const std::map<std::string, int64_t>& devices);

  // The project's DeviceTaintRules become `want`: missing ones created, the project's others
  // deleted. Where DeviceTaintRules are not served (404: the DRADeviceTaints feature is off)
  // nothing is written, the log says so once, and OK is returned. The API server's error
  // otherwise.
  absl::Status ProjectDeviceTaints(const std::string& project, const DeviceTaintRules& want);

  // Writes `plan`: the time-slicing configs into the device plugin's ConfigMap first (a node
  // labelled for a config the plugin cannot find would lose its devices), then each node's
  // patch. The configs' error, or the first patch's error (every patch is tried).
  absl::Status NodeOwners(const NodeOwnerPlan& plan);

  // Each pod ("namespace/name") annotated kReclaimDeadlineAnnotation = `deadline` (RFC 3339),
  // one merge patch a pod; a pod that is gone (404) is skipped. The first error, every pod tried.
  absl::Status ReclaimDeadline(const std::vector<std::string>& pods, const std::string& deadline);
  // Each pod deleted with a grace period of 0; a pod that is gone (404) is skipped. The first
  // error, every pod tried.
  absl::Status RemovePods(const std::vector<std::string>& pods);

 private:
  // The device plugin's ConfigMap holds a time-slicing config for each count in `slices`.
  absl::Status EnsureTimeSlicingConfigs(const std::set<int64_t>& slices);

  const std::string cluster_;
  Client& client_;
  const std::string config_namespace_;
  const std::string device_plugin_config_map_;
  std::atomic<int64_t>& writes_;
  std::atomic<bool> said_no_device_taints_{false};
};

}  // namespace gpuaas::cluster::kubernetes

#endif  // GPUAAS_CLUSTER_KUBERNETES_ENFORCEMENT_H_

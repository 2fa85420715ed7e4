// A Kubernetes Node object (core/v1, as the API server sends it) in the driver's terms: its GPUs
// from GPU Feature Discovery's labels (node_labels.h), whether pods may be scheduled there
// (spec.unschedulable, the Ready condition), its CPU and memory capacity, and the device plugin's
// `nvidia.com/gpu` capacity and allocatable (fewer allocatable than capacity: devices the plugin
// found unhealthy). Pure.
//
// Labels give counts, not devices: a GPU is named by a UUID derived from its cluster, node and
// index ("GPU-" + StableUuid), and MIG instances are placed as mig-parted places a config's
// profiles (the largest first, spread evenly over the node's GPUs). The node agent and DRA's
// ResourceSlices, which carry real UUIDs and placements, replace both where they run.
#ifndef GPUAAS_CLUSTER_KUBERNETES_NODES_H_
#define GPUAAS_CLUSTER_KUBERNETES_NODES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "cluster/driver.h"

namespace gpuaas::cluster::kubernetes {

// A Kubernetes quantity as a whole number ("64", "500m" rounds down to 0, "527830208Ki",
// "16Gi", "2k"); nullopt for anything else.
std::optional<int64_t> ParseQuantity(std::string_view q);

// metadata.<key> (a string field: "name", "resourceVersion") of an object's JSON, or "" when
// the text is not an object or has no such string.
std::string MetadataField(std::string_view object_json, std::string_view key);

// A Node's JSON (text) as an ObservedNode of cluster `cluster`. NotFound for a node without GPU
// labels (not a GPU node, or GFD has not labelled it yet); InvalidArgument, naming the node and
// the field, for JSON that is not a Node or labels node_labels.h refuses. A product the catalogue
// does not know is not refused: its GPUs come without MIG, and the inventory flags the node.
absl::StatusOr<ObservedNode> ReadNode(std::string_view cluster, std::string_view node_json);

// A Node's JSON (text) without its GPUs: name, schedulability, CPU, memory and the labels
// gpuaas keeps, for nodes whose GPUs only NVIDIA's DRA driver names (no GFD labels).
// InvalidArgument for JSON that is not a Node.
absl::StatusOr<ObservedNode> ReadBareNode(std::string_view node_json);

// The annotation gpuaas puts on a node it cordoned for a MIG change (mig_manager.h).
inline constexpr std::string_view kCordonAnnotation = "gpuaas.io/cordoned-for-mig";

// What gpuaas needs of a Node to write to it at the version it saw (enforcement.h fences it,
// mig_manager.h cordons it): not part of what Observe reports, so its changes tell no one.
struct NodeMeta {
  std::string resource_version;
  std::string taints = "[]";      // spec.taints as JSON text ("[]" when none)
  bool unschedulable = false;     // spec.unschedulable (cordoned, by anyone)
  bool cordoned_for_mig = false;  // annotated kCordonAnnotation: cordoned by gpuaas
  friend bool operator==(const NodeMeta&, const NodeMeta&) = default;
};

// A Node's JSON (text) as NodeMeta; what is missing (or not JSON) is left at its default.
NodeMeta ReadNodeMeta(std::string_view node_json);

// A Node as the driver keeps it, from one parse of its JSON (text): a GPU node (ReadNode and
// ReadNodeMeta), a node without GPU labels kept bare (ReadBareNode), or one refused, saying why.
struct NodeRead {
  enum class Kind { kGpu, kBare, kRefused };
  std::string name;  // empty only for JSON that is not a Node
  Kind kind = Kind::kRefused;
  ObservedNode node;    // kGpu: with its GPUs from labels; kBare: without GPUs
  NodeMeta meta;        // kGpu
  std::string refused;  // kRefused: why
};
NodeRead ReadNodeOnce(std::string_view cluster, std::string_view node_json);

// The value of label `key` of `node`, or "" when it has none.
std::string NodeLabel(const ObservedNode& node, std::string_view key);

// What a pod holds of a node's GPUs: the nvidia.com/ resources of its containers (extended
// resources are asked for in limits), and its DRA claims, while it is bound to a node and not
// finished.
struct PodGpus {
  std::string key;   // namespace/name
  std::string node;  // spec.nodeName; empty while unscheduled
  bool active = false;  // bound and neither Succeeded nor Failed
  std::map<std::string, int64_t> devices;  // "nvidia.com/gpu", "nvidia.com/mig-3g.71gb" -> count
  std::vector<std::string> claims = {};    // "namespace/claim", of status.resourceClaimStatuses
  // What its containers request (a limit where no request is given, as Kubernetes defaults it).
  int64_t cpu_milli = 0;
  int64_t memory_bytes = 0;
  bool Holds() const { return active && (!devices.empty() || !claims.empty()); }
  friend bool operator==(const PodGpus&, const PodGpus&) = default;
};

// A CPU quantity in millicores: "500m", "2", "1.5". nullopt for anything else.
std::optional<int64_t> ParseCpuMilli(std::string_view q);

// A Pod's JSON (text). InvalidArgument for JSON that is not a Pod.
absl::StatusOr<PodGpus> ReadPod(std::string_view pod_json);

// Device UUIDs (a whole GPU's "GPU-…", a MIG instance's "MIG-…") by pod key.
using HeldDevices = std::map<std::string, std::vector<std::string>>;

// Marks the devices the pods of `node` hold as in use, each naming its pods:
//  1. `exact`: the devices a pod's DRA claims were allocated (the API server names them);
//  2. a pod's counted devices (PodGpus::devices) where `sticky` put them at the last call, when
//     still there, of the resource and free: which device a counted pod holds the API does not
//     say (the node agent's PodResources does), and a guess must not move while the pod runs;
//  3. the rest on the first free devices in index and placement order, those that `owners`
//     (UUID -> project) gives the pod's project (its namespace) first, then those of no project,
//     then others; with none free (the device plugin shares GPUs by time), on the device with
//     the fewest other pods.
// `sticky` is replaced by what each of these pods holds now (pods of other nodes are kept).
void MarkHeld(const std::vector<const PodGpus*>& pods, const HeldDevices& exact,
              const std::map<std::string, std::string>& owners, HeldDevices& sticky, ObservedNode& node);

// The GPU UUID given to GPU `index` of `node` when nothing names the device itself.
std::string DerivedGpuUuid(std::string_view cluster, std::string_view node, int index);

}  // namespace gpuaas::cluster::kubernetes

#endif  // GPUAAS_CLUSTER_KUBERNETES_NODES_H_

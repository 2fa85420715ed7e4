// Driving the GPU Operator's MIG manager, for the Kubernetes driver (driver.h): what gpuaas asks
// of it and what it answers. Ask records a GPU's wanted layout; a writer thread puts each node's
// wanted layouts, once per node however many GPUs changed, as a mig-parted config
// `gpuaas-<node>-<n>` into the MIG manager's ConfigMap (mig_config.h) and points the node's
// `nvidia.com/mig.config` label at it (a new name each time, so the MIG manager runs again even
// after a failure). The answer is read back from the node's `nvidia.com/mig.config.state` label
// as the driver watches the node (ObserveNode): State reports it, and once the manager reports
// success and the node's device counts are the wanted ones, ShowApplied gives the GPUs the
// placements asked for (labels carry counts only), until the counts change again.
//
// A node with GPU pods is not changed (the MIG manager would stop them): it is cordoned and
// annotated kCordonAnnotation (nodes.h) until they finish, and uncordoned by the writer once the
// manager is done with it (a node cordoned by someone else stays as it is).
//
// Thread-safety: every member function is thread-safe. The manager takes its own mutex, never
// the driver's: the driver may call it with its own lock held, and the NodeLookup it is given
// is called with no lock of the manager held.
#ifndef GPUAAS_CLUSTER_KUBERNETES_MIG_MANAGER_H_
#define GPUAAS_CLUSTER_KUBERNETES_MIG_MANAGER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cluster/driver.h"
#include "cluster/kubernetes/client.h"
#include "cluster/kubernetes/mig_config.h"
#include "cluster/kubernetes/nodes.h"

namespace gpuaas::cluster::kubernetes {

// The node labels the MIG manager follows (the config asked for) and sets (its progress with it:
// pending, rebooting, success or failed).
inline constexpr std::string_view kMigConfigLabel = "nvidia.com/mig.config";
inline constexpr std::string_view kMigConfigStateLabel = "nvidia.com/mig.config.state";

struct MigManagerOptions {
  // The MIG manager's custom config (the GPU Operator's migManager.config.name), key
  // config.yaml.
  std::string config_namespace = "gpu-operator";
  std::string config_map = "gpuaas-mig-parted-config";
  // A node whose MIG manager stays pending this long after gpuaas asked is reported failed.
  std::chrono::milliseconds pending_timeout{std::chrono::minutes(10)};
  // Layouts asked for within this long are written together, one config per node.
  std::chrono::milliseconds write_delay{2000};
};

class MigManager {
 public:
  // What the writer reads of a GPU node as last watched.
  struct NodeFacts {
    std::string mig_config;        // its nvidia.com/mig.config label ("" when none)
    std::string resource_version;  // metadata.resourceVersion
  };
  // The facts of GPU node `node`; nullopt for a node that is not (or no longer) a GPU node.
  using NodeLookup = std::function<std::optional<NodeFacts>(const std::string& node)>;

  // The MIG manager of cluster `cluster` (for logs), written to through `client`, which must
  // outlive this. Each write to the API server adds one to `writes`, which must outlive this.
  // Starts nothing: call Start.
  MigManager(std::string cluster, Client& client, MigManagerOptions options, NodeLookup lookup,
             std::atomic<int64_t>& writes);
  ~MigManager();  // stops
  MigManager(const MigManager&) = delete;
  MigManager& operator=(const MigManager&) = delete;

  // Starts the writer thread; Stop ends it and waits. Not restartable.
  void Start();
  void Stop();

  // A GPU node as listed or watched, with its metadata: follows the manager's progress with
  // what gpuaas asked of the node (every state it passes through is seen here, however briefly
  // it lasts). Call for every GPU node of every list and event.
  void ObserveNode(const ObservedNode& node, const NodeMeta& meta);

  // Asks for GPU `gpu_uuid` of `node` (whose GPUs are `gpus`, as the driver reports them) to be
  // brought to a layout: MIG off, or on with `instances`. The rest of the node stays as it is.
  // Idempotent: the same layout is not asked twice. NotFound when the node has no such GPU.
  absl::Status Ask(const std::string& node, const std::vector<ObservedGpu>& gpus,
                   const std::string& gpu_uuid, bool mig_enabled,
                   const std::vector<ObservedMigInstance>& instances);

  // Refuses a MIG change of `node` (with `meta`), on which pod `pod` (and maybe others) holds
  // GPUs: cordons the node (one patch at meta's resourceVersion) unless it is unschedulable
  // already. FailedPrecondition naming the pod; the patch's error when it fails.
  absl::Status RefuseWhilePodsRun(const std::string& node, const NodeMeta& meta,
                                  const std::string& pod);

  // The manager's state for `node`, as gpuaas asked of it, or from the labels of `observed`
  // (the GPU node as watched; null when there is none) where gpuaas asked nothing.
  ClusterDriver::MigState State(const std::string& node, const ObservedNode* observed);

  // Where the labels of `node` count what the manager last applied for gpuaas, gives its GPUs
  // the placements asked for (instead of those derived from counts) and returns true; else
  // leaves it as it is and returns false.
  bool ShowApplied(ObservedNode& node) const;

 private:
  // What gpuaas last asked of a node's MIG manager.
  struct NodeMig {
    std::map<int, GpuMigSpec> want;                              // every GPU of the node
    std::map<int, std::vector<ObservedMigInstance>> placements;  // as asked, by GPU index
    bool dirty = false;                                          // to be written
    std::string config;  // the config name the label was set to; empty until written
    std::string error;   // the last write's failure
    std::chrono::steady_clock::time_point asked{};
    bool progressed = false;  // the manager was seen working on `config`
    bool failed = false;      // it failed (or never answered): ask again when told
    bool uncordon = false;    // the manager is done with a node gpuaas cordoned: give it back
    // What the GPUs hold: the layouts of the last config the manager applied.
    std::map<int, GpuMigSpec> applied;
    std::map<int, std::vector<ObservedMigInstance>> applied_placements;
  };

  void Run();  // the writer thread
  // One node's config into the ConfigMap and its label; the config's name.
  absl::StatusOr<std::string> Write(const std::string& node, const std::map<int, GpuMigSpec>& want);

  const std::string cluster_;
  Client& client_;
  const MigManagerOptions options_;
  const NodeLookup lookup_;
  std::atomic<int64_t>& writes_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, NodeMig> nodes_ ABSL_GUARDED_BY(mu_);  // by node
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread writer_;
};

}  // namespace gpuaas::cluster::kubernetes

#endif  // GPUAAS_CLUSTER_KUBERNETES_MIG_MANAGER_H_

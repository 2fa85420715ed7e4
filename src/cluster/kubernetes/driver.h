// The Kubernetes cluster driver: one registered cluster seen through its API server. Reflectors
// list and watch the cluster's Nodes and Pods; each GPU node and each pod holding nvidia.com/
// devices is decoded once per change (nodes.h) and kept, so that Observe answers from memory and
// the inventory controller is told of a change only when a node's GPUs, schedulability,
// capacity or devices in use changed (not on every status heartbeat or pod without GPUs).
// Each collection is one WatchCache (watch_cache.h) fed by its Reflector. Layer 7 of
// docs/architecture.md, beside the simulated driver.
//
// MIG, the GPU Operator way (mig_manager.h): ApplyMigLayout records a GPU's wanted layout; a
// writer thread puts each node's wanted layouts, once per node however many GPUs changed, as a
// mig-parted config `gpuaas-<node>-<n>` into the MIG manager's ConfigMap and points the node's
// `nvidia.com/mig.config` label at it (a new name each time, so the MIG manager runs again even
// after a failure). NodeMigState follows `nvidia.com/mig.config.state`. A node with GPU pods is
// refused: the MIG manager would stop them. Once the manager reports success and the node's
// device counts are the wanted ones, Observe shows the placements asked for (labels carry
// counts), until the counts change again. Quotas, device taints and node fencing: enforcement.h.
//
// Pods: each device in use names the pods holding it, exactly where DRA claims were allocated
// the devices of ResourceSlices, else by a guess that stays while the pod runs (nodes.h).
#ifndef GPUAAS_CLUSTER_KUBERNETES_DRIVER_H_
#define GPUAAS_CLUSTER_KUBERNETES_DRIVER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "cluster/driver.h"
#include "cluster/kubernetes/client.h"
#include "cluster/kubernetes/nodes.h"
#include "cluster/kubernetes/reflector.h"
#include "cluster/kubernetes/resource_slices.h"
#include "cluster/kubernetes/watch_cache.h"

namespace gpuaas::cluster::kubernetes {

class Enforcer;
class MigManager;

// kCordonAnnotation, the annotation gpuaas puts on a node it cordoned for a MIG change: nodes.h.

struct DriverOptions {
  std::string display_name;  // empty: the cluster's name
  std::string region;
  Backoff backoff;
  ClientTimeouts timeouts;
  // The MIG manager's custom config (the GPU Operator's migManager.config.name) gpuaas writes
  // its per-node configs into, key config.yaml.
  std::string mig_config_namespace = "gpu-operator";
  std::string mig_config_map = "gpuaas-mig-parted-config";
  // The device plugin's config (the GPU Operator's devicePlugin.config.name), in the same
  // namespace: gpuaas adds its time-slicing configs to it, keeping the operator's.
  std::string device_plugin_config_map = "gpuaas-device-plugin-config";
  // A node whose MIG manager stays pending this long after gpuaas asked (gpu-operator #2833: a
  // GPU client that will not stop) is reported failed.
  std::chrono::milliseconds mig_pending_timeout{std::chrono::minutes(10)};
  // Layouts asked for within this long are written together, one config per node.
  std::chrono::milliseconds mig_write_delay{2000};
};

class KubernetesDriver final : public ClusterDriver {
 public:
  // A driver for cluster `name` on `config`; InvalidArgument when the configuration does not make
  // a client (client.h). Starts nothing: call Start.
  static absl::StatusOr<std::unique_ptr<KubernetesDriver>> Make(std::string name, const ClientConfig& config,
                                                                DriverOptions options = {});
  ~KubernetesDriver() override;  // stops

  // Starts listing and watching; Stop ends it (and every watch) and waits. Not restartable.
  void Start() override;
  void Stop() override;

  std::string_view ClusterName() const override { return name_; }
  // The GPU nodes as last listed and watched. Unavailable, with the client's error, before the
  // first list and while listing or watching fails (the last nodes seen are then kept, not
  // reported). Thread-safe.
  absl::StatusOr<ObservedCluster> Observe() override;
  bool Watch(std::function<void()> on_change) override;
  absl::Status ApplyMigLayout(const std::string& node, const std::string& gpu_uuid, bool mig_enabled,
                              const std::vector<ObservedMigInstance>& instances) override;
  // A node that runs GPU pods is cordoned (annotated kCordonAnnotation) and the change refused
  // with FailedPrecondition until they finish; the node is uncordoned once the MIG manager is
  // done with it (a node cordoned by someone else stays as it is).
  // From the node's nvidia.com/mig.config.state label ("success" when unlabelled).
  MigState NodeMigState(const std::string& node) override;
  // The project's namespace (named like the project; created when it holds something) and its
  // ResourceQuota `gpuaas-pools`: `requests.<resource>` for every GPU resource the device plugin
  // may advertise (nvidia.com/gpu and every catalogue MIG profile), the pools' devices or 0.
  // Written only where it differs from what the API server has.
  absl::Status EnforceProjectQuota(const std::string& project, const std::map<std::string, int64_t>& devices) override;
  // Pods of the project's namespace are guessed onto these devices first (nodes.h, MarkHeld).
  // Where the API server serves ResourceSlices and DeviceTaintRules, each of the devices that a
  // complete gpu.nvidia.com pool names gets a DeviceTaintRule (resource_slices.h), created when
  // missing; the project's rules for other devices are deleted. Without DeviceTaintRules (404:
  // the DRADeviceTaints feature is off) nothing is written, and the log says so once.
  absl::Status EnforceProjectDevices(const std::string& project, const std::set<std::string>& uuids) override;

  // Label and taint `gpuaas.io/pool` on the nodes a pool holds whole: one merge patch a node that
  // differs, at the node's resourceVersion (a node changed meanwhile answers 409: Aborted, asked
  // again later), keeping the node's other taints.
  // A time-sliced pool's nodes get `nvidia.com/device-plugin.config=gpuaas-time-slicing-<n>`,
  // the config written first into the device plugin's ConfigMap (DriverOptions).
  absl::Status EnforceNodeOwners(const std::map<std::string, NodeOwner>& owners) override;
  // Annotation kReclaimDeadlineAnnotation (enforcement.h), one merge patch a pod without it.
  absl::Status TellPodsOfReclaim(const std::vector<std::string>& pods,
                                 std::chrono::system_clock::time_point deadline) override;
  // DELETE with gracePeriodSeconds 0, a pod not already deleted so.
  absl::Status RemovePods(const std::vector<std::string>& pods) override;

  // Writes made to the API server (ConfigMap and label), for tests and metrics.
  int64_t writes() const { return writes_.load(); }
  ReflectorStats node_stats() const { return nodes_reflector_->stats(); }
  ReflectorStats pod_stats() const { return pods_reflector_->stats(); }
  ReflectorStats slice_stats() const { return slices_reflector_->stats(); }
  ReflectorStats claim_stats() const { return claims_reflector_->stats(); }
  // Nodes whose GPU labels were refused (by name, with the reason); they are left out.
  std::map<std::string, std::string> refused_nodes() const;

 private:
  // A Node as the nodes' cache holds it: a GPU node (GFD labels), a bare one (no GPU labels:
  // kept for when NVIDIA's DRA driver names GPUs there) or one whose GPU labels were refused.
  using WatchedNode = NodeRead;  // nodes.h: a GPU node, a bare node, or one refused
  using Nodes = WatchCache<WatchedNode>;
  using Pods = WatchCache<PodGpus>;

  KubernetesDriver(std::string name, DriverOptions options, std::unique_ptr<Client> client,
                   std::unique_ptr<Client> pods_client, std::unique_ptr<Client> slices_client,
                   std::unique_ptr<Client> claims_client);
  // The reflectors' callbacks: a list replaces a cache, an event changes one object of it.
  void ReplaceNodes(const ListResult& list);
  void ApplyNode(const WatchEvent& event);
  void ReplacePods(const ListResult& list);
  void ApplyPod(const WatchEvent& event);
  void ReplaceSlices(const ListResult& list);
  void ApplySlice(const WatchEvent& event);
  void ReplaceClaims(const ListResult& list);
  void ApplyClaim(const WatchEvent& event);
  // One Node's JSON (text) as the nodes' cache holds it.
  WatchedNode ReadWatchedNode(const std::string& json) const;
  // Whether a change of one node changed what Observe reports.
  bool NodeChanged(const Nodes::Change& change) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Recomputes slice_gpus_, slice_uuids_ and slice_products_ from slices_; true when the GPUs
  // changed.
  bool SlicesChanged() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A node's GPUs: from its DRA pool where one is complete, else from its labels.
  const std::vector<ObservedGpu>& GpusOf(const ObservedNode& node) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Changed();

  const std::string name_;
  const DriverOptions options_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<Client> pods_client_;  // a watch at a time per client: the pods have their own
  std::unique_ptr<Client> slices_client_;  // and the ResourceSlices theirs
  std::unique_ptr<Client> claims_client_;  // and the ResourceClaims theirs
  // The watched collections, each with its own mutex. Nodes and slices change only with mu_
  // held as well, so that what is derived from them (MIG progress, slice_gpus_) moves with them.
  Nodes nodes_;                      // every node, by name
  Pods pods_;                        // active pods holding GPU devices or requesting CPU or memory
  WatchCache<ResourceSlice> slices_;  // gpu.nvidia.com ResourceSlices, by name
  WatchCache<ResourceClaim> claims_;  // claims allocated gpu.nvidia.com devices, by key
  std::unique_ptr<Reflector> nodes_reflector_;
  std::unique_ptr<Reflector> pods_reflector_;
  std::unique_ptr<Reflector> slices_reflector_;
  std::unique_ptr<Reflector> claims_reflector_;
  mutable std::mutex mu_;
  std::map<std::string, std::vector<ObservedGpu>> slice_gpus_ ABSL_GUARDED_BY(mu_);  // by node
  std::map<std::string, std::string> slice_uuids_ ABSL_GUARDED_BY(mu_);  // "pool/device" -> UUID
  std::map<std::string, std::string> slice_products_ ABSL_GUARDED_BY(mu_);  // node -> its GPUs' productName
  HeldDevices sticky_ ABSL_GUARDED_BY(mu_);  // the devices guessed for counted pods
  std::map<std::string, std::string> device_projects_ ABSL_GUARDED_BY(mu_);  // UUID -> project (EnforceProjectDevices)
  std::function<void()> on_change_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> writes_{0};
  std::unique_ptr<MigManager> mig_;       // called with mu_ held or not; never takes it
  std::unique_ptr<Enforcer> enforcer_;
};

// The driver of a cluster registered with a self-contained kubeconfig (`gpuaas cluster add`),
// not started. InvalidArgument, naming spec.kubeconfig, when it does not make a client.
absl::StatusOr<std::unique_ptr<KubernetesDriver>> DriverFromKubeconfig(std::string name, std::string_view kubeconfig,
                                                                        std::string_view context,
                                                                        DriverOptions options = {});

}  // namespace gpuaas::cluster::kubernetes

#endif  // GPUAAS_CLUSTER_KUBERNETES_DRIVER_H_

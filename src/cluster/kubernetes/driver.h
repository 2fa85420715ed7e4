// The Kubernetes cluster driver: one registered cluster seen through its API server. Reflectors
// list and watch the cluster's Nodes and Pods; each GPU node and each pod holding nvidia.com/
// devices is decoded once per change (nodes.h) and kept, so that Observe answers from memory and
// the inventory controller is told of a change only when a node's GPUs, schedulability,
// capacity or devices in use changed (not on every status heartbeat or pod without GPUs).
// Layer 7 of docs/architecture.md, beside the simulated driver.
//
// Not yet: MIG layouts through the MIG manager (ApplyMigLayout answers Unimplemented), pods as
// Profiles, ResourceSlices. docs/kubernetes.md keeps the list.
#ifndef GPUAAS_CLUSTER_KUBERNETES_DRIVER_H_
#define GPUAAS_CLUSTER_KUBERNETES_DRIVER_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "cluster/driver.h"
#include "cluster/kubernetes/client.h"
#include "cluster/kubernetes/nodes.h"
#include "cluster/kubernetes/reflector.h"

namespace gpuaas::cluster::kubernetes {

struct DriverOptions {
  std::string display_name;  // empty: the cluster's name
  std::string region;
  Backoff backoff;
  ClientTimeouts timeouts;
};

class KubernetesDriver final : public ClusterDriver {
 public:
  // A driver for cluster `name` on `config`; InvalidArgument when the configuration does not make
  // a client (client.h). Starts nothing: call Start.
  static absl::StatusOr<std::unique_ptr<KubernetesDriver>> Make(std::string name, const ClientConfig& config,
                                                                DriverOptions options = {});
  ~KubernetesDriver() override;  // stops

  // Starts listing and watching; Stop ends it (and every watch) and waits. Not restartable.
  void Start();
  void Stop();

  std::string_view ClusterName() const override { return name_; }
  // The GPU nodes as last listed and watched. Unavailable, with the client's error, before the
  // first list and while listing or watching fails (the last nodes seen are then kept, not
  // reported). Thread-safe.
  absl::StatusOr<ObservedCluster> Observe() override;
  bool Watch(std::function<void()> on_change) override;
  absl::Status ApplyMigLayout(const std::string& node, const std::string& gpu_uuid, bool mig_enabled,
                              const std::vector<ObservedMigInstance>& instances) override;
  // From the node's nvidia.com/mig.config.state label ("success" when unlabelled).
  MigState NodeMigState(const std::string& node) override;

  ReflectorStats node_stats() const { return nodes_reflector_->stats(); }
  ReflectorStats pod_stats() const { return pods_reflector_->stats(); }
  // Nodes whose GPU labels were refused (by name, with the reason); they are left out.
  std::map<std::string, std::string> refused_nodes() const;

 private:
  KubernetesDriver(std::string name, DriverOptions options, std::unique_ptr<Client> client,
                   std::unique_ptr<Client> pods_client);
  void ReplaceNodes(const ListResult& list);
  void ApplyNode(const WatchEvent& event);
  void ReplacePods(const ListResult& list);
  void ApplyPod(const WatchEvent& event);
  // Keeps (or forgets) one pod's GPU devices; true when a node's devices in use changed.
  bool PutPod(const std::string& json, bool deleted) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Decodes one Node into nodes_ (or drops it); true when what Observe reports changed.
  bool PutNode(const std::string& json) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Changed();

  const std::string name_;
  const DriverOptions options_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<Client> pods_client_;  // a watch at a time per client: the pods have their own
  std::unique_ptr<Reflector> nodes_reflector_;
  std::unique_ptr<Reflector> pods_reflector_;
  mutable std::mutex mu_;
  std::map<std::string, ObservedNode> nodes_ ABSL_GUARDED_BY(mu_);   // GPU nodes by name
  std::map<std::string, std::string> refused_ ABSL_GUARDED_BY(mu_);  // node -> why
  std::map<std::string, PodGpus> pods_ ABSL_GUARDED_BY(mu_);         // active pods with GPU devices
  std::function<void()> on_change_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpuaas::cluster::kubernetes

#endif  // GPUAAS_CLUSTER_KUBERNETES_DRIVER_H_

// The inventory controller: makes the store's Cluster, NodeCapacity, GpuCapacity and SpecAndCount
// objects match what each ClusterDriver observes. Level-triggered: every reconcile observes the
// cluster afresh and writes only the difference, in one transaction per cluster, so a crash at
// any point leaves either the old or the new inventory. Every driver, simulated or Kubernetes,
// goes through this one path. Owns every field of those objects except a GpuCapacity's health
// (status.health and the conditions the health controller writes, model/fleet.h), which a new
// GPU is created with as the health controller judges it (JudgeNewGpusWith).
#ifndef GPUAAS_CONTROLLER_INVENTORY_H_
#define GPUAAS_CONTROLLER_INVENTORY_H_

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/driver.h"
#include "cluster/registry.h"
#include "common/clock.h"
#include "controller/runtime/manager.h"
#include "model/fleet.h"
#include "store/store.h"

namespace gpuaas::controller {

// Label keys gpuaas puts on inventory objects, for selectors.
inline constexpr std::string_view kLabelCluster = "gpuaas.io/cluster";
// The node as gpuaas names it and prints it: its NodeCapacity name, "CLUSTER.NODE".
inline constexpr std::string_view kLabelNode = "gpuaas.io/node";
inline constexpr std::string_view kLabelModel = "gpuaas.io/gpu-model";
inline constexpr std::string_view kLabelMigMode = "gpuaas.io/mig-mode";
inline constexpr std::string_view kLabelProfile = "gpuaas.io/profile";

struct Inventory {
  model::Cluster cluster;
  std::vector<model::NodeCapacity> nodes;
  std::vector<model::GpuCapacity> gpus;
  std::vector<model::SpecAndCount> specs;
};

// The objects an observation calls for (pure; metadata other than name and labels left empty).
// GPUs whose product is unknown to the catalogue are listed with an empty model and a
// `Recognized=False` condition on their node rather than dropped.
Inventory BuildInventory(const cluster::ObservedCluster& observed, Time now);

struct SyncStats {
  int created = 0;
  int updated = 0;
  int deleted = 0;
  int unchanged = 0;
};

// Reconciles one cluster (the key is its name): observes its driver, compares what it sees with
// the informers' objects of that cluster, and writes the difference in one transaction, each
// object at the resourceVersion it was compared with (a conflict is retried). Drivers that
// report their changes (ClusterDriver::Watch) are observed when they do, others every `resync`.
// The health controller's conditions and status.health are carried over as stored. A cluster
// taken out of the registry has its objects deleted, in one transaction.
class InventoryController final : public runtime::Reconciler {
 public:
  // Follows the clusters of `registry` (not owned), each queued when it joins. Registers itself
  // with `manager`.
  InventoryController(store::Store& store, runtime::Manager& manager, cluster::Registry& registry,
                      Duration resync = std::chrono::seconds(30));
  ~InventoryController() override;

  absl::StatusOr<runtime::Result> Reconcile(const std::string& cluster) override;

  // One observation of `driver` written as a difference; what the last reconcile did.
  absl::StatusOr<SyncStats> Sync(cluster::ClusterDriver& driver);
  SyncStats last() const;
  // Blocks until every cluster managed now was observed once (successfully or not), up to
  // `timeout`.
  bool WaitObserved(Duration timeout);

  // How a GPU's health is set as it is created (the health controller's judgment, which the
  // control plane hands in before the controllers start), so that a new GPU is written once, not
  // created Unknown and written again. Unset, new GPUs are created Unknown.
  using NewGpuJudge = std::function<void(model::GpuCapacity& gpu, Time now)>;
  void JudgeNewGpusWith(NewGpuJudge judge) { judge_new_ = std::move(judge); }

 private:
  store::Store& store_;
  runtime::Manager& manager_;
  // Deletes every object of a cluster no longer managed.
  absl::StatusOr<SyncStats> Forget(const std::string& cluster);

  cluster::Registry& registry_;
  NewGpuJudge judge_new_;
  // The revision of each cluster's last write: its next comparison waits for the informers to
  // show it, while other clusters' observations go on meanwhile. One worker, so unguarded.
  std::map<std::string, int64_t> written_;
  Duration resync_;
  runtime::Informer<model::Cluster>& clusters_;
  runtime::Informer<model::NodeCapacity>& nodes_;
  runtime::Informer<model::GpuCapacity>& gpus_;
  runtime::Informer<model::SpecAndCount>& specs_;
  mutable std::mutex mu_;
  std::condition_variable observed_cv_;
  SyncStats last_;                  // guarded by mu_
  std::set<std::string> observed_;  // clusters observed at least once; guarded by mu_
  std::map<std::string, bool> watched_;  // drivers that report changes; guarded by mu_
  cluster::Registry::Subscription subscription_;  // last: it goes first
};

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_INVENTORY_H_
